//! Where the crash loop's journals live: a directory per iteration (the default), or one
//! Redis (`--redis`) that the loop starts itself, with AOF and `appendfsync always`, and
//! restarts by SIGKILL when an iteration draws it (between the writer's kill and the drain,
//! or in the middle of the drain). With Redis the writer's own journal directory (its
//! "machine") is removed after the kill: a drainer must find everything in Redis.

use std::collections::BTreeSet;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use cycles_core::config::JournalConfig;
use cycles_core::journal::names::record_file_name;
use cycles_core::journal::Store;
use cycles_test_redis::RedisServer;
use serde_json::Value;

/// A lease a killed holder leaves lapses this fast, so a drain (30 s) is never held up long.
const LEASE_MS: u64 = 1000;

/// Every file under `dir` (the journal matrix's and the crash loop's journals).
pub fn paths(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out
}

/// Every file under `dir`, with its inode (a rename-replace gives a new one).
pub fn files(dir: &Path) -> BTreeSet<(PathBuf, u64)> {
    paths(dir)
        .into_iter()
        .filter_map(|p| {
            let ino = std::fs::symlink_metadata(&p).ok()?.ino();
            Some((p, ino))
        })
        .collect()
}

fn is_record(p: &Path) -> bool {
    p.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.ends_with(".json"))
}

/// A record, or a record set aside (quarantined): what a drain must not leave. The lock
/// file and a rename's `.tmp` a kill cut short are not records.
fn is_left_record(p: &Path) -> bool {
    p.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
        n.ends_with(".json")
            || n.contains(".corrupt-")
            || n.contains(".unsupported-")
            || n.contains(".unrecoverable-")
    })
}

/// Redis databases the iterations cycle through, so a record a failed iteration left is
/// never taken for a later one's.
const DATABASES: usize = 16;

/// The loop's journal: a directory per iteration, or one Redis for all (a database per
/// iteration, in turn).
pub enum Place {
    /// `journal-<i>` under the loop's work directory.
    Dir,
    /// A Redis the loop started, and the orchestrator's own view of the loop's partition.
    Redis {
        /// The process.
        server: RedisServer,
        /// The URL of each database (what the faces are given).
        urls: Vec<String>,
        /// The partition the faces' identity maps to, in each database, read through core's
        /// store.
        stores: Vec<Store>,
        /// The current iteration's database.
        db: usize,
    },
}

impl Place {
    /// A Redis started under `dir`, viewed as the partition of (base URL, key, tenant).
    pub fn redis(dir: &Path, base_url: &str, key: &str, tenant: &str) -> Result<Place, String> {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let server = RedisServer::start(dir, true)?;
        let urls: Vec<String> = (0..DATABASES)
            .map(|db| {
                format!(
                    "redis://127.0.0.1:{}/{db}?lease_ms={LEASE_MS}",
                    server.port()
                )
            })
            .collect();
        let stores = urls
            .iter()
            .map(|url| {
                let config = JournalConfig {
                    enabled: true,
                    dir: dir.join("unused"),
                    url: Some(url.clone()),
                };
                Store::open(&config, base_url, key, Some(tenant)).map_err(|e| e.to_string())
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Place::Redis {
            server,
            urls,
            stores,
            db: 0,
        })
    }

    /// Starts iteration `i`: with Redis, its database, emptied of what an earlier failed
    /// iteration left there (already reported).
    pub fn begin(&mut self, i: usize) -> Result<(), String> {
        if let Place::Redis { server, db, .. } = self {
            *db = i % DATABASES;
            server.commands(&[&["SELECT", &db.to_string()], &["FLUSHDB"]])?;
        }
        Ok(())
    }

    /// The `journal_url` the faces are given, if any.
    pub fn url(&self) -> Option<&str> {
        match self {
            Place::Dir => None,
            Place::Redis { urls, db, .. } => Some(&urls[*db]),
        }
    }

    /// The Redis process, if any.
    pub fn server(&mut self) -> Option<&mut RedisServer> {
        match self {
            Place::Dir => None,
            Place::Redis { server, .. } => Some(server),
        }
    }

    fn store(&self) -> Option<&Store> {
        match self {
            Place::Dir => None,
            Place::Redis { stores, db, .. } => Some(&stores[*db]),
        }
    }

    /// The reservation ids the journal holds records of (`dir`: the iteration's directory).
    pub fn journaled(&self, dir: &Path) -> Result<BTreeSet<String>, String> {
        match self.store() {
            None => Ok(files(dir)
                .into_iter()
                .filter(|(p, _)| is_record(p))
                .filter_map(|(p, _)| {
                    let v: Value = serde_json::from_slice(&std::fs::read(p).ok()?).ok()?;
                    Some(v.get("reservation_id")?.as_str()?.to_string())
                })
                .collect()),
            Some(store) => Ok(store
                .scan()
                .map_err(|e| format!("the journal's Redis: {e}"))?
                .records
                .into_iter()
                .map(|s| s.record.reservation_id)
                .collect()),
        }
    }

    /// Whether `reservation_id`'s record is in the journal now.
    pub fn has_record(&self, dir: &Path, reservation_id: &str) -> bool {
        match self.store() {
            None => {
                let name = record_file_name(reservation_id);
                files(dir).iter().any(|(f, _)| f.ends_with(&name))
            }
            Some(store) => store.scan().is_ok_and(|s| {
                s.records
                    .iter()
                    .any(|r| r.record.reservation_id == reservation_id)
            }),
        }
    }

    /// What a drain left: records, invalid and quarantined ones (file names, or keys).
    pub fn left(&self, dir: &Path) -> Result<Vec<String>, String> {
        match self.store() {
            None => Ok(files(dir)
                .into_iter()
                .filter(|(f, _)| is_left_record(f))
                .map(|(f, _)| f.to_string_lossy().into_owned())
                .collect()),
            Some(store) => {
                let s = store
                    .scan()
                    .map_err(|e| format!("the journal's Redis: {e}"))?;
                Ok(s.records
                    .iter()
                    .map(|r| r.file.clone())
                    .chain(s.invalid.iter().map(|i| i.file.clone()))
                    .chain(s.quarantined.iter().map(|q| q.file.clone()))
                    .collect())
            }
        }
    }
}
