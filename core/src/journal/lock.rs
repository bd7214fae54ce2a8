//! Advisory per-record locks (`flock`), so independent workers and processes never work on
//! one record at once.
//!
//! The lock is a separate `v2-<hash>.lock` file, not the record: records are replaced by
//! rename, and a lock on a replaced inode would exclude nobody. The holder unlinks the lock
//! file before unlocking; an acquirer therefore checks, after locking, that the path still
//! names the inode it locked, and retries otherwise (the classic unlink-while-locked race).
//! `flock` locks belong to open file descriptions, so two workers of one process exclude each
//! other too. Acquisition never blocks: a busy record is skipped and retried later.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};

use super::names;

/// An exclusive lock on one record, released (and its lock file removed) on drop.
#[derive(Debug)]
pub struct RecordLock {
    file: Option<File>,
    path: PathBuf,
    record_file: String,
}

impl RecordLock {
    /// Tries to lock the record file `record_file` in `dir`; `Ok(None)` when another worker
    /// holds it. `dir` must exist.
    pub fn try_acquire(dir: &Path, record_file: &str) -> io::Result<Option<RecordLock>> {
        let path = dir.join(names::lock_file_name(record_file));
        for _ in 0..16 {
            let mut o = OpenOptions::new();
            o.read(true).write(true).create(true).truncate(false);
            #[cfg(unix)]
            {
                use std::os::unix::fs::OpenOptionsExt;
                o.mode(0o600);
            }
            let file = o.open(&path)?;
            if !try_flock(&file)? {
                return Ok(None);
            }
            if same_file(&file, &path)? {
                return Ok(Some(RecordLock {
                    file: Some(file),
                    path,
                    record_file: record_file.to_string(),
                }));
            }
            // The previous holder unlinked the file between our open and our lock: retry on
            // the current one.
        }
        Ok(None)
    }

    /// The record file name this lock covers.
    pub fn record_file(&self) -> &str {
        &self.record_file
    }
}

impl Drop for RecordLock {
    fn drop(&mut self) {
        // Unlink while still holding the lock, then close (which unlocks).
        let _ = fs::remove_file(&self.path);
        drop(self.file.take());
    }
}

#[cfg(unix)]
fn try_flock(file: &File) -> io::Result<bool> {
    use rustix::fs::{flock, FlockOperation};
    match flock(file, FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Ok(true),
        Err(e) if e == rustix::io::Errno::WOULDBLOCK || e == rustix::io::Errno::INTR => Ok(false),
        Err(e) => Err(e.into()),
    }
}

#[cfg(unix)]
fn same_file(file: &File, path: &Path) -> io::Result<bool> {
    use std::os::unix::fs::MetadataExt;
    let a = file.metadata()?;
    match fs::metadata(path) {
        Ok(b) => Ok(a.dev() == b.dev() && a.ino() == b.ino()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

// Without flock the lock degrades to a no-op; the idempotency key still makes a duplicate
// settlement harmless.
#[cfg(not(unix))]
fn try_flock(_file: &File) -> io::Result<bool> {
    Ok(true)
}

#[cfg(not(unix))]
fn same_file(_file: &File, _path: &Path) -> io::Result<bool> {
    Ok(true)
}
