//! `cycles_core::runtime::shutdown`: the bounded drain, the journal keeping what the drain
//! could not settle, heartbeats stopping, threads joined, later calls failing with RUNTIME, a
//! second call being a no-op, a background replay stopping (even on the caller's runtime), and
//! the refusals (inside a runtime, pinned runtime).
//!
//! Shutdown ends core for the whole process, so every scenario runs in a child process of its
//! own: each test re-runs this test binary filtered to itself with [`CHILD`] set, and the child
//! runs the scenario. The local server runs on a runtime of the test's own (threads not named
//! `cycles-core`), so it outlives core's.

mod common;

use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use cycles_core::lease::{Heartbeat, HeartbeatConfig};
use cycles_core::runtime::{self, JOIN_TIMEOUT, SHUT_DOWN_MESSAGE};
use cycles_core::*;
use cycles_local_server::{Fault, FaultRule, LocalServer, Operation};

/// Names the scenario a child process runs.
const CHILD: &str = "CYCLES_SHUTDOWN_SCENARIO";

/// Runs `scenario` in a child process (or, in that child, runs it).
fn in_child(name: &str, scenario: fn()) {
    if std::env::var(CHILD).as_deref() == Ok(name) {
        scenario();
        return;
    }
    let out = Command::new(std::env::current_exe().unwrap())
        .args([name, "--exact", "--test-threads=1", "--nocapture"])
        .env(CHILD, name)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "scenario {name} failed:\n{stdout}\n{stderr}"
    );
    // The filter matched exactly this test: the scenario really ran.
    assert!(stdout.contains("1 passed"), "{name} did not run:\n{stdout}");
}

/// The local server on a runtime of the test's own.
fn local_server() -> (tokio::runtime::Runtime, LocalServer) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("test-server")
        .enable_all()
        .build()
        .unwrap();
    let server = rt.block_on(server());
    (rt, server)
}

fn settler(url: &str, dir: &Path) -> Settler {
    let cfg = Config::new(url, KEY)
        .with_request_timeout(Duration::from_secs(2))
        .with_journal_dir(dir);
    let settings = SettleConfig {
        max_attempts: 1,
        ..SettleConfig::default()
    };
    Settler::new(&cfg, settings).unwrap()
}

fn settlement(id: &str) -> Settlement {
    Settlement {
        reservation_id: id.to_string(),
        commit: CommitRequest::new(key("commit"), usd(300)),
        fallback: None,
    }
}

fn journaled(s: &Settler) -> usize {
    s.journal().unwrap().scan().unwrap().records.len()
}

fn requests(server: &LocalServer, op: Operation, id: &str) -> usize {
    server
        .requests()
        .iter()
        .filter(|r| r.operation == Some(op) && r.reservation_id.as_deref() == Some(id))
        .count()
}

/// Threads of this process named by core's runtime.
fn core_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|comm| comm.trim() == "cycles-core")
        .count()
}

fn assert_shut_down(e: &Error) {
    assert_eq!(e.kind(), &ErrorKind::Runtime);
    assert_eq!(e.message(), SHUT_DOWN_MESSAGE);
}

#[test]
fn drains_a_pending_settlement_within_the_bound() {
    in_child("drains_a_pending_settlement_within_the_bound", || {
        let (_srv_rt, server) = local_server();
        let tmp = tempfile::tempdir().unwrap();
        let s = settler(&server.url(), tmp.path());
        let h = runtime::handle().unwrap();
        let id = h.block_on(reserve(&client(&server), 1000));
        server.add_fault(FaultRule {
            operation: Operation::CommitReservation,
            reservation_id: None,
            skip: 0,
            times: 1,
            every: 1,
            fault: Fault::ServerError { status: 503 },
        });
        assert!(h.block_on(s.settle(settlement(&id))).is_pending());
        assert_eq!(journaled(&s), 1);

        let bound = Duration::from_secs(10);
        let started = Instant::now();
        let report = runtime::shutdown(bound).unwrap();
        assert!(started.elapsed() < bound + JOIN_TIMEOUT);
        assert!(!report.already_shut_down);
        assert_eq!(report.settled, 1, "{report:?}");
        assert!(report.remaining.is_empty(), "{report:?}");
        assert_eq!(journaled(&s), 0);
        assert_eq!(requests(&server, Operation::CommitReservation, &id), 2);
    });
}

#[test]
fn leaves_an_unsettled_record_in_the_journal_when_the_server_is_down() {
    in_child(
        "leaves_an_unsettled_record_in_the_journal_when_the_server_is_down",
        || {
            let (srv_rt, server) = local_server();
            let url = server.url();
            let tmp = tempfile::tempdir().unwrap();
            let s = settler(&url, tmp.path());
            let h = runtime::handle().unwrap();
            let id = h.block_on(reserve(&client(&server), 1000));
            srv_rt.block_on(server.shutdown());
            assert!(h.block_on(s.settle(settlement(&id))).is_pending());

            let bound = Duration::from_millis(300);
            let started = Instant::now();
            let report = runtime::shutdown(bound).unwrap();
            let took = started.elapsed();
            assert!(
                took >= bound,
                "the drain kept trying until the bound: {took:?}"
            );
            assert!(took < bound + JOIN_TIMEOUT, "{took:?}");
            assert_eq!(report.settled, 0);
            assert_eq!(report.remaining.len(), 1, "{report:?}");
            assert_eq!(report.remaining[0].reservation_id, id);
            // Nothing is lost: the next process replays it.
            let left = Journal::new(tmp.path(), &url, KEY, None).scan().unwrap();
            assert_eq!(left.records.len(), 1);
            assert_eq!(left.records[0].record.reservation_id, id);
        },
    );
}

#[test]
fn gives_up_an_unjournaled_settlement_loudly_when_the_server_stays_down() {
    in_child(
        "gives_up_an_unjournaled_settlement_loudly_when_the_server_stays_down",
        || {
            let (srv_rt, server) = local_server();
            let tmp = tempfile::tempdir().unwrap();
            // A regular file where the journal directory should be: nothing can be journaled.
            let not_a_dir = tmp.path().join("journal");
            std::fs::write(&not_a_dir, b"x").unwrap();
            let s = settler(&server.url(), &not_a_dir);
            let h = runtime::handle().unwrap();
            let id = h.block_on(reserve(&client(&server), 1000));
            srv_rt.block_on(server.shutdown());
            let out = h.block_on(s.settle(settlement(&id)));
            assert!(
                matches!(
                    out,
                    SettleOutcome::Pending {
                        journaled: false,
                        journal_error: Some(_),
                        ..
                    }
                ),
                "{out:?}"
            );
            let report = runtime::shutdown(Duration::from_millis(300)).unwrap();
            assert_eq!(report.settled, 0);
            assert!(report.remaining.is_empty(), "{report:?}");
            // Neither in the journal nor settled: reported, not dropped in silence.
            assert_eq!(report.unjournaled, vec![id], "{report:?}");
        },
    );
}

/// How each heartbeat ended, by reservation (its `HeartbeatEnded` event).
type Ends = Arc<Mutex<Vec<(String, events::HeartbeatEnd)>>>;

/// A 4 s lease heartbeating on `on` (a 500 ms request timeout keeps it beating: the lead
/// stays above the retry reserve, docs/heartbeat.md), its end recorded in `ends`.
fn start_heartbeat(
    on: &tokio::runtime::Handle,
    server: &LocalServer,
    ends: &Ends,
) -> (Heartbeat, String) {
    let cfg = Config::new(server.url(), KEY).with_request_timeout(Duration::from_millis(500));
    // Its own client: a connection opened on core's runtime dies with it.
    let c = Arc::new(CyclesClient::new(cfg).unwrap());
    let mut req = reserve_req(1000);
    req.ttl_ms = Some(4000);
    let created = on.block_on(c.create_reservation(&req)).unwrap();
    let id = created.body.reservation_id.clone().unwrap();
    let seen = ends.clone();
    let config = HeartbeatConfig {
        events: events::EventSink::with_callback(move |e| {
            if let events::Event::HeartbeatEnded {
                reservation_id,
                end,
                ..
            } = e
            {
                seen.lock()
                    .unwrap()
                    .push((reservation_id.clone(), end.clone()));
            }
        }),
        ..HeartbeatConfig::new(4000)
    };
    let _in = on.enter();
    (Heartbeat::start(c, &id, &created, config), id)
}

#[test]
fn stops_every_live_heartbeat() {
    in_child("stops_every_live_heartbeat", || {
        let (srv_rt, server) = local_server();
        let ends: Ends = Arc::default();
        // One lease on core's runtime, one on a runtime of the caller's: both stop.
        let (on_core, core_id) = start_heartbeat(&runtime::handle().unwrap(), &server, &ends);
        let (on_own, own_id) = start_heartbeat(srv_rt.handle(), &server, &ends);
        let extends = |id: &str| requests(&server, Operation::ExtendReservation, id);
        let waited = Instant::now();
        while extends(&core_id) < 1 || extends(&own_id) < 1 {
            assert!(waited.elapsed() < Duration::from_secs(5), "no extend seen");
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(ends.lock().unwrap().is_empty(), "both still beating");

        runtime::shutdown(Duration::ZERO).unwrap();
        let (seen_core, seen_own) = (extends(&core_id), extends(&own_id));
        // The lease on the caller's runtime, which shutdown does not touch, was stopped (not
        // ended on its own: that would be `Stopped(reason)`), promptly.
        let waited = Instant::now();
        while !ends.lock().unwrap().iter().any(|(id, _)| *id == own_id) {
            assert!(waited.elapsed() < Duration::from_secs(2), "not stopped");
            std::thread::sleep(Duration::from_millis(10));
        }
        let own_end = ends
            .lock()
            .unwrap()
            .iter()
            .find(|(id, _)| *id == own_id)
            .cloned();
        assert_eq!(own_end.unwrap().1, events::HeartbeatEnd::Finished);
        // Core's lease had its task dropped with the runtime: nothing runs it any more.
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(extends(&core_id), seen_core);
        assert_eq!(extends(&own_id), seen_own);
        drop((on_core, on_own));
    });
}

#[test]
fn joins_threads_then_later_calls_fail_and_a_second_call_is_a_no_op() {
    in_child(
        "joins_threads_then_later_calls_fail_and_a_second_call_is_a_no_op",
        || {
            let h = runtime::handle().unwrap();
            // Workers plus a blocking-pool thread.
            h.block_on(async { tokio::task::spawn_blocking(|| ()).await })
                .unwrap();
            assert!(core_threads() >= 2, "{}", core_threads());

            let report = runtime::shutdown(Duration::from_secs(1)).unwrap();
            assert!(!report.already_shut_down);
            assert_eq!(core_threads(), 0);

            assert_shut_down(&runtime::handle().unwrap_err());
            assert_shut_down(&runtime::pinned().unwrap_err());
            let again = runtime::shutdown(Duration::from_secs(1)).unwrap();
            assert!(again.already_shut_down);
            assert_eq!(core_threads(), 0);
        },
    );
}

#[test]
fn refuses_inside_a_runtime_worker_and_works_after() {
    in_child("refuses_inside_a_runtime_worker_and_works_after", || {
        let h = runtime::handle().unwrap();
        let on_worker = h
            .block_on(h.spawn(async { runtime::shutdown(Duration::ZERO) }))
            .unwrap();
        let e = on_worker.unwrap_err();
        assert_eq!(e.kind(), &ErrorKind::Runtime);
        assert!(e.message().contains("plain thread"), "{}", e.message());
        // Refused means nothing happened: the runtime still runs work.
        assert_eq!(h.block_on(h.spawn(async { 2 })).unwrap(), 2);
        assert!(!runtime::shutdown(Duration::ZERO).unwrap().already_shut_down);
        assert_eq!(core_threads(), 0);
    });
}

#[test]
fn a_pinned_runtime_refuses_shutdown() {
    in_child("a_pinned_runtime_refuses_shutdown", || {
        let rt = runtime::pinned().unwrap();
        let e = runtime::shutdown(Duration::ZERO).unwrap_err();
        assert_eq!(e.kind(), &ErrorKind::Runtime);
        assert!(e.message().contains("pinned"), "{}", e.message());
        assert_eq!(rt.block_on(async { 3 }), 3);
        assert!(runtime::handle().is_ok());
    });
}

/// A background replay running on the CALLER's runtime (which shutdown does not end) stops
/// too: only core's process-wide stop token can stop it.
#[test]
fn stops_a_background_replay_on_the_callers_runtime() {
    in_child("stops_a_background_replay_on_the_callers_runtime", || {
        let (srv_rt, server) = local_server();
        let own = srv_rt.handle().clone();
        let tmp = tempfile::tempdir().unwrap();
        let cfg = Config::new(server.url(), KEY)
            .with_request_timeout(Duration::from_secs(2))
            .with_journal_dir(tmp.path());
        let settings = SettleConfig {
            max_attempts: 1,
            replay_interval: Duration::from_millis(20),
            ..SettleConfig::default()
        };
        let s = Settler::new(&cfg, settings).unwrap();
        let id = own.block_on(reserve(&client(&server), 1000));
        // Every commit fails until the process ends: the replay keeps trying.
        server.add_fault(FaultRule {
            operation: Operation::CommitReservation,
            reservation_id: None,
            skip: 0,
            times: u32::MAX,
            every: 1,
            fault: Fault::ServerError { status: 503 },
        });
        assert!(own.block_on(s.settle(settlement(&id))).is_pending());
        let replay = {
            let _entered = own.enter();
            s.start_replay()
        };
        let commits = || requests(&server, Operation::CommitReservation, &id);
        let deadline = Instant::now() + Duration::from_secs(10);
        while commits() < 4 {
            assert!(Instant::now() < deadline, "the replay never retried");
            std::thread::sleep(Duration::from_millis(10));
        }

        let report = runtime::shutdown(Duration::from_millis(100)).unwrap();
        assert_eq!(report.remaining.len(), 1, "{report:?}");
        // Ten replay intervals later nothing more was sent although the runtime the replay
        // ran on is alive; the record is still journaled for the next process.
        let after = commits();
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(commits(), after, "the replay went on after shutdown");
        assert_eq!(journaled(&s), 1);
        own.block_on(replay.stop());
    });
}
