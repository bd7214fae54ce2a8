#![cfg(unix)]
//! The journal on disk: permissions, atomic durable writes, per-record locks across OS
//! processes, never-overwriting quarantine, legacy migration that leaves colliding files
//! alone, stale temp reaping, and no resurrection of finished records.

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime};

use cycles_core::journal::{fsio, names, Journal, Mode, QuarantineKind, Record};
use serde_json::value::RawValue;

const BASE: &str = "http://localhost";

fn journal(root: &Path) -> Journal {
    Journal::new(root, BASE, "test-key", None)
}

fn record(id: &str) -> Record {
    let body = RawValue::from_string(format!(
        r#"{{"idempotency_key":"k-{id}","actual":{{"unit":"TOKENS","amount":1}}}}"#
    ))
    .unwrap();
    Record::new_commit(id, BASE, body, None)
}

fn save(j: &Journal, id: &str) {
    let lock = j.try_lock(id).unwrap().unwrap();
    j.save(&lock, &mut record(id)).unwrap();
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

fn listing(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn directories_0700_files_0600_and_existing_dirs_untouched() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("shared");
    std::fs::create_dir(&root).unwrap();
    std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o755)).unwrap();
    let j = journal(&root);
    assert_eq!(j.partition(), "68c905017df7dbfc");
    save(&j, "rsv/a");
    assert_eq!(mode(j.dir()), 0o700);
    assert_eq!(mode(&j.path_of("rsv/a")), 0o600);
    assert_eq!(
        mode(&root),
        0o755,
        "a directory we did not create is never chmod-ed"
    );
    // Missing parents are created private too.
    let deep = tmp.path().join("a/b");
    let j2 = journal(&deep);
    save(&j2, "x");
    assert_eq!(mode(&tmp.path().join("a")), 0o700);
    assert_eq!(mode(j2.dir()), 0o700);
}

#[test]
fn writes_are_atomic_and_leave_no_temp_files() {
    let tmp = tempfile::tempdir().unwrap();
    let j = journal(tmp.path());
    let lock = j.try_lock("rsv-1").unwrap().unwrap();
    let mut r = record("rsv-1");
    j.save(&lock, &mut r).unwrap();
    r.mode = Mode::Commit;
    r.not_before_ms = Some(42);
    j.save(&lock, &mut r).unwrap();
    let files = listing(j.dir());
    assert_eq!(
        files.iter().filter(|f| f.ends_with(".tmp")).count(),
        0,
        "{files:?}"
    );
    let back = Record::parse(&std::fs::read(j.path_of("rsv-1")).unwrap()).unwrap();
    assert_eq!(back.not_before_ms, Some(42));
    assert!(back.recorded_at_ms.is_some());
    // A crashed writer's temp file is never read as a record, and is reaped once stale.
    let stale = j
        .dir()
        .join(names::temp_file_name(&names::record_file_name("rsv-2")));
    std::fs::write(&stale, b"{\"version\":1,").unwrap();
    let fresh = j
        .dir()
        .join(names::temp_file_name(&names::record_file_name("rsv-3")));
    std::fs::write(&fresh, b"{").unwrap();
    let old = SystemTime::now() - Duration::from_secs(2 * 3600);
    std::fs::File::options()
        .write(true)
        .open(&stale)
        .unwrap()
        .set_modified(old)
        .unwrap();
    drop(lock);
    let scan = j.scan().unwrap();
    assert_eq!(scan.records.len(), 1);
    assert!(scan.invalid.is_empty());
    assert_eq!(scan.reaped.len(), 1);
    assert!(!stale.exists());
    assert!(
        fresh.exists(),
        "young temp files may belong to a live writer"
    );
}

#[test]
fn every_official_sdk_temp_form_is_reaped_once_stale_and_never_a_record() {
    let tmp = tempfile::tempdir().unwrap();
    let j = journal(tmp.path());
    let lock = j.try_lock("rsv-1").unwrap().unwrap();
    let mut r = record("rsv-1");
    j.save(&lock, &mut r).unwrap();
    drop(lock);
    let rec = names::record_file_name("rsv-9");
    // Python and TypeScript: `<record>.<pid>.<hex>.tmp`; the Rust crate (tempfile):
    // `.tmp` + 6 alphanumerics; ours: `.<record>.<pid>.<hex>.tmp`.
    let forms = [
        format!("{rec}.4242.0a1b2c3d.tmp"),
        ".tmpA1b2C3".to_string(),
        names::temp_file_name(&rec),
    ];
    let old = SystemTime::now() - Duration::from_secs(2 * 3600);
    for f in &forms {
        let p = j.dir().join(f);
        std::fs::write(&p, b"{\"version\":1,").unwrap();
        std::fs::File::options()
            .write(true)
            .open(&p)
            .unwrap()
            .set_modified(old)
            .unwrap();
    }
    // A fresh one of the Rust crate's form may belong to a live writer.
    let young = j.dir().join(".tmpZz9Yy8");
    std::fs::write(&young, b"{").unwrap();
    let scan = j.scan().unwrap();
    assert_eq!(scan.records.len(), 1);
    assert!(scan.invalid.is_empty(), "{:?}", scan.invalid);
    assert_eq!(scan.reaped.len(), forms.len(), "{:?}", scan.reaped);
    for f in &forms {
        assert!(!j.dir().join(f).exists(), "{f} not reaped");
    }
    assert!(young.exists());
    assert!(j.path_of("rsv-1").exists(), "a record is never reaped");
}

#[test]
fn quarantine_never_overwrites_earlier_evidence() {
    let tmp = tempfile::tempdir().unwrap();
    let j = journal(tmp.path());
    j.ensure_dir().unwrap();
    let file = names::record_file_name("rsv-bad");
    let mut moved = Vec::new();
    for i in 0..5 {
        std::fs::write(j.dir().join(&file), format!("junk {i}")).unwrap();
        let scan = j.scan().unwrap();
        assert_eq!(scan.invalid.len(), 1);
        let (new, err) = j.quarantine_invalid(&file).unwrap().unwrap();
        assert!(err.to_string().contains("corrupt"));
        moved.push(new);
    }
    let mut unique = moved.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), 5, "{moved:?}");
    for (i, m) in moved.iter().enumerate() {
        assert_eq!(
            std::fs::read_to_string(j.dir().join(m)).unwrap(),
            format!("junk {i}")
        );
    }
    // Unsupported versions are quarantined under their own category; the scan lists them.
    std::fs::write(
        j.dir().join(names::record_file_name("rsv-v2")),
        r#"{"version":2,"reservation_id":"rsv-v2"}"#,
    )
    .unwrap();
    let (new, _) = j
        .quarantine_invalid(&names::record_file_name("rsv-v2"))
        .unwrap()
        .unwrap();
    assert!(new.contains(".unsupported-"));
    let scan = j.scan().unwrap();
    assert_eq!(scan.quarantined.len(), 6);
    assert!(scan.quarantined.iter().all(|q| q.reason.is_some()));
    let now = fsio::now_ms();
    assert!(scan
        .quarantined
        .iter()
        .all(|q| q.since_ms.is_some_and(|t| t <= now && now - t < 60_000)));
    // Fsio-level: same name, same millisecond, still never replaced.
    std::fs::write(j.dir().join("x.json"), "a").unwrap();
    let a = fsio::quarantine(j.dir(), "x.json", QuarantineKind::Corrupt).unwrap();
    std::fs::write(j.dir().join("x.json"), "b").unwrap();
    let b = fsio::quarantine(j.dir(), "x.json", QuarantineKind::Corrupt).unwrap();
    assert_ne!(a, b);
    assert_eq!(std::fs::read_to_string(j.dir().join(&a)).unwrap(), "a");
}

#[test]
fn legacy_records_migrate_and_colliding_legacy_files_stay() {
    let tmp = tempfile::tempdir().unwrap();
    let j = journal(tmp.path());
    j.ensure_dir().unwrap();
    // `rsv_a.json` holds the record of `rsv_a`; `rsv/a` has the same legacy name.
    let legacy = j.dir().join("rsv_a.json");
    std::fs::write(&legacy, record("rsv_a").to_json()).unwrap();
    let lock = j.try_lock("rsv/a").unwrap().unwrap();
    assert!(j.load(&lock, "rsv/a").unwrap().is_none());
    drop(lock);
    assert!(
        legacy.exists(),
        "a colliding legacy file of another id is never deleted"
    );
    let scan = j.scan().unwrap();
    assert_eq!(scan.records.len(), 1);
    assert!(scan.records[0].legacy);
    // The matching id migrates: standard file written, legacy removed.
    let lock = j.try_lock("rsv_a").unwrap().unwrap();
    let rec = j.load(&lock, "rsv_a").unwrap().unwrap().unwrap();
    assert_eq!(rec.reservation_id, "rsv_a");
    drop(lock);
    assert!(!legacy.exists());
    assert!(j.path_of("rsv_a").exists());
    assert_ne!(j.path_of("rsv_a"), j.path_of("rsv/a"));
}

#[test]
fn a_finished_record_is_not_resurrected() {
    let tmp = tempfile::tempdir().unwrap();
    let j = journal(tmp.path());
    save(&j, "rsv-1");
    // Worker B saw the record in a scan...
    let seen = j.scan().unwrap().records;
    assert_eq!(seen.len(), 1);
    // ...worker A settles and removes it...
    let lock = j.try_lock("rsv-1").unwrap().unwrap();
    assert!(j.remove(&lock, "rsv-1").unwrap());
    drop(lock);
    // ...and B, once it holds the lock, re-reads and finds nothing to do.
    let lock = j.try_lock("rsv-1").unwrap().unwrap();
    assert!(j.load(&lock, "rsv-1").unwrap().is_none());
    // A lock for another record cannot be used to write this one.
    let other = j.try_lock("rsv-2").unwrap().unwrap();
    assert!(j.save(&other, &mut record("rsv-1")).is_err());
}

#[test]
fn locks_exclude_workers_in_one_process() {
    let tmp = tempfile::tempdir().unwrap();
    let j = journal(tmp.path());
    let a = j.try_lock("rsv-1").unwrap().unwrap();
    assert!(j.try_lock("rsv-1").unwrap().is_none());
    assert!(j.try_lock("rsv-2").unwrap().is_some());
    drop(a);
    assert!(j.try_lock("rsv-1").unwrap().is_some());
    assert_eq!(
        listing(j.dir()),
        vec![names::LOCK_TABLE.to_string()],
        "one lock table, no file per record"
    );
}

#[test]
fn an_earlier_versions_lock_files_are_reaped_once_stale_unless_held() {
    use rustix::fs::{flock, FlockOperation};
    let tmp = tempfile::tempdir().unwrap();
    let j = journal(tmp.path());
    j.ensure_dir().unwrap();
    let old = SystemTime::now() - Duration::from_secs(2 * 3600);
    let make = |id: &str| {
        let p = j
            .dir()
            .join(names::lock_file_name(&names::record_file_name(id)));
        let f = std::fs::File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&p)
            .unwrap();
        f.set_modified(old).unwrap();
        (p, f)
    };
    let (orphan, f) = make("rsv-1");
    drop(f);
    // Held by a live worker of that version: kept.
    let (held, h) = make("rsv-2");
    flock(&h, FlockOperation::NonBlockingLockExclusive).unwrap();
    // Its record still exists: kept.
    let (with_record, f) = make("rsv-3");
    drop(f);
    save(&j, "rsv-3");
    // Young: kept.
    let young = j
        .dir()
        .join(names::lock_file_name(&names::record_file_name("rsv-4")));
    std::fs::write(&young, b"").unwrap();
    let scan = j.scan().unwrap();
    let orphan_name = orphan.file_name().unwrap().to_string_lossy().into_owned();
    assert_eq!(scan.reaped, vec![orphan_name]);
    assert!(!orphan.exists());
    assert!(held.exists() && with_record.exists() && young.exists());
    assert!(j.dir().join(names::LOCK_TABLE).exists(), "the table stays");
    drop(h);
}

const CHILD_ENV: &str = "CYCLES_JOURNAL_LOCK_CHILD_DIR";

/// Not a test on its own: the body of the child process of `locks_exclude_other_processes`.
#[test]
fn lock_child_process() {
    let Ok(dir) = std::env::var(CHILD_ENV) else {
        return;
    };
    let j = journal(Path::new(&dir));
    let _lock = j
        .try_lock("rsv-shared")
        .unwrap()
        .expect("child gets the lock first");
    println!("CHILD-LOCKED");
    let release = Path::new(&dir).join("release");
    for _ in 0..2000 {
        if release.exists() {
            return;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    panic!("never released");
}

#[test]
fn locks_exclude_other_processes() {
    let tmp = tempfile::tempdir().unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "lock_child_process",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, tmp.path())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    assert!(
        lines.any(|l| l.unwrap().contains("CHILD-LOCKED")),
        "child never locked"
    );
    // Keep draining the child's output so it never fails writing to a closed pipe.
    let drain = std::thread::spawn(move || lines.map_while(Result::ok).count());
    let j = journal(tmp.path());
    assert!(
        j.try_lock("rsv-shared").unwrap().is_none(),
        "another process holds the record"
    );
    std::fs::write(tmp.path().join("release"), b"").unwrap();
    assert!(child.wait().unwrap().success());
    drain.join().unwrap();
    assert!(j.try_lock("rsv-shared").unwrap().is_some());
}
