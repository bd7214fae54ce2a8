//! Durable recovery across REAL process deaths: the settling process is this test binary
//! re-executed as a child (`recovery_child_process`, selected by an environment variable), it
//! is killed with SIGKILL at a chosen moment, and a fresh process rebuilds everything from the
//! journal alone. The local server runs in the test process, so its ledger and request log
//! outlive every child. One test per durable scenario of the recovery profile
//! (`CR-DURABLE-001`, `-002`, `-003`, `-004`, `-006`).
#![cfg(unix)]

mod common;

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::store::TestJournal;
use common::*;
use cycles_core::journal::Record;
use cycles_core::*;
use cycles_local_server::{
    Fault, FaultRule, LocalServer, Operation, RequestRecord, ServerConfig, TenantSeed,
};
use serde_json::{json, Value};

const CHILD_ENV: &str = "CYCLES_RECOVERY_CHILD";

// ---------------------------------------------------------------------------------------------
// The child process.

/// Not a test on its own: the body of every child process of this file. Its spec (JSON in
/// `CYCLES_RECOVERY_CHILD`) says what to do; its result goes to the file `spec.result`.
/// Ignored, and panics when run without its parent (see `common::child_spec`).
#[test]
#[ignore = "child process of this file's tests; runs only when one of them starts it"]
fn recovery_child_process() {
    let spec = child_spec(
        CHILD_ENV,
        "recovery_child_process",
        "any test of recovery_process.rs",
    );
    let spec: Value = serde_json::from_str(&spec).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let result = rt.block_on(run_child(&spec));
    let path = PathBuf::from(spec["result"].as_str().unwrap());
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, result.to_string()).unwrap();
    std::fs::rename(&tmp, &path).unwrap();
}

fn describe(o: &SettleOutcome) -> &'static str {
    match o {
        SettleOutcome::Committed(_) => "committed",
        SettleOutcome::RecoveredViaEvent(_) => "event",
        SettleOutcome::Pending { .. } => "pending",
        SettleOutcome::Rejected(_) => "rejected",
    }
}

fn report_json(r: &DrainReport) -> Value {
    json!({
        "settled": r.settled(),
        "outcomes": r.outcomes.iter().map(|(_, o)| describe(o)).collect::<Vec<_>>(),
        "remaining": r.remaining.len(),
        "quarantined": r.quarantined.len(),
    })
}

async fn run_child(spec: &Value) -> Value {
    let mut cfg = Config::new(
        spec["url"].as_str().unwrap(),
        spec["api_key"].as_str().unwrap_or(KEY),
    )
    .with_journal_dir(spec["dir"].as_str().unwrap())
    .with_request_timeout(Duration::from_secs(30));
    if let Some(t) = spec["tenant"].as_str() {
        cfg = cfg.with_tenant(t);
    }
    if let Some(u) = spec["journal_url"].as_str() {
        cfg = cfg.with_journal_url(u);
    }
    let settings = SettleConfig {
        max_attempts: spec["max_attempts"].as_u64().unwrap_or(5) as u32,
        backoff_base: Duration::from_millis(20),
        backoff_cap: Duration::from_millis(200),
        max_inline_wait: Duration::from_millis(
            spec["max_inline_wait_ms"].as_u64().unwrap_or(30_000),
        ),
        ..SettleConfig::default()
    };
    let s = Settler::new(&cfg, settings).unwrap();
    // Readiness handshake: say "built", then wait for the parent's go.
    if let Some(ready) = spec["ready"].as_str() {
        std::fs::write(ready, b"").unwrap();
    }
    if let Some(go) = spec["go"].as_str() {
        while !Path::new(go).exists() {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
    match spec["mode"].as_str().unwrap() {
        "settle" => {
            let out = s
                .settle(settlement(
                    spec["id"].as_str().unwrap(),
                    spec["key"].as_str().unwrap(),
                    spec["amount"].as_i64().unwrap(),
                ))
                .await;
            json!({"outcome": describe(&out)})
        }
        "flush" => report_json(&s.flush().await),
        "drain" => report_json(
            &s.drain(Duration::from_millis(
                spec["timeout_ms"].as_u64().unwrap_or(30_000),
            ))
            .await,
        ),
        m => panic!("unknown child mode {m}"),
    }
}

// ---------------------------------------------------------------------------------------------
// The driver side.

struct Child {
    proc: std::process::Child,
    result: PathBuf,
    spawned: Instant,
}

/// Starts a fresh OS process running `recovery_child_process` with `spec` (plus a result path).
fn spawn(mut spec: Value, result: PathBuf) -> Child {
    let _ = std::fs::remove_file(&result);
    spec["result"] = json!(result.display().to_string());
    let proc = Command::new(std::env::current_exe().unwrap())
        .args(child_args("recovery_child_process"))
        .env(CHILD_ENV, spec.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    Child {
        proc,
        result,
        spawned: Instant::now(),
    }
}

/// Waits for a normal exit and returns the child's result.
async fn finish(mut c: Child, limit: Duration) -> Value {
    loop {
        if let Some(status) = c.proc.try_wait().unwrap() {
            assert!(status.success(), "child failed: {status:?}");
            let text = std::fs::read_to_string(&c.result).expect("child result");
            return serde_json::from_str(&text).unwrap();
        }
        if c.spawned.elapsed() > limit {
            let _ = c.proc.kill();
            let _ = c.proc.wait();
            panic!("child did not finish within {limit:?}");
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// SIGKILL (`Child::kill` on Unix), then reap; asserts the process really died of signal 9
/// (it had not finished on its own).
fn kill9(mut c: Child) {
    c.proc.kill().unwrap();
    let status = c.proc.wait().unwrap();
    assert_eq!(status.signal(), Some(9), "killed by SIGKILL: {status:?}");
    assert!(!c.result.exists(), "the child had not finished");
}

/// Polls `f` every millisecond until it returns `Some`, or panics after `limit`.
async fn wait_for<T>(limit: Duration, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let t = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(t.elapsed() < limit, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

fn fault(op: Operation, id: &str, times: u32, fault: Fault) -> FaultRule {
    FaultRule {
        operation: op,
        reservation_id: Some(id.to_string()),
        skip: 0,
        times,
        every: 1,
        fault,
    }
}

/// Settlement requests (commit or event) that concern `id` / `key`, in arrival order.
fn settlement_requests(server: &LocalServer, id: &str, key: &str) -> Vec<RequestRecord> {
    server
        .requests()
        .into_iter()
        .filter(|r| match r.operation {
            Some(Operation::CommitReservation) => r.reservation_id.as_deref() == Some(id),
            Some(Operation::CreateEvent) => r.idempotency_key.as_deref() == Some(key),
            _ => false,
        })
        .collect()
}

/// Ledger entries settling `id` (its commits, and events carrying its key).
fn settlements(server: &LocalServer, id: &str, key: &str) -> (usize, usize) {
    let l = server.ledger();
    let commits = l
        .iter()
        .filter(|e| e.kind == "commit" && e.reservation_id.as_deref() == Some(id))
        .count();
    let events = l
        .iter()
        .filter(|e| e.kind == "event" && e.idempotency_key == key)
        .count();
    (commits, events)
}

/// Every file name under the journal root (all partitions).
fn all_files(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(parts) = std::fs::read_dir(root) else {
        return out;
    };
    for p in parts.flatten() {
        if p.path().is_dir() {
            for f in std::fs::read_dir(p.path()).unwrap().flatten() {
                out.push(f.path());
            }
        } else {
            out.push(p.path());
        }
    }
    out
}

fn no_release(server: &LocalServer) {
    assert!(
        server
            .requests()
            .iter()
            .all(|r| r.operation != Some(Operation::ReleaseReservation)),
        "nothing ever releases a reservation"
    );
}

// ---------------------------------------------------------------------------------------------
// CR-DURABLE-001

/// One round of CR-DURABLE-001 with `first` as the fault holding the first commit in flight.
async fn first_commit_killed_in_flight(first: Fault, hold: Duration) {
    let server = server().await;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("journal");
    // The journal under test (the directory, or Redis: common::store).
    let j = TestJournal::new(dir.clone());
    let url = server.url();
    let id = reserve(&client(&server), 1000).await;
    let key = key("commit");
    let record = || {
        j.record_of(&url, KEY, None, &id)
            .map(|b| Record::parse(&b).unwrap())
    };
    server.add_fault(fault(Operation::CommitReservation, &id, 1, first));
    let spec = j.spec(json!({"url": url, "mode": "settle", "id": id, "key": key, "amount": 400}));

    // Process 1: journals, sends the first commit; the server holds it; kill -9 in flight.
    let p1 = spawn(spec, tmp.path().join("p1.json"));
    let first_req = wait_for(Duration::from_secs(20), "the first commit", || {
        settlement_requests(&server, &id, &key).into_iter().next()
    })
    .await;
    // At the moment the commit is at the server, its record is already on disk.
    let rec = record().expect("record on disk while the commit is in flight");
    assert!(first_req.status.is_none(), "the commit is still in flight");
    kill9(p1);
    assert_eq!(rec.reservation_id, id);
    assert_eq!(rec.mode, Mode::Commit);
    assert_eq!(rec.idempotency_key().as_deref(), Some(key.as_str()));
    assert_eq!(rec.actual(), Some(("USD_MICROCENTS".to_string(), 400)));
    let recorded = rec.recorded_at_ms.expect("recorded_at_ms") as i64;
    assert!(
        recorded <= first_req.received_at_ms,
        "journal write ({recorded}) precedes the first commit ({})",
        first_req.received_at_ms
    );

    // The unresolved record survives the kill, byte for byte.
    let survived = record().expect("the record survives the kill");
    assert_eq!(survived.to_json(), rec.to_json());
    let killed_at = Instant::now();

    // Process 2: fresh process, journal only (Settler::new + drain).
    let p2 = spawn(
        j.spec(json!({"url": url, "mode": "drain", "timeout_ms": 20_000})),
        tmp.path().join("p2.json"),
    );
    let restarted_mono_us = server.requests().last().map_or(0, |r| r.received_mono_us);
    let r2 = finish(p2, Duration::from_secs(30)).await;
    assert_eq!(r2["settled"], 1, "{r2}");
    assert_eq!(r2["remaining"], 0, "{r2}");
    assert!(record().is_none(), "successful replay removes the record");
    assert!(
        j.records().is_empty() && j.quarantined().is_empty(),
        "nothing left in the journal"
    );
    assert!(j.dir_untouched_on_redis());

    // Let the held first request finish at the server, so a late apply would show.
    let rest = hold.saturating_sub(killed_at.elapsed()) + Duration::from_millis(200);
    tokio::time::sleep(rest).await;
    let reqs = settlement_requests(&server, &id, &key);
    assert!(reqs.len() >= 2, "{reqs:?}");
    assert!(reqs
        .iter()
        .all(|r| r.operation == Some(Operation::CommitReservation)
            && r.idempotency_key.as_deref() == Some(key.as_str())));
    assert!(
        reqs[1..]
            .iter()
            .all(|r| r.received_mono_us > restarted_mono_us),
        "the later commits came from the restarted process"
    );
    assert_eq!(
        settlements(&server, &id, &key),
        (1, 0),
        "settled exactly once"
    );
    no_release(&server);
}

/// CR-DURABLE-001: the first commit is journaled before it leaves the process. Two rounds:
/// the server applies the commit and holds the response (`DelayAfterApply`), or holds the
/// request before applying it (`Delay`); either way the process is SIGKILLed while the
/// commit is in flight, and a fresh process replays the surviving record.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn first_commit_is_journaled_before_it_leaves_and_replayed_after_sigkill() {
    first_commit_killed_in_flight(
        Fault::DelayAfterApply { ms: 1000 },
        Duration::from_millis(1000),
    )
    .await;
    first_commit_killed_in_flight(Fault::Delay { ms: 1000 }, Duration::from_millis(1000)).await;
}

// ---------------------------------------------------------------------------------------------
// CR-DURABLE-002

/// CR-DURABLE-002: a journaled commit is replayed by a fresh process after the reservation
/// expired; the 410 switches the record to event mode on disk before the event leaves; the
/// process is SIGKILLed with that event in flight; the next fresh process sends only the event
/// (same key) and removes the record.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn replayed_expired_commit_switches_durably_to_event_mode_across_sigkill() {
    let server = server().await;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("journal");
    // The journal under test (the directory, or Redis: common::store).
    let j = TestJournal::new(dir.clone());
    let url = server.url();
    let id = reserve(&client(&server), 1000).await;
    let key = key("commit");
    let record = || {
        j.record_of(&url, KEY, None, &id)
            .map(|b| Record::parse(&b).unwrap())
    };

    // Process 1 leaves a commit record (its only attempt fails with a 500).
    server.add_fault(fault(
        Operation::CommitReservation,
        &id,
        1,
        Fault::ServerError { status: 500 },
    ));
    let r1 = finish(
        spawn(
            j.spec(json!({"url": url, "mode": "settle", "id": id, "key": key,
                   "amount": 400, "max_attempts": 1})),
            tmp.path().join("p1.json"),
        ),
        Duration::from_secs(30),
    )
    .await;
    assert_eq!(r1["outcome"], "pending");
    let rec = record().expect("journal contains the commit");
    assert_eq!(rec.mode, Mode::Commit);
    let before_restart = settlement_requests(&server, &id, &key).len();
    assert_eq!(before_restart, 1);

    // The reservation expires; the event will be applied and its response held.
    server.advance_clock(200_000);
    server.add_fault(FaultRule {
        reservation_id: None,
        ..fault(
            Operation::CreateEvent,
            &id,
            1,
            Fault::DelayAfterApply { ms: 1000 },
        )
    });

    // Process 2 (fresh): commit -> 410 -> event mode persisted -> event in flight -> kill -9.
    let p2 = spawn(
        j.spec(json!({"url": url, "mode": "drain", "timeout_ms": 20_000})),
        tmp.path().join("p2.json"),
    );
    let event_req = wait_for(Duration::from_secs(20), "the event request", || {
        settlement_requests(&server, &id, &key)
            .into_iter()
            .find(|r| r.operation == Some(Operation::CreateEvent))
    })
    .await;
    let switched = record().expect("record present while the event is in flight");
    assert!(event_req.status.is_none(), "the event is in flight");
    kill9(p2);
    assert_eq!(
        switched.mode,
        Mode::Event,
        "event mode is persisted before the event attempt"
    );
    assert_eq!(switched.idempotency_key().as_deref(), Some(key.as_str()));
    let reqs = settlement_requests(&server, &id, &key);
    assert_eq!(reqs.len(), 3, "{reqs:?}");
    assert_eq!(reqs[1].operation, Some(Operation::CommitReservation));
    assert_eq!(reqs[1].status, Some(410), "commit after restart: expired");
    let after_kill = record().expect("the record survives the kill");
    assert_eq!(after_kill.mode, Mode::Event);

    // Process 3 (fresh): sends the event only, same key; success removes the record.
    let r3 = finish(
        spawn(
            j.spec(json!({"url": url, "mode": "drain", "timeout_ms": 20_000})),
            tmp.path().join("p3.json"),
        ),
        Duration::from_secs(30),
    )
    .await;
    assert_eq!(r3["settled"], 1, "{r3}");
    assert_eq!(r3["outcomes"], json!(["event"]), "{r3}");
    assert!(record().is_none(), "successful event removes the record");
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let reqs = settlement_requests(&server, &id, &key);
    assert!(
        reqs[3..]
            .iter()
            .all(|r| r.operation == Some(Operation::CreateEvent)),
        "after the mode switch only events are sent: {reqs:?}"
    );
    assert!(reqs.len() >= 4);
    assert!(reqs
        .iter()
        .all(|r| r.idempotency_key.as_deref() == Some(key.as_str())));
    assert_eq!(
        settlements(&server, &id, &key),
        (0, 1),
        "settled exactly once, by the event"
    );
    let ev = server
        .ledger()
        .into_iter()
        .find(|e| e.kind == "event" && e.idempotency_key == key)
        .unwrap();
    assert_eq!(
        (ev.unit.as_deref(), ev.amount),
        (Some("USD_MICROCENTS"), Some(400))
    );
    no_release(&server);
}

// ---------------------------------------------------------------------------------------------
// CR-DURABLE-003

/// CR-DURABLE-003: a 429 with `Retry-After: 3` persists the absolute floor; the process is
/// SIGKILLed right after that journal write (while it waits inline); a fresh process started
/// before the floor sends nothing; the next one retries no earlier than the floor, with the
/// same key, and removes the record.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn rate_limit_floor_survives_sigkill_and_restart() {
    let server = server().await;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("journal");
    // The journal under test (the directory, or Redis: common::store).
    let j = TestJournal::new(dir.clone());
    let url = server.url();
    let id = reserve(&client(&server), 1000).await;
    let key = key("commit");
    let record = || {
        j.record_of(&url, KEY, None, &id)
            .map(|b| Record::parse(&b).unwrap())
    };
    server.add_fault(fault(
        Operation::CommitReservation,
        &id,
        1,
        Fault::RateLimited {
            retry_after: Some("3".into()),
        },
    ));
    let p1 = spawn(
        j.spec(json!({"url": url, "mode": "settle", "id": id, "key": key, "amount": 400})),
        tmp.path().join("p1.json"),
    );
    // Kill as soon as the floor is on disk (the child is then waiting inline for it).
    let nb = wait_for(Duration::from_secs(20), "the persisted floor", || {
        record().and_then(|r| r.not_before_ms)
    })
    .await;
    kill9(p1);
    let first = settlement_requests(&server, &id, &key);
    assert_eq!(first.len(), 1);
    assert_eq!(first[0].status, Some(429));
    assert!(
        nb as i64 >= first[0].received_at_ms + 3000,
        "floor {nb} honours Retry-After from {}",
        first[0].received_at_ms
    );
    let rec = record().expect("the record survives the kill");
    assert_eq!(rec.not_before_ms, Some(nb));

    // Restarted before Retry-After: a fresh process sends nothing.
    let r2 = finish(
        spawn(
            j.spec(json!({"url": url, "mode": "flush"})),
            tmp.path().join("p2.json"),
        ),
        Duration::from_secs(30),
    )
    .await;
    let now = cycles_core::journal::fsio::now_ms();
    assert!(now < nb, "the check ran before the floor ({now} < {nb})");
    assert_eq!(r2["outcomes"], json!([]), "{r2}");
    assert_eq!(r2["remaining"], 1, "{r2}");
    assert_eq!(settlement_requests(&server, &id, &key).len(), 1);

    // Another fresh process drains: no retry before the floor, then success removes it.
    let r3 = finish(
        spawn(
            j.spec(json!({"url": url, "mode": "drain", "timeout_ms": 20_000})),
            tmp.path().join("p3.json"),
        ),
        Duration::from_secs(30),
    )
    .await;
    assert_eq!(r3["settled"], 1, "{r3}");
    assert!(record().is_none(), "successful replay removes the record");
    let reqs = settlement_requests(&server, &id, &key);
    assert_eq!(reqs.len(), 2, "{reqs:?}");
    assert!(
        reqs[1].received_at_ms >= nb as i64,
        "retried at {} before the floor {nb}",
        reqs[1].received_at_ms
    );
    assert_eq!(reqs[1].status, Some(200));
    assert!(reqs
        .iter()
        .all(|r| r.idempotency_key.as_deref() == Some(key.as_str())));
    assert_eq!(settlements(&server, &id, &key), (1, 0));
}

// ---------------------------------------------------------------------------------------------
// CR-DURABLE-004

/// CR-DURABLE-004: a record written under tenant `acme` with `old-key` is found and settled
/// (same idempotency key) by a fresh process holding only `new-key`; no journal file ever
/// contains an API key; without the tenant, the new key's partition is a different one.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tenant_journal_survives_api_key_rotation_across_processes() {
    let cfg = ServerConfig {
        tenants: vec![TenantSeed {
            id: "acme".into(),
            api_keys: vec!["old-key".into(), "new-key".into()],
            closed: false,
        }],
        ..ServerConfig::default()
    };
    let server = LocalServer::start(cfg).await.unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("journal");
    // The journal under test (the directory, or Redis: common::store).
    let j = TestJournal::new(dir.clone());
    let url = server.url();
    let c = CyclesClient::new(Config::new(&url, "old-key")).unwrap();
    let id = c
        .create_reservation(&reserve_req(1000))
        .await
        .unwrap()
        .body
        .reservation_id
        .unwrap();
    let key = key("commit");
    server.add_fault(fault(
        Operation::CommitReservation,
        &id,
        1,
        Fault::ServerError { status: 500 },
    ));
    let r1 = finish(
        spawn(
            j.spec(json!({"url": url, "api_key": "old-key", "tenant": "acme",
                   "mode": "settle", "id": id, "key": key, "amount": 400, "max_attempts": 1})),
            tmp.path().join("p1.json"),
        ),
        Duration::from_secs(30),
    )
    .await;
    assert_eq!(r1["outcome"], "pending");
    let records = j.records();
    assert!(!records.is_empty());
    for (part, name, bytes) in &records {
        let text = String::from_utf8_lossy(bytes);
        assert!(
            !text.contains("old-key") && !text.contains("new-key"),
            "old API key is not stored: {part}/{name}"
        );
        assert!(!part.contains("old-key") && !name.contains("old-key"));
    }
    if j.url().is_none() {
        // Nor in any other file of the directory (its lock table, ...).
        for f in all_files(&dir) {
            let text = String::from_utf8_lossy(&std::fs::read(&f).unwrap_or_default()).into_owned();
            assert!(
                !text.contains("old-key") && !text.contains("new-key"),
                "{}",
                f.display()
            );
        }
    }
    let tenant_record = || j.record_of(&url, "new-key", Some("acme"), &id);
    assert!(
        tenant_record().is_some(),
        "the tenant partition is key-independent"
    );

    // The new key without the tenant is another partition: nothing to replay there.
    let r_other = finish(
        spawn(
            j.spec(json!({"url": url, "api_key": "new-key", "mode": "flush"})),
            tmp.path().join("p-other.json"),
        ),
        Duration::from_secs(30),
    )
    .await;
    assert_eq!(r_other["outcomes"], json!([]), "{r_other}");
    assert_eq!(settlement_requests(&server, &id, &key).len(), 1);

    // Rotated: a fresh process with the new key and the same tenant finds and settles it.
    let r2 = finish(
        spawn(
            j.spec(json!({"url": url, "api_key": "new-key", "tenant": "acme",
                   "mode": "drain", "timeout_ms": 20_000})),
            tmp.path().join("p2.json"),
        ),
        Duration::from_secs(30),
    )
    .await;
    assert_eq!(
        r2["settled"], 1,
        "new tenant credential finds the record: {r2}"
    );
    assert!(tenant_record().is_none());
    let reqs = settlement_requests(&server, &id, &key);
    assert_eq!(reqs.len(), 2);
    assert!(reqs
        .iter()
        .all(|r| r.operation == Some(Operation::CommitReservation)
            && r.idempotency_key.as_deref() == Some(key.as_str())));
    assert_eq!(reqs[1].status, Some(200));
    assert_eq!(settlements(&server, &id, &key), (1, 0));
}

// ---------------------------------------------------------------------------------------------
// CR-DURABLE-006

/// CR-DURABLE-006 without the lock's help: two independent OS processes each hold a copy of
/// the same record (two hosts, or a platform without `flock`), start together, and commit
/// concurrently with the same key while the server holds the first commit. The server applies
/// it once, both processes see success, and both terminal records are removed.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_processes_with_copies_of_one_record_commit_concurrently_once() {
    let server = server().await;
    let tmp = tempfile::tempdir().unwrap();
    let url = server.url();
    let base = Config::new(&url, KEY).base_url;
    let id = reserve(&client(&server), 1000).await;
    let key = key("shared");
    // Two hosts' journals under test (two directories, or two Redis: common::store).
    let hosts = [
        TestJournal::new(tmp.path().join("host-a")),
        TestJournal::new(tmp.path().join("host-b")),
    ];
    for j in &hosts {
        let body = serde_json::value::RawValue::from_string(format!(
            r#"{{"idempotency_key":"{key}","actual":{{"unit":"USD_MICROCENTS","amount":300}}}}"#
        ))
        .unwrap();
        let rec = Record::new_commit(id.clone(), base.clone(), body, None);
        j.put(
            &url,
            KEY,
            None,
            &cycles_core::journal::names::record_file_name(&id),
            &rec.to_json(),
        );
    }
    // The first commit to arrive is held until the second arrives (at most 10 s): the two
    // meet at the server however the OS scheduled the workers (a fixed 800 ms delay did not
    // always cover that on a loaded CI machine).
    server.add_fault(fault(
        Operation::CommitReservation,
        &id,
        1,
        Fault::Hold { ms: 10_000 },
    ));
    let go = tmp.path().join("go");
    let children: Vec<Child> = hosts
        .iter()
        .enumerate()
        .map(|(i, j)| {
            let ready = tmp.path().join(format!("ready-{i}"));
            spawn(
                j.spec(json!({"url": url, "mode": "flush", "go": go, "ready": ready})),
                tmp.path().join(format!("worker-{i}.json")),
            )
        })
        .collect();
    // Both workers are built before they are released together.
    wait_for(Duration::from_secs(30), "both workers ready", || {
        (0..2)
            .all(|i| tmp.path().join(format!("ready-{i}")).exists())
            .then_some(())
    })
    .await;
    std::fs::write(&go, b"").unwrap();
    let mut settled = 0;
    for c in children {
        let r = finish(c, Duration::from_secs(30)).await;
        assert_eq!(r["remaining"], 0, "{r}");
        settled += r["settled"].as_u64().unwrap();
    }
    assert_eq!(settled, 2, "both workers got the one settlement's success");
    let reqs = settlement_requests(&server, &id, &key);
    assert_eq!(reqs.len(), 2, "{reqs:?}");
    assert!(reqs
        .iter()
        .all(|r| r.idempotency_key.as_deref() == Some(key.as_str()) && r.status == Some(200)));
    let gap = reqs[1].received_mono_us - reqs[0].received_mono_us;
    assert!(
        gap < 10_000_000,
        "the second commit arrived while the first was held ({gap} us)"
    );
    assert_eq!(reqs.iter().filter(|r| r.replay).count(), 1);
    assert_eq!(settlements(&server, &id, &key), (1, 0), "applied once");
    for j in &hosts {
        assert!(j.records().is_empty(), "terminal record removed");
    }
}
