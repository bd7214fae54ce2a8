//! File names inside an identity partition.
//!
//! - Records: `v2-<sha256 lowercase hex of the exact UTF-8 reservation id>.json` (the standard
//!   name every SDK writes; collision-resistant, so `rsv/a` and `rsv_a` never share a file).
//! - Legacy records (read and migrate only, never written): the id with every character outside
//!   `[A-Za-z0-9_-]` replaced by `_`, plus `.json`. Different ids collide under it.
//! - Our temp files: `.<record name>.<pid>.<random>.tmp` (hidden, never `*.json`, so no SDK
//!   mistakes one for a record). Every temp-file form an official SDK writes is recognised and
//!   reaped after an hour ([`is_temp_file_name`]): `*.tmp` (ours; Python's and TypeScript's
//!   `<record name>.<pid>.<hex>.tmp`), `*.tmp.*`, and the Rust crate's `.tmpXXXXXX` (the
//!   `tempfile` crate's default: `.tmp` and random alphanumerics, no extension).
//! - Our lock table: `v2.locks`, one per partition; a record's lock is a byte range of it
//!   (`super::lock`). Earlier versions locked `v2-<hash>.lock` files, one per record: those
//!   are recognised and reaped once stale.
//! - Quarantined records: `<record name>.<category>-<ms>-<n>` where `category` is `corrupt`,
//!   `unsupported` or `unrecoverable`; the official SDKs' `<stem>.corrupt` is recognised too.

use sha2::{Digest, Sha256};

/// The standard record file name of `reservation_id`.
pub fn record_file_name(reservation_id: &str) -> String {
    format!(
        "v2-{}.json",
        hex::encode(Sha256::digest(reservation_id.as_bytes()))
    )
}

/// The legacy (pre-v2) file name of `reservation_id`; used only to find and migrate records.
pub fn legacy_file_name(reservation_id: &str) -> String {
    let mut s: String = reservation_id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    s.push_str(".json");
    s
}

/// The lock table of a partition (never a record, a temp file or a `*.lock`).
pub const LOCK_TABLE: &str = "v2.locks";

/// The per-record lock file earlier versions used (`v2-<hash>.json` -> `v2-<hash>.lock`),
/// reaped by the scan once stale.
pub fn lock_file_name(record_file: &str) -> String {
    format!(
        "{}.lock",
        record_file.strip_suffix(".json").unwrap_or(record_file)
    )
}

/// A fresh temp file name for writing `record_file`.
pub fn temp_file_name(record_file: &str) -> String {
    format!(
        ".{record_file}.{}.{:016x}.tmp",
        std::process::id(),
        fastrand::u64(..)
    )
}

/// Why a record was quarantined; also the category in the quarantined file's name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QuarantineKind {
    /// Not a parseable version-1 record.
    Corrupt,
    /// A record of a format version this SDK does not understand.
    Unsupported,
    /// A valid record that can no longer be settled (expired reservation, no event body).
    Unrecoverable,
}

impl QuarantineKind {
    /// The category as written in file names and reports.
    pub fn as_str(self) -> &'static str {
        match self {
            QuarantineKind::Corrupt => "corrupt",
            QuarantineKind::Unsupported => "unsupported",
            QuarantineKind::Unrecoverable => "unrecoverable",
        }
    }
}

/// A quarantine name for `file` (unique thanks to the time and counter; the caller retries
/// with the next counter if the name exists, so evidence is never overwritten).
pub fn quarantine_file_name(file: &str, kind: QuarantineKind, now_ms: u64, n: u32) -> String {
    format!("{file}.{}-{now_ms}-{n}", kind.as_str())
}

/// What a directory entry of a partition is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EntryKind {
    /// A standard `v2-<64 hex>.json` record.
    Record,
    /// Some other `*.json`: a legacy record.
    Legacy,
    /// A temp file (ours or an official SDK's).
    Temp,
    /// A per-record lock file of an earlier version.
    Lock,
    /// A quarantined record and its category (`corrupt`, `unsupported`, `unrecoverable`).
    Quarantined(String),
    /// Anything else: left alone.
    Other,
}

/// True for `v2-<64 lowercase hex>.json`.
pub fn is_record_file_name(name: &str) -> bool {
    name.strip_prefix("v2-")
        .and_then(|r| r.strip_suffix(".json"))
        .is_some_and(|h| h.len() == 64 && h.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
}

/// True for a temp file of ours or of an official SDK; never for a `*.json` record.
pub fn is_temp_file_name(name: &str) -> bool {
    if name.ends_with(".json") {
        return false;
    }
    // The Rust crate (`tempfile::NamedTempFile::new_in`): `.tmp` + 6 random alphanumerics.
    let rust_crate = name
        .strip_prefix(".tmp")
        .is_some_and(|r| !r.is_empty() && r.bytes().all(|b| b.is_ascii_alphanumeric()));
    rust_crate || name.ends_with(".tmp") || name.contains(".tmp.")
}

/// Classifies a file name found in a partition directory.
pub fn classify(name: &str) -> EntryKind {
    if is_temp_file_name(name) {
        return EntryKind::Temp;
    }
    for cat in ["corrupt", "unsupported", "unrecoverable"] {
        // Ours: `x.json.corrupt-<ms>-<n>`; the official SDKs': `<stem>.corrupt`.
        if name.ends_with(&format!(".{cat}")) || name.contains(&format!(".{cat}-")) {
            return EntryKind::Quarantined(cat.to_string());
        }
    }
    if is_record_file_name(name) {
        EntryKind::Record
    } else if name.ends_with(".lock") {
        EntryKind::Lock
    } else if name.ends_with(".json") && !name.starts_with('.') {
        EntryKind::Legacy
    } else {
        EntryKind::Other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn standard_names() {
        let a = record_file_name("rsv/a");
        assert!(
            a.starts_with("v2-e3edb9ca") && a.ends_with("141d7.json"),
            "{a}"
        );
        assert_ne!(a, record_file_name("rsv_a"));
        assert!(is_record_file_name(&a));
        assert_eq!(classify(&a), EntryKind::Record);
    }

    #[test]
    fn legacy_names_collide() {
        assert_eq!(legacy_file_name("rsv/a"), "rsv_a.json");
        assert_eq!(legacy_file_name("rsv_a"), "rsv_a.json");
        assert_eq!(legacy_file_name("résa 1"), "r_sa_1.json");
        assert_eq!(classify("rsv_a.json"), EntryKind::Legacy);
    }

    #[test]
    fn classification() {
        let rec = record_file_name("x");
        assert_eq!(classify(&temp_file_name(&rec)), EntryKind::Temp);
        assert_eq!(classify("v2-abc.json.tmp"), EntryKind::Temp);
        // The official SDKs' forms: Python/TypeScript, then the Rust crate (`tempfile`).
        assert_eq!(
            classify(&format!("{rec}.4242.0a1b2c3d.tmp")),
            EntryKind::Temp
        );
        assert_eq!(classify(".tmpA1b2C3"), EntryKind::Temp);
        // Never a record, whatever it looks like.
        assert_eq!(classify(".tmp.json"), EntryKind::Other);
        assert_eq!(classify("x.tmp.json"), EntryKind::Legacy);
        assert_eq!(classify(".tmpdir-x"), EntryKind::Other);
        assert_eq!(classify(&lock_file_name(&rec)), EntryKind::Lock);
        assert_eq!(classify(LOCK_TABLE), EntryKind::Other);
        assert_eq!(
            classify(&quarantine_file_name(
                &rec,
                QuarantineKind::Unsupported,
                5,
                0
            )),
            EntryKind::Quarantined("unsupported".into())
        );
        assert_eq!(
            classify("rsv_a.corrupt"),
            EntryKind::Quarantined("corrupt".into())
        );
        assert_eq!(classify("README"), EntryKind::Other);
    }
}
