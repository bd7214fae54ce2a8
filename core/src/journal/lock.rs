//! Advisory per-record locks, so independent workers and processes never work on one record
//! at once.
//!
//! One lock table per partition, the file `v2.locks`, created once and never removed. A
//! record's lock is an exclusive open-file-description (OFD) lock on one byte of it, at an
//! offset taken from a SHA-256 of the record's file name. Why not a lock file per record (as
//! before): creating and unlinking one per settlement changed the directory twice more than
//! the write itself, and every change to a directory is serialised by the directory's lock
//! and committed by the next directory fsync; at 64 settlements in flight that cost more than
//! the fsyncs.
//!
//! OFD locks belong to an open file description, like `flock`: each lock opens the table
//! afresh, so two workers of one process exclude each other as two processes do, and closing
//! (dropping the lock, or a crash) releases it. Acquisition never blocks: a busy record is
//! skipped and retried later. Two records whose offsets collide (62 bits) would only exclude
//! each other for a moment.
//!
//! Off Linux the lock is a no-op; the idempotency key still makes a duplicate settlement
//! harmless.

use std::fs::{File, OpenOptions};
use std::io;
use std::path::Path;

use sha2::{Digest, Sha256};

use super::names;

/// An exclusive lock on one record, released when dropped.
#[derive(Debug)]
pub struct RecordLock {
    // Held for its open file description: closing it releases the lock.
    _table: File,
    record_file: String,
}

impl RecordLock {
    /// Tries to lock the record file `record_file` in `dir`; `Ok(None)` when another worker
    /// holds it. `dir` must exist.
    pub fn try_acquire(dir: &Path, record_file: &str) -> io::Result<Option<RecordLock>> {
        let mut o = OpenOptions::new();
        o.read(true).write(true).create(true).truncate(false);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            o.mode(0o600);
        }
        let table = o.open(dir.join(names::LOCK_TABLE))?;
        if !try_lock_byte(&table, offset_of(record_file))? {
            return Ok(None);
        }
        Ok(Some(RecordLock {
            _table: table,
            record_file: record_file.to_string(),
        }))
    }

    /// The record file name this lock covers.
    pub fn record_file(&self) -> &str {
        &self.record_file
    }
}

/// Removes an earlier version's per-record lock file unless someone holds its `flock` (it is
/// unlinked while locked, then closed, as that version did); true when removed.
pub fn reap_lock_file(path: &Path) -> io::Result<bool> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
    };
    #[cfg(unix)]
    {
        use rustix::fs::{flock, FlockOperation};
        if flock(&file, FlockOperation::NonBlockingLockExclusive).is_err() {
            return Ok(false);
        }
    }
    std::fs::remove_file(path)?;
    drop(file);
    Ok(true)
}

/// The byte of the lock table that stands for `record_file`: 62 bits of its SHA-256, so the
/// offset plus one stays a valid `off_t`.
pub fn offset_of(record_file: &str) -> u64 {
    let d = Sha256::digest(record_file.as_bytes());
    let mut b = [0u8; 8];
    b.copy_from_slice(&d[..8]);
    u64::from_be_bytes(b) >> 2
}

#[cfg(target_os = "linux")]
fn try_lock_byte(file: &File, offset: u64) -> io::Result<bool> {
    use std::os::fd::AsRawFd;
    let start = libc::off_t::try_from(offset)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "lock offset out of range"))?;
    // SAFETY: `flock` is plain data, fully initialised here (zeroed, then every field the
    // kernel reads set); the descriptor is open for as long as `file` is borrowed.
    let rc = unsafe {
        let mut fl: libc::flock = std::mem::zeroed();
        fl.l_type = libc::F_WRLCK as libc::c_short;
        fl.l_whence = libc::SEEK_SET as libc::c_short;
        fl.l_start = start;
        fl.l_len = 1;
        libc::fcntl(file.as_raw_fd(), libc::F_OFD_SETLK, &fl)
    };
    if rc == 0 {
        return Ok(true);
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EAGAIN | libc::EACCES | libc::EINTR) => Ok(false),
        _ => Err(e),
    }
}

#[cfg(not(target_os = "linux"))]
fn try_lock_byte(_file: &File, _offset: u64) -> io::Result<bool> {
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_are_stable_and_in_range() {
        let a = offset_of("v2-00.json");
        assert_eq!(a, offset_of("v2-00.json"));
        assert_ne!(a, offset_of("v2-01.json"));
        assert!(a < (1 << 62));
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn one_holder_per_record_even_in_one_process() {
        let dir = tempfile::tempdir().unwrap();
        let a = RecordLock::try_acquire(dir.path(), "v2-a.json").unwrap();
        assert!(a.is_some());
        assert!(RecordLock::try_acquire(dir.path(), "v2-a.json")
            .unwrap()
            .is_none());
        // Another record is independent.
        let b = RecordLock::try_acquire(dir.path(), "v2-b.json").unwrap();
        assert!(b.is_some());
        drop(a);
        assert!(RecordLock::try_acquire(dir.path(), "v2-a.json")
            .unwrap()
            .is_some());
        // One table file, never a file per record.
        let files: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(files.len(), 1);
    }
}
