//! Disks (issue 32): every face surfaces a journal it cannot write the same way. The journal
//! directory is a regular file (every journal operation fails, as on a full or read-only
//! disk, without needing a mount), and the server fails the first commit: the guarded action
//! must end pending, not journaled, with core's `journal_error`; the face's events must show
//! the `journal_io_failed` and the error-level, unjournaled `settlement_pending`; the flush
//! that follows must settle it from memory (`settlement_settled`, nothing left unjournaled),
//! and the ledger must hold one reserve and one commit.

use cycles_local_server::{Fault, FaultRule, LocalServer, Operation};
use serde_json::{json, Value};

use crate::face::{canonical, Face};

/// The one answer every face must give (PROTOCOL.md, `journal_fail`), events normalized.
fn expected() -> Value {
    json!({
        "status": "pending",
        "journaled": false,
        "journal_error": "lock: Not a directory (os error 20)",
        "flush_unjournaled": 0,
        "events": [
            {"kind": "journal_io_failed", "level": "error", "operation": "lock", "journaled": null},
            {"kind": "settlement_pending", "level": "error", "operation": null, "journaled": false},
            {"kind": "settlement_settled", "level": "debug", "operation": null, "journaled": null},
        ],
    })
}

/// Events arrive on host threads in an order a face does not control, and a failure may be
/// reported more than once (the settle, then the flush's retry): compared as a sorted set.
fn normalized(mut answer: Value) -> Value {
    if let Some(Value::Array(events)) = answer.get_mut("events") {
        let mut seen: Vec<(String, Value)> = events.drain(..).map(|e| (canonical(&e), e)).collect();
        seen.sort_by(|a, b| a.0.cmp(&b.0));
        seen.dedup_by(|a, b| a.0 == b.0);
        *events = seen.into_iter().map(|(_, e)| e).collect();
    }
    answer
}

/// Runs the case in one face: (cases passed, failures).
/// The case counts in the lifecycle contract's row, with its client identity and unit.
pub async fn run(
    face: &mut Face,
    server: &LocalServer,
    url: &str,
    root: &std::path::Path,
) -> (u64, Vec<String>) {
    use crate::contract::{KEY as api_key, LABEL as label, TENANT as tenant, UNIT as unit};
    let not_a_dir = root.join(format!("disk-{}", face.name));
    if let Err(e) = std::fs::write(&not_a_dir, b"not a directory") {
        return (0, vec![format!("{label}: {}: disks: {e}", face.name)]);
    }
    let key = format!("disks-{}", face.name);
    server.add_fault(FaultRule {
        operation: Operation::CommitReservation,
        reservation_id: None,
        skip: 0,
        every: 1,
        times: 1,
        fault: Fault::ServerError { status: 503 },
    });
    let before = server.ledger().len();
    let request = json!({"op": "journal_fail", "url": url, "api_key": api_key, "tenant": tenant,
                         "default_unit": unit, "journal_dir": not_a_dir.to_string_lossy(),
                         "key": key});
    let got = match tokio::task::block_in_place(|| face.batch(vec![request])) {
        Ok(mut a) => a.pop().unwrap_or(Value::Null),
        Err(e) => return (0, vec![format!("{label}: {}: disks: {e}", face.name)]),
    };
    // A face that never reached the commit leaves the fault for the next face.
    server.clear_faults();
    let mut problems = Vec::new();
    let answer = normalized(got["ok"].clone());
    let expect = normalized(expected());
    if canonical(&answer) != canonical(&expect) {
        problems.push(format!(
            "answered {}, expected {}",
            canonical(&got),
            canonical(&expect)
        ));
    }
    let kinds: Vec<String> = server
        .ledger()
        .into_iter()
        .skip(before)
        .filter(|e| e.idempotency_key == key || e.idempotency_key.starts_with(&format!("{key}:")))
        .map(|e| e.kind)
        .collect();
    if kinds != ["reserve", "commit"] {
        problems.push(format!(
            "ledger {kinds:?}, expected [\"reserve\", \"commit\"]"
        ));
    }
    if problems.is_empty() {
        (1, Vec::new())
    } else {
        (
            0,
            vec![format!(
                "{label}: {} journal write failure: {}",
                face.name,
                problems.join("; ")
            )],
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_compare_as_a_sorted_set() {
        let mut shuffled = expected();
        let events = shuffled["events"].as_array_mut().unwrap();
        events.reverse();
        let dup = events[0].clone();
        events.push(dup);
        assert_eq!(
            canonical(&normalized(shuffled)),
            canonical(&normalized(expected()))
        );
    }
}
