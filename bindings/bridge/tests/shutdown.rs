//! `process::shutdown`, the call a binding's exit path makes: a guarded action's pending
//! settlement is drained, later calls fail with RUNTIME, a second call is a no-op. Shutdown
//! ends core for the process, so this binary holds this one test (one process).

#![allow(clippy::result_large_err)] // ErrorFields: see the crate root

use std::time::Duration;

mod common;

use common::{block, journaled_client};
use cycles_bridge::{process, task, Lifecycle};
use cycles_core::runtime::SHUT_DOWN_MESSAGE;
use cycles_local_server::{Fault, FaultRule, LocalServer, Operation, ServerConfig};
use serde_json::{json, Value};

#[test]
fn shutdown_drains_then_every_call_fails_with_runtime() {
    // The server on a runtime of the test's own: it must outlive core's.
    let srv_rt = tokio::runtime::Runtime::new().unwrap();
    let server = srv_rt
        .block_on(LocalServer::start(ServerConfig::default()))
        .unwrap();
    let journal = tempfile::tempdir().unwrap();
    let client = journaled_client(&server, journal.path());
    let lc = Lifecycle::new(client.live().unwrap(), client.config(), Some(1), None).unwrap();
    let spec = json!({
        "idempotency_key": "bridge-shutdown-1",
        "subject": {"tenant": "acme"},
        "action": {"kind": "llm.completion", "name": "bridge-test"},
        "estimate": {"unit": "USD_MICROCENTS", "amount": 1000},
    });
    let active = block(lc.begin(&spec.to_string()).unwrap()).unwrap();
    active
        .usage()
        .set_actual(250)
        .expect("reported before the end");
    server.add_fault(FaultRule {
        operation: Operation::CommitReservation,
        reservation_id: None,
        skip: 0,
        times: 1,
        every: 1,
        fault: Fault::ServerError { status: 503 },
    });
    let finished: Value = serde_json::from_str(&block(active.finish(true).unwrap())).unwrap();
    assert_eq!(
        finished["settlement"]["status"],
        json!("pending"),
        "{finished}"
    );

    let report: Value =
        serde_json::from_str(&process::shutdown(Duration::from_secs(10)).unwrap()).unwrap();
    assert_eq!(
        report,
        json!({"already_shut_down": false, "settled": 1, "remaining": [], "unjournaled": []})
    );

    let e = task::start(async {}).err().unwrap();
    assert_eq!(
        (e.name.as_str(), e.message.as_str()),
        ("RUNTIME", SHUT_DOWN_MESSAGE)
    );
    let again: Value =
        serde_json::from_str(&process::shutdown(Duration::from_secs(1)).unwrap()).unwrap();
    assert_eq!(again["already_shut_down"], json!(true));
}
