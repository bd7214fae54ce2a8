//! Crash loop: a settling process is SIGKILLed at random moments and restarted, again and
//! again, and every known actual must still reach the ledger exactly once.
//!
//! The settling process is this test binary re-executed (`crash_loop_child`, selected by
//! `CYCLES_CRASH_CHILD`). Each start it builds a fresh `Settler` from the journal
//! (`Settler::new` + `drain`), then settles with `Settler::settle` every known actual it has
//! not seen settled (its application checkpoint, `done.log`, is written only after `settle`
//! returned: an actual whose `settle` was cut short before its journal write is re-driven
//! with the same idempotency key, as the recovery profile requires of the integration). The
//! local server runs in the test process, never in a killed one.
//!
//! Kill moments, chosen at random per start: a random delay after spawn; right after a
//! journal write (a new record inode appears); right after a settlement request reaches the
//! server (with the commit often held in flight by a `Delay`/`DelayAfterApply` fault, or its
//! response dropped); right after the ledger applied a settlement (before the record is
//! removed). Some iterations expire the reservations mid-way, so commits turn into events.
//!
//! `CYCLES_CRASH_ITERATIONS` (default 20) and `CYCLES_CRASH_SEED` (default random, printed)
//! control the run. Full run: `CYCLES_CRASH_ITERATIONS=200 cargo test -p cycles-core --test
//! recovery_crash_loop -- --nocapture` (see docs/recovery.md).
#![cfg(unix)]

mod common;

use std::collections::{BTreeSet, HashSet};
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use cycles_core::*;
use cycles_local_server::{Fault, FaultRule, LocalServer, Operation};
use serde_json::{json, Value};

const CHILD_ENV: &str = "CYCLES_CRASH_CHILD";

// ---------------------------------------------------------------------------------------------
// The settling process.

/// Not a test on its own: the settling process of `crash_loop_settles_every_known_actual_exactly_once`.
/// Ignored, and panics when run without its parent (see `common::child_spec`).
#[test]
#[ignore = "child process of crash_loop_settles_every_known_actual_exactly_once; runs only when that test starts it"]
fn crash_loop_child() {
    let work = child_spec(
        CHILD_ENV,
        "crash_loop_child",
        "crash_loop_settles_every_known_actual_exactly_once",
    );
    let work = PathBuf::from(work);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(child(&work));
}

fn append(path: &Path, line: &str) {
    // One write(2) of a whole line with O_APPEND: a kill cuts at most this line short.
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap();
    f.write_all(format!("{line}\n").as_bytes()).unwrap();
}

async fn child(work: &Path) {
    let spec: Value =
        serde_json::from_slice(&std::fs::read(work.join("spec.json")).unwrap()).unwrap();
    let cfg = Config::new(spec["url"].as_str().unwrap(), KEY)
        .with_journal_dir(work.join("journal"))
        .with_request_timeout(Duration::from_secs(10));
    let settler = Settler::new(
        &cfg,
        SettleConfig {
            backoff_base: Duration::from_millis(10),
            backoff_cap: Duration::from_millis(100),
            ..SettleConfig::default()
        },
    )
    .unwrap();
    let done_log = work.join("done.log");

    // 1. Replay what the journal holds (a fresh process: durable state only).
    let report = settler.drain(Duration::from_secs(30)).await;
    assert!(report.remaining.is_empty(), "drain left {report:?}");
    assert!(report.quarantined.is_empty(), "quarantined {report:?}");
    for (id, o) in &report.outcomes {
        assert!(o.is_settled(), "replay of {id}: {o:?}");
        append(&done_log, id);
    }
    append(
        &work.join("stats.log"),
        &format!("replayed {}", report.outcomes.len()),
    );

    // 2. Settle every known actual not yet seen settled, concurrently.
    let done: HashSet<String> = std::fs::read_to_string(&done_log)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect();
    let mut tasks = tokio::task::JoinSet::new();
    for item in spec["items"].as_array().unwrap() {
        let id = item["id"].as_str().unwrap().to_string();
        if done.contains(&id) {
            continue;
        }
        let s = settler.clone();
        let key = item["key"].as_str().unwrap().to_string();
        let amount = item["amount"].as_i64().unwrap();
        let done_log = done_log.clone();
        tasks.spawn(async move {
            let out = s
                .settle(Settlement {
                    reservation_id: id.clone(),
                    commit: CommitRequest::new(key, usd(amount)),
                    fallback: Some(EventFallback {
                        subject: subject(),
                        action: action(),
                        overage_policy: None,
                    }),
                })
                .await;
            assert!(out.is_settled(), "settle {id}: {out:?}");
            append(&done_log, &id);
        });
    }
    while let Some(r) = tasks.join_next().await {
        r.unwrap();
    }
    std::fs::write(work.join("complete"), b"").unwrap();
}

// ---------------------------------------------------------------------------------------------
// The driver.

/// Record files (name, inode) under the journal root: a rename-replace gives a new inode.
fn records(root: &Path) -> BTreeSet<(String, u64)> {
    let mut out = BTreeSet::new();
    let Ok(parts) = std::fs::read_dir(root) else {
        return out;
    };
    for p in parts.flatten() {
        let Ok(files) = std::fs::read_dir(p.path()) else {
            continue;
        };
        for f in files.flatten() {
            let n = f.file_name().to_string_lossy().to_string();
            if n.starts_with("v2-") && n.ends_with(".json") {
                if let Ok(m) = f.metadata() {
                    out.insert((n, m.ino()));
                }
            }
        }
    }
    out
}

fn leftovers(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let Ok(parts) = std::fs::read_dir(root) else {
        return out;
    };
    for p in parts.flatten() {
        if let Ok(files) = std::fs::read_dir(p.path()) {
            out.extend(
                files
                    .flatten()
                    .map(|f| f.file_name().to_string_lossy().to_string()),
            );
        }
    }
    out
}

fn spawn_child(work: &Path) -> std::process::Child {
    Command::new(std::env::current_exe().unwrap())
        .args(child_args("crash_loop_child"))
        .env(CHILD_ENV, work)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .unwrap()
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Trigger {
    /// A random delay after spawn (0..400 ms): startup, drain, settle, anywhere.
    Delay,
    /// A new record inode appeared: right after a journal write.
    JournalWrite,
    /// A new settlement request reached the server (often held in flight by a fault).
    Request,
    /// The ledger applied a new settlement (the record is not removed yet, or just was).
    Applied,
}

const TRIGGERS: [Trigger; 4] = [
    Trigger::Delay,
    Trigger::JournalWrite,
    Trigger::Request,
    Trigger::Applied,
];

#[derive(Default, Debug)]
struct Stats {
    kills: usize,
    by_trigger: std::collections::BTreeMap<String, usize>,
    exited_before_kill: usize,
    in_flight_at_kill: usize,
    settled_by_commit: usize,
    settled_by_event: usize,
    replayed_from_journal: usize,
    tmp_leftovers: usize,
}

fn settlement_ops(server: &LocalServer) -> usize {
    server
        .requests()
        .iter()
        .filter(|r| {
            matches!(
                r.operation,
                Some(Operation::CommitReservation | Operation::CreateEvent)
            )
        })
        .count()
}

fn in_flight(server: &LocalServer, since: usize) -> bool {
    server
        .requests()
        .iter()
        .filter(|r| {
            matches!(
                r.operation,
                Some(Operation::CommitReservation | Operation::CreateEvent)
            )
        })
        .skip(since)
        .any(|r| r.status.is_none() && r.fault.as_deref() != Some("drop_response_after_apply"))
}

fn settlement_ledger(server: &LocalServer) -> usize {
    server
        .ledger()
        .iter()
        .filter(|e| e.kind == "commit" || e.kind == "event")
        .count()
}

fn random_fault(rng: &mut fastrand::Rng) -> Option<FaultRule> {
    let fault = match rng.u32(0..6) {
        0 => return None,
        1 => Fault::Delay {
            ms: rng.u64(20..300),
        },
        2 => Fault::DelayAfterApply {
            ms: rng.u64(20..300),
        },
        3 => Fault::DropResponseAfterApply,
        4 => Fault::ServerError { status: 503 },
        _ => Fault::ConnectionReset,
    };
    let operation = if rng.u32(0..4) == 0 {
        Operation::CreateEvent
    } else {
        Operation::CommitReservation
    };
    Some(FaultRule {
        operation,
        reservation_id: None,
        skip: rng.u32(0..3),
        times: rng.u32(1..3),
        every: 1,
        fault,
    })
}

/// Runs one child until the trigger fires (then SIGKILL) or it exits on its own.
async fn run_and_kill(
    server: &LocalServer,
    work: &Path,
    trigger: Trigger,
    rng: &mut fastrand::Rng,
    stats: &mut Stats,
) {
    let journal = work.join("journal");
    let before_records = records(&journal);
    let before_reqs = settlement_ops(server);
    let before_ledger = settlement_ledger(server);
    let delay = Duration::from_millis(rng.u64(0..400));
    let extra = Duration::from_micros(rng.u64(0..3000));
    let mut child = spawn_child(work);
    let started = Instant::now();
    let mut fired: Option<Instant> = None;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(status.success(), "settling process failed: {status:?}");
            stats.exited_before_kill += 1;
            return;
        }
        let now = Instant::now();
        if fired.is_none() {
            let hit = match trigger {
                Trigger::Delay => now - started >= delay,
                Trigger::JournalWrite => records(&journal)
                    .difference(&before_records)
                    .next()
                    .is_some(),
                Trigger::Request => settlement_ops(server) > before_reqs,
                Trigger::Applied => settlement_ledger(server) > before_ledger,
            };
            if hit {
                fired = Some(now);
            }
        }
        if fired.is_some_and(|f| now - f >= extra) {
            break;
        }
        assert!(
            now - started < Duration::from_secs(60),
            "settling process neither finished nor hit {trigger:?}"
        );
        if fired.is_some() {
            std::thread::yield_now();
        } else {
            tokio::time::sleep(Duration::from_micros(500)).await;
        }
    }
    if in_flight(server, before_reqs) {
        stats.in_flight_at_kill += 1;
    }
    child.kill().unwrap();
    let status = child.wait().unwrap();
    if status.signal() == Some(9) {
        stats.kills += 1;
        *stats.by_trigger.entry(format!("{trigger:?}")).or_default() += 1;
    } else {
        assert!(status.success(), "settling process failed: {status:?}");
        stats.exited_before_kill += 1;
    }
}

async fn iteration(server: &LocalServer, rng: &mut fastrand::Rng, stats: &mut Stats) {
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path();
    let c = client(server);
    let n = rng.usize(2..=5);
    let mut items = Vec::new();
    for _ in 0..n {
        let id = reserve(&c, 1000).await;
        items.push(json!({"id": id, "key": key("crash"), "amount": rng.i64(1..=1000)}));
    }
    std::fs::write(
        work.join("spec.json"),
        json!({"url": server.url(), "items": items}).to_string(),
    )
    .unwrap();
    server.clear_faults();
    let kills = rng.usize(1..=4);
    // Some iterations expire every reservation after one of the kills: commits turn to events.
    let expire_after = (rng.u32(0..4) == 0).then(|| rng.usize(0..kills));
    let mut held = false;
    for k in 0..kills {
        if let Some(rule) = random_fault(rng) {
            held |= matches!(
                rule.fault,
                Fault::Delay { .. } | Fault::DelayAfterApply { .. }
            );
            server.add_fault(rule);
        }
        let trigger = TRIGGERS[rng.usize(0..TRIGGERS.len())];
        run_and_kill(server, work, trigger, rng, stats).await;
        if expire_after == Some(k) {
            server.advance_clock(200_000);
        }
        if work.join("complete").exists() {
            break;
        }
    }
    server.clear_faults();
    // Final, undisturbed start; it must finish everything.
    let mut child = spawn_child(work);
    let t = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(t.elapsed() < Duration::from_secs(60), "final run hangs");
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    assert!(status.success(), "final settling process: {status:?}");
    assert!(work.join("complete").exists());
    if held {
        // Let a request still held by a Delay fault finish at the server, so a late apply shows.
        tokio::time::sleep(Duration::from_millis(320)).await;
    }

    // Every known actual settled exactly once: one commit or one event, with its amount.
    let ledger = server.ledger();
    for item in &items {
        let id = item["id"].as_str().unwrap();
        let key = item["key"].as_str().unwrap();
        let amount = item["amount"].as_i64().unwrap();
        let commits: Vec<_> = ledger
            .iter()
            .filter(|e| e.kind == "commit" && e.reservation_id.as_deref() == Some(id))
            .collect();
        let events: Vec<_> = ledger
            .iter()
            .filter(|e| e.kind == "event" && e.idempotency_key == key)
            .collect();
        assert_eq!(
            commits.len() + events.len(),
            1,
            "{id}: {} commits, {} events",
            commits.len(),
            events.len()
        );
        if let Some(cm) = commits.first() {
            assert_eq!(cm.idempotency_key, key);
            assert_eq!(cm.amount, Some(amount));
            stats.settled_by_commit += 1;
        } else {
            assert_eq!(events[0].amount, Some(amount));
            stats.settled_by_event += 1;
        }
    }
    assert!(
        ledger.iter().all(|e| e.kind != "release"),
        "nothing released"
    );
    // Nothing left in the journal: no record, no quarantine.
    let left = leftovers(&work.join("journal"));
    assert!(
        left.iter().all(|f| !f.ends_with(".json")
            && !f.contains(".corrupt-")
            && !f.contains(".unsupported-")
            && !f.contains(".unrecoverable-")),
        "journal not empty: {left:?}"
    );
    stats.tmp_leftovers += left.iter().filter(|f| f.ends_with(".tmp")).count();
    stats.replayed_from_journal += std::fs::read_to_string(work.join("stats.log"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.strip_prefix("replayed ")?.parse::<usize>().ok())
        .sum::<usize>();
}

/// Every known actual is settled exactly once (one commit or one event per reservation, as
/// the server's ledger records) and the journal ends empty, however often the settling
/// process is SIGKILLed and restarted.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn crash_loop_settles_every_known_actual_exactly_once() {
    let iterations: usize = std::env::var("CYCLES_CRASH_ITERATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    let seed: u64 = std::env::var("CYCLES_CRASH_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| fastrand::u64(..));
    eprintln!("crash loop: {iterations} iterations, CYCLES_CRASH_SEED={seed}");
    let mut rng = fastrand::Rng::with_seed(seed);
    let server = server().await;
    let mut stats = Stats::default();
    let t = Instant::now();
    for i in 0..iterations {
        iteration(&server, &mut rng, &mut stats).await;
        if (i + 1) % 10 == 0 {
            eprintln!("crash loop: {} iterations done, {:?}", i + 1, t.elapsed());
        }
    }
    eprintln!(
        "crash loop: {iterations} iterations in {:?}: {stats:#?}",
        t.elapsed()
    );
    assert!(
        stats.kills >= iterations / 2,
        "most starts were really killed: {stats:?}"
    );
}
