//! Guard specs in, results out, as JSON: the shapes `python/cycles/lifecycle.py` consumes and
//! every binding shares (docs/bindings.md). Behaviour is core's; this only translates.

use cycles_core::events::{Event, HeartbeatEnd};
use cycles_core::guard::{invalid_actual_text, missing_actual_text, Finished, GuardSpec};
use cycles_core::lease::{FailurePolicy, LeaseReport};
use cycles_core::model::{Amount, CommitResponse, EventCreateResponse, Subject, Unit};
use cycles_core::settle::{DrainReport, PendingRecord, SettleOutcome};
use cycles_core::timing::StopReason;
use cycles_core::{Config, Error};
use serde::Serialize;
use serde_json::{json, Value};

use crate::args::Args;

/// The heartbeat failure policy of its boundary name.
pub fn policy(name: &str) -> Result<FailurePolicy, Error> {
    Ok(match name {
        "warn" => FailurePolicy::Warn,
        "fail_on_finalize" => FailurePolicy::FailOnFinalize,
        "cancel" => FailurePolicy::Cancel,
        other => {
            return Err(Error::invalid_argument(format!(
                "heartbeat policy must be warn, fail_on_finalize or cancel, not {other:?}"
            )))
        }
    })
}

/// What a client fills in where a guard spec leaves a member out (its config's tenant and
/// default unit): one rule for every host, so no binding repeats it.
#[derive(Clone, Debug, Default)]
pub struct SpecDefaults {
    /// Subject tenant when the spec has no `subject`.
    pub tenant: Option<String>,
    /// Unit of an estimate given as a bare number; `None`: `USD_MICROCENTS`.
    pub unit: Option<Unit>,
}

impl SpecDefaults {
    /// The defaults of a client's config.
    pub fn of(config: &Config) -> SpecDefaults {
        SpecDefaults {
            tenant: config.tenant.clone(),
            unit: config.default_unit.clone(),
        }
    }
}

/// The members a guard spec may have; any other is INVALID_ARGUMENT naming it.
const SPEC_MEMBERS: &[&str] = &[
    "idempotency_key",
    "subject",
    "action",
    "estimate",
    "unit",
    "ttl_ms",
    "grace_period_ms",
    "overage_policy",
    "metadata",
    "heartbeat",
    "policy",
];

/// A guard spec of its JSON with no client defaults (every member a host leaves out that
/// [`parse_spec_with`] would fill is then required).
pub fn parse_spec(json: &str) -> Result<GuardSpec, Error> {
    parse_spec_with(json, &SpecDefaults::default())
}

/// A guard spec of its JSON. `action` and `estimate` are required; `estimate` is an
/// `Amount` object or a bare integer in `unit` (else the client's default unit, else
/// `USD_MICROCENTS`; a `unit` that differs from an `Amount`'s is an error). Left out:
/// `idempotency_key` is a fresh `cycles-<uuid>`, `subject` is the client's tenant (an error
/// when it has none); `ttl_ms`, `grace_period_ms`, `overage_policy`, `metadata`, `heartbeat`,
/// `policy` keep core's defaults (absent or null). An unknown member is an error.
pub fn parse_spec_with(json: &str, defaults: &SpecDefaults) -> Result<GuardSpec, Error> {
    // Member by member from the exact text: reserve-time metadata reaches the wire as given.
    let v = Args::parse(json, "guard spec")?;
    v.only(SPEC_MEMBERS, "guard spec member")?;
    let idempotency_key = match v.optional::<String>("idempotency_key")? {
        Some(k) => k,
        None => GuardSpec::fresh_key(),
    };
    let subject = match v.optional::<Subject>("subject")? {
        Some(s) => s,
        None => GuardSpec::default_subject(defaults.tenant.as_deref())?,
    };
    let unit = v.optional::<String>("unit")?.map(Unit::from);
    let estimate = match v.raw("estimate") {
        None => return Err(Error::invalid_argument("missing estimate")),
        Some(raw) if raw.get().starts_with('{') => {
            let amount: Amount = v.required("estimate", "estimate")?;
            if unit.as_ref().is_some_and(|u| *u != amount.unit) {
                return Err(Error::invalid_argument(format!(
                    "unit {} differs from the estimate's unit {}",
                    unit.as_ref().map_or("", Unit::as_str),
                    amount.unit
                )));
            }
            amount
        }
        Some(_) => {
            let n = v.optional::<i64>("estimate").map_err(|_| {
                Error::invalid_argument(
                    "estimate must be an Amount or an integer that fits in 64 bits",
                )
            })?;
            let unit = unit
                .or_else(|| defaults.unit.clone())
                .unwrap_or(Unit::UsdMicrocents);
            Amount::new(unit, n.unwrap_or_default())
        }
    };
    let mut spec = GuardSpec::new(
        idempotency_key,
        subject,
        v.required("action", "action")?,
        estimate,
    );
    if let Some(ttl) = v.optional::<i64>("ttl_ms")? {
        spec.ttl_ms = ttl;
    }
    spec.grace_period_ms = v.optional("grace_period_ms")?;
    spec.overage_policy = v.optional("overage_policy")?;
    spec.metadata = v.optional("metadata")?;
    if let Some(hb) = v.optional::<bool>("heartbeat")? {
        spec.heartbeat = hb;
    }
    if let Some(p) = v.optional::<String>("policy")? {
        spec.policy = policy(&p)?;
    }
    Ok(spec)
}

// The result shapes are typed structs serialized straight to text: a guarded call's result
// is built on every finish, and going through `serde_json::Value` (a map per object, the
// server's response copied into one) cost a blocking host about 5% of a lifecycle's CPU.
// Field order is the JSON's.

/// One settlement outcome, in the order of its JSON.
#[derive(Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
enum OutcomeOut<'a> {
    Committed {
        charged: Option<&'a Amount>,
        // Left out of a report's head only (`finished_head_text`).
        #[serde(skip_serializing_if = "Option::is_none")]
        body: Option<&'a CommitResponse>,
    },
    RecoveredViaEvent {
        charged: Option<&'a Amount>,
        #[serde(skip_serializing_if = "Option::is_none")]
        body: Option<&'a EventCreateResponse>,
    },
    Pending {
        reason: &'a str,
        error_kind: Option<&'static str>,
        journaled: bool,
        journal_error: Option<&'a str>,
        not_before_ms: Option<u64>,
    },
    Rejected {
        error_kind: &'static str,
        reason: &'a str,
        http_status: Option<u16>,
        error_code: Option<&'a str>,
    },
}

/// `o` in the order of its JSON; `body` whether the server's response goes with it.
fn outcome_out(o: &SettleOutcome, body: bool) -> OutcomeOut<'_> {
    match o {
        SettleOutcome::Committed(r) => OutcomeOut::Committed {
            charged: o.charged(),
            body: body.then_some(r),
        },
        SettleOutcome::RecoveredViaEvent(r) => OutcomeOut::RecoveredViaEvent {
            charged: o.charged(),
            body: body.then_some(&r.response),
        },
        SettleOutcome::Pending {
            reason,
            last_error,
            journaled,
            journal_error,
            not_before_ms,
        } => OutcomeOut::Pending {
            reason,
            error_kind: last_error.as_ref().map(|k| k.name()),
            journaled: *journaled,
            journal_error: journal_error.as_deref(),
            not_before_ms: *not_before_ms,
        },
        SettleOutcome::Rejected(r) => OutcomeOut::Rejected {
            error_kind: r.kind.name(),
            reason: &r.message,
            http_status: r.http_status,
            error_code: r.server_code.as_deref(),
        },
    }
}

/// One settlement outcome: `status` is committed, recovered_via_event, pending or rejected.
pub fn outcome_json(o: &SettleOutcome) -> Value {
    serde_json::to_value(outcome_out(o, true)).unwrap_or(Value::Null)
}

fn stop_reason(end: &HeartbeatEnd) -> Option<&StopReason> {
    match end {
        HeartbeatEnd::Finished => None,
        HeartbeatEnd::Stopped(r) => Some(r),
    }
}

/// What a heartbeat did, in the order of its JSON.
#[derive(Serialize)]
struct LeaseOut<'a> {
    extensions: u32,
    failures: u32,
    path: &'static str,
    stopped_early: bool,
    end: &'static str,
    stop_reason: Option<&'static str>,
    stop_detail: Option<serde_json::Map<String, Value>>,
    last_error: Option<(&'a str, &'a str)>,
}

fn lease_out(l: &LeaseReport) -> LeaseOut<'_> {
    let stop = stop_reason(&l.end);
    LeaseOut {
        extensions: l.extensions,
        failures: l.failures,
        path: l.path.name(),
        stopped_early: l.stopped_early(),
        end: l.end.name(),
        stop_reason: stop.map(StopReason::name),
        stop_detail: stop.map(StopReason::detail_json),
        last_error: l.last_error.as_ref().map(|(k, m)| (k.as_str(), m.as_str())),
    }
}

/// A release's error, in the order of its JSON.
#[derive(Serialize)]
struct ReleaseErrorOut<'a> {
    error_kind: &'static str,
    message: &'a str,
}

/// How a guarded action ended, in the order of its JSON.
#[derive(Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
enum FinishedOut<'a> {
    Settled {
        reservation_id: &'a str,
        actual: i64,
        settlement: OutcomeOut<'a>,
        lease: Option<LeaseOut<'a>>,
    },
    WorkFailed {
        reservation_id: &'a str,
        settlement: Option<OutcomeOut<'a>>,
        released: bool,
        release_error: Option<ReleaseErrorOut<'a>>,
        lease: Option<LeaseOut<'a>>,
    },
    MissingActual {
        reservation_id: &'a str,
        released: bool,
        release_error: Option<ReleaseErrorOut<'a>>,
        message: String,
        lease: Option<LeaseOut<'a>>,
    },
    InvalidActual {
        reservation_id: &'a str,
        actual: i64,
        released: bool,
        release_error: Option<ReleaseErrorOut<'a>>,
        message: String,
    },
    Released {
        reservation_id: &'a str,
        released: bool,
        release_error: Option<ReleaseErrorOut<'a>>,
        lease: Option<LeaseOut<'a>>,
    },
    HeartbeatLapsed {
        reservation_id: &'a str,
        reason: &'static str,
        stop_detail: serde_json::Map<String, Value>,
        message: String,
        settlement: OutcomeOut<'a>,
    },
}

fn release_error_out(e: &Option<Error>) -> Option<ReleaseErrorOut<'_>> {
    e.as_ref().map(|e| ReleaseErrorOut {
        error_kind: e.kind().name(),
        message: e.message(),
    })
}

/// `f` in the order of its JSON; `body` whether its settlement carries the server's response.
fn finished_out(f: &Finished, body: bool) -> FinishedOut<'_> {
    match f {
        Finished::Settled {
            reservation_id,
            actual,
            settlement,
            lease,
        } => FinishedOut::Settled {
            reservation_id,
            actual: actual.amount,
            settlement: outcome_out(settlement, body),
            lease: lease.as_ref().map(lease_out),
        },
        Finished::WorkFailed {
            reservation_id,
            settlement,
            release_error,
            lease,
        } => FinishedOut::WorkFailed {
            reservation_id,
            settlement: settlement.as_ref().map(|o| outcome_out(o, body)),
            released: settlement.is_none() && release_error.is_none(),
            release_error: release_error_out(release_error),
            lease: lease.as_ref().map(lease_out),
        },
        Finished::MissingActual {
            reservation_id,
            lease,
            release_error,
        } => FinishedOut::MissingActual {
            reservation_id,
            released: release_error.is_none(),
            release_error: release_error_out(release_error),
            message: missing_actual_text(reservation_id, release_error.as_ref()),
            lease: lease.as_ref().map(lease_out),
        },
        Finished::InvalidActual {
            reservation_id,
            actual,
            release_error,
        } => FinishedOut::InvalidActual {
            reservation_id,
            actual: *actual,
            released: release_error.is_none(),
            release_error: release_error_out(release_error),
            message: invalid_actual_text(reservation_id, *actual, release_error.as_ref()),
        },
        Finished::Released {
            reservation_id,
            release_error,
            lease,
        } => FinishedOut::Released {
            reservation_id,
            released: release_error.is_none(),
            release_error: release_error_out(release_error),
            lease: lease.as_ref().map(lease_out),
        },
        Finished::HeartbeatLapsed { lapse, settlement } => FinishedOut::HeartbeatLapsed {
            reservation_id: &lapse.reservation_id,
            reason: lapse.reason.name(),
            stop_detail: lapse.reason.detail_json(),
            message: lapse.to_string(),
            settlement: outcome_out(settlement, body),
        },
    }
}

/// Core's `Finished` as JSON text (what hosts receive): `outcome` is settled, work_failed,
/// missing_actual, invalid_actual, released or heartbeat_lapsed; `released` says whether the
/// estimate was given back; `message` (missing and invalid actual) is the error text every
/// host raises; `lease` is what the heartbeat did (`null` without one).
pub fn finished_text(f: &Finished) -> String {
    serde_json::to_string(&finished_out(f, true)).unwrap_or_else(|_| "null".into())
}

/// [`finished_text`] without the settlement's `body` (the server's commit or event response,
/// most of the text): for a host that reads the outcome at once and the body only when asked
/// ([`settlement_body_text`]), so a guarded call that never reads it neither writes nor
/// parses it.
pub fn finished_head_text(f: &Finished) -> String {
    serde_json::to_string(&finished_out(f, false)).unwrap_or_else(|_| "null".into())
}

/// The `body` [`finished_text`] gives `f`'s settlement (the server's commit response, or
/// its event response after the event fallback), as JSON text; `None` when it has none.
pub fn settlement_body_text(f: &Finished) -> Option<String> {
    let outcome = match f {
        Finished::Settled { settlement, .. } | Finished::HeartbeatLapsed { settlement, .. } => {
            settlement
        }
        Finished::WorkFailed { settlement, .. } => settlement.as_ref()?,
        Finished::MissingActual { .. }
        | Finished::InvalidActual { .. }
        | Finished::Released { .. } => return None,
    };
    match outcome {
        SettleOutcome::Committed(r) => serde_json::to_string(r).ok(),
        SettleOutcome::RecoveredViaEvent(r) => serde_json::to_string(&r.response).ok(),
        SettleOutcome::Pending { .. } | SettleOutcome::Rejected(_) => None,
    }
}

/// [`finished_text`] as a JSON value (for a result that adds to it).
pub fn finished_json(f: &Finished) -> Value {
    serde_json::to_value(finished_out(f, true)).unwrap_or(Value::Null)
}

/// A drain (or flush, or close) report as JSON text: `outcomes`, `remaining`, `quarantined`,
/// `unjournaled` (reservations pending only in memory: the journal could not be written).
pub fn drain_json(r: &DrainReport) -> String {
    json!({
        "outcomes": r.outcomes.iter().map(|(id, o)| json!({"reservation_id": id, "settlement": outcome_json(o)})).collect::<Vec<_>>(),
        "remaining": r.remaining.iter().map(pending_json).collect::<Vec<_>>(),
        "quarantined": r.quarantined,
        "unjournaled": r.unjournaled,
    })
    .to_string()
}

/// The drain report of a client that never ran a guarded action (nothing to drain): every
/// host's `close` returns a report, always, in the one shape.
pub fn empty_drain_json() -> String {
    drain_json(&DrainReport::default())
}

/// One journal record still pending, as the drain and shutdown reports list it.
pub fn pending_json(p: &PendingRecord) -> Value {
    json!({
        "reservation_id": p.reservation_id,
        "mode": p.mode.to_string(),
        "recorded_at_ms": p.recorded_at_ms,
        "not_before_ms": p.not_before_ms,
        "file": p.file,
    })
}

/// One event as JSON text: core's stable event object (`Event::to_json`, docs/events.md).
pub fn event_json(e: &Event) -> String {
    e.to_json().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use cycles_core::ErrorKind;

    /// What hosts receive, read back for the shape checks.
    fn finished_json(f: &Finished) -> Value {
        serde_json::from_str(&finished_text(f)).unwrap()
    }

    fn lease_json(l: Option<&LeaseReport>) -> Value {
        serde_json::to_value(l.map(lease_out)).unwrap()
    }

    const SPEC: &str = r#"{"idempotency_key":"k1","subject":{"tenant":"acme"},
        "action":{"kind":"llm.completion","name":"gpt"},"estimate":{"unit":"USD_MICROCENTS","amount":100}}"#;

    #[test]
    fn spec_defaults_and_options() {
        let s = parse_spec(SPEC).unwrap();
        assert_eq!(s.idempotency_key, "k1");
        assert!(s.heartbeat);
        let with: Value = {
            let mut v: Value = serde_json::from_str(SPEC).unwrap();
            v["ttl_ms"] = json!(5000);
            v["heartbeat"] = json!(false);
            v["policy"] = json!("cancel");
            v["grace_period_ms"] = Value::Null;
            v
        };
        let s = parse_spec(&with.to_string()).unwrap();
        assert_eq!(s.ttl_ms, 5000);
        assert!(!s.heartbeat);
        assert_eq!(s.policy, FailurePolicy::Cancel);
        assert_eq!(s.grace_period_ms, None);
    }

    #[test]
    fn spec_errors_are_invalid_argument() {
        let e = parse_spec("[").unwrap_err();
        assert_eq!(*e.kind(), ErrorKind::InvalidArgument);
        assert!(e.message().starts_with("guard spec: "));
        let e = parse_spec(r#"{"subject":{}}"#).unwrap_err();
        assert_eq!(e.message(), "missing estimate");
        let mut v: Value = serde_json::from_str(SPEC).unwrap();
        v["policy"] = json!("ignore");
        let e = parse_spec(&v.to_string()).unwrap_err();
        assert_eq!(
            e.message(),
            "heartbeat policy must be warn, fail_on_finalize or cancel, not \"ignore\""
        );
    }

    #[test]
    fn pending_outcome_shape() {
        let o = SettleOutcome::Pending {
            reason: "server error".into(),
            last_error: Some(ErrorKind::ServerError),
            journaled: true,
            journal_error: None,
            not_before_ms: Some(7),
        };
        assert_eq!(
            outcome_json(&o),
            json!({"status": "pending", "reason": "server error", "error_kind": "SERVER_ERROR",
                   "journaled": true, "journal_error": null, "not_before_ms": 7})
        );
    }

    #[test]
    fn lease_and_lapse_use_stable_names() {
        use cycles_core::lease::HeartbeatLapse;
        use cycles_core::timing::SignedMillis;
        let reason = StopReason::NoSafeRetryWindow {
            retry_window: SignedMillis::Finite(-353),
        };
        let report = LeaseReport {
            reservation_id: "r1".into(),
            extensions: 3,
            failures: 1,
            path: cycles_core::events::HeartbeatPath::Primary,
            end: HeartbeatEnd::Stopped(reason.clone()),
            last_error: Some(("TIMEOUT".into(), "timed out".into())),
            policy: FailurePolicy::Warn,
        };
        assert_eq!(
            lease_json(Some(&report)),
            json!({"extensions": 3, "failures": 1, "path": "primary", "stopped_early": true,
                   "end": "stopped", "stop_reason": "no_safe_retry_window",
                   "stop_detail": {"retry_window_ms": -353},
                   "last_error": ["TIMEOUT", "timed out"]})
        );
        let finished = LeaseReport {
            end: HeartbeatEnd::Finished,
            ..report
        };
        let v = lease_json(Some(&finished));
        assert_eq!(
            (v["end"].as_str(), &v["stop_reason"]),
            (Some("finished"), &Value::Null)
        );
        let lapse = HeartbeatLapse {
            reservation_id: "r1".into(),
            reason,
            last_error: Some(("TIMEOUT".into(), "timed out".into())),
        };
        assert_eq!(
            lapse.to_string(),
            "the heartbeat of reservation r1 stopped before the work finished: \
             no_safe_retry_window (last error: TIMEOUT: timed out)"
        );
    }

    #[test]
    fn finished_shapes_without_network() {
        let f = Finished::MissingActual {
            reservation_id: "r1".into(),
            lease: None,
            release_error: None,
        };
        assert_eq!(
            finished_json(&f),
            json!({"outcome": "missing_actual", "reservation_id": "r1", "released": true,
                   "release_error": null,
                   "message": "the guarded work on reservation r1 finished without reporting its actual amount; nothing was committed, and the reservation was released",
                   "lease": null})
        );
        let f = Finished::InvalidActual {
            reservation_id: "r2".into(),
            actual: -5,
            release_error: Some(Error::runtime("timed out")),
        };
        let v = finished_json(&f);
        assert_eq!(
            (&v["outcome"], &v["actual"], &v["released"]),
            (&json!("invalid_actual"), &json!(-5), &json!(false))
        );
        assert_eq!(
            v["release_error"],
            json!({"error_kind": "RUNTIME", "message": "timed out"})
        );
        assert!(v["message"]
            .as_str()
            .unwrap()
            .ends_with("releasing the reservation failed (RUNTIME: timed out); the estimate stays held until the lease expires"));
        let f = Finished::Released {
            reservation_id: "r3".into(),
            release_error: None,
            lease: None,
        };
        assert_eq!(
            finished_json(&f),
            json!({"outcome": "released", "reservation_id": "r3", "released": true,
                   "release_error": null, "lease": null})
        );
    }

    #[test]
    fn spec_defaults_come_from_the_client() {
        let d = SpecDefaults {
            tenant: Some("acme".into()),
            unit: Some(Unit::Tokens),
        };
        let s = parse_spec_with(
            r#"{"action":{"kind":"llm.completion","name":"m"},"estimate":40}"#,
            &d,
        )
        .unwrap();
        assert_eq!(s.subject, Subject::tenant("acme"));
        assert_eq!(s.estimate, Amount::new(Unit::Tokens, 40));
        assert!(s.idempotency_key.starts_with("cycles-") && s.idempotency_key.len() == 43);
        let s = parse_spec_with(
            r#"{"action":{"kind":"k","name":"m"},"estimate":40,"unit":"CREDITS","subject":{"tenant":"t2"},"idempotency_key":"k9"}"#,
            &d,
        )
        .unwrap();
        assert_eq!(
            (
                s.estimate.unit,
                s.subject.tenant.as_deref(),
                s.idempotency_key.as_str()
            ),
            (Unit::Credits, Some("t2"), "k9")
        );
        // No defaults: USD_MICROCENTS, and a subject is required.
        let e = parse_spec(r#"{"action":{"kind":"k","name":"m"},"estimate":1}"#).unwrap_err();
        assert_eq!(
            e.message(),
            "subject is required (or configure a tenant on the client)"
        );
        let s = parse_spec(
            r#"{"action":{"kind":"k","name":"m"},"estimate":1,"subject":{"tenant":"a"}}"#,
        )
        .unwrap();
        assert_eq!(s.estimate.unit, Unit::UsdMicrocents);
        for (text, says) in [
            (
                r#"{"action":{"kind":"k","name":"m"},"estimate":{"unit":"TOKENS","amount":1},"unit":"CREDITS"}"#,
                "unit CREDITS differs from the estimate's unit TOKENS",
            ),
            (
                r#"{"action":{"kind":"k","name":"m"},"estimate":1.5}"#,
                "estimate must be an Amount or an integer that fits in 64 bits",
            ),
            (
                r#"{"action":{"kind":"k","name":"m"},"estimate":100000000000000000000}"#,
                "estimate must be an Amount or an integer that fits in 64 bits",
            ),
            (
                r#"{"action":{"kind":"k","name":"m"},"estimate":1,"polcy":"warn"}"#,
                "unknown guard spec member \"polcy\"",
            ),
            (r#"{"action":{"kind":"k","name":"m"}}"#, "missing estimate"),
            (
                r#"{"action":{"kind":"k"},"estimate":1}"#,
                "invalid action: missing field `name`",
            ),
        ] {
            let e = parse_spec_with(text, &d).unwrap_err();
            assert_eq!(*e.kind(), cycles_core::ErrorKind::InvalidArgument, "{text}");
            assert!(e.message().starts_with(says), "{text}: {}", e.message());
            assert!(
                !e.message().contains(" at line "),
                "{text}: {}",
                e.message()
            );
        }
    }

    #[test]
    fn settled_and_rejected_text_keeps_its_order() {
        let committed: cycles_core::model::CommitResponse = serde_json::from_value(json!({
            "status": "COMMITTED",
            "charged": {"unit": "USD_MICROCENTS", "amount": 800},
            "released": {"unit": "USD_MICROCENTS", "amount": 200},
        }))
        .unwrap();
        let f = Finished::Settled {
            reservation_id: "r1".into(),
            actual: cycles_core::Amount::new(cycles_core::Unit::UsdMicrocents, 800),
            settlement: SettleOutcome::Committed(committed),
            lease: None,
        };
        let charged = r#"{"unit":"USD_MICROCENTS","amount":800}"#;
        assert_eq!(
            finished_text(&f),
            format!(
                r#"{{"outcome":"settled","reservation_id":"r1","actual":800,"settlement":{{"status":"committed","charged":{charged},"body":{{"status":"COMMITTED","charged":{charged},"released":{{"unit":"USD_MICROCENTS","amount":200}}}}}},"lease":null}}"#
            )
        );
        let f = Finished::WorkFailed {
            reservation_id: "r2".into(),
            settlement: Some(SettleOutcome::Rejected(cycles_core::settle::Rejection {
                kind: ErrorKind::BudgetExceeded,
                message: "no budget".into(),
                http_status: Some(409),
                server_code: Some("BUDGET_EXCEEDED".into()),
            })),
            release_error: None,
            lease: None,
        };
        assert_eq!(
            finished_text(&f),
            r#"{"outcome":"work_failed","reservation_id":"r2","settlement":{"status":"rejected","error_kind":"BUDGET_EXCEEDED","reason":"no budget","http_status":409,"error_code":"BUDGET_EXCEEDED"},"released":false,"release_error":null,"lease":null}"#
        );
    }

    /// The head and the body, put back together, are the whole report; the head is the
    /// report without the settlement's `body` and nothing else.
    fn assert_head_and_body(f: &Finished) {
        let whole: Value = serde_json::from_str(&finished_text(f)).unwrap();
        let mut head: Value = serde_json::from_str(&finished_head_text(f)).unwrap();
        let body = settlement_body_text(f).map(|b| serde_json::from_str::<Value>(&b).unwrap());
        assert_eq!(body.as_ref(), whole["settlement"].get("body"), "{whole}");
        assert!(head["settlement"].get("body").is_none(), "{head}");
        if let Some(b) = body {
            head["settlement"]["body"] = b;
        }
        assert_eq!(head, whole);
    }

    #[test]
    fn a_report_in_two_parts_is_the_whole_report() {
        let committed: cycles_core::model::CommitResponse = serde_json::from_value(json!({
            "status": "COMMITTED",
            "charged": {"unit": "USD_MICROCENTS", "amount": 800},
            "released": {"unit": "USD_MICROCENTS", "amount": 200},
        }))
        .unwrap();
        let actual = cycles_core::Amount::new(cycles_core::Unit::UsdMicrocents, 800);
        let settled = Finished::Settled {
            reservation_id: "r1".into(),
            actual: actual.clone(),
            settlement: SettleOutcome::Committed(committed),
            lease: None,
        };
        assert_eq!(
            finished_head_text(&settled),
            r#"{"outcome":"settled","reservation_id":"r1","actual":800,"settlement":{"status":"committed","charged":{"unit":"USD_MICROCENTS","amount":800}},"lease":null}"#
        );
        assert_head_and_body(&settled);
        let event: cycles_core::model::EventCreateResponse = serde_json::from_value(json!({
            "status": "APPLIED", "event_id": "e1",
        }))
        .unwrap();
        let recovered = Finished::WorkFailed {
            reservation_id: "r2".into(),
            settlement: Some(SettleOutcome::RecoveredViaEvent(
                cycles_core::settle::EventRecovery::new(
                    event,
                    r#"{"actual":{"unit":"USD_MICROCENTS","amount":800}}"#,
                ),
            )),
            release_error: None,
            lease: None,
        };
        assert!(settlement_body_text(&recovered).is_some_and(|b| b.contains("\"e1\"")));
        assert_head_and_body(&recovered);
        let rejected = Finished::WorkFailed {
            reservation_id: "r3".into(),
            settlement: Some(SettleOutcome::Rejected(cycles_core::settle::Rejection {
                kind: ErrorKind::BudgetExceeded,
                message: "no budget".into(),
                http_status: Some(409),
                server_code: None,
            })),
            release_error: None,
            lease: None,
        };
        assert_eq!(settlement_body_text(&rejected), None);
        assert_head_and_body(&rejected);
        let released = Finished::Released {
            reservation_id: "r4".into(),
            release_error: None,
            lease: None,
        };
        assert_eq!(settlement_body_text(&released), None);
        assert_eq!(finished_head_text(&released), finished_text(&released));
    }

    #[test]
    fn empty_drain_shape() {
        let j: Value = serde_json::from_str(&empty_drain_json()).unwrap();
        assert_eq!(
            j,
            json!({"outcomes": [], "remaining": [], "quarantined": [], "unjournaled": []})
        );
    }
}
