//! Client options: the one table of what a host may set when it builds a client, one check of
//! every value, one error text. Hosts pass their typed options as a JSON object in their own
//! [`Spelling`] (C and the JVM: snake_case, milliseconds; Node, Kotlin and Swift: camelCase,
//! milliseconds; Python: snake_case, seconds), and a bad member is named as the host's user wrote it:
//!
//! - an unknown member: `unknown option "journalDri" (known: baseUrl, apiKey, ...)`;
//! - a value of the wrong type or out of range:
//!   `requestTimeoutMs must be an integer from 0 to 4294967295, not -1`,
//!   `request_timeout must be a finite number of seconds, 0 or more, not -1`;
//! - a missing endpoint: `baseUrl is required`.
//!
//! `null` is the same as absent (core's default). What core validates stays core's: a zero
//! timeout, `max_concurrent_requests` or settle attempt count, a timeout past core's maximum,
//! an unknown `default_unit` pass this check and are core's CONFIG errors (`Config::validate`,
//! `SettleConfig::validate`), as in Rust; this check is only for what a host's value must be
//! to be one at all.

use std::path::PathBuf;

use cycles_core::error::json_reason;
use cycles_core::settle::SettleConfig;
use cycles_core::Config;
use serde_json::{Map, Value};

use crate::error::ErrorFields;
use crate::lifecycle::SettleOverrides;
use crate::ops::{ClientHandle, ClientOptions, Connection};

/// How a host spells its options.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Spelling {
    /// snake_case names, durations in integer milliseconds (`request_timeout_ms`): C, JVM.
    Snake,
    /// camelCase names, durations in integer milliseconds (`requestTimeoutMs`): Node, Kotlin
    /// and Swift.
    Camel,
    /// snake_case names, durations in seconds, any finite number (`request_timeout`): Python.
    Seconds,
}

/// A host: how it spells its options, and whether its `close()` takes no bound (then the
/// options carry the default one, `close_timeout_ms`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Host {
    /// Its spelling.
    pub spelling: Spelling,
    /// Whether it has the `close_timeout_ms` option.
    pub close_default: bool,
}

/// C: snake_case in ms; `cycles_client_close` takes its bound, so no `close_timeout_ms`.
pub const C: Host = Host {
    spelling: Spelling::Snake,
    close_default: false,
};
/// The JVM: snake_case in ms (the builder writes them); `close()` drains for
/// `close_timeout_ms`.
pub const JVM: Host = Host {
    spelling: Spelling::Snake,
    close_default: true,
};
/// Node: camelCase in ms.
pub const NODE: Host = Host {
    spelling: Spelling::Camel,
    close_default: true,
};
/// Kotlin and Swift (`bindings/uniffi`): camelCase in ms, as their properties are spelled.
pub const UNIFFI: Host = Host {
    spelling: Spelling::Camel,
    close_default: true,
};
/// Python: snake_case in seconds.
pub const PYTHON: Host = Host {
    spelling: Spelling::Seconds,
    close_default: true,
};

/// What a member holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A string.
    Text,
    /// A boolean.
    Flag,
    /// A duration of at least `min` milliseconds (at most [`MAX_MS`]).
    Duration {
        /// The least value: 1, or 0 where 0 means "none".
        min_ms: u64,
    },
    /// An integer from `min` to [`MAX_COUNT`].
    Count {
        /// The least value.
        min: u64,
    },
}

/// The longest duration an option takes, in milliseconds (2^32 - 1: about 49.7 days).
pub const MAX_MS: u64 = u32::MAX as u64;
/// The largest count an option takes.
pub const MAX_COUNT: u64 = u32::MAX as u64;
/// How long `close()` drains pending settlements when the host's option does not say.
pub const DEFAULT_CLOSE_TIMEOUT_MS: u64 = 5_000;

/// One client option.
#[derive(Clone, Copy, Debug)]
pub struct ClientOption {
    /// Its snake_case name with the unit suffix (`request_timeout_ms`): C's and the JVM's.
    pub key: &'static str,
    /// Node's name.
    pub camel: &'static str,
    /// Python's name (durations in seconds, without the `_ms`).
    pub seconds: &'static str,
    /// What it holds.
    pub kind: Kind,
    /// Whether only the hosts whose `close()` takes no bound have it ([`Host::close_default`]).
    pub close_default: bool,
}

const fn opt(
    key: &'static str,
    camel: &'static str,
    seconds: &'static str,
    kind: Kind,
) -> ClientOption {
    ClientOption {
        key,
        camel,
        seconds,
        kind,
        close_default: false,
    }
}

// Core validates the values (a zero timeout, bound or settle attempt count is its CONFIG
// error, in Rust too): the bridge checks only that the host's value is one (an integer, in
// range of the type), so the rule stays core's.
const MS0: Kind = Kind::Duration { min_ms: 0 };
const COUNT0: Kind = Kind::Count { min: 0 };

/// Every client option, in the order the docs list them. `base_url` and `api_key` come first:
/// hosts that pass the endpoint apart from the options ([`Connection::Given`], the
/// environment) have neither.
pub const CLIENT_OPTION_TABLE: &[ClientOption] = &[
    opt("base_url", "baseUrl", "base_url", Kind::Text),
    opt("api_key", "apiKey", "api_key", Kind::Text),
    opt("tenant", "tenant", "tenant", Kind::Text),
    opt("default_unit", "defaultUnit", "default_unit", Kind::Text),
    opt(
        "request_timeout_ms",
        "requestTimeoutMs",
        "request_timeout",
        MS0,
    ),
    opt(
        "connect_timeout_ms",
        "connectTimeoutMs",
        "connect_timeout",
        MS0,
    ),
    opt("journal_dir", "journalDir", "journal_dir", Kind::Text),
    opt("journal_url", "journalUrl", "journal_url", Kind::Text),
    opt(
        "journal_enabled",
        "journalEnabled",
        "journal_enabled",
        Kind::Flag,
    ),
    opt(
        "max_concurrent_requests",
        "maxConcurrentRequests",
        "max_concurrent_requests",
        COUNT0,
    ),
    opt(
        "max_response_bytes",
        "maxResponseBytes",
        "max_response_bytes",
        COUNT0,
    ),
    opt(
        "settle_max_attempts",
        "maxAttempts",
        "settle_max_attempts",
        COUNT0,
    ),
    opt(
        "replay_interval_ms",
        "replayIntervalMs",
        "replay_interval",
        MS0,
    ),
    ClientOption {
        close_default: true,
        ..opt("close_timeout_ms", "closeTimeoutMs", "close_timeout", MS0)
    },
];

impl ClientOption {
    /// The name `spelling` gives it.
    pub fn name(&self, spelling: Spelling) -> &'static str {
        match spelling {
            Spelling::Snake => self.key,
            Spelling::Camel => self.camel,
            Spelling::Seconds => self.seconds,
        }
    }

    fn offered(&self, host: Host, connection: Connection<'_>) -> bool {
        let endpoint = matches!(self.key, "base_url" | "api_key");
        let tenant_given = self.key == "tenant" && matches!(connection, Connection::Given { .. });
        (!endpoint || matches!(connection, Connection::InOptions))
            && !tenant_given
            && (!self.close_default || host.close_default)
    }
}

/// A client built from a host's options, with what the host applies itself.
pub struct HostClient {
    /// The client.
    pub client: ClientHandle,
    /// Settle attempts and replay interval for its lifecycle.
    pub settle: SettleOverrides,
    /// The drain bound of a `close()` given none ([`DEFAULT_CLOSE_TIMEOUT_MS`] unless set).
    pub close_timeout_ms: u64,
}

/// One member's value, checked.
enum Checked {
    Text(String),
    Flag(bool),
    Ms(u64),
    Count(u64),
}

/// `value` as `option` holds it, or the one error text naming it as `spelling` does.
fn check(option: &ClientOption, spelling: Spelling, value: &Value) -> Result<Checked, ErrorFields> {
    let name = option.name(spelling);
    let refuse =
        |what: String| ErrorFields::invalid(format!("{name} must be {what}, not {}", shown(value)));
    match option.kind {
        Kind::Text => value
            .as_str()
            .map(|s| Checked::Text(s.to_string()))
            .ok_or_else(|| refuse("a string".into())),
        Kind::Flag => value
            .as_bool()
            .map(Checked::Flag)
            .ok_or_else(|| refuse("a boolean".into())),
        Kind::Count { min } => match value.as_u64() {
            Some(n) if (min..=MAX_COUNT).contains(&n) => Ok(Checked::Count(n)),
            _ => Err(refuse(format!("an integer from {min} to {MAX_COUNT}"))),
        },
        Kind::Duration { min_ms } if spelling == Spelling::Seconds => {
            let what = if min_ms == 0 {
                "a finite number of seconds, 0 or more".to_string()
            } else {
                "a finite number of seconds above 0".to_string()
            };
            let s = match value {
                Value::Number(n) => n.as_f64(),
                _ => None,
            };
            match s {
                Some(s) if s.is_finite() && (s > 0.0 || (min_ms == 0 && s == 0.0)) => {
                    // The seconds' milliseconds, rounded; a positive bound is never 0 ms.
                    let ms = (s * 1000.0).round();
                    if ms > MAX_MS as f64 {
                        return Err(ErrorFields::invalid(format!(
                            "{name} is too large ({s} s; at most {} s)",
                            MAX_MS / 1000
                        )));
                    }
                    Ok(Checked::Ms(if s > 0.0 { (ms as u64).max(1) } else { 0 }))
                }
                _ => Err(refuse(what)),
            }
        }
        Kind::Duration { min_ms } => match value.as_u64() {
            Some(n) if (min_ms..=MAX_MS).contains(&n) => Ok(Checked::Ms(n)),
            _ => Err(refuse(format!("an integer from {min_ms} to {MAX_MS}"))),
        },
    }
}

/// A value as the error shows it: its JSON, cut at 40 characters.
fn shown(value: &Value) -> String {
    let text = value.to_string();
    match text.char_indices().nth(40) {
        Some((i, _)) => format!("{}...", &text[..i]),
        None => text,
    }
}

/// The client of a host's options JSON, checked member by member against
/// [`CLIENT_OPTION_TABLE`] (see the module docs for the texts). `connection` says where the
/// endpoint comes from; with [`Connection::Env`] the options apply over the `CYCLES_*`
/// environment.
pub fn host_client(
    options_json: &str,
    host: Host,
    connection: Connection<'_>,
) -> Result<HostClient, ErrorFields> {
    let spelling = host.spelling;
    let given: Map<String, Value> = match serde_json::from_str::<Value>(options_json) {
        Ok(Value::Object(m)) => m,
        Ok(other) => {
            return Err(ErrorFields::invalid(format!(
                "the client options must be an object, not {}",
                shown(&other)
            )))
        }
        Err(e) => {
            return Err(ErrorFields::invalid(format!(
                "the client options are not JSON: {}",
                json_reason(&e)
            )))
        }
    };
    let offered: Vec<&ClientOption> = CLIENT_OPTION_TABLE
        .iter()
        .filter(|o| o.offered(host, connection))
        .collect();
    let mut values: Vec<(&'static str, Checked)> = Vec::new();
    for (name, value) in &given {
        let Some(option) = offered.iter().find(|o| o.name(spelling) == name) else {
            let known: Vec<&str> = offered.iter().map(|o| o.name(spelling)).collect();
            return Err(ErrorFields::invalid(format!(
                "unknown option {name:?} (known: {})",
                known.join(", ")
            )));
        };
        if !value.is_null() {
            values.push((option.key, check(option, spelling, value)?));
        }
    }
    let take = |key: &str| values.iter().find(|(k, _)| *k == key).map(|(_, v)| v);
    let text = |key: &str| match take(key) {
        Some(Checked::Text(s)) => Some(s.clone()),
        _ => None,
    };
    let ms = |key: &str| match take(key) {
        Some(Checked::Ms(n)) => Some(*n),
        _ => None,
    };
    let count = |key: &str| match take(key) {
        Some(Checked::Count(n)) => Some(*n),
        _ => None,
    };
    let options = ClientOptions {
        base_url: String::new(),
        api_key: String::new(),
        tenant: text("tenant"),
        default_unit: text("default_unit"),
        request_timeout_ms: ms("request_timeout_ms"),
        connect_timeout_ms: ms("connect_timeout_ms"),
        journal_dir: text("journal_dir").map(PathBuf::from),
        journal_url: text("journal_url"),
        journal_enabled: match take("journal_enabled") {
            Some(Checked::Flag(b)) => Some(*b),
            _ => None,
        },
        max_concurrent_requests: count("max_concurrent_requests").map(|n| n as usize),
        max_response_bytes: count("max_response_bytes").map(|n| n as usize),
    };
    let config = match connection {
        Connection::Env => options.apply_to(Config::from_env()?),
        Connection::Given {
            base_url,
            api_key,
            tenant,
        } => ClientOptions {
            base_url: base_url.to_string(),
            api_key: api_key.to_string(),
            tenant: tenant.map(str::to_string),
            ..options
        }
        .into_config(),
        Connection::InOptions => {
            let required = |key: &str| {
                text(key).ok_or_else(|| {
                    let option = CLIENT_OPTION_TABLE.iter().find(|o| o.key == key);
                    let name = option.map_or(key, |o| o.name(spelling));
                    ErrorFields::invalid(format!("{name} is required"))
                })
            };
            ClientOptions {
                base_url: required("base_url")?,
                api_key: required("api_key")?,
                ..options
            }
            .into_config()
        }
    };
    let settle = SettleOverrides {
        max_attempts: count("settle_max_attempts").map(|n| n as u32),
        replay_interval_ms: ms("replay_interval_ms"),
    };
    // Checked now, so a bad override fails where the client is built, not at the first
    // guarded call that starts its lifecycle.
    settle.apply_to(SettleConfig::default()).validate()?;
    Ok(HostClient {
        client: ClientHandle::new(config)?,
        settle,
        close_timeout_ms: ms("close_timeout_ms").unwrap_or(DEFAULT_CLOSE_TIMEOUT_MS),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn given() -> Connection<'static> {
        Connection::Given {
            base_url: "http://127.0.0.1:1",
            api_key: "k",
            tenant: None,
        }
    }

    fn error(json: &str, host: Host, connection: Connection<'_>) -> String {
        let e = host_client(json, host, connection).err().expect(json);
        assert_eq!(e.name, "INVALID_ARGUMENT", "{json}: {}", e.message);
        e.message
    }

    #[test]
    fn every_spelling_names_what_its_user_wrote() {
        let end = r#""baseUrl":"http://127.0.0.1:1","apiKey":"k""#;
        let camel = |m: &str| error(&format!("{{{end},{m}}}"), NODE, Connection::InOptions);
        assert_eq!(
            camel(r#""requestTimeoutMs":-1"#),
            "requestTimeoutMs must be an integer from 0 to 4294967295, not -1"
        );
        assert_eq!(
            camel(r#""requestTimeoutMs":1.5"#),
            "requestTimeoutMs must be an integer from 0 to 4294967295, not 1.5"
        );
        assert_eq!(
            camel(r#""closeTimeoutMs":"5""#),
            "closeTimeoutMs must be an integer from 0 to 4294967295, not \"5\""
        );
        assert_eq!(
            camel(r#""maxAttempts":-1"#),
            "maxAttempts must be an integer from 0 to 4294967295, not -1"
        );
        assert_eq!(
            camel(r#""journalEnabled":"yes""#),
            "journalEnabled must be a boolean, not \"yes\""
        );
        assert!(camel(r#""journalDri":"/tmp""#)
            .starts_with("unknown option \"journalDri\" (known: baseUrl, apiKey, tenant,"));
        assert_eq!(
            error(r#"{"apiKey":"k"}"#, NODE, Connection::InOptions),
            "baseUrl is required"
        );
        let py = |m: &str| error(&format!("{{{m}}}"), PYTHON, given());
        assert_eq!(
            py(r#""request_timeout":-1"#),
            "request_timeout must be a finite number of seconds, 0 or more, not -1"
        );
        assert_eq!(
            py(r#""replay_interval":-0.5"#),
            "replay_interval must be a finite number of seconds, 0 or more, not -0.5"
        );
        assert_eq!(
            py(r#""request_timeout":true"#),
            "request_timeout must be a finite number of seconds, 0 or more, not true"
        );
        assert_eq!(
            py(r#""close_timeout":"inf""#),
            "close_timeout must be a finite number of seconds, 0 or more, not \"inf\""
        );
        assert!(py(r#""request_timeout":1e300"#).starts_with("request_timeout is too large"));
        assert_eq!(
            py(r#""max_concurrent_requests":-1"#),
            "max_concurrent_requests must be an integer from 0 to 4294967295, not -1"
        );
        assert!(py(r#""request_timeout_ms":5"#).starts_with(
            "unknown option \"request_timeout_ms\" (known: default_unit, request_timeout,"
        ));
        let snake = |m: &str| error(&format!("{{{m}}}"), C, given());
        assert_eq!(
            snake(r#""settle_max_attempts":true"#),
            "settle_max_attempts must be an integer from 0 to 4294967295, not true"
        );
        assert!(snake(r#""close_timeout_ms":1"#).starts_with("unknown option \"close_timeout_ms\""));
        let jvm = host_client(r#"{"close_timeout_ms":250}"#, JVM, given()).unwrap();
        assert_eq!(jvm.close_timeout_ms, 250);
        assert!(snake(r#""tenant":"t""#).starts_with("unknown option \"tenant\""));
        assert!(snake(r#""base_url":"http://x""#).starts_with("unknown option \"base_url\""));
        assert!(error("[1]", C, given()).starts_with("the client options must be an object"));
        assert_eq!(
            snake(&format!(r#""tenant_id":"{}""#, "x".repeat(60)))
                .split(' ')
                .next(),
            Some("unknown")
        );
    }

    #[test]
    fn values_reach_the_client() {
        let c = host_client(
            r#"{"tenant":"t","default_unit":"TOKENS","request_timeout":0.25,"connect_timeout":0.0001,
                "journal_enabled":false,"max_concurrent_requests":3,"settle_max_attempts":2,
                "replay_interval":1.5,"close_timeout":0,"journal_dir":null}"#,
            PYTHON,
            Connection::InOptions,
        );
        let e = c.err().expect("no endpoint");
        assert_eq!(e.message, "base_url is required");
        let c = host_client(
            r#"{"base_url":"http://127.0.0.1:1","api_key":"k","tenant":"t","default_unit":"TOKENS",
                "request_timeout":0.25,"connect_timeout":0.0001,"journal_enabled":false,
                "max_concurrent_requests":3,"settle_max_attempts":2,"replay_interval":1.5,
                "close_timeout":0,"journal_dir":null}"#,
            PYTHON,
            Connection::InOptions,
        )
        .unwrap();
        let cfg = c.client.config();
        assert_eq!(
            (cfg.tenant.as_deref(), cfg.unit().as_str()),
            (Some("t"), "TOKENS")
        );
        assert_eq!(cfg.request_timeout, std::time::Duration::from_millis(250));
        // A positive bound is never rounded down to no time at all.
        assert_eq!(cfg.connect_timeout, std::time::Duration::from_millis(1));
        assert_eq!(cfg.max_concurrent_requests, 3);
        assert!(!cfg.journal.enabled);
        assert_eq!(
            c.settle,
            SettleOverrides {
                max_attempts: Some(2),
                replay_interval_ms: Some(1500)
            }
        );
        assert_eq!(c.close_timeout_ms, 0);
        let d = host_client(
            r#"{"baseUrl":"http://127.0.0.1:1","apiKey":"k"}"#,
            NODE,
            Connection::InOptions,
        )
        .unwrap();
        assert_eq!(d.close_timeout_ms, DEFAULT_CLOSE_TIMEOUT_MS);
        assert_eq!(d.settle, SettleOverrides::default());
        // Values only core can judge stay core's CONFIG errors.
        let e = host_client(r#"{"defaultUnit":"TOKEN"}"#, NODE, given())
            .err()
            .unwrap();
        assert_eq!(e.name, "CONFIG");
    }
}
