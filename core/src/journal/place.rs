//! [`Place`]: where a journal is, a directory or a Redis URL, as operator tools and hosts name
//! it (`cycles journal ... --dir DIR | --url redis://...`, each face's pending listing), with
//! its partitions, the store of each, and the pending records in it.

use std::path::PathBuf;

use super::backend::{RedisJournal, Store};
use super::identity;
use super::record::Record;
use super::redis_store::{RedisStore, RedisTarget};
use super::store::Journal;

/// A journal's place: a directory, or a Redis URL.
#[derive(Clone, Debug)]
pub enum Place {
    /// A journal directory (its sub-directories are the partitions).
    Dir(PathBuf),
    /// A Redis journal (`redis://...`, parsed as `journal_url` is).
    Redis(RedisTarget),
}

/// One valid record found by [`Place::pending`].
#[derive(Clone, Debug)]
pub struct Pending {
    /// Its partition (`fp16`).
    pub partition: String,
    /// Its file name (the Redis store keeps the same names).
    pub file: String,
    /// True for a legacy (pre-v2) file name (the file store only).
    pub legacy: bool,
    /// The record.
    pub record: Record,
}

impl Place {
    /// `redis://...` (and `rediss://`, refused with why) is Redis; anything else a directory.
    pub fn parse(s: &str) -> Result<Place, String> {
        if s.starts_with("redis://") || s.starts_with("rediss://") {
            RedisTarget::parse(s).map(Place::Redis)
        } else {
            Ok(Place::Dir(PathBuf::from(s)))
        }
    }

    /// The place as messages show it (a Redis password replaced).
    pub fn shown(&self) -> String {
        match self {
            Place::Dir(d) => d.display().to_string(),
            Place::Redis(t) => t.shown.clone(),
        }
    }

    /// The partitions present (a missing directory has none).
    pub fn partitions(&self) -> Result<Vec<String>, String> {
        match self {
            Place::Dir(d) => Journal::partitions(d).map_err(|e| format!("{}: {e}", d.display())),
            Place::Redis(t) => RedisStore::partitions(t).map_err(|e| format!("{}: {e}", t.shown)),
        }
    }

    /// The store of one partition (Redis: connected and checked for durability).
    pub fn store(&self, partition: &str) -> Result<Store, String> {
        Ok(match self {
            Place::Dir(d) => Store::File(Journal::for_partition(d.clone(), partition, "")),
            Place::Redis(t) => Store::Redis(RedisJournal::open(t, partition)?),
        })
    }

    /// The valid records here: of the partition of `identity` (base URL as the client uses it,
    /// API key, tenant) when given, else of every partition. Invalid and quarantined records
    /// are not listed; the error says which partition could not be read.
    pub fn pending(
        &self,
        identity: Option<(&str, &str, Option<&str>)>,
    ) -> Result<Vec<Pending>, String> {
        let partitions = match identity {
            Some((base_url, api_key, tenant)) => {
                vec![identity::partition(base_url, api_key, tenant)]
            }
            None => self.partitions()?,
        };
        let mut out = Vec::new();
        for partition in partitions {
            let store = self.store(&partition)?;
            let scan = store
                .scan()
                .map_err(|e| format!("cannot scan {}: {e}", store.location()))?;
            out.extend(scan.records.into_iter().map(|s| Pending {
                partition: partition.clone(),
                file: s.file,
                legacy: s.legacy,
                record: s.record,
            }));
        }
        Ok(out)
    }
}
