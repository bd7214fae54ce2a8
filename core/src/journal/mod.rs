//! The durable settlement journal, in the on-disk format shared with the official Cycles SDKs
//! (`docs/journal.md`; the format is `JOURNAL.md`).
//!
//! `<journal_dir>/<fp16>/v2-<sha256 of the reservation id>.json`, one version-1 record a file.
//! One concern a module:
//! - [`identity`]: the `fp16` partition (PBKDF2, cached once per identity per process);
//! - [`names`]: record, legacy, temp, lock and quarantine file names;
//! - [`record`]: parse (every variant the SDKs write) and serialize (compact) a record, bodies
//!   kept byte-faithful;
//! - [`fsio`]: atomic durable writes (0600 temp, fsync, rename, fsync dir), 0700 directories,
//!   never-overwriting quarantine, temp reaping;
//! - [`lock`]: advisory per-record locks (a byte of the partition's lock table each);
//! - [`store`]: [`Journal`], one partition and the locked record operations on it;
//! - [`redis_store`]: the same records in Redis, under per-record leases with fencing tokens;
//! - [`backend`]: [`Store`], the one the settlement engine uses (file or Redis);
//! - [`place`]: [`Place`], where a journal is (a directory or a Redis URL) and what is pending
//!   there;
//! - [`transfer`]: copying records between stores, bytes unchanged.
//!
//! Everything here blocks; the settlement engine calls it on the blocking pool.

pub mod backend;
pub mod fsio;
pub mod identity;
pub mod lock;
pub mod names;
pub mod place;
pub mod record;
pub mod redis_store;
pub mod store;
pub mod transfer;

pub use backend::{RedisJournal, Store, StoreLock};
pub use lock::RecordLock;
pub use names::QuarantineKind;
pub use place::{Pending, Place};
pub use record::{Mode, ParseError, Record};
pub use store::{Invalid, Journal, Quarantined, Scan, Scanned};
