//! [`Journal`]: one identity partition (`<journal_dir>/<fp16>/`) and the record operations
//! on it. Every method does blocking file I/O: async callers run them on the blocking pool.
//!
//! Writes, loads and removals take a [`RecordLock`], so only the worker holding a record's
//! lock can change it; a worker that gets the lock re-reads the record first, so a record
//! finished (deleted) by one worker is never rewritten by another's late failure path.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use super::fsio;
use super::identity;
use super::lock::{self, RecordLock};
use super::names::{self, EntryKind, QuarantineKind};
use super::record::{ParseError, Record};

/// One identity partition of a journal directory.
#[derive(Clone, Debug)]
pub struct Journal {
    root: PathBuf,
    dir: PathBuf,
    partition: String,
    base_url: String,
}

/// A record found by [`Journal::scan`].
#[derive(Clone, Debug)]
pub struct Scanned {
    /// File name in the partition directory.
    pub file: String,
    /// True for a legacy (pre-v2) file name, migrated when the record is worked on.
    pub legacy: bool,
    /// The record.
    pub record: Record,
}

/// A file that is not a usable record.
#[derive(Clone, Debug)]
pub struct Invalid {
    /// File name in the partition directory.
    pub file: String,
    /// Why.
    pub error: ParseError,
}

/// A quarantined file.
#[derive(Clone, Debug)]
pub struct Quarantined {
    /// File name in the partition directory.
    pub file: String,
    /// `corrupt`, `unsupported` or `unrecoverable`.
    pub category: String,
    /// Why it cannot be used now (re-parsed), when it still parses, `None`.
    pub reason: Option<String>,
    /// When it was quarantined (epoch ms): from our file name, else the file's mtime.
    pub since_ms: Option<u64>,
}

/// Everything in a partition directory.
#[derive(Clone, Debug, Default)]
pub struct Scan {
    /// Valid records (standard and legacy names).
    pub records: Vec<Scanned>,
    /// Corrupt or unsupported files, not yet quarantined.
    pub invalid: Vec<Invalid>,
    /// Quarantined files.
    pub quarantined: Vec<Quarantined>,
    /// Stale temp and orphaned lock files removed by this scan.
    pub reaped: Vec<String>,
    /// Record files that could not be read (file name, error), e.g. permission denied.
    pub unreadable: Vec<(String, String)>,
}

pub(super) fn not_found_is_none<T>(r: io::Result<T>) -> io::Result<Option<T>> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

fn mtime_ms(path: &Path) -> Option<u64> {
    let m = fs::metadata(path).ok()?.modified().ok()?;
    let d = m.duration_since(std::time::UNIX_EPOCH).ok()?;
    u64::try_from(d.as_millis()).ok()
}

/// The quarantine time our names carry (`<file>.<category>-<ms>-<n>`).
pub(crate) fn quarantined_at(file: &str, category: &str) -> Option<u64> {
    let rest = file.rsplit_once(&format!(".{category}-"))?.1;
    rest.split('-').next()?.parse().ok()
}

/// Parses a record's bytes; a standard name must match the stored id's hash (both stores).
pub(crate) fn parse_named(file: &str, bytes: &[u8]) -> Result<Record, ParseError> {
    let rec = Record::parse(bytes)?;
    if names::is_record_file_name(file) && names::record_file_name(&rec.reservation_id) != file {
        return Err(ParseError::Corrupt(format!(
            "file name does not match reservation_id {:?}",
            rec.reservation_id
        )));
    }
    Ok(rec)
}

impl Journal {
    /// The partition of (base URL, API key, tenant) under `root` (PBKDF2, cached per process).
    /// Nothing is created on disk until the first write.
    pub fn new(
        root: impl Into<PathBuf>,
        base_url: &str,
        api_key: &str,
        tenant: Option<&str>,
    ) -> Journal {
        let partition = identity::partition(base_url, api_key, tenant);
        Journal::for_partition(root, &partition, base_url)
    }

    /// A known partition (e.g. from a directory listing, for operator tools).
    pub fn for_partition(root: impl Into<PathBuf>, partition: &str, base_url: &str) -> Journal {
        let root = root.into();
        Journal {
            dir: root.join(partition),
            root,
            partition: partition.to_string(),
            base_url: base_url.to_string(),
        }
    }

    /// The journal directory (all partitions).
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// This partition's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The partition name (`fp16`).
    pub fn partition(&self) -> &str {
        &self.partition
    }

    /// The base URL records of this journal belong to.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// The standard path of a reservation's record.
    pub fn path_of(&self, reservation_id: &str) -> PathBuf {
        self.dir.join(names::record_file_name(reservation_id))
    }

    /// Whether a record with another base URL must be left alone.
    pub fn owns(&self, record: &Record) -> bool {
        record
            .base_url
            .as_deref()
            .map_or(true, |b| b == self.base_url)
    }

    /// Creates the partition directory (`0700`) if needed.
    pub fn ensure_dir(&self) -> io::Result<()> {
        fsio::ensure_dir(&self.dir).map(|_| ())
    }

    /// Tries to lock `reservation_id`'s record; `Ok(None)` when another worker holds it.
    pub fn try_lock(&self, reservation_id: &str) -> io::Result<Option<RecordLock>> {
        self.ensure_dir()?;
        RecordLock::try_acquire(&self.dir, &names::record_file_name(reservation_id))
    }

    fn check(&self, lock: &RecordLock, reservation_id: &str) -> io::Result<String> {
        let file = names::record_file_name(reservation_id);
        if lock.record_file() != file {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "the lock held is not this record's",
            ));
        }
        Ok(file)
    }

    /// Durably writes `record` (stamping `recorded_at_ms`) under its standard name.
    pub fn save(&self, lock: &RecordLock, record: &mut Record) -> io::Result<()> {
        let file = self.check(lock, &record.reservation_id)?;
        self.ensure_dir()?;
        record.recorded_at_ms = Some(fsio::now_ms());
        fsio::write_durable(&self.dir, &file, &record.to_json())
    }

    /// Reads `reservation_id`'s record. When only a legacy file exists and its stored id is
    /// exactly `reservation_id`, it is migrated to the standard name first (the legacy file is
    /// removed only then; a colliding legacy file of another id is left in place).
    pub fn load(
        &self,
        lock: &RecordLock,
        reservation_id: &str,
    ) -> io::Result<Option<Result<Record, ParseError>>> {
        let file = self.check(lock, reservation_id)?;
        if let Some(bytes) = not_found_is_none(fs::read(self.dir.join(&file)))? {
            return Ok(Some(Record::parse(&bytes)));
        }
        let legacy = names::legacy_file_name(reservation_id);
        let Some(bytes) = not_found_is_none(fs::read(self.dir.join(&legacy)))? else {
            return Ok(None);
        };
        match Record::parse(&bytes) {
            Ok(mut rec) if rec.reservation_id == reservation_id => {
                let stamp = rec.recorded_at_ms;
                self.save(lock, &mut rec)?;
                // Keep the original write time: it says since when the settlement is pending.
                rec.recorded_at_ms = stamp.or(rec.recorded_at_ms);
                fsio::remove_durable(&self.dir, &legacy)?;
                Ok(Some(Ok(rec)))
            }
            // Another id's record (legacy names collide) or unreadable: not ours to touch.
            _ => Ok(None),
        }
    }

    /// Removes `reservation_id`'s record (settled or terminally rejected), without a directory
    /// fsync: a record that reappears after a power loss replays idempotently (see
    /// [`fsio::remove`]).
    pub fn remove(&self, lock: &RecordLock, reservation_id: &str) -> io::Result<bool> {
        let file = self.check(lock, reservation_id)?;
        fsio::remove(&self.dir, &file)
    }

    /// Quarantines `reservation_id`'s record as `kind` (e.g. unrecoverable).
    pub fn quarantine_record(
        &self,
        lock: &RecordLock,
        reservation_id: &str,
        kind: QuarantineKind,
    ) -> io::Result<String> {
        let file = self.check(lock, reservation_id)?;
        fsio::quarantine(&self.dir, &file, kind)
    }

    /// Quarantines an invalid file found by [`Journal::scan`], if it is still invalid under its
    /// lock (a concurrent writer may have replaced it). Returns the new name, or `None` when
    /// the file changed, vanished or is busy.
    pub fn quarantine_invalid(&self, file: &str) -> io::Result<Option<(String, ParseError)>> {
        let Some(_lock) = RecordLock::try_acquire(&self.dir, file)? else {
            return Ok(None);
        };
        let Some(bytes) = not_found_is_none(fs::read(self.dir.join(file)))? else {
            return Ok(None);
        };
        let error = match parse_named(file, &bytes) {
            Ok(_) => return Ok(None),
            Err(e) => e,
        };
        let kind = error.quarantine_kind();
        Ok(Some((fsio::quarantine(&self.dir, file, kind)?, error)))
    }

    /// Lists the partition: valid records, invalid files, quarantined files; reaps temp files
    /// older than an hour. A missing directory is an empty journal.
    pub fn scan(&self) -> io::Result<Scan> {
        let mut scan = Scan::default();
        let Some(entries) = not_found_is_none(fs::read_dir(&self.dir))? else {
            return Ok(scan);
        };
        let mut names_found: Vec<String> = Vec::new();
        for entry in entries {
            names_found.push(entry?.file_name().to_string_lossy().into_owned());
        }
        names_found.sort();
        for file in names_found {
            let path = self.dir.join(&file);
            match names::classify(&file) {
                EntryKind::Record | EntryKind::Legacy => {
                    let bytes = match fs::read(&path) {
                        Ok(b) => b,
                        Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                        // One unreadable file must not stop the others from replaying.
                        Err(e) => {
                            scan.unreadable.push((file, e.to_string()));
                            continue;
                        }
                    };
                    match parse_named(&file, &bytes) {
                        Ok(record) => scan.records.push(Scanned {
                            legacy: !names::is_record_file_name(&file),
                            file,
                            record,
                        }),
                        Err(error) => scan.invalid.push(Invalid { file, error }),
                    }
                }
                EntryKind::Quarantined(category) => {
                    let reason = fs::read(&path).ok().map(|b| match Record::parse(&b) {
                        Ok(_) => None,
                        Err(e) => Some(e.to_string()),
                    });
                    scan.quarantined.push(Quarantined {
                        since_ms: quarantined_at(&file, &category).or_else(|| mtime_ms(&path)),
                        file,
                        category,
                        reason: reason.flatten(),
                    });
                }
                EntryKind::Lock => {
                    // An earlier version's per-record lock file, left only if its holder
                    // crashed. Reaped once stale, when its record is gone and nobody holds it.
                    let record = format!("{}.json", file.trim_end_matches(".lock"));
                    let stale = fs::metadata(&path)
                        .and_then(|m| m.modified())
                        .ok()
                        .and_then(|m| m.elapsed().ok())
                        .is_some_and(|age| age > fsio::TEMP_MAX_AGE);
                    if stale
                        && !self.dir.join(&record).exists()
                        && lock::reap_lock_file(&path).unwrap_or(false)
                    {
                        scan.reaped.push(file);
                    }
                }
                EntryKind::Temp | EntryKind::Other => {}
            }
        }
        // After the lock files: reaped lock files are reported too.
        scan.reaped
            .extend(fsio::reap_temps(&self.dir, fsio::TEMP_MAX_AGE)?);
        Ok(scan)
    }

    /// The partitions (sub-directory names) present under a journal directory.
    pub fn partitions(root: &Path) -> io::Result<Vec<String>> {
        let Some(entries) = not_found_is_none(fs::read_dir(root))? else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        for e in entries {
            let e = e?;
            if e.file_type()?.is_dir() {
                out.push(e.file_name().to_string_lossy().into_owned());
            }
        }
        out.sort();
        Ok(out)
    }
}
