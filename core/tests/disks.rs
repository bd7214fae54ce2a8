#![cfg(target_os = "linux")]
//! Disks: the journal on a full tmpfs (ENOSPC), on a read-only mount, removed while running,
//! a corrupt file appearing while a drain runs, and no file descriptors left (`RLIMIT_NOFILE`).
//! In every case the settlement is still attempted synchronously, the failure is surfaced
//! (the `journal_io_failed` event, `journal_error` on a pending result, an error-level
//! `settlement_pending`), nothing already journaled is lost, and once the disk is back every
//! pending settlement drains, also the ones that could never be journaled. An engine dropped
//! while one of those is still pending logs it as lost, with the body the server never got.
//!
//! The mount and rlimit cases change process-wide state, so each runs in a child process of
//! this test binary (`disk_child`, ignored unless run by its parent); the mount cases in a
//! private mount namespace (`unshare -m --propagation private`) so nothing leaks to the host.
//! A parent FAILS when it cannot unshare or mount: these tests are never skipped as passed.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use cycles_core::events::{Event, EventSink, Level};
use cycles_core::journal::Record;
use cycles_core::*;
use cycles_local_server::{Fault, FaultRule, LocalServer, Operation};

type Seen = Arc<Mutex<Vec<Event>>>;

/// The env var naming the case a child runs.
const CASE_VAR: &str = "CYCLES_DISK_CASE";
/// The scratch directory a child works in (its parent's tempdir).
const DIR_VAR: &str = "CYCLES_DISK_DIR";
/// What a child prints when its case passed; its parent requires the line.
const DONE: &str = "DISK-CASE-PASSED";

fn settler(server: &LocalServer, dir: &Path, seen: &Seen) -> Settler {
    let s = seen.clone();
    let cfg = Config::new(server.url(), KEY)
        .with_journal_dir(dir)
        .with_request_timeout(Duration::from_secs(5));
    Settler::new(
        &cfg,
        SettleConfig {
            // One attempt a settlement: each scripted 503 leaves exactly one pending.
            max_attempts: 1,
            backoff_base: Duration::from_millis(10),
            backoff_cap: Duration::from_millis(50),
            events: EventSink::with_callback(move |e| s.lock().unwrap().push(e.clone())),
            ..SettleConfig::default()
        },
    )
    .unwrap()
}

fn settlement(id: &str, amount: i64) -> Settlement {
    Settlement {
        reservation_id: id.to_string(),
        commit: CommitRequest::new(key("commit"), usd(amount)),
        fallback: Some(EventFallback {
            subject: subject(),
            action: action(),
            overage_policy: None,
        }),
    }
}

/// The next `n` commits answer 503 (not applied).
fn fail_commits(server: &LocalServer, n: u32) {
    server.add_fault(FaultRule {
        operation: Operation::CommitReservation,
        reservation_id: None,
        skip: 0,
        every: 1,
        times: n,
        fault: Fault::ServerError { status: 503 },
    });
}

/// Every `v2-*.json` record file under the journal's partitions.
fn record_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for p in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        for f in std::fs::read_dir(p.path()).into_iter().flatten().flatten() {
            let n = f.file_name().to_string_lossy().to_string();
            if n.starts_with("v2-") && n.ends_with(".json") {
                out.push(f.path());
            }
        }
    }
    out.sort();
    out
}

/// Commits the server applied for `id`.
fn applied(server: &LocalServer, id: &str) -> usize {
    server
        .ledger()
        .iter()
        .filter(|e| e.kind == "commit" && e.reservation_id.as_deref() == Some(id))
        .count()
}

fn take(seen: &Seen) -> Vec<Event> {
    std::mem::take(&mut *seen.lock().unwrap())
}

/// The journal error of a pending outcome that could not be journaled, asserting the shape
/// every face reports: pending, `journaled: false`, a `journal_error`.
fn unjournaled_error(out: &SettleOutcome) -> String {
    match out {
        SettleOutcome::Pending {
            journaled: false,
            journal_error: Some(e),
            ..
        } => e.clone(),
        other => panic!("expected pending, not journaled, with a journal_error: {other:?}"),
    }
}

/// The failure is surfaced as events: `journal_io_failed` naming the reservation and the OS
/// error, and, when it stays pending, an error-level `settlement_pending` with
/// `journaled: false`.
fn assert_io_failure_reported(events: &[Event], id: &str, os_error: &str, pending: bool) {
    assert!(
        events.iter().any(
            |e| matches!(e, Event::JournalIoFailed { reservation_id: Some(r), error, .. }
            if r == id && error.contains(os_error))
        ),
        "no journal_io_failed for {id} with {os_error:?}: {events:#?}"
    );
    let p = events.iter().find(|e| {
        matches!(e, Event::SettlementPending { reservation_id, journaled: false, .. } if reservation_id == id)
    });
    if pending {
        let p = p.unwrap_or_else(|| panic!("no unjournaled settlement_pending: {events:#?}"));
        assert_eq!(p.level(), Level::Error);
        assert!(p.to_string().contains("NOT journaled"), "{p}");
        assert_eq!(p.to_json()["journaled"], false);
    } else {
        assert!(p.is_none(), "{events:#?}");
    }
}

fn run(cmd: &mut Command) {
    let st = cmd.status().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(st.success(), "{cmd:?}: {st}");
}

fn mount_tmpfs(dir: &Path, size: &str) {
    std::fs::create_dir_all(dir).unwrap();
    run(Command::new("mount")
        .args([
            "-t",
            "tmpfs",
            "-o",
            &format!("size={size},mode=0700"),
            "tmpfs",
        ])
        .arg(dir));
}

fn remount(dir: &Path, how: &str) {
    run(Command::new("mount")
        .args(["-o", &format!("remount,{how}")])
        .arg(dir));
}

/// Fills the file system holding `dir` until a write fails with ENOSPC; returns the filler.
fn fill(dir: &Path) -> PathBuf {
    use std::io::Write;
    let path = dir.join("filler");
    let mut f = std::fs::File::create(&path).unwrap();
    let chunk = vec![0u8; 4096];
    loop {
        match f.write_all(&chunk) {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => break,
            Err(e) => panic!("filling {}: {e}", dir.display()),
        }
    }
    path
}

/// Runs `case` in a child of this test binary, in a private mount namespace when `unshare`,
/// and requires that it passed.
fn in_child(case: &str, unshare: bool) {
    let tmp = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    let mut cmd = if unshare {
        let mut c = Command::new("unshare");
        c.args(["-m", "--propagation", "private", "--"]).arg(&exe);
        c
    } else {
        Command::new(&exe)
    };
    cmd.args([
        "disk_child",
        "--exact",
        "--ignored",
        "--nocapture",
        "--test-threads=1",
    ])
    .env(CASE_VAR, case)
    .env(DIR_VAR, tmp.path());
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{cmd:?} (unshare and mount are required): {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains(&format!("{DONE} {case}")),
        "disk case {case} failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
}

#[test]
fn a_full_disk_still_settles_keeps_what_was_journaled_and_drains_once_space_returns() {
    in_child("enospc", true);
}

#[test]
fn a_read_only_journal_still_settles_and_drains_once_writable_again() {
    in_child("readonly", true);
}

#[test]
fn no_file_descriptors_left_still_settles_and_drains_once_the_limit_is_raised() {
    in_child("nofile", false);
}

/// The body of every child case (ignored unless its parent runs it).
#[test]
#[ignore = "run by the disk tests in a child process"]
fn disk_child() {
    let case = std::env::var(CASE_VAR).expect("run by its parent test, with CYCLES_DISK_CASE");
    let dir = PathBuf::from(std::env::var(DIR_VAR).expect("CYCLES_DISK_DIR"));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        match case.as_str() {
            "enospc" => enospc(&dir).await,
            "readonly" => readonly(&dir).await,
            "nofile" => nofile(&dir).await,
            other => panic!("unknown disk case {other:?}"),
        }
    });
    println!("{DONE} {case}");
}

/// The part every broken-journal case shares, once the journal has broken: `before` was
/// journaled while the disk worked and is still pending. A settlement with the server up is
/// committed anyway; one with the server down is pending, not journaled, reported, kept in
/// memory across a flush, and `heal` then brings the disk back and a drain settles all.
async fn broken_journal(
    server: &LocalServer,
    s: &Settler,
    seen: &Seen,
    jdir: &Path,
    before: &str,
    os_error: &str,
    heal: impl FnOnce(),
) {
    let on_disk = record_files(jdir);
    assert_eq!(on_disk.len(), 1, "the record journaled before the failure");
    let kept_bytes = std::fs::read(&on_disk[0]).unwrap();

    // Server up: the synchronous settlement is attempted and applied, the failure reported.
    let up = reserve(&client(server), 1000).await;
    let out = s.settle(settlement(&up, 300)).await;
    assert!(matches!(out, SettleOutcome::Committed(_)), "{out:?}");
    assert_eq!(applied(server, &up), 1);
    assert_io_failure_reported(&take(seen), &up, os_error, false);

    // Server down: neither journaled nor settled, so it says so everywhere.
    let down = reserve(&client(server), 1000).await;
    fail_commits(server, 1);
    let out = s.settle(settlement(&down, 400)).await;
    let why = unjournaled_error(&out);
    assert!(why.contains(os_error), "{why}");
    assert_io_failure_reported(&take(seen), &down, os_error, true);

    // Still broken, server still down: kept in memory, listed as unjournaled; the journaled
    // record untouched.
    fail_commits(server, 2);
    let report = s.flush().await;
    assert_eq!(report.unjournaled, vec![down.clone()], "{report:?}");
    assert_eq!(report.settled(), 0, "{report:?}");
    assert_eq!(
        report
            .remaining
            .iter()
            .map(|r| r.reservation_id.as_str())
            .collect::<Vec<_>>(),
        vec![before]
    );
    assert_eq!(
        std::fs::read(&on_disk[0]).unwrap(),
        kept_bytes,
        "a journaled record was changed"
    );
    take(seen);

    // The disk is back: the in-memory settlement is journaled again, then everything drains.
    heal();
    server.clear_faults();
    let report = s.drain(Duration::from_secs(10)).await;
    assert!(
        report.remaining.is_empty() && report.unjournaled.is_empty(),
        "{report:?}"
    );
    assert_eq!(report.settled(), 2, "{report:?}");
    for id in [before, &up, &down] {
        assert_eq!(applied(server, id), 1, "{id} applied exactly once");
    }
    assert!(record_files(jdir).is_empty(), "{:?}", record_files(jdir));
    let events = take(seen);
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, Event::JournalIoFailed { .. })),
        "the healed journal still failed: {events:#?}"
    );
}

/// Journals one settlement while the disk works (server down), returning its id.
async fn journal_one(server: &LocalServer, s: &Settler, jdir: &Path) -> String {
    let id = reserve(&client(server), 1000).await;
    fail_commits(server, 1);
    let out = s.settle(settlement(&id, 200)).await;
    assert!(
        matches!(
            out,
            SettleOutcome::Pending {
                journaled: true,
                journal_error: None,
                ..
            }
        ),
        "{out:?}"
    );
    assert_eq!(record_files(jdir).len(), 1);
    let rec = Record::parse(&std::fs::read(&record_files(jdir)[0]).unwrap()).unwrap();
    assert_eq!(rec.reservation_id, id);
    id
}

async fn enospc(dir: &Path) {
    let jdir = dir.join("journal");
    mount_tmpfs(&jdir, "64k");
    let server = server().await;
    let seen = Seen::default();
    let s = settler(&server, &jdir, &seen);
    let before = journal_one(&server, &s, &jdir).await;
    let filler = fill(&jdir);
    broken_journal(
        &server,
        &s,
        &seen,
        &jdir,
        &before,
        "No space left on device",
        || {
            std::fs::remove_file(&filler).unwrap();
        },
    )
    .await;
}

async fn readonly(dir: &Path) {
    let jdir = dir.join("journal");
    mount_tmpfs(&jdir, "1m");
    let server = server().await;
    let seen = Seen::default();
    let s = settler(&server, &jdir, &seen);
    let before = journal_one(&server, &s, &jdir).await;
    // Root ignores file modes, so read-only means a read-only mount.
    remount(&jdir, "ro");
    broken_journal(
        &server,
        &s,
        &seen,
        &jdir,
        &before,
        "Read-only file system",
        || {
            remount(&jdir, "rw");
        },
    )
    .await;
}

fn nofile_limit() -> libc::rlimit {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit into the struct it is given.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) }, 0);
    r
}

fn set_nofile(cur: libc::rlim_t, max: libc::rlim_t) {
    let r = libc::rlimit {
        rlim_cur: cur,
        rlim_max: max,
    };
    // SAFETY: setrlimit reads the struct it is given.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &r) }, 0);
}

/// The lowest free descriptor number: with the soft limit there, no new descriptor opens
/// (open returns the lowest free number, and it would be at the limit), while the open ones,
/// also above it, keep working.
fn lowest_free_fd() -> libc::rlim_t {
    use std::os::fd::AsRawFd;
    let probe = std::fs::File::open("/dev/null").unwrap();
    libc::rlim_t::try_from(probe.as_raw_fd()).unwrap()
}

async fn nofile(dir: &Path) {
    let jdir = dir.join("journal");
    let server = server().await;
    let seen = Seen::default();
    let s = settler(&server, &jdir, &seen);
    let before = journal_one(&server, &s, &jdir).await;
    // One settlement over the engine's own connection, so the pool holds an open one that the
    // next commits reuse: only the journal needs new descriptors.
    let warm = reserve(&client(&server), 1000).await;
    assert!(s.settle(settlement(&warm, 100)).await.is_settled());
    let reserve_client = client(&server);
    let ids = [
        reserve(&reserve_client, 1000).await,
        reserve(&reserve_client, 1000).await,
    ];
    take(&seen);
    let saved = nofile_limit();
    set_nofile(lowest_free_fd(), saved.rlim_max);

    let out = s.settle(settlement(&ids[0], 300)).await;
    assert!(matches!(out, SettleOutcome::Committed(_)), "{out:?}");
    assert_io_failure_reported(&take(&seen), &ids[0], "Too many open files", false);
    fail_commits(&server, 1);
    let out = s.settle(settlement(&ids[1], 400)).await;
    let why = unjournaled_error(&out);
    assert!(why.contains("Too many open files"), "{why}");
    assert_io_failure_reported(&take(&seen), &ids[1], "Too many open files", true);

    set_nofile(saved.rlim_cur, saved.rlim_max);
    let report = s.drain(Duration::from_secs(10)).await;
    assert!(
        report.remaining.is_empty() && report.unjournaled.is_empty(),
        "{report:?}"
    );
    for id in [&before, &ids[0], &ids[1]] {
        assert_eq!(applied(&server, id), 1, "{id} applied exactly once");
    }
    assert!(record_files(&jdir).is_empty());
}

#[tokio::test]
async fn a_journal_directory_removed_while_running_is_recreated_and_keeps_working() {
    let tmp = tempfile::tempdir().unwrap();
    let jdir = tmp.path().join("journal");
    let server = server().await;
    let seen = Seen::default();
    let s = settler(&server, &jdir, &seen);
    let gone = journal_one(&server, &s, &jdir).await;
    std::fs::remove_dir_all(&jdir).unwrap();

    // A pass over a missing directory is an empty journal, not an error.
    let report = s.flush().await;
    assert!(
        report.remaining.is_empty() && report.unjournaled.is_empty(),
        "{report:?}"
    );
    assert!(
        !take(&seen)
            .iter()
            .any(|e| matches!(e, Event::JournalIoFailed { .. })),
        "a missing journal directory is not an I/O failure"
    );

    // The next settlement recreates it and is journaled as usual.
    let id = reserve(&client(&server), 1000).await;
    fail_commits(&server, 1);
    let out = s.settle(settlement(&id, 400)).await;
    assert!(
        matches!(
            out,
            SettleOutcome::Pending {
                journaled: true,
                journal_error: None,
                ..
            }
        ),
        "{out:?}"
    );
    assert_eq!(record_files(&jdir).len(), 1);
    let report = s.drain(Duration::from_secs(10)).await;
    assert!(report.remaining.is_empty(), "{report:?}");
    assert_eq!(applied(&server, &id), 1);
    // The record removed with the directory was the operator's to remove: never applied.
    assert_eq!(applied(&server, &gone), 0);
}

#[tokio::test]
async fn a_corrupt_record_appearing_during_a_drain_is_quarantined_and_the_rest_drains() {
    let tmp = tempfile::tempdir().unwrap();
    let jdir = tmp.path().join("journal");
    let server = server().await;
    let seen = Seen::default();
    let s = settler(&server, &jdir, &seen);
    let a = journal_one(&server, &s, &jdir).await;
    let b = reserve(&client(&server), 1000).await;
    fail_commits(&server, 1);
    assert!(s.settle(settlement(&b, 500)).await.is_pending());
    let partition = record_files(&jdir)[0].parent().unwrap().to_path_buf();

    // The first pass: `a` is slow, `b` fails once, so the drain needs a second pass.
    server.add_fault(FaultRule {
        operation: Operation::CommitReservation,
        reservation_id: Some(a.clone()),
        skip: 0,
        every: 1,
        times: 1,
        fault: Fault::Delay { ms: 400 },
    });
    server.add_fault(FaultRule {
        operation: Operation::CommitReservation,
        reservation_id: Some(b.clone()),
        skip: 0,
        every: 1,
        times: 1,
        fault: Fault::ServerError { status: 503 },
    });
    let drain = tokio::spawn({
        let s = s.clone();
        async move { s.drain(Duration::from_secs(10)).await }
    });
    // While the first pass runs, a corrupt record appears (a torn write of another writer).
    for _ in 0..200 {
        if server
            .requests()
            .iter()
            .filter(|r| r.operation == Some(Operation::CommitReservation))
            .count()
            >= 4
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let corrupt = partition.join(format!("v2-{}.json", "ab".repeat(32)));
    std::fs::write(&corrupt, b"{\"version\":1,\"reservation_id\":").unwrap();
    let report = drain.await.unwrap();

    assert!(
        report.remaining.is_empty() && report.unjournaled.is_empty(),
        "{report:?}"
    );
    assert_eq!(report.settled(), 2, "{report:?}");
    assert_eq!(report.quarantined.len(), 1, "{report:?}");
    assert!(!corrupt.exists());
    assert!(
        partition.join(&report.quarantined[0]).exists(),
        "the evidence is kept"
    );
    assert!(take(&seen)
        .iter()
        .any(|e| matches!(e, Event::JournalQuarantined { quarantined_as, .. } if *quarantined_as == report.quarantined[0])));
    assert_eq!((applied(&server, &a), applied(&server, &b)), (1, 1));
}

/// Everything `tracing` printed in this test binary (one global subscriber: the engine is
/// dropped on whichever thread holds its last reference).
fn log() -> &'static Mutex<Vec<u8>> {
    static LOG: std::sync::OnceLock<&'static Mutex<Vec<u8>>> = std::sync::OnceLock::new();
    LOG.get_or_init(|| {
        let buf: &'static Mutex<Vec<u8>> = Box::leak(Box::new(Mutex::new(Vec::new())));
        let subscriber = tracing_subscriber::fmt()
            .with_ansi(false)
            .with_writer(move || LogWriter(buf))
            .finish();
        tracing::subscriber::set_global_default(subscriber).expect("one subscriber");
        buf
    })
}

struct LogWriter(&'static Mutex<Vec<u8>>);

impl std::io::Write for LogWriter {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn an_engine_dropped_with_an_unjournaled_settlement_logs_it_as_lost_with_its_body() {
    log();
    let tmp = tempfile::tempdir().unwrap();
    // A regular file where the journal directory should be: every journal operation fails.
    let not_a_dir = tmp.path().join("journal");
    std::fs::write(&not_a_dir, b"x").unwrap();
    let server = server().await;
    let seen = Seen::default();
    let s = settler(&server, &not_a_dir, &seen);
    let id = reserve(&client(&server), 1000).await;
    fail_commits(&server, 1);
    let out = s.settle(settlement(&id, 777)).await;
    assert!(unjournaled_error(&out).starts_with("lock: "), "{out:?}");
    drop(s);
    let text = String::from_utf8_lossy(&log().lock().unwrap()).to_string();
    let line = text
        .lines()
        .find(|l| l.contains("settlement LOST") && l.contains(&id))
        .unwrap_or_else(|| panic!("no LOST line for {id}:\n{text}"));
    assert!(
        line.contains(r#""amount":777"#),
        "the body is in the line: {line}"
    );
    assert!(line.contains("Not a directory"), "{line}");
    assert_eq!(applied(&server, &id), 0);
}
