//! The Redis journal store against a real `redis-server` (Debian's package; scripts/test-all.sh
//! installs it) on loopback and the local Cycles server over real HTTP: a settlement journaled
//! by one engine is drained by another that shares nothing with it but Redis (the first one's
//! machine "lost"), leases exclude and fence, the durability the URL asks for is checked at
//! startup, a restart with AOF keeps the records (also one in the middle of a drain), a dead
//! holder's lease lapses after `lease_ms`, a corrupt record is quarantined in the store, and an
//! unreachable Redis is a journal I/O failure while the settlement still runs.

mod common;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use cycles_core::events::{Event, EventSink};
use cycles_core::journal::{names, QuarantineKind, Record, Store};
use cycles_core::*;
use cycles_local_server::{Fault, FaultRule, LocalServer, Operation};
use cycles_test_redis::{free_port, RedisServer};

type Seen = Arc<Mutex<Vec<Event>>>;

/// A `redis-server` (cycles-test-redis) and a few commands to look inside it.
struct Redis(RedisServer);

impl Redis {
    /// Starts one: with `aof`, `appendonly yes` + `appendfsync always` (what the store asks
    /// for by default); without, Redis's own defaults (no AOF).
    fn start(dir: &Path, aof: bool) -> Redis {
        Redis(RedisServer::start(dir, aof).unwrap())
    }

    fn url(&self) -> String {
        self.0.url()
    }

    fn cmd<T: redis::FromRedisValue>(&self, args: &[&str]) -> T {
        let mut c = redis::Client::open(self.url())
            .unwrap()
            .get_connection()
            .unwrap();
        let mut cmd = redis::cmd(args[0]);
        for a in &args[1..] {
            cmd.arg(*a);
        }
        cmd.query(&mut c).unwrap()
    }

    /// SIGKILLs it (nothing flushed beyond what was already durable).
    fn kill(&mut self) {
        self.0.kill();
    }

    /// Kills it and starts it again on the same port and data directory.
    fn restart(&mut self) {
        self.0.restart().unwrap();
    }
}

fn settings(seen: &Seen, max_attempts: u32) -> SettleConfig {
    let s = seen.clone();
    SettleConfig {
        max_attempts,
        backoff_base: Duration::from_millis(10),
        backoff_cap: Duration::from_millis(50),
        events: EventSink::with_callback(move |e| s.lock().unwrap().push(e.clone())),
        ..SettleConfig::default()
    }
}

/// An engine journaling to `journal_url`; its journal directory exists only to prove it is
/// not used.
fn settler(server: &LocalServer, journal_url: &str, seen: &Seen, attempts: u32) -> Settler {
    let config = Config::new(server.url(), KEY)
        .with_journal_dir(std::env::temp_dir().join("cycles-journal-redis-never-used"))
        .with_journal_url(journal_url)
        .with_request_timeout(Duration::from_secs(5));
    Settler::new(&config, settings(seen, attempts)).unwrap()
}

fn server_errors(times: u32) -> FaultRule {
    FaultRule {
        operation: Operation::CommitReservation,
        reservation_id: None,
        skip: 0,
        times,
        every: 1,
        fault: Fault::ServerError { status: 503 },
    }
}

fn applied_commits(server: &LocalServer) -> usize {
    server
        .ledger()
        .iter()
        .filter(|e| e.kind == "commit")
        .count()
}

fn record_keys(r: &Redis) -> Vec<String> {
    let mut keys: Vec<String> = r.cmd(&["KEYS", "cycles:journal:*:r:*"]);
    keys.sort();
    keys
}

#[tokio::test]
async fn a_record_journaled_by_a_lost_worker_is_drained_by_another_once() {
    let data = tempfile::tempdir().unwrap();
    let redis = Redis::start(data.path(), true);
    let server = server().await;
    let id = reserve(&client(&server), 1000).await;
    server.add_fault(server_errors(2));
    let seen = Seen::default();
    let first = settler(&server, &redis.url(), &seen, 2);
    let out = first.settle(settlement(&id, &key("commit"), 400)).await;
    let SettleOutcome::Pending { journaled, .. } = out else {
        panic!("expected pending, got {out:?}");
    };
    assert!(journaled, "the record is in Redis");
    // The worker and its machine are gone: nothing of it is left but what Redis holds.
    drop(first);
    let keys = record_keys(&redis);
    assert_eq!(keys.len(), 1, "{keys:?}");
    let file = names::record_file_name(&id);
    assert!(
        keys[0].ends_with(&format!(":r:{file}")),
        "same record name: {}",
        keys[0]
    );
    let bytes: Vec<u8> = redis.cmd(&["GET", &keys[0]]);
    let rec = Record::parse(&bytes).unwrap();
    assert_eq!(rec.reservation_id, id);
    assert_eq!(
        rec.to_json(),
        bytes,
        "stored byte for byte as the file store writes it"
    );
    assert_eq!(applied_commits(&server), 0);

    let other = settler(&server, &redis.url(), &Seen::default(), 3);
    let report = other.flush().await;
    assert_eq!(report.outcomes.len(), 1, "{report:?}");
    assert!(
        matches!(report.outcomes[0].1, SettleOutcome::Committed(_)),
        "{report:?}"
    );
    assert_eq!(applied_commits(&server), 1);
    assert!(
        record_keys(&redis).is_empty(),
        "settled records leave the store"
    );
    // A second drain finds nothing: applied once.
    assert!(other.flush().await.outcomes.is_empty());
    assert_eq!(applied_commits(&server), 1);
}

#[tokio::test]
async fn two_replicas_draining_at_once_apply_each_record_once() {
    let data = tempfile::tempdir().unwrap();
    let redis = Redis::start(data.path(), true);
    let server = server().await;
    let c = client(&server);
    let mut ids = Vec::new();
    for _ in 0..12 {
        ids.push(reserve(&c, 100).await);
    }
    server.add_fault(server_errors(12));
    let writer = settler(&server, &redis.url(), &Seen::default(), 1);
    for id in &ids {
        let out = writer.settle(settlement(id, &key("commit"), 50)).await;
        assert!(out.is_pending(), "{out:?}");
    }
    drop(writer);
    assert_eq!(record_keys(&redis).len(), 12);
    let a = settler(&server, &redis.url(), &Seen::default(), 3);
    let b = settler(&server, &redis.url(), &Seen::default(), 3);
    let (ra, rb) = tokio::join!(a.flush(), b.flush());
    let committed = ra
        .outcomes
        .iter()
        .chain(rb.outcomes.iter())
        .filter(|(_, o)| matches!(o, SettleOutcome::Committed(_)))
        .count();
    assert!(
        committed >= 12,
        "every record settled by one of them: {ra:?} {rb:?}"
    );
    assert_eq!(applied_commits(&server), 12, "each applied once");
    assert!(record_keys(&redis).is_empty());
}

#[test]
fn the_durability_asked_for_is_checked_at_startup() {
    let data = tempfile::tempdir().unwrap();
    let plain = Redis::start(data.path(), false);
    let cfg = |url: String| {
        Config::new("http://127.0.0.1:9", KEY)
            .with_journal_url(url)
            .with_journal_dir(data.path().join("unused"))
    };
    let refused = Settler::new(&cfg(plain.url()), SettleConfig::default()).unwrap_err();
    assert_eq!(*refused.kind(), ErrorKind::Config);
    let msg = refused.message().to_string();
    assert!(msg.contains("appendonly no"), "{msg}");
    assert!(msg.contains("appendfsync always"), "{msg}");
    assert!(
        msg.contains("durability=none"),
        "says how to opt out: {msg}"
    );
    // Explicit opt-out, and WAIT for replicas this server does not have.
    Settler::new(
        &cfg(format!("{}?durability=none", plain.url())),
        SettleConfig::default(),
    )
    .unwrap();
    let replicas = Settler::new(
        &cfg(format!("{}?durability=replicas:1", plain.url())),
        SettleConfig::default(),
    )
    .unwrap_err();
    assert!(
        replicas.message().contains("0 connected replica"),
        "{}",
        replicas.message()
    );
    // Unreachable at startup: the check cannot be made.
    let port = free_port();
    let down = Settler::new(
        &cfg(format!("redis://127.0.0.1:{port}/0")),
        SettleConfig::default(),
    )
    .unwrap_err();
    assert_eq!(*down.kind(), ErrorKind::Config);
    // A bad URL is refused by Config::validate already, naming what is wrong.
    for (url, says) in [
        ("rediss://127.0.0.1/0", "TLS"),
        ("http://127.0.0.1/0", "unknown scheme"),
        ("redis://127.0.0.1/0?durability=sometimes", "durability"),
        ("redis://127.0.0.1/0?durability=replicas:0", "replicas:N"),
    ] {
        let e = cfg(url.into()).validate().unwrap_err();
        assert!(e.message().contains(says), "{url}: {}", e.message());
    }
}

fn store(redis: &Redis) -> Store {
    store_at(&redis.url())
}

fn store_at(url: &str) -> Store {
    let config = JournalConfig {
        enabled: true,
        dir: PathBuf::from("/nonexistent"),
        url: Some(url.to_string()),
    };
    Store::open(&config, "http://127.0.0.1:9", KEY, Some("acme")).unwrap()
}

fn record(id: &str) -> Record {
    let body = serde_json::value::RawValue::from_string(
        r#"{"idempotency_key":"k","actual":{"unit":"USD_MICROCENTS","amount":7}}"#.into(),
    )
    .unwrap();
    Record::new_commit(id, "http://127.0.0.1:9", body, None)
}

#[test]
fn leases_exclude_and_a_stale_holder_is_fenced_off() {
    let data = tempfile::tempdir().unwrap();
    let redis = Redis::start(data.path(), true);
    let (a, b) = (store(&redis), store(&redis));
    let la = a.try_lock("rsv-1").unwrap().expect("free");
    assert!(b.try_lock("rsv-1").unwrap().is_none(), "held by a");
    let mut rec = record("rsv-1");
    a.save(&la, &mut rec).unwrap();
    // a's lease expires (a paused past it): b takes the record over.
    let lease_keys: Vec<String> = redis.cmd(&["KEYS", "cycles:journal:*:l:*"]);
    assert_eq!(lease_keys.len(), 1);
    let _: i64 = redis.cmd(&["DEL", &lease_keys[0]]);
    let lb = b.try_lock("rsv-1").unwrap().expect("expired: free");
    let cycles_core::journal::StoreLock::Redis(lease_a) = &la else {
        panic!("a Redis lease")
    };
    let cycles_core::journal::StoreLock::Redis(lease_b) = &lb else {
        panic!("a Redis lease")
    };
    assert!(lease_b.fence() > lease_a.fence(), "fencing tokens increase");
    // a wakes up: its writes and removals are refused, b's record stands.
    let e = a.save(&la, &mut record("rsv-1")).unwrap_err();
    assert!(e.to_string().contains("expired"), "{e}");
    assert!(a.remove(&la, "rsv-1").is_err());
    assert!(a
        .quarantine_record(&la, "rsv-1", QuarantineKind::Corrupt)
        .is_err());
    assert!(b.load(&lb, "rsv-1").unwrap().unwrap().is_ok());
    drop(la); // releasing a lease that is not ours any more leaves b's alone
    assert!(a.try_lock("rsv-1").unwrap().is_none(), "still b's");
    assert!(b.remove(&lb, "rsv-1").unwrap());
    drop(lb);
    assert!(a.try_lock("rsv-1").unwrap().is_some(), "released on drop");
}

#[test]
fn a_restart_with_aof_keeps_every_record() {
    let data = tempfile::tempdir().unwrap();
    let mut redis = Redis::start(data.path(), true);
    let s = store(&redis);
    for i in 0..5 {
        let id = format!("rsv-{i}");
        let l = s.try_lock(&id).unwrap().unwrap();
        s.save(&l, &mut record(&id)).unwrap();
    }
    redis.restart(); // SIGKILL: only what was fsynced before each answer survives
    let after = store(&redis).scan().unwrap();
    let mut ids: Vec<_> = after
        .records
        .iter()
        .map(|r| r.record.reservation_id.clone())
        .collect();
    ids.sort();
    assert_eq!(ids, ["rsv-0", "rsv-1", "rsv-2", "rsv-3", "rsv-4"]);
}

#[test]
fn the_first_write_after_a_redis_restart_succeeds_on_stale_pooled_connections() {
    let data = tempfile::tempdir().unwrap();
    let mut redis = Redis::start(data.path(), true);
    let s = store(&redis);
    let l = s.try_lock("rsv-a").unwrap().unwrap();
    s.save(&l, &mut record("rsv-a")).unwrap();
    drop(l); // every connection used so far is back in the pool
    redis.restart();
    // Each of these is the first command on a connection Redis closed when it died.
    let l = s.try_lock("rsv-b").expect("take after a restart").unwrap();
    s.save(&l, &mut record("rsv-b"))
        .expect("save after a restart");
    drop(l);
    let ids: Vec<String> = s
        .scan()
        .unwrap()
        .records
        .into_iter()
        .map(|r| r.record.reservation_id)
        .collect();
    assert_eq!(ids.len(), 2, "{ids:?}");
}

#[tokio::test]
async fn a_corrupt_record_is_quarantined_in_the_store() {
    let data = tempfile::tempdir().unwrap();
    let redis = Redis::start(data.path(), true);
    let server = server().await;
    let seen = Seen::default();
    let s = settler(&server, &redis.url(), &seen, 2);
    let partition = s.journal().unwrap().partition().to_string();
    let file = names::record_file_name("rsv-broken");
    let prefix = format!("cycles:journal:{{{partition}}}");
    let _: () = redis.cmd(&["SET", &format!("{prefix}:r:{file}"), "{\"version\":1,"]);
    let _: i64 = redis.cmd(&["SADD", &format!("{prefix}:records"), &file]);
    let report = s.flush().await;
    assert_eq!(report.quarantined.len(), 1, "{report:?}");
    let scan = s.journal().unwrap().scan().unwrap();
    assert!(scan.records.is_empty() && scan.invalid.is_empty());
    assert_eq!(scan.quarantined.len(), 1);
    assert_eq!(scan.quarantined[0].category, "corrupt");
    assert!(scan.quarantined[0].file.starts_with(&file));
    let events = seen.lock().unwrap();
    let q = events
        .iter()
        .find_map(|e| match e {
            Event::JournalQuarantined { file, .. } => Some(file.clone()),
            _ => None,
        })
        .expect("a journal_quarantined event");
    assert!(q.contains(&redis.url()) && q.contains(&file), "{q}");
}

#[tokio::test]
async fn redis_unreachable_at_write_time_is_a_journal_failure_and_the_commit_still_runs() {
    let data = tempfile::tempdir().unwrap();
    let mut redis = Redis::start(data.path(), true);
    let server = server().await;
    let id = reserve(&client(&server), 1000).await;
    let seen = Seen::default();
    let s = settler(&server, &redis.url(), &seen, 2);
    redis.kill();
    let out = s.settle(settlement(&id, &key("commit"), 300)).await;
    assert!(matches!(out, SettleOutcome::Committed(_)), "{out:?}");
    assert_eq!(applied_commits(&server), 1);
    assert!(seen
        .lock()
        .unwrap()
        .iter()
        .any(|e| matches!(e, Event::JournalIoFailed { error, .. } if error.contains("redis"))));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_restarting_mid_drain_is_waited_out_and_the_record_settled_once() {
    let data = tempfile::tempdir().unwrap();
    let mut redis = Redis::start(data.path(), true);
    let server = server().await;
    let id = reserve(&client(&server), 1000).await;
    server.add_fault(server_errors(1));
    let writer = settler(&server, &redis.url(), &Seen::default(), 1);
    let out = writer.settle(settlement(&id, &key("commit"), 250)).await;
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
    drop(writer);
    server.clear_faults();
    let seen = Seen::default();
    let drainer = settler(&server, &redis.url(), &seen, 3);
    // Redis goes down as the drain starts and comes back 600 ms later, AOF intact.
    redis.kill();
    let drain = tokio::spawn({
        let d = drainer.clone();
        async move { d.drain(Duration::from_secs(20)).await }
    });
    tokio::time::sleep(Duration::from_millis(600)).await;
    let redis = tokio::task::spawn_blocking(move || {
        redis.restart();
        redis
    })
    .await
    .unwrap();
    let report = drain.await.unwrap();
    assert!(report.remaining.is_empty(), "{report:?}");
    assert_eq!(report.settled(), 1, "{report:?}");
    assert_eq!(applied_commits(&server), 1);
    assert!(record_keys(&redis).is_empty());
    assert!(
        seen.lock()
            .unwrap()
            .iter()
            .any(|e| matches!(e, Event::JournalIoFailed { .. })),
        "the outage was reported"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_settlement_retrying_past_its_lease_renews_it_and_removes_its_record() {
    let data = tempfile::tempdir().unwrap();
    let redis = Redis::start(data.path(), true);
    let server = server().await;
    let id = reserve(&client(&server), 1000).await;
    // Two attempts time out (500 ms each) before the third is answered: 1 s in all, past
    // an 800 ms lease unless each retry renews it.
    server.add_fault(FaultRule {
        operation: Operation::CommitReservation,
        reservation_id: None,
        skip: 0,
        times: 2,
        every: 1,
        fault: Fault::Delay { ms: 700 },
    });
    let config = Config::new(server.url(), KEY)
        .with_journal_dir(data.path().join("unused"))
        .with_journal_url(format!("{}?lease_ms=800", redis.url()))
        .with_request_timeout(Duration::from_millis(500));
    let seen = Seen::default();
    let s = Settler::new(&config, settings(&seen, 5)).unwrap();
    let out = s.settle(settlement(&id, &key("commit"), 250)).await;
    assert!(matches!(out, SettleOutcome::Committed(_)), "{out:?}");
    assert!(
        record_keys(&redis).is_empty(),
        "removed under a lease still ours"
    );
    let failures: Vec<String> = seen
        .lock()
        .unwrap()
        .iter()
        .filter_map(|e| match e {
            Event::JournalIoFailed {
                operation, error, ..
            } => Some(format!("{operation}: {error}")),
            _ => None,
        })
        .collect();
    assert!(failures.is_empty(), "{failures:?}");
    // The held attempts finish at the server: applied once all the same.
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(applied_commits(&server), 1);
}

/// CR-DURABLE-007 on Redis: a record's key ends in the file store's name for the exact id
/// (`v2-<sha256>.json`, the cross-language vectors' function), ids that differ only in ways a
/// lossy scheme would erase never share a key, and each record reads back as its own.
#[test]
fn redis_record_keys_are_the_file_names_of_the_exact_ids() {
    let data = tempfile::tempdir().unwrap();
    let redis = Redis::start(data.path(), true);
    let s = store(&redis);
    let ids = tricky_ids();
    for id in &ids {
        let l = s.try_lock(id).unwrap().unwrap();
        s.save(&l, &mut record(id)).unwrap();
    }
    let partition = s.partition().to_string();
    let mut keys: Vec<String> = redis.cmd(&["KEYS", "cycles:journal:*:r:*"]);
    keys.sort();
    let mut want: Vec<String> = ids
        .iter()
        .map(|id| {
            format!(
                "cycles:journal:{{{partition}}}:r:{}",
                names::record_file_name(id)
            )
        })
        .collect();
    want.sort();
    assert_eq!(
        keys, want,
        "one key per id, named as the file store names it"
    );
    let scan = s.scan().unwrap();
    assert_eq!(scan.records.len(), ids.len());
    for r in &scan.records {
        assert_eq!(r.file, names::record_file_name(&r.record.reservation_id));
    }
}

#[test]
fn a_lease_left_by_a_dead_holder_lapses_after_lease_ms() {
    let data = tempfile::tempdir().unwrap();
    let redis = Redis::start(data.path(), true);
    let url = format!("{}?lease_ms=300", redis.url());
    let (a, b) = (store_at(&url), store_at(&url));
    let held = a.try_lock("rsv-1").unwrap().unwrap();
    // The holder dies without letting go (its Drop never runs).
    std::mem::forget(held);
    assert!(b.try_lock("rsv-1").unwrap().is_none(), "still held");
    let started = Instant::now();
    let taken = loop {
        if let Some(l) = b.try_lock("rsv-1").unwrap() {
            break l;
        }
        assert!(started.elapsed() < Duration::from_secs(5), "never lapsed");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(
        started.elapsed() <= Duration::from_millis(400),
        "{:?}",
        started.elapsed()
    );
    drop(taken);
}

/// Every record file under a journal directory's partitions: (partition, file, bytes).
fn dir_records(dir: &Path) -> Vec<(String, String, Vec<u8>)> {
    let mut out = Vec::new();
    for p in std::fs::read_dir(dir).unwrap().flatten() {
        let partition = p.file_name().to_string_lossy().to_string();
        for f in std::fs::read_dir(p.path()).unwrap().flatten() {
            let name = f.file_name().to_string_lossy().to_string();
            if names::is_record_file_name(&name) {
                out.push((partition.clone(), name, std::fs::read(f.path()).unwrap()));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn records_move_between_a_directory_and_redis_unchanged() {
    use cycles_core::journal::transfer::{copy, Copy, Place};
    let data = tempfile::tempdir().unwrap();
    let redis = Redis::start(data.path(), true);
    let src = tempfile::tempdir().unwrap();
    // Two partitions, written by the file store; one record pretty-printed, as an official
    // SDK may write it: its bytes must survive exactly.
    for (tenant, id) in [("acme", "rsv-a"), ("acme", "rsv-b"), ("globex", "rsv-c")] {
        let j =
            cycles_core::journal::Journal::new(src.path(), "http://127.0.0.1:9", KEY, Some(tenant));
        let l = j.try_lock(id).unwrap().unwrap();
        j.save(&l, &mut record(id)).unwrap();
    }
    let mut before = dir_records(src.path());
    let pretty = serde_json::to_vec_pretty(
        &serde_json::from_slice::<serde_json::Value>(&before[0].2).unwrap(),
    )
    .unwrap();
    std::fs::write(src.path().join(&before[0].0).join(&before[0].1), &pretty).unwrap();
    before[0].2 = pretty;
    assert_eq!(before.len(), 3);

    let to_redis = copy(
        &Place::Dir(src.path().to_path_buf()),
        &Place::parse(&redis.url()).unwrap(),
        false,
    )
    .unwrap();
    assert_eq!(to_redis.records.len(), 3);
    assert!(to_redis.records.iter().all(|r| r.outcome == Copy::Copied));
    assert_eq!(record_keys(&redis).len(), 3);
    assert_eq!(dir_records(src.path()), before, "a copy leaves the source");
    // Again: the destination holds them already, and keeps its own.
    let again = copy(
        &Place::Dir(src.path().to_path_buf()),
        &Place::parse(&redis.url()).unwrap(),
        false,
    )
    .unwrap();
    assert!(again.records.iter().all(|r| r.outcome == Copy::Exists));

    // Back to a fresh directory, moving: the same partitions, names and bytes.
    let back = tempfile::tempdir().unwrap();
    let moved = copy(
        &Place::parse(&redis.url()).unwrap(),
        &Place::Dir(back.path().to_path_buf()),
        true,
    )
    .unwrap();
    assert_eq!(moved.records.len(), 3);
    assert_eq!(dir_records(back.path()), before, "byte for byte");
    assert!(record_keys(&redis).is_empty(), "moved out of Redis");
    // A corrupt source record is reported and left where it is.
    std::fs::write(
        src.path().join(&before[1].0).join(&before[1].1),
        b"{\"version\":",
    )
    .unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let report = copy(
        &Place::Dir(src.path().to_path_buf()),
        &Place::Dir(elsewhere.path().to_path_buf()),
        false,
    )
    .unwrap();
    assert_eq!(report.skipped.len(), 1, "{report:?}");
    assert!(report.skipped[0].0.ends_with(&before[1].1));
}

/// `Place::pending`: the same listing from a directory and from Redis (what every face's
/// pending listing and the operator tools read): one identity's partition, or every partition;
/// a corrupt record is not listed; a missing directory and an empty Redis list nothing; an
/// unreachable Redis is an error naming it.
#[test]
fn pending_is_listed_alike_from_a_directory_and_from_redis() {
    use cycles_core::journal::Place;
    let data = tempfile::tempdir().unwrap();
    let redis = Redis::start(data.path(), true);
    let dir = tempfile::tempdir().unwrap();
    let empty = Place::parse(&redis.url()).unwrap();
    assert!(empty.pending(None).unwrap().is_empty());
    let missing = Place::Dir(dir.path().join("missing"));
    assert!(missing.pending(None).unwrap().is_empty());
    for (tenant, id) in [("acme", "rsv-a"), ("acme", "rsv-b"), ("globex", "rsv-c")] {
        let j =
            cycles_core::journal::Journal::new(dir.path(), "http://127.0.0.1:9", KEY, Some(tenant));
        let l = j.try_lock(id).unwrap().unwrap();
        j.save(&l, &mut record(id)).unwrap();
    }
    let acme =
        cycles_core::journal::Journal::new(dir.path(), "http://127.0.0.1:9", KEY, Some("acme"));
    std::fs::write(
        acme.dir().join(names::record_file_name("rsv-torn")),
        b"{\"version\": 1,",
    )
    .unwrap();
    let from_dir = Place::Dir(dir.path().to_path_buf());
    cycles_core::journal::transfer::copy(&from_dir, &Place::parse(&redis.url()).unwrap(), false)
        .unwrap();
    for place in [from_dir, Place::parse(&redis.url()).unwrap()] {
        let ids = |identity| {
            let mut v: Vec<(String, String, String)> = place
                .pending(identity)
                .unwrap()
                .into_iter()
                .map(|p| (p.record.reservation_id, p.partition, p.file))
                .collect();
            v.sort();
            v
        };
        let all = ids(None);
        assert_eq!(
            all.iter().map(|(id, _, _)| id.as_str()).collect::<Vec<_>>(),
            ["rsv-a", "rsv-b", "rsv-c"],
            "{}",
            place.shown()
        );
        for (id, partition, file) in &all {
            assert_eq!(file, &names::record_file_name(id));
            let tenant = if id == "rsv-c" { "globex" } else { "acme" };
            assert_eq!(
                partition,
                &cycles_core::journal::identity::partition("http://127.0.0.1:9", KEY, Some(tenant))
            );
        }
        let mine = ids(Some(("http://127.0.0.1:9", KEY, Some("acme"))));
        assert_eq!(mine.len(), 2, "{}: {mine:?}", place.shown());
        assert!(ids(Some(("http://127.0.0.1:9", KEY, Some("initech")))).is_empty());
    }
    let gone = Place::parse(&format!("redis://127.0.0.1:{}/0", free_port())).unwrap();
    let e = gone.pending(None).unwrap_err();
    assert!(e.contains("127.0.0.1"), "{e}");
}
