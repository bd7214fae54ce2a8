//! [`Store`]: where the settlement engine journals, the file store ([`Journal`], the default,
//! shared with the official SDKs) or Redis ([`RedisStore`], `journal_url = "redis://..."`).
//! Both keep the same records under the same partition and record names, so a record moves
//! between them unchanged; the engine sees one interface.

use std::io;

use super::names::{self, QuarantineKind};
use super::record::{ParseError, Record};
use super::redis_store::{Lease, RedisStore, RedisTarget};
use super::store::{parse_named, quarantined_at, Invalid, Journal, Quarantined, Scan, Scanned};
use super::{identity, RecordLock};
use crate::config::JournalConfig;
use crate::error::Error;

/// The journal of one identity partition, in one of the two stores.
#[derive(Clone, Debug)]
pub enum Store {
    /// `<journal_dir>/<fp16>/` on the local disk.
    File(Journal),
    /// `cycles:journal:{<fp16>}:*` keys in Redis.
    Redis(RedisJournal),
}

/// The Redis store of one partition and the base URL its records belong to.
#[derive(Clone, Debug)]
pub struct RedisJournal {
    store: RedisStore,
    partition: String,
    base_url: String,
}

impl RedisJournal {
    /// A known partition at `target` (for operator tools: its records' base URL unknown),
    /// connected and checked for durability ([`RedisStore::open`]).
    pub fn open(target: &RedisTarget, partition: &str) -> Result<RedisJournal, String> {
        Ok(RedisJournal {
            store: RedisStore::open(target, partition)?,
            partition: partition.to_string(),
            base_url: String::new(),
        })
    }

    /// The store.
    pub fn store(&self) -> &RedisStore {
        &self.store
    }
}

/// A record held by one worker: a file lock or a Redis lease (with its fencing token).
#[derive(Debug)]
pub enum StoreLock {
    /// The file store's lock.
    File(RecordLock),
    /// The Redis store's lease.
    Redis(Lease),
}

pub(super) fn wrong_lock() -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        "the lock held is not of this journal's store",
    )
}

impl Store {
    /// The store `config` asks for, for (base URL, API key, tenant): Redis when
    /// `config.url` is set (connected and checked for durability now: CONFIG when it cannot
    /// be, with what to change), else the directory. Computes the partition (PBKDF2, cached
    /// per process).
    pub fn open(
        config: &JournalConfig,
        base_url: &str,
        api_key: &str,
        tenant: Option<&str>,
    ) -> Result<Store, Error> {
        let partition = identity::partition(base_url, api_key, tenant);
        match &config.url {
            None => Ok(Store::File(Journal::for_partition(
                config.dir.clone(),
                &partition,
                base_url,
            ))),
            Some(url) => {
                let target = RedisTarget::parse(url).map_err(Error::config)?;
                let mut r = RedisJournal::open(&target, &partition).map_err(Error::config)?;
                r.base_url = base_url.to_string();
                Ok(Store::Redis(r))
            }
        }
    }

    /// The partition name (`fp16`).
    pub fn partition(&self) -> &str {
        match self {
            Store::File(j) => j.partition(),
            Store::Redis(r) => &r.partition,
        }
    }

    /// Where the journal is, for messages: the directory, or the Redis URL (no password).
    pub fn location(&self) -> String {
        match self {
            Store::File(j) => j.dir().display().to_string(),
            Store::Redis(r) => r.store.shown().to_string(),
        }
    }

    /// Where `reservation_id`'s record is, for messages and events.
    pub fn locate(&self, reservation_id: &str) -> String {
        self.locate_file(&names::record_file_name(reservation_id))
    }

    /// Where a record file (or quarantined name) is, for messages and events.
    pub fn locate_file(&self, file: &str) -> String {
        match self {
            Store::File(j) => j.dir().join(file).display().to_string(),
            Store::Redis(r) => r.store.locate(file),
        }
    }

    /// Whether `reservation_id`'s record exists under its standard name (a legacy file is
    /// migrated when loaded; Redis has no legacy names).
    pub fn has_standard(&self, reservation_id: &str) -> bool {
        match self {
            Store::File(j) => j.path_of(reservation_id).exists(),
            Store::Redis(_) => true,
        }
    }

    /// Whether a record with another base URL must be left alone.
    pub fn owns(&self, record: &Record) -> bool {
        let base = match self {
            Store::File(j) => j.base_url(),
            Store::Redis(r) => &r.base_url,
        };
        record.base_url.as_deref().map_or(true, |b| b == base)
    }

    /// Tries to lock `reservation_id`'s record; `Ok(None)` when another worker holds it.
    pub fn try_lock(&self, reservation_id: &str) -> io::Result<Option<StoreLock>> {
        match self {
            Store::File(j) => Ok(j.try_lock(reservation_id)?.map(StoreLock::File)),
            Store::Redis(r) => Ok(r
                .store
                .try_lease(&names::record_file_name(reservation_id))?
                .map(StoreLock::Redis)),
        }
    }

    /// Durably writes `record` (stamping `recorded_at_ms`) under its standard name.
    pub fn save(&self, lock: &StoreLock, record: &mut Record) -> io::Result<()> {
        match (self, lock) {
            (Store::File(j), StoreLock::File(l)) => j.save(l, record),
            (Store::Redis(r), StoreLock::Redis(l)) => {
                record.recorded_at_ms = Some(super::fsio::now_ms());
                let file = names::record_file_name(&record.reservation_id);
                r.store.save(l, &file, &record.to_json())
            }
            _ => Err(wrong_lock()),
        }
    }

    /// Extends the hold `lock` has on its record, for a settlement that retries for longer
    /// than a Redis lease lasts; false when a Redis lease was already lost. A file lock lasts
    /// as long as its holder, so there is nothing to extend.
    pub fn renew(&self, lock: &StoreLock) -> io::Result<bool> {
        match (self, lock) {
            (Store::File(_), StoreLock::File(_)) => Ok(true),
            (Store::Redis(r), StoreLock::Redis(l)) => r.store.renew(l),
            _ => Err(wrong_lock()),
        }
    }

    /// Whether holding a record can lapse (a Redis lease), so a long settlement renews it.
    pub fn leases_expire(&self) -> bool {
        matches!(self, Store::Redis(_))
    }

    /// Reads `reservation_id`'s record (see [`Journal::load`]).
    pub fn load(
        &self,
        lock: &StoreLock,
        reservation_id: &str,
    ) -> io::Result<Option<Result<Record, ParseError>>> {
        match (self, lock) {
            (Store::File(j), StoreLock::File(l)) => j.load(l, reservation_id),
            (Store::Redis(r), StoreLock::Redis(l)) => {
                let file = names::record_file_name(reservation_id);
                Ok(r.store
                    .load(l, &file)?
                    .map(|bytes| parse_named(&file, &bytes)))
            }
            _ => Err(wrong_lock()),
        }
    }

    /// Removes `reservation_id`'s record; true when it existed.
    pub fn remove(&self, lock: &StoreLock, reservation_id: &str) -> io::Result<bool> {
        match (self, lock) {
            (Store::File(j), StoreLock::File(l)) => j.remove(l, reservation_id),
            (Store::Redis(r), StoreLock::Redis(l)) => {
                r.store.remove(l, &names::record_file_name(reservation_id))
            }
            _ => Err(wrong_lock()),
        }
    }

    /// Quarantines `reservation_id`'s record as `kind`; the quarantined name.
    pub fn quarantine_record(
        &self,
        lock: &StoreLock,
        reservation_id: &str,
        kind: QuarantineKind,
    ) -> io::Result<String> {
        match (self, lock) {
            (Store::File(j), StoreLock::File(l)) => j.quarantine_record(l, reservation_id, kind),
            (Store::Redis(r), StoreLock::Redis(l)) => {
                r.store
                    .quarantine(l, &names::record_file_name(reservation_id), kind)
            }
            _ => Err(wrong_lock()),
        }
    }

    /// Quarantines an invalid record found by [`Store::scan`] if it is still invalid under its
    /// lock; `None` when it changed, vanished or is busy.
    pub fn quarantine_invalid(&self, file: &str) -> io::Result<Option<(String, ParseError)>> {
        match self {
            Store::File(j) => j.quarantine_invalid(file),
            Store::Redis(r) => {
                let Some(lease) = r.store.try_lease(file)? else {
                    return Ok(None);
                };
                let Some(bytes) = r.store.load(&lease, file)? else {
                    return Ok(None);
                };
                let error = match parse_named(file, &bytes) {
                    Ok(_) => return Ok(None),
                    Err(e) => e,
                };
                let kind = error.quarantine_kind();
                Ok(Some((r.store.quarantine(&lease, file, kind)?, error)))
            }
        }
    }

    /// Lists the partition: valid records, invalid ones, quarantined ones.
    pub fn scan(&self) -> io::Result<Scan> {
        let r = match self {
            Store::File(j) => return j.scan(),
            Store::Redis(r) => r,
        };
        let mut scan = Scan::default();
        for (file, bytes) in r.store.records()? {
            match parse_named(&file, &bytes) {
                Ok(record) => scan.records.push(Scanned {
                    file,
                    legacy: false,
                    record,
                }),
                Err(error) => scan.invalid.push(Invalid { file, error }),
            }
        }
        for (name, bytes) in r.store.quarantined()? {
            let category = match names::classify(&name) {
                names::EntryKind::Quarantined(c) => c,
                _ => continue,
            };
            scan.quarantined.push(Quarantined {
                since_ms: quarantined_at(&name, &category),
                reason: Record::parse(&bytes).err().map(|e| e.to_string()),
                file: name,
                category,
            });
        }
        Ok(scan)
    }
}
