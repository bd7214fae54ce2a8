//! Settlement recovery over real HTTP against the local server: same-key retries, the
//! expiry-to-event fallback, 429 floors, ambiguous 2xx, auth failures, terminal rejections,
//! drain deadlines and restarts (a fresh engine on the same journal directory).

mod common;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::store::TestJournal;
use common::*;
use cycles_core::events::{Event, EventSink};
use cycles_core::journal::Record;
use cycles_core::*;
use cycles_local_server::{
    Fault, FaultRule, LocalServer, Malformed, Operation, ServerConfig, TenantSeed,
};

type Seen = Arc<Mutex<Vec<Event>>>;

fn settings(seen: &Seen) -> SettleConfig {
    let s = seen.clone();
    SettleConfig {
        backoff_base: Duration::from_millis(20),
        backoff_cap: Duration::from_millis(200),
        events: EventSink::with_callback(move |e| s.lock().unwrap().push(e.clone())),
        ..SettleConfig::default()
    }
}

fn config(url: &str, dir: &Path) -> Config {
    Config::new(url, KEY)
        .with_journal_dir(dir)
        .with_request_timeout(Duration::from_secs(5))
}

fn settler(server: &LocalServer, dir: &Path, seen: &Seen) -> Settler {
    Settler::new(&config(&server.url(), dir), settings(seen)).unwrap()
}

/// A settler on the journal under test (the directory, or Redis: `common::store`).
fn settler_on(server: &LocalServer, j: &TestJournal, seen: &Seen) -> Settler {
    let cfg =
        j.configure(Config::new(server.url(), KEY).with_request_timeout(Duration::from_secs(5)));
    Settler::new(&cfg, settings(seen)).unwrap()
}

fn settlement(id: &str, key: &str, amount: i64) -> Settlement {
    let mut commit = CommitRequest::new(key, usd(amount));
    let mut meta = Metadata::new();
    meta.insert("run".into(), "r-1".into());
    commit.metadata = Some(meta.into());
    Settlement {
        reservation_id: id.to_string(),
        commit,
        fallback: Some(EventFallback {
            subject: subject(),
            action: action(),
            overage_policy: None,
        }),
    }
}

fn fault(op: Operation, times: u32, fault: Fault) -> FaultRule {
    FaultRule {
        operation: op,
        reservation_id: None,
        skip: 0,
        times,
        every: 1,
        fault,
    }
}

/// Every `v2-*.json` under the journal directory's partitions.
fn record_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(parts) = std::fs::read_dir(dir) else {
        return out;
    };
    for p in parts.flatten() {
        for f in std::fs::read_dir(p.path()).unwrap().flatten() {
            let n = f.file_name().to_string_lossy().to_string();
            if n.starts_with("v2-") && n.ends_with(".json") {
                out.push(f.path());
            }
        }
    }
    out
}

fn read_record(path: &Path) -> Record {
    Record::parse(&std::fs::read(path).unwrap()).unwrap()
}

fn commits(server: &LocalServer) -> Vec<cycles_local_server::RequestRecord> {
    server
        .requests()
        .into_iter()
        .filter(|r| r.operation == Some(Operation::CommitReservation))
        .collect()
}

fn ledger_count(server: &LocalServer, kind: &str) -> usize {
    server.ledger().iter().filter(|e| e.kind == kind).count()
}

#[tokio::test]
async fn lost_commit_response_is_retried_with_the_same_key_and_applied_once() {
    let server = server().await;
    let dir = tempfile::tempdir().unwrap();
    let j = TestJournal::new(dir.path().join("journal"));
    let seen = Seen::default();
    let id = reserve(&client(&server), 1000).await;
    server.add_fault(fault(
        Operation::CommitReservation,
        1,
        Fault::DropResponseAfterApply,
    ));
    let s = settler_on(&server, &j, &seen);
    let key = key("commit");
    let out = s.settle(settlement(&id, &key, 400)).await;
    assert!(matches!(out, SettleOutcome::Committed(_)), "{out:?}");
    let c = commits(&server);
    assert_eq!(c.len(), 2);
    assert!(c
        .iter()
        .all(|r| r.idempotency_key.as_deref() == Some(key.as_str())));
    assert_eq!(c[0].status, None, "the first response was dropped");
    assert_eq!(ledger_count(&server, "commit"), 1, "settled exactly once");
    assert!(j.records().is_empty(), "record removed after success");
    assert!(j.dir_untouched_on_redis());
}

#[tokio::test]
async fn journal_write_precedes_the_first_request_and_a_fresh_engine_replays_it() {
    let server = server().await;
    let dir = tempfile::tempdir().unwrap();
    let seen = Seen::default();
    let id = reserve(&client(&server), 1000).await;
    server.add_fault(fault(
        Operation::CommitReservation,
        1,
        Fault::DropResponseAfterApply,
    ));
    let key = key("commit");
    {
        // "Process 1": one attempt, its response lost, then it goes away.
        let s = Settler::new(
            &config(&server.url(), dir.path()),
            SettleConfig {
                max_attempts: 1,
                ..settings(&seen)
            },
        )
        .unwrap();
        let out = s.settle(settlement(&id, &key, 400)).await;
        assert!(
            matches!(
                out,
                SettleOutcome::Pending {
                    journaled: true,
                    ..
                }
            ),
            "{out:?}"
        );
    }
    let files = record_files(dir.path());
    assert_eq!(files.len(), 1);
    let rec = read_record(&files[0]);
    let first = &commits(&server)[0];
    assert!(
        rec.recorded_at_ms.unwrap() as i64 <= first.received_at_ms,
        "the record was written before the commit reached the server"
    );
    assert_eq!(rec.idempotency_key().as_deref(), Some(key.as_str()));
    assert!(
        !std::fs::read_to_string(&files[0]).unwrap().contains(KEY),
        "API key never stored"
    );

    // "Process 2": a new engine from durable state only.
    let seen2 = Seen::default();
    let s2 = settler(&server, dir.path(), &seen2);
    assert_eq!(s2.pending().await.len(), 1);
    let report = s2.flush().await;
    assert_eq!(report.settled(), 1, "{report:?}");
    assert!(report.remaining.is_empty());
    assert!(record_files(dir.path()).is_empty());
    let c = commits(&server);
    assert_eq!(c.len(), 2);
    assert!(c
        .iter()
        .all(|r| r.idempotency_key.as_deref() == Some(key.as_str())));
    assert_eq!(ledger_count(&server, "commit"), 1);
}

#[tokio::test]
async fn expired_reservation_switches_durably_to_event_mode_then_settles_by_event() {
    let server = server().await;
    let dir = tempfile::tempdir().unwrap();
    let seen = Seen::default();
    let id = reserve(&client(&server), 1000).await;
    server.advance_clock(200_000); // past expires_at + any grace
                                   // The event request fails first, so the persisted mode can be inspected in between.
    server.add_fault(fault(Operation::CreateEvent, 0, Fault::ConnectionReset));
    let key = key("commit");
    {
        let s = Settler::new(
            &config(&server.url(), dir.path()),
            SettleConfig {
                max_attempts: 2,
                ..settings(&seen)
            },
        )
        .unwrap();
        let out = s.settle(settlement(&id, &key, 400)).await;
        assert!(out.is_pending(), "{out:?}");
    }
    let files = record_files(dir.path());
    let rec = read_record(&files[0]);
    assert_eq!(rec.mode, Mode::Event);
    let body: serde_json::Value =
        serde_json::from_str(rec.event_fallback_body.as_ref().unwrap().get()).unwrap();
    assert_eq!(body["idempotency_key"], key.as_str());
    assert_eq!(body["subject"], serde_json::json!({"tenant": "acme"}));
    assert_eq!(body["action"]["kind"], "llm.completion");
    assert_eq!(
        body["actual"],
        serde_json::json!({"unit": "USD_MICROCENTS", "amount": 400})
    );
    assert_eq!(body["metadata"]["run"], "r-1");
    assert_eq!(body["metadata"]["recovered_reservation_id"], id.as_str());
    assert_eq!(
        body["metadata"]["recovery_reason"],
        "commit_after_reservation_expired"
    );
    {
        // The switch was persisted before the first event attempt.
        let ev = seen.lock().unwrap();
        let switched = ev
            .iter()
            .position(|e| matches!(e, Event::SettlementModeSwitched { .. }))
            .unwrap();
        let event_fail = ev
            .iter()
            .position(|e| {
                matches!(
                    e,
                    Event::SettlementAttemptFailed {
                        mode: Mode::Event,
                        ..
                    }
                )
            })
            .unwrap();
        assert!(switched < event_fail);
    }

    server.clear_faults();
    let s2 = settler(&server, dir.path(), &Seen::default());
    let report = s2.flush().await;
    assert!(
        matches!(report.outcomes[0].1, SettleOutcome::RecoveredViaEvent(_)),
        "{report:?}"
    );
    // A replay reports the amount applied too (read back from the journaled event body).
    assert_eq!(report.outcomes[0].1.charged(), Some(&usd(400)));
    assert!(record_files(dir.path()).is_empty());
    let events: Vec<_> = server
        .ledger()
        .into_iter()
        .filter(|e| e.kind == "event")
        .collect();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].idempotency_key, key);
    assert_eq!(
        (events[0].unit.as_deref(), events[0].amount),
        (Some("USD_MICROCENTS"), Some(400))
    );
    assert_eq!(ledger_count(&server, "commit"), 0);
    // Commit once, then event attempts only, all with the commit's key.
    let settle_reqs: Vec<_> = server
        .requests()
        .into_iter()
        .filter(|r| {
            matches!(
                r.operation,
                Some(Operation::CommitReservation | Operation::CreateEvent)
            )
        })
        .collect();
    assert_eq!(settle_reqs[0].operation, Some(Operation::CommitReservation));
    assert_eq!(settle_reqs[0].status, Some(410));
    assert!(settle_reqs[1..]
        .iter()
        .all(|r| r.operation == Some(Operation::CreateEvent)));
    assert!(settle_reqs
        .iter()
        .all(|r| r.idempotency_key.as_deref() == Some(key.as_str())));
}

#[tokio::test]
async fn expired_without_fallback_is_quarantined_as_unrecoverable() {
    let server = server().await;
    let dir = tempfile::tempdir().unwrap();
    let id = reserve(&client(&server), 1000).await;
    server.advance_clock(200_000);
    let s = settler(&server, dir.path(), &Seen::default());
    let mut st = settlement(&id, &key("commit"), 400);
    st.fallback = None;
    let out = s.settle(st).await;
    assert!(
        matches!(&out, SettleOutcome::Rejected(r) if r.kind == ErrorKind::ReservationExpired),
        "{out:?}"
    );
    assert!(record_files(dir.path()).is_empty());
    let scan = s.journal().unwrap().scan().unwrap();
    assert_eq!(scan.quarantined.len(), 1);
    assert_eq!(scan.quarantined[0].category, "unrecoverable");
}

#[tokio::test]
async fn rate_limit_floor_is_persisted_and_no_retry_happens_before_it() {
    let server = server().await;
    let dir = tempfile::tempdir().unwrap();
    let id = reserve(&client(&server), 1000).await;
    server.add_fault(fault(
        Operation::CommitReservation,
        1,
        Fault::RateLimited {
            retry_after: Some("2".into()),
        },
    ));
    let key = key("commit");
    let before = now_ms();
    {
        let s = Settler::new(
            &config(&server.url(), dir.path()),
            SettleConfig {
                max_inline_wait: Duration::ZERO,
                ..settings(&Seen::default())
            },
        )
        .unwrap();
        let out = s.settle(settlement(&id, &key, 400)).await;
        let SettleOutcome::Pending {
            not_before_ms: Some(nb),
            ..
        } = out
        else {
            panic!("{out:?}")
        };
        assert!(nb >= before + 2000);
    }
    let rec = read_record(&record_files(dir.path())[0]);
    let nb = rec.not_before_ms.expect("floor persisted");
    assert!(nb >= before + 2000);
    // A restarted engine does not retry before the floor...
    let s2 = settler(&server, dir.path(), &Seen::default());
    let report = s2.flush().await;
    assert!(report.outcomes.is_empty());
    assert_eq!(report.remaining.len(), 1);
    assert_eq!(commits(&server).len(), 1);
    // ...and settles once it has passed.
    let report = s2.drain(Duration::from_secs(10)).await;
    assert_eq!(report.settled(), 1, "{report:?}");
    let c = commits(&server);
    assert_eq!(c.len(), 2);
    assert!(
        c[1].received_at_ms >= nb as i64,
        "retried at {} before floor {nb}",
        c[1].received_at_ms
    );
    // drain wakes at the floor itself, not at its next backoff step (up to 1 s later).
    assert!(
        c[1].received_at_ms < nb as i64 + 300,
        "retried at {}, floor {nb}: drain overslept",
        c[1].received_at_ms
    );
    assert!(c
        .iter()
        .all(|r| r.idempotency_key.as_deref() == Some(key.as_str())));
    assert_eq!(ledger_count(&server, "commit"), 1);
}

#[tokio::test]
async fn short_retry_after_is_waited_inline() {
    let server = server().await;
    let dir = tempfile::tempdir().unwrap();
    let id = reserve(&client(&server), 1000).await;
    server.add_fault(fault(
        Operation::CommitReservation,
        1,
        Fault::RateLimited {
            retry_after: Some("1".into()),
        },
    ));
    let s = settler(&server, dir.path(), &Seen::default());
    let out = s.settle(settlement(&id, &key("commit"), 400)).await;
    assert!(matches!(out, SettleOutcome::Committed(_)), "{out:?}");
    let c = commits(&server);
    assert!(c[1].received_at_ms - c[0].received_at_ms >= 1000);
}

#[tokio::test]
async fn malformed_success_is_ambiguous_and_retried_with_the_same_key() {
    for shape in [
        Malformed::MissingRequiredField,
        Malformed::WrongStatusCode,
        Malformed::NotJson,
        Malformed::WrongFieldType,
    ] {
        let server = server().await;
        let dir = tempfile::tempdir().unwrap();
        let j = TestJournal::new(dir.path().join("journal"));
        let id = reserve(&client(&server), 1000).await;
        server.add_fault(fault(
            Operation::CommitReservation,
            1,
            Fault::MalformedSuccess { shape },
        ));
        let s = settler_on(&server, &j, &Seen::default());
        let key = key("commit");
        let out = s.settle(settlement(&id, &key, 400)).await;
        assert!(
            matches!(out, SettleOutcome::Committed(_)),
            "{shape:?}: {out:?}"
        );
        let c = commits(&server);
        assert_eq!(c.len(), 2, "{shape:?}");
        assert!(c
            .iter()
            .all(|r| r.idempotency_key.as_deref() == Some(key.as_str())));
        assert_eq!(ledger_count(&server, "commit"), 1);
        assert!(j.records().is_empty());
    }
}

#[tokio::test]
async fn unauthorized_keeps_the_record_and_later_replay_settles() {
    let server = server().await;
    let dir = tempfile::tempdir().unwrap();
    let id = reserve(&client(&server), 1000).await;
    server.add_fault(fault(
        Operation::CommitReservation,
        1,
        Fault::Error {
            status: 401,
            code: "UNAUTHORIZED".into(),
        },
    ));
    let s = settler(&server, dir.path(), &Seen::default());
    let out = s.settle(settlement(&id, &key("commit"), 400)).await;
    assert!(
        matches!(
            &out,
            SettleOutcome::Pending {
                last_error: Some(ErrorKind::Unauthorized),
                journaled: true,
                ..
            }
        ),
        "{out:?}"
    );
    assert_eq!(
        commits(&server).len(),
        1,
        "no blind retry of an auth failure"
    );
    assert_eq!(record_files(dir.path()).len(), 1);
    // No release was ever sent.
    assert!(server
        .requests()
        .iter()
        .all(|r| r.operation != Some(Operation::ReleaseReservation)));
    let report = s.flush().await;
    assert_eq!(report.settled(), 1);
    assert!(record_files(dir.path()).is_empty());
}

#[tokio::test]
async fn terminal_rejection_removes_the_record_and_unknown_codes_keep_it() {
    let server = server().await;
    let dir = tempfile::tempdir().unwrap();
    let c = client(&server);
    let terminal = reserve(&c, 1000).await;
    let unknown = reserve(&c, 1000).await;
    server.add_fault(FaultRule {
        reservation_id: Some(terminal.clone()),
        ..fault(
            Operation::CommitReservation,
            1,
            Fault::Error {
                status: 409,
                code: "BUDGET_EXCEEDED".into(),
            },
        )
    });
    server.add_fault(FaultRule {
        reservation_id: Some(unknown.clone()),
        ..fault(
            Operation::CommitReservation,
            1,
            Fault::Error {
                status: 409,
                code: "ACTION_QUOTA_EXCEEDED".into(),
            },
        )
    });
    let s = settler(&server, dir.path(), &Seen::default());
    let out = s.settle(settlement(&terminal, &key("commit"), 400)).await;
    assert!(
        matches!(&out, SettleOutcome::Rejected(r) if r.kind == ErrorKind::BudgetExceeded),
        "{out:?}"
    );
    assert!(record_files(dir.path()).is_empty());
    let out = s.settle(settlement(&unknown, &key("commit"), 400)).await;
    assert!(out.is_pending(), "{out:?}");
    assert_eq!(record_files(dir.path()).len(), 1);
    assert_eq!(commits(&server).len(), 2);
}

#[tokio::test]
async fn real_unit_mismatch_is_terminal() {
    let server = server().await;
    let dir = tempfile::tempdir().unwrap();
    let id = reserve(&client(&server), 1000).await;
    let s = settler(&server, dir.path(), &Seen::default());
    let mut st = settlement(&id, &key("commit"), 400);
    st.commit.actual = Amount::new(Unit::Tokens, 400);
    let out = s.settle(st).await;
    assert!(
        matches!(&out, SettleOutcome::Rejected(r) if r.kind == ErrorKind::UnitMismatch),
        "{out:?}"
    );
    assert!(record_files(dir.path()).is_empty());
}

#[tokio::test]
async fn drain_with_a_short_deadline_leaves_records_in_place() {
    let server = server().await;
    let dir = tempfile::tempdir().unwrap();
    let c = client(&server);
    let s = Settler::new(
        &config(&server.url(), dir.path()),
        SettleConfig {
            max_attempts: 1,
            ..settings(&Seen::default())
        },
    )
    .unwrap();
    server.add_fault(fault(
        Operation::CommitReservation,
        2,
        Fault::ServerError { status: 503 },
    ));
    for _ in 0..2 {
        let id = reserve(&c, 1000).await;
        assert!(s
            .settle(settlement(&id, &key("commit"), 400))
            .await
            .is_pending());
    }
    server.add_fault(fault(
        Operation::CommitReservation,
        0,
        Fault::Delay { ms: 3000 },
    ));
    let t = std::time::Instant::now();
    let report = s.drain(Duration::from_millis(300)).await;
    assert!(
        t.elapsed() < Duration::from_secs(2),
        "drain respected its deadline"
    );
    assert_eq!(report.remaining.len(), 2, "{report:?}");
    assert_eq!(record_files(dir.path()).len(), 2);
    server.clear_faults();
    let report = s.drain(Duration::from_secs(10)).await;
    assert_eq!(report.settled(), 2, "{report:?}");
    assert!(report.remaining.is_empty());
    // Delayed commits were applied by the server and replayed as the same result: one each.
    assert_eq!(ledger_count(&server, "commit"), 2);
}

#[tokio::test]
async fn two_independent_engines_replay_one_record_once() {
    let server = server().await;
    let dir = tempfile::tempdir().unwrap();
    let id = reserve(&client(&server), 1000).await;
    server.add_fault(fault(
        Operation::CommitReservation,
        1,
        Fault::ServerError { status: 500 },
    ));
    let s = Settler::new(
        &config(&server.url(), dir.path()),
        SettleConfig {
            max_attempts: 1,
            ..settings(&Seen::default())
        },
    )
    .unwrap();
    assert!(s
        .settle(settlement(&id, &key("commit"), 400))
        .await
        .is_pending());
    drop(s);
    server.add_fault(fault(
        Operation::CommitReservation,
        1,
        Fault::Delay { ms: 300 },
    ));
    let a = settler(&server, dir.path(), &Seen::default());
    let b = settler(&server, dir.path(), &Seen::default());
    let (ra, rb) = tokio::join!(a.flush(), b.flush());
    assert_eq!(ra.settled() + rb.settled(), 1, "{ra:?} {rb:?}");
    assert_eq!(
        commits(&server).len(),
        2,
        "the failed first attempt and exactly one replay"
    );
    assert_eq!(ledger_count(&server, "commit"), 1);
    assert!(record_files(dir.path()).is_empty());
}

#[tokio::test]
async fn tenant_partition_survives_api_key_rotation() {
    let cfg = ServerConfig {
        tenants: vec![TenantSeed {
            id: "acme".into(),
            api_keys: vec!["old-key".into(), "new-key".into()],
            closed: false,
        }],
        ..ServerConfig::default()
    };
    let server = LocalServer::start(cfg).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let c = CyclesClient::new(Config::new(server.url(), "old-key")).unwrap();
    let id = c
        .create_reservation(&reserve_req(1000))
        .await
        .unwrap()
        .body
        .reservation_id
        .unwrap();
    server.add_fault(fault(
        Operation::CommitReservation,
        1,
        Fault::ServerError { status: 500 },
    ));
    let old = Config::new(server.url(), "old-key")
        .with_tenant("acme")
        .with_journal_dir(dir.path());
    let s = Settler::new(
        &old,
        SettleConfig {
            max_attempts: 1,
            ..settings(&Seen::default())
        },
    )
    .unwrap();
    assert!(s
        .settle(settlement(&id, &key("commit"), 400))
        .await
        .is_pending());
    drop(s);
    let files = record_files(dir.path());
    assert!(!std::fs::read_to_string(&files[0])
        .unwrap()
        .contains("old-key"));
    let new = Config::new(server.url(), "new-key")
        .with_tenant("acme")
        .with_journal_dir(dir.path());
    let s2 = Settler::new(&new, settings(&Seen::default())).unwrap();
    let report = s2.flush().await;
    assert_eq!(report.settled(), 1, "{report:?}");
    assert_eq!(ledger_count(&server, "commit"), 1);
}

#[tokio::test]
async fn records_of_another_base_url_are_left_alone() {
    let server = server().await;
    let dir = tempfile::tempdir().unwrap();
    let s = settler(&server, dir.path(), &Seen::default());
    let j = s.journal().unwrap().clone();
    let lock = j.try_lock("rsv-elsewhere").unwrap().unwrap();
    let body = serde_json::value::RawValue::from_string(
        r#"{"idempotency_key":"k","actual":{"unit":"USD_MICROCENTS","amount":1}}"#.into(),
    )
    .unwrap();
    let mut rec = Record::new_commit("rsv-elsewhere", "http://other.example", body, None);
    j.save(&lock, &mut rec).unwrap();
    drop(lock);
    let report = s.flush().await;
    assert!(report.outcomes.is_empty());
    assert!(report.remaining.is_empty(), "not ours to report either");
    assert_eq!(record_files(dir.path()).len(), 1);
    assert!(commits(&server).is_empty());
}

#[tokio::test]
async fn journal_failure_is_reported_and_the_settlement_still_runs() {
    let server = server().await;
    let dir = tempfile::tempdir().unwrap();
    // The journal "directory" is a regular file: every journal operation fails.
    let not_a_dir = dir.path().join("file");
    std::fs::write(&not_a_dir, b"x").unwrap();
    let seen = Seen::default();
    let s = settler(&server, &not_a_dir, &seen);
    let id = reserve(&client(&server), 1000).await;
    let out = s.settle(settlement(&id, &key("commit"), 400)).await;
    assert!(matches!(out, SettleOutcome::Committed(_)), "{out:?}");
    assert!(seen
        .lock()
        .unwrap()
        .iter()
        .any(|e| matches!(e, Event::JournalIoFailed { .. })));
}

#[tokio::test]
async fn background_replay_settles_pending_records() {
    let server = server().await;
    let dir = tempfile::tempdir().unwrap();
    let id = reserve(&client(&server), 1000).await;
    server.add_fault(fault(
        Operation::CommitReservation,
        1,
        Fault::ServerError { status: 502 },
    ));
    let s = Settler::new(
        &config(&server.url(), dir.path()),
        SettleConfig {
            max_attempts: 1,
            replay_interval: Duration::from_millis(50),
            ..settings(&Seen::default())
        },
    )
    .unwrap();
    assert!(s
        .settle(settlement(&id, &key("commit"), 400))
        .await
        .is_pending());
    let replay = s.start_replay();
    for _ in 0..100 {
        if record_files(dir.path()).is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    replay.stop().await;
    assert!(record_files(dir.path()).is_empty());
    assert_eq!(ledger_count(&server, "commit"), 1);
}

fn now_ms() -> u64 {
    cycles_core::journal::fsio::now_ms()
}

#[tokio::test]
async fn journal_disabled_still_retries_in_memory_and_writes_nothing() {
    let server = server().await;
    let dir = tempfile::tempdir().unwrap();
    let jdir = dir.path().join("journal");
    let id = reserve(&client(&server), 1000).await;
    server.add_fault(fault(
        Operation::CommitReservation,
        1,
        Fault::ServerError { status: 503 },
    ));
    let cfg = config(&server.url(), &jdir).with_journal_enabled(false);
    let s = Settler::new(&cfg, settings(&Seen::default())).unwrap();
    assert!(s.journal().is_none());
    let out = s.settle(settlement(&id, &key("commit"), 400)).await;
    assert!(matches!(out, SettleOutcome::Committed(_)), "{out:?}");
    assert!(!jdir.exists());
    assert_eq!(commits(&server).len(), 2);
}

#[tokio::test]
async fn journal_disabled_builds_the_event_body_only_after_expiry_and_recovers_by_event() {
    let server = server().await;
    let id = reserve(&client(&server), 1000).await;
    server.advance_clock(200_000); // past expires_at + any grace
    let dir = tempfile::tempdir().unwrap();
    let jdir = dir.path().join("journal");
    let cfg = config(&server.url(), &jdir).with_journal_enabled(false);
    let s = Settler::new(&cfg, settings(&Seen::default())).unwrap();
    let key = key("commit");
    let out = s.settle(settlement(&id, &key, 400)).await;
    assert!(
        matches!(out, SettleOutcome::RecoveredViaEvent(_)),
        "{out:?}"
    );
    assert!(!jdir.exists());
    assert_eq!(ledger_count(&server, "event"), 1);
    let event = server
        .requests()
        .into_iter()
        .find(|r| r.operation == Some(Operation::CreateEvent))
        .expect("the event request");
    let body: serde_json::Value = serde_json::from_str(event.body.as_deref().unwrap()).unwrap();
    assert_eq!(body["idempotency_key"], key.as_str());
    assert_eq!(body["metadata"]["recovered_reservation_id"], id.as_str());
    assert_eq!(
        body["metadata"]["recovery_reason"],
        "commit_after_reservation_expired"
    );
}
