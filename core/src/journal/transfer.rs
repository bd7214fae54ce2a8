//! Moving records between stores (`cycles journal copy --from A --to B [--move]`): from a
//! journal directory to Redis when a fleet adopts the Redis store, back to a directory to
//! inspect or hand to an official SDK. Every partition of the source, each valid record's
//! bytes unchanged (a legacy file name becomes the standard one, which its id determines),
//! each record under both stores' locks; a record the destination already holds is left as
//! it is there (it is the original settlement, as in [`crate::Settler::settle`]).

use std::io;

use super::backend::{wrong_lock, Store, StoreLock};
use super::names;
pub use super::place::Place;
use super::store::not_found_is_none;

/// What happened to one record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Copy {
    /// Written to the destination (and, moving, removed from the source).
    Copied,
    /// The destination holds this record already: left as it is there, and in the source.
    Exists,
    /// Held by a worker (being settled) in either store: not copied; run the copy again.
    Busy,
}

/// One record of a copy.
#[derive(Clone, Debug)]
pub struct Copied {
    /// The partition (`fp16`).
    pub partition: String,
    /// The reservation id.
    pub reservation_id: String,
    /// Its standard record file name.
    pub file: String,
    /// What happened.
    pub outcome: Copy,
}

/// What a copy did, and the records it could not read (file or key, why).
#[derive(Clone, Debug, Default)]
pub struct CopyReport {
    /// Every valid record of the source.
    pub records: Vec<Copied>,
    /// Invalid or unreadable records, left in the source (drain or quarantine them first).
    pub skipped: Vec<(String, String)>,
}

/// Copies every valid record of every partition of `from` to `to` (removing each from `from`
/// once the destination holds it durably, when `remove_source`). An I/O failure stops the
/// copy with what was done so far lost from the report but not from either store: every
/// record is in at least one of them, and running the copy again finishes it.
pub fn copy(from: &Place, to: &Place, remove_source: bool) -> Result<CopyReport, String> {
    let mut report = CopyReport::default();
    for partition in from.partitions()? {
        let src = from.store(&partition)?;
        let dst = to.store(&partition)?;
        let scan = src.scan().map_err(|e| format!("{}: {e}", src.location()))?;
        for inv in scan.invalid {
            report
                .skipped
                .push((src.locate_file(&inv.file), inv.error.to_string()));
        }
        for (file, error) in scan.unreadable {
            report.skipped.push((src.locate_file(&file), error));
        }
        for s in scan.records {
            let id = s.record.reservation_id.clone();
            let outcome = copy_one(&src, &dst, &s.file, &id, remove_source)
                .map_err(|e| format!("{id}: {e} (copying {} to {})", src.location(), to.shown()))?;
            report.records.push(Copied {
                partition: partition.clone(),
                file: names::record_file_name(&id),
                reservation_id: id,
                outcome,
            });
        }
    }
    Ok(report)
}

fn copy_one(
    src: &Store,
    dst: &Store,
    src_file: &str,
    id: &str,
    remove_source: bool,
) -> io::Result<Copy> {
    let Some(src_lock) = src.try_lock(id)? else {
        return Ok(Copy::Busy);
    };
    let Some(dst_lock) = dst.try_lock(id)? else {
        return Ok(Copy::Busy);
    };
    // Read under the lock: a worker may have finished (removed) it since the scan.
    let Some(bytes) = src.read_raw(&src_lock, src_file)? else {
        return Ok(Copy::Busy);
    };
    if dst
        .read_raw(&dst_lock, &names::record_file_name(id))?
        .is_some()
    {
        return Ok(Copy::Exists);
    }
    dst.write_raw(&dst_lock, id, &bytes)?;
    if remove_source {
        src.remove_raw(&src_lock, src_file)?;
    }
    drop((dst_lock, src_lock));
    Ok(Copy::Copied)
}

impl Store {
    /// The bytes of a record file (or key), read under `lock`.
    pub(crate) fn read_raw(&self, lock: &StoreLock, file: &str) -> io::Result<Option<Vec<u8>>> {
        match (self, lock) {
            (Store::File(j), StoreLock::File(_)) => {
                not_found_is_none(std::fs::read(j.dir().join(file)))
            }
            (Store::Redis(r), StoreLock::Redis(l)) => r.store().load(l, file),
            _ => Err(wrong_lock()),
        }
    }

    /// Writes `bytes` as `reservation_id`'s record, unchanged (no stamp), durably.
    pub(crate) fn write_raw(
        &self,
        lock: &StoreLock,
        reservation_id: &str,
        bytes: &[u8],
    ) -> io::Result<()> {
        let file = names::record_file_name(reservation_id);
        match (self, lock) {
            (Store::File(j), StoreLock::File(_)) => {
                j.ensure_dir()?;
                super::fsio::write_durable(j.dir(), &file, bytes)
            }
            (Store::Redis(r), StoreLock::Redis(l)) => r.store().save(l, &file, bytes),
            _ => Err(wrong_lock()),
        }
    }

    /// Removes a record file (or key) under `lock`.
    pub(crate) fn remove_raw(&self, lock: &StoreLock, file: &str) -> io::Result<bool> {
        match (self, lock) {
            (Store::File(j), StoreLock::File(_)) => super::fsio::remove_durable(j.dir(), file),
            (Store::Redis(r), StoreLock::Redis(l)) => r.store().remove(l, file),
            _ => Err(wrong_lock()),
        }
    }
}
