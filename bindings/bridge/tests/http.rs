//! The bridge over real HTTP against the local server: JSON operations through the table,
//! a guarded action begun and finished from JSON, its events through the pump, and close.

#![allow(clippy::result_large_err)] // ErrorFields: see the crate root

use std::time::Duration;

mod common;

use common::{block, journaled_client};
use cycles_bridge::{ClientHandle, ErrorFields, Lifecycle};
use cycles_core::runtime;
use cycles_local_server::{LocalServer, ServerConfig};
use serde_json::{json, Value};

struct Setup {
    _server: LocalServer,
    client: ClientHandle,
    _journal: tempfile::TempDir,
}

fn setup() -> Setup {
    let rt = runtime::handle().unwrap();
    let server = rt
        .block_on(LocalServer::start(ServerConfig::default()))
        .unwrap();
    let journal = tempfile::tempdir().unwrap();
    let client = journaled_client(&server, journal.path());
    Setup {
        _server: server,
        client,
        _journal: journal,
    }
}

fn call(c: &ClientHandle, op: &str, args: Value) -> Result<(u16, Value), ErrorFields> {
    let call = c.prepare(op, &args.to_string())?;
    let r = block(call.run())?;
    assert!(r.rtt_us > 0 || op == "list_reservations_all");
    Ok((r.status, serde_json::from_str(&r.body).unwrap()))
}

fn subject_action_estimate(key: &str, amount: i64) -> Value {
    json!({
        "idempotency_key": key,
        "subject": {"tenant": "acme"},
        "action": {"kind": "llm.completion", "name": "bridge-test"},
        "estimate": {"unit": "USD_MICROCENTS", "amount": amount},
    })
}

#[test]
fn operations_round_trip_as_json() {
    let s = setup();
    let (status, created) = call(
        &s.client,
        "create_reservation",
        subject_action_estimate("bridge-op-1", 500),
    )
    .unwrap();
    assert_eq!(status, 200);
    let id = created["reservation_id"].as_str().unwrap().to_string();
    let (_, got) = call(&s.client, "get_reservation", json!({"reservation_id": id})).unwrap();
    assert_eq!(got["reservation_id"], json!(id));
    let (status, committed) = call(
        &s.client,
        "commit_reservation",
        json!({"reservation_id": id, "request": {
            "idempotency_key": "bridge-op-1-commit",
            "actual": {"unit": "USD_MICROCENTS", "amount": 300}}}),
    )
    .unwrap();
    assert_eq!(status, 200);
    assert_eq!(committed["charged"]["amount"], json!(300));
    let (_, rows) = call(
        &s.client,
        "list_reservations_all",
        json!({"tenant": "acme", "max_pages": 2}),
    )
    .unwrap();
    assert!(rows
        .as_array()
        .unwrap()
        .iter()
        .any(|r| r["reservation_id"] == json!(id)));

    // A server error keeps its facts; a missing argument is the caller's.
    let e = call(
        &s.client,
        "get_reservation",
        json!({"reservation_id": "nope"}),
    )
    .unwrap_err();
    assert_eq!((e.name.as_str(), e.http_status), ("NOT_FOUND", Some(404)));
    assert!(e.request_id.is_some());
    let e = call(&s.client, "get_reservation", json!({})).unwrap_err();
    assert_eq!(e.message, "missing argument reservation_id");
    let e = call(
        &s.client,
        "commit_reservation",
        json!({"reservation_id": id, "request": {}}),
    )
    .unwrap_err();
    assert_eq!(e.name, "INVALID_ARGUMENT");
    assert!(
        e.message.starts_with("invalid commit request: "),
        "{}",
        e.message
    );
}

#[test]
fn guarded_action_from_json_with_events_and_close() {
    let s = setup();
    let lc = Lifecycle::new(s.client.live().unwrap(), s.client.config(), None, None).unwrap();
    let mut spec = subject_action_estimate("bridge-guard-1", 1000);
    spec["ttl_ms"] = json!(60_000);
    let active = block(lc.begin(&spec.to_string()).unwrap()).unwrap();
    assert!(!active.reservation_id().is_empty());
    active
        .usage()
        .set_actual(250)
        .expect("reported before the end");
    let finished: Value = serde_json::from_str(&block(active.finish(true).unwrap())).unwrap();
    assert_eq!(finished["outcome"], json!("settled"));
    assert_eq!(finished["reservation_id"], json!(active.reservation_id()));
    assert_eq!(finished["actual"], json!(250));
    assert_eq!(finished["settlement"]["status"], json!("committed"));
    assert!(active.is_finished());
    let again = active.finish(true).err().unwrap();
    assert_eq!(again.message, "this guarded action has already finished");

    // The settlement's event arrives through the pump as core's event JSON.
    let mut events = Vec::new();
    while let Some(batch) = lc.next_events(Duration::from_millis(200)) {
        if batch.is_empty() {
            break;
        }
        events.extend(batch);
    }
    let kinds: Vec<Value> = events
        .iter()
        .map(|e| serde_json::from_str::<Value>(e).unwrap()["kind"].clone())
        .collect();
    assert!(kinds.contains(&json!("settlement_settled")), "{kinds:?}");

    let report: Value = serde_json::from_str(&block(lc.close(Duration::ZERO))).unwrap();
    assert_eq!(report["remaining"], json!([]));
    assert!(lc.is_closed());
    assert_eq!(
        lc.begin(&spec.to_string()).err(),
        Some(ErrorFields::closed())
    );
    // Closed and drained: the pump ends instead of waiting.
    assert_eq!(lc.next_events(Duration::from_secs(60)), None);
}
