//! Scripted fault injection: rules matched per operation (and optionally reservation), with
//! skip/times counters, so a test can say "lose the response of the 2nd commit".

use std::collections::HashMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::sync::watch;

use crate::error::ApiError;

pub use crate::routes::Operation;

/// When and how to inject a fault. Unknown keys are refused: a misspelt key would otherwise
/// script a different fault than the test meant.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct FaultRule {
    /// Operation the rule applies to.
    pub operation: Operation,
    /// Only requests for this reservation (path id), if set.
    #[serde(default)]
    pub reservation_id: Option<String>,
    /// Let this many matching requests pass first.
    #[serde(default)]
    pub skip: u32,
    /// How many matching requests to fault; 0 = every later one.
    #[serde(default)]
    pub times: u32,
    /// Fault only every Nth matching request after `skip` (the Nth, 2Nth, ...; `times` still
    /// counts faulted ones), so a steady mix such as 1% of commits is one rule. At least 1
    /// (the default: every one); 0 is refused, it would never fire.
    #[serde(default = "every_one", deserialize_with = "nonzero_every")]
    pub every: u32,
    /// What to do.
    #[serde(deserialize_with = "strict_fault")]
    pub fault: Fault,
}

fn every_one() -> u32 {
    1
}

fn nonzero_every<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    use serde::de::Error;
    match u32::deserialize(d)? {
        0 => Err(D::Error::custom(
            "`every` must be at least 1 (1: every matching request; N: every Nth)",
        )),
        n => Ok(n),
    }
}

/// A [`Fault`], refusing unknown keys on every kind: serde's `deny_unknown_fields` covers the
/// kinds with fields, but an internally tagged unit kind (`connection_reset`) ignores extra
/// keys, so `{"kind": "connection_reset", "ms": 5}` would silently lose its `ms`.
fn strict_fault<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Fault, D::Error> {
    use serde::de::Error;
    let given = serde_json::Value::deserialize(d)?;
    let fault = Fault::deserialize(&given).map_err(D::Error::custom)?;
    if let (Some(g), Ok(serde_json::Value::Object(known))) =
        (given.as_object(), serde_json::to_value(&fault))
    {
        if let Some(extra) = g.keys().find(|k| !known.contains_key(*k)) {
            return Err(D::Error::custom(format!(
                "unknown field `{extra}` for fault kind `{}`",
                known.get("kind").and_then(|k| k.as_str()).unwrap_or("?")
            )));
        }
    }
    Ok(fault)
}

/// The injected behaviour. Serde: `{"kind": "drop_response_after_apply"}`, `{"kind": "server_error", "status": 503}`, ...
/// (PascalCase kinds accepted too).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Fault {
    /// Apply, then reset the connection (RST) with no response.
    #[serde(alias = "DropResponseAfterApply")]
    DropResponseAfterApply,
    /// Reset (RST) without applying.
    #[serde(alias = "ConnectionReset")]
    ConnectionReset,
    /// 5xx ErrorResponse INTERNAL_ERROR, not applied.
    #[serde(alias = "ServerError")]
    ServerError {
        /// HTTP status to send.
        status: u16,
    },
    /// 429 LIMIT_EXCEEDED with this raw Retry-After value, not applied.
    #[serde(alias = "RateLimited")]
    RateLimited {
        /// Raw `Retry-After` header value (may be deliberately invalid).
        #[serde(default)]
        retry_after: Option<String>,
    },
    /// Wait, then handle normally.
    #[serde(alias = "Delay")]
    Delay {
        /// Milliseconds to wait.
        ms: u64,
    },
    /// Hold the request until the next request of the same operation arrives (at most `ms`),
    /// then handle normally: two clients' requests meet at the server however far apart
    /// their processes happened to be scheduled, which a fixed delay cannot promise.
    #[serde(alias = "Hold")]
    Hold {
        /// The longest wait, in milliseconds, when no other request comes.
        ms: u64,
    },
    /// Apply, wait, then respond.
    #[serde(alias = "DelayAfterApply")]
    DelayAfterApply {
        /// Milliseconds to wait.
        ms: u64,
    },
    /// Apply, then answer with a 2xx that is not schema-valid.
    #[serde(alias = "MalformedSuccess")]
    MalformedSuccess {
        /// Which kind of malformation.
        shape: Malformed,
    },
    /// This ErrorResponse, not applied.
    #[serde(alias = "Error")]
    Error {
        /// HTTP status.
        status: u16,
        /// `error` code.
        code: String,
    },
    /// An ErrorResponse that echoes the received `X-Cycles-API-Key` (as some servers and
    /// proxies do), not applied: in `message`, in `details` (a value, a nested array and an
    /// object key) and in `error` wherever `code` contains `{api_key}`. Tests that the client
    /// never surfaces a secret a server sends back.
    #[serde(alias = "EchoApiKey")]
    EchoApiKey {
        /// HTTP status.
        status: u16,
        /// `error` code; `{api_key}` in it is replaced by the received key.
        #[serde(default = "unauthorized")]
        code: String,
    },
    /// Apply normally, but the reservation this request creates gets this id (a
    /// `createReservation` rule): for testing clients with unusual ids (slashes, unicode,
    /// characters a path must escape). A replay keeps the id it was first given.
    #[serde(alias = "ReservationId")]
    ReservationId {
        /// The reservation id to assign.
        id: String,
    },
}

fn unauthorized() -> String {
    "UNAUTHORIZED".into()
}

/// The error body of [`Fault::EchoApiKey`] for the received `key` ("" when none was sent).
pub(crate) fn echo_api_key(status: u16, code: &str, key: &str) -> ApiError {
    let message = format!("API key '{key}' is not accepted here");
    ApiError::new(status, &code.replace("{api_key}", key), message).with_details(json!({
        "received_api_key": key,
        "attempts": [format!("header X-Cycles-API-Key={key}")],
        key: "the key as an object key",
    }))
}

impl Fault {
    /// Stable name recorded in the request log.
    pub fn name(&self) -> &'static str {
        match self {
            Fault::DropResponseAfterApply => "drop_response_after_apply",
            Fault::ConnectionReset => "connection_reset",
            Fault::ServerError { .. } => "server_error",
            Fault::RateLimited { .. } => "rate_limited",
            Fault::Delay { .. } => "delay",
            Fault::Hold { .. } => "hold",
            Fault::DelayAfterApply { .. } => "delay_after_apply",
            Fault::MalformedSuccess { .. } => "malformed_success",
            Fault::Error { .. } => "error",
            Fault::EchoApiKey { .. } => "echo_api_key",
            Fault::ReservationId { .. } => "reservation_id",
        }
    }
}

/// Ways to break a success response.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Malformed {
    /// A required field is removed.
    #[serde(alias = "MissingRequiredField")]
    MissingRequiredField,
    /// The correct body with status 202.
    #[serde(alias = "WrongStatusCode")]
    WrongStatusCode,
    /// A body that is not JSON.
    #[serde(alias = "NotJson")]
    NotJson,
    /// A required field with the wrong JSON type.
    #[serde(alias = "WrongFieldType")]
    WrongFieldType,
}

/// Installed rules with their match counters.
#[derive(Debug, Default)]
pub(crate) struct FaultTable {
    rules: Vec<(FaultRule, u32)>,
}

impl FaultTable {
    pub(crate) fn add(&mut self, rule: FaultRule) {
        self.rules.push((rule, 0));
    }

    pub(crate) fn clear(&mut self) {
        self.rules.clear();
    }

    /// Count this request against every matching rule and return the first fault that fires.
    pub(crate) fn take(&mut self, op: Operation, reservation_id: Option<&str>) -> Option<Fault> {
        let mut fired = None;
        for (rule, seen) in self.rules.iter_mut() {
            if rule.operation != op {
                continue;
            }
            if let Some(want) = &rule.reservation_id {
                if reservation_id != Some(want.as_str()) {
                    continue;
                }
            }
            *seen += 1;
            let n = *seen;
            // k: position among the requests after `skip`; every `every`th one is a
            // candidate, and `times` bounds how many candidates fire.
            let fires = n > rule.skip && {
                let k = n - rule.skip;
                let every = rule.every.max(1);
                k % every == 0 && (rule.times == 0 || k / every <= rule.times)
            };
            if fires && fired.is_none() {
                fired = Some(rule.fault.clone());
            }
        }
        fired
    }
}

/// How many requests of each operation have arrived, watched by held requests
/// ([`Fault::Hold`]).
#[derive(Debug)]
pub(crate) struct Arrivals(watch::Sender<HashMap<Operation, u64>>);

impl Default for Arrivals {
    fn default() -> Self {
        Arrivals(watch::Sender::new(HashMap::new()))
    }
}

impl Arrivals {
    /// Counts one arrival of `op` and returns its number (1 for the first).
    pub(crate) fn arrive(&self, op: Operation) -> u64 {
        let mut n = 0;
        self.0.send_modify(|m| {
            let c = m.entry(op).or_insert(0);
            *c += 1;
            n = *c;
        });
        n
    }

    /// Waits until a request of `op` numbered after `n` has arrived, or `max` has passed.
    pub(crate) async fn later_than(&self, op: Operation, n: u64, max: Duration) {
        let mut rx = self.0.subscribe();
        let later = rx.wait_for(|m| m.get(&op).is_some_and(|c| *c > n));
        let _ = tokio::time::timeout(max, later).await;
    }
}
