//! Durable file primitives. All of them block: call them from a blocking context
//! (`tokio::task::spawn_blocking`), never on an async worker.
//!
//! - [`write_durable`]: temp file created `0600` with `O_EXCL` (no window at umask
//!   permissions), write, fsync, rename over the target, fsync the directory. Only when it
//!   returns is the record on disk across a power loss.
//! - [`ensure_dir`]: creates missing directories `0700`; an existing directory is never
//!   chmod-ed (it may be the user's, e.g. `/tmp`).
//! - [`quarantine`]: moves a file aside under a fresh unique name without ever replacing an
//!   existing file (hard link, which fails on an existing name, then unlink).
//! - [`sync_dir_shared`]: group commit of directory fsyncs: concurrent writers in one
//!   directory share one fsync that started after their rename, instead of one each.

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::names::{self, QuarantineKind};

/// Temp files older than this are debris of a crashed writer and are reaped.
pub const TEMP_MAX_AGE: Duration = Duration::from_secs(3600);

/// Wall-clock now in epoch milliseconds (0 if the clock is before 1970).
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Creates `dir` (and missing parents) with mode `0700`. Returns whether `dir` itself was
/// created; existing directories keep their permissions.
pub fn ensure_dir(dir: &Path) -> io::Result<bool> {
    if dir.is_dir() {
        return Ok(false);
    }
    let mut b = fs::DirBuilder::new();
    b.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        b.mode(0o700);
    }
    b.create(dir)?;
    // Make the new directory entry itself durable.
    if let Some(parent) = dir.parent() {
        let _ = sync_dir(parent);
    }
    Ok(true)
}

/// fsyncs a directory so renames and unlinks in it survive a power loss.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    #[cfg(unix)]
    {
        File::open(dir)?.sync_all()
    }
    #[cfg(not(unix))]
    {
        let _ = dir;
        Ok(())
    }
}

/// Directory fsyncs actually issued (for tests and diagnostics).
static DIR_SYNCS: AtomicU64 = AtomicU64::new(0);

/// Number of directory fsyncs this process has issued through [`sync_dir_shared`].
pub fn dir_sync_count() -> u64 {
    DIR_SYNCS.load(Ordering::Relaxed)
}

#[derive(Default)]
struct GroupState {
    /// Tickets handed out (one per caller whose rename/unlink is done).
    requested: u64,
    /// Every ticket up to this one is covered by a completed fsync.
    completed: u64,
    /// An fsync is in progress.
    running: bool,
}

#[derive(Default)]
struct Group {
    state: Mutex<GroupState>,
    done: Condvar,
}

fn group(dir: &Path) -> Arc<Group> {
    static GROUPS: OnceLock<Mutex<HashMap<PathBuf, Arc<Group>>>> = OnceLock::new();
    let mut m = GROUPS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    m.entry(dir.to_path_buf()).or_default().clone()
}

/// fsyncs `dir` on behalf of a caller whose rename or unlink in it has completed, sharing the
/// fsync with concurrent callers (group commit). Returns once an fsync that STARTED after this
/// call began has succeeded, so the caller's change is durable. A failed fsync is returned to
/// the caller that ran it; the others retry it themselves.
pub fn sync_dir_shared(dir: &Path) -> io::Result<()> {
    let g = group(dir);
    let mut st = g.state.lock().unwrap_or_else(|p| p.into_inner());
    st.requested += 1;
    let ticket = st.requested;
    loop {
        if st.completed >= ticket {
            return Ok(());
        }
        if !st.running {
            st.running = true;
            // Every ticket issued so far belongs to a finished rename: this fsync covers them.
            let target = st.requested;
            drop(st);
            DIR_SYNCS.fetch_add(1, Ordering::Relaxed);
            let r = sync_dir(dir);
            st = g.state.lock().unwrap_or_else(|p| p.into_inner());
            st.running = false;
            if r.is_ok() {
                st.completed = st.completed.max(target);
            }
            g.done.notify_all();
            r?;
            continue;
        }
        st = g.done.wait(st).unwrap_or_else(|p| p.into_inner());
    }
}

/// Creates a new file readable and writable by the owner only, failing if it exists.
pub fn create_private(path: &Path) -> io::Result<File> {
    let mut o = OpenOptions::new();
    o.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        o.mode(0o600);
    }
    o.open(path)
}

/// Atomically and durably replaces `dir/name` with `bytes`.
pub fn write_durable(dir: &Path, name: &str, bytes: &[u8]) -> io::Result<()> {
    let tmp = dir.join(names::temp_file_name(name));
    let result = (|| {
        let mut f = create_private(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        drop(f);
        fs::rename(&tmp, dir.join(name))?;
        sync_dir_shared(dir)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// Removes `dir/name` WITHOUT an fsync of the directory; `Ok(false)` if it did not exist.
///
/// For a settled record: the removal need not survive a power loss. A record that comes back
/// is replayed with its original idempotency key, and the server answers with the original
/// response or `RESERVATION_FINALIZED` (terminal, never re-settled by an event), so it is
/// applied once either way. Skipping the fsync saves a journal commit wait per settlement.
pub fn remove(dir: &Path, name: &str) -> io::Result<bool> {
    match fs::remove_file(dir.join(name)) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

/// Durably removes `dir/name`; `Ok(false)` if it did not exist.
pub fn remove_durable(dir: &Path, name: &str) -> io::Result<bool> {
    let removed = remove(dir, name)?;
    if removed {
        sync_dir_shared(dir)?;
    }
    Ok(removed)
}

/// Moves `dir/name` aside as `name.<kind>-<ms>-<n>` and returns the new name. Never replaces
/// an existing file: earlier evidence is always kept.
pub fn quarantine(dir: &Path, name: &str, kind: QuarantineKind) -> io::Result<String> {
    let now = now_ms();
    for n in 0..10_000u32 {
        let target = names::quarantine_file_name(name, kind, now, n);
        match fs::hard_link(dir.join(name), dir.join(&target)) {
            Ok(()) => {
                fs::remove_file(dir.join(name))?;
                sync_dir(dir)?;
                return Ok(target);
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::other("no free quarantine name"))
}

/// Removes temp files in `dir` last modified more than `max_age` ago; returns their names.
pub fn reap_temps(dir: &Path, max_age: Duration) -> io::Result<Vec<String>> {
    let mut reaped = Vec::new();
    let now = SystemTime::now();
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if names::classify(&name) != names::EntryKind::Temp {
            continue;
        }
        let old = entry
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|m| now.duration_since(m).ok())
            .is_some_and(|age| age > max_age);
        if old && fs::remove_file(entry.path()).is_ok() {
            reaped.push(name);
        }
    }
    if !reaped.is_empty() {
        sync_dir(dir)?;
    }
    Ok(reaped)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn concurrent_writes_share_directory_fsyncs_and_all_land() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().to_path_buf();
        let n = 32;
        let barrier = Arc::new(std::sync::Barrier::new(n));
        let before = dir_sync_count();
        let threads: Vec<_> = (0..n)
            .map(|i| {
                let (dir, barrier) = (dir.clone(), barrier.clone());
                std::thread::spawn(move || {
                    barrier.wait();
                    write_durable(&dir, &format!("f{i}.json"), format!("{i}").as_bytes()).unwrap();
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        for i in 0..n {
            let got = fs::read_to_string(dir.join(format!("f{i}.json"))).unwrap();
            assert_eq!(got, i.to_string());
        }
        // Other tests may sync concurrently, so only the upper bound is exact.
        let syncs = dir_sync_count() - before;
        assert!(syncs >= 1);
        eprintln!("{n} concurrent durable writes used {syncs} directory fsyncs");
    }

    #[test]
    fn shared_sync_reports_errors() {
        let missing = Path::new("/nonexistent/cycles-journal-test");
        assert!(sync_dir_shared(missing).is_err());
    }
}
