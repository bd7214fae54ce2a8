//! The stable event object every binding forwards (`Event::to_json`, docs/events.md): one
//! example of each variant, its exact kind, level and fields.

use cycles_core::events::{
    Disposition, Event, HeartbeatEnd, HeartbeatPath, Level, SettleDisposition,
};
use cycles_core::journal::Mode;
use cycles_core::timing::{Millis, SignedMillis, StopReason};
use serde_json::{json, Value};

fn examples() -> Vec<(Event, Level, Value)> {
    let rid = || "rsv_1".to_string();
    vec![
        (
            Event::HeartbeatExtended {
                reservation_id: rid(),
                expires_at_ms: 1_000,
                remaining_ttl_ms: Some(60_000),
                next_delay: Millis::ms(20_000),
                path: HeartbeatPath::Primary,
            },
            Level::Debug,
            json!({"kind": "heartbeat_extended", "expires_at_ms": 1_000, "remaining_ttl_ms": 60_000,
                   "next_delay_ms": 20_000, "path": "primary"}),
        ),
        (
            Event::HeartbeatFailed {
                reservation_id: rid(),
                error_kind: "TRANSPORT_CONNECT",
                error: "refused".into(),
                disposition: Disposition::RetryAfter {
                    delay: Millis::Infinite,
                },
            },
            Level::Warning,
            json!({"kind": "heartbeat_failed", "disposition": "retry", "retry_in_ms": null,
                   "error_kind": "TRANSPORT_CONNECT", "error": "refused"}),
        ),
        (
            Event::HeartbeatFailed {
                reservation_id: rid(),
                error_kind: "SERVER_ERROR",
                error: "503".into(),
                disposition: Disposition::Stopped(StopReason::NoSafeRetryWindow {
                    retry_window: SignedMillis::Finite(-250),
                }),
            },
            Level::Error,
            json!({"kind": "heartbeat_failed", "disposition": "stopped",
                   "stop_reason": "no_safe_retry_window", "stop_detail": {"retry_window_ms": -250},
                   "error_kind": "SERVER_ERROR", "error": "503"}),
        ),
        (
            Event::HeartbeatLeaseTooShort {
                reservation_id: rid(),
                lead_floor: Millis::ms(1990),
                min_ttl: Millis::ms(3011),
                timeout: Millis::ms(1000),
                working_timeout: None,
                path: HeartbeatPath::Primary,
            },
            Level::Warning,
            json!({"kind": "heartbeat_lease_too_short", "lead_floor_ms": 1990, "min_ttl_ms": 3011,
                   "timeout_ms": 1000, "working_timeout_ms": null, "path": "primary"}),
        ),
        (
            Event::HeartbeatLeaseTooShort {
                reservation_id: rid(),
                lead_floor: Millis::ms(6000),
                min_ttl: Millis::Infinite,
                timeout: Millis::ms(10_000),
                working_timeout: Some(Millis::ms(1000)),
                path: HeartbeatPath::Fallback,
            },
            Level::Warning,
            json!({"kind": "heartbeat_lease_too_short", "lead_floor_ms": 6000, "min_ttl_ms": null,
                   "timeout_ms": 10_000, "working_timeout_ms": 1000, "path": "fallback"}),
        ),
        (
            Event::HeartbeatEnded {
                reservation_id: rid(),
                end: HeartbeatEnd::Stopped(StopReason::Rejected {
                    status: 403,
                    code: None,
                }),
                extensions: 2,
            },
            Level::Warning,
            json!({"kind": "heartbeat_ended", "disposition": "stopped", "stop_reason": "rejected",
                   "stop_detail": {"status": 403, "code": null}, "extensions": 2}),
        ),
        (
            Event::HeartbeatEnded {
                reservation_id: rid(),
                end: HeartbeatEnd::Finished,
                extensions: 0,
            },
            Level::Debug,
            json!({"kind": "heartbeat_ended", "disposition": "finished", "extensions": 0}),
        ),
        (
            Event::SettlementSettled {
                reservation_id: rid(),
                via: Mode::Event,
                attempts: 2,
            },
            Level::Info,
            json!({"kind": "settlement_settled", "disposition": "settled", "mode": "event", "attempts": 2}),
        ),
        (
            Event::SettlementSettled {
                reservation_id: rid(),
                via: Mode::Commit,
                attempts: 1,
            },
            Level::Debug,
            json!({"kind": "settlement_settled", "disposition": "settled", "mode": "commit", "attempts": 1}),
        ),
        (
            Event::SettlementSettled {
                reservation_id: rid(),
                via: Mode::Commit,
                attempts: 3,
            },
            Level::Info,
            json!({"kind": "settlement_settled", "disposition": "settled", "mode": "commit", "attempts": 3}),
        ),
        (
            Event::SettlementAttemptFailed {
                reservation_id: rid(),
                mode: Mode::Commit,
                error_kind: "RATE_LIMITED",
                error: "429".into(),
                disposition: SettleDisposition::NotBefore { not_before_ms: 5 },
            },
            Level::Warning,
            json!({"kind": "settlement_attempt_failed", "mode": "commit", "error_kind": "RATE_LIMITED",
                   "error": "429", "disposition": "not_before", "disposition_value": 5}),
        ),
        (
            Event::SettlementModeSwitched {
                reservation_id: rid(),
            },
            Level::Info,
            json!({"kind": "settlement_mode_switched", "disposition": "switch_to_event"}),
        ),
        (
            Event::SettlementPending {
                reservation_id: rid(),
                reason: "outage".into(),
                not_before_ms: None,
                journaled: true,
            },
            Level::Warning,
            json!({"kind": "settlement_pending", "disposition": "pending", "reason": "outage",
                   "not_before_ms": null, "journaled": true}),
        ),
        (
            Event::SettlementPending {
                reservation_id: rid(),
                reason: "outage".into(),
                not_before_ms: None,
                journaled: false,
            },
            Level::Error,
            json!({"kind": "settlement_pending", "disposition": "pending", "reason": "outage",
                   "not_before_ms": null, "journaled": false}),
        ),
        (
            Event::JournalQuarantined {
                reservation_id: None,
                file: "/j/v2-x.json".into(),
                quarantined_as: "v2-x.json.corrupt-1-0".into(),
                reason: "corrupt".into(),
            },
            Level::Error,
            json!({"kind": "journal_quarantined", "disposition": "quarantined", "file": "/j/v2-x.json",
                   "quarantined_as": "v2-x.json.corrupt-1-0", "reason": "corrupt"}),
        ),
        (
            Event::JournalIoFailed {
                reservation_id: Some(rid()),
                operation: "write",
                error: "ENOSPC".into(),
            },
            Level::Error,
            json!({"kind": "journal_io_failed", "operation": "write", "error": "ENOSPC"}),
        ),
        (
            Event::JournalMigrated {
                reservation_id: rid(),
            },
            Level::Info,
            json!({"kind": "journal_migrated", "disposition": "migrated"}),
        ),
        (
            Event::CapsApplied {
                reservation_id: rid(),
                api: "messages",
                bound_from: Some(500),
                bound_to: Some(100),
                removed_tools: vec!["shell".into()],
                send: true,
            },
            Level::Info,
            json!({"kind": "caps_applied", "api": "messages", "bound_from": 500, "bound_to": 100,
                   "removed_tools": ["shell"], "send": true}),
        ),
    ]
}

#[test]
fn every_variant_has_its_stable_kind_level_and_fields() {
    for (event, level, fields) in examples() {
        let got = event.to_json();
        assert_eq!(event.level(), level, "{event:?}");
        assert_eq!(got["kind"], json!(event.kind()));
        assert_eq!(got["level"], json!(level.as_str()));
        assert_eq!(got["reservation_id"], json!(event.reservation_id()));
        assert_eq!(got["message"], json!(event.to_string()));
        let mut expected = fields.as_object().unwrap().clone();
        for k in ["level", "reservation_id", "message"] {
            expected.insert(k.into(), got[k].clone());
        }
        assert_eq!(got, Value::Object(expected), "{event:?}");
    }
}

#[test]
fn kinds_are_distinct_snake_case_names() {
    let mut kinds: Vec<&str> = examples().iter().map(|(e, _, _)| e.kind()).collect();
    kinds.dedup();
    assert_eq!(kinds.len(), 12, "one kind per variant: {kinds:?}");
    for k in kinds {
        assert!(k.chars().all(|c| c.is_ascii_lowercase() || c == '_'), "{k}");
    }
}

#[test]
fn unbounded_windows_are_strings_not_numbers() {
    let e = Event::HeartbeatEnded {
        reservation_id: "r".into(),
        end: HeartbeatEnd::Stopped(StopReason::NoSafeRetryWindow {
            retry_window: SignedMillis::NegInfinite,
        }),
        extensions: 0,
    };
    assert_eq!(
        e.to_json()["stop_detail"]["retry_window_ms"],
        json!("-infinite")
    );
}

#[test]
fn lease_too_short_names_the_ttl_or_timeout_that_would_work() {
    let e = Event::HeartbeatLeaseTooShort {
        reservation_id: "r".into(),
        lead_floor: Millis::ms(1990),
        min_ttl: Millis::ms(3011),
        timeout: Millis::ms(1000),
        working_timeout: None,
        path: HeartbeatPath::Primary,
    };
    assert!(e.to_string().contains("ttl_ms >= 3011"), "{e}");
    let e = Event::HeartbeatLeaseTooShort {
        reservation_id: "r".into(),
        lead_floor: Millis::ms(5990),
        min_ttl: Millis::ms(21_011),
        timeout: Millis::ms(10_000),
        working_timeout: Some(Millis::ms(1000)),
        path: HeartbeatPath::Primary,
    };
    assert!(e.to_string().contains("request timeout of 1000 ms"), "{e}");
}

#[test]
fn levels_are_ordered_by_severity_and_found_by_name() {
    let mut sorted = Level::ALL;
    sorted.sort();
    assert_eq!(sorted, Level::ALL, "ALL is least severe first");
    for level in Level::ALL {
        assert_eq!(Level::from_name(level.as_str()), Some(level));
    }
    assert_eq!(Level::from_name("warn"), None);
    assert_eq!(Level::from_name("INFO"), None);
}
