//! Core's journal helpers (record parsing and the pending scan) as JSON, for hosts that take
//! records as JSON text (C; Python builds dicts from the same core calls). Nothing here
//! re-implements a journal rule: naming, identity and parsing are `cycles_core::journal`'s.

use cycles_core::journal::{Place, Record};
use serde_json::{json, Value};

use crate::error::ErrorFields;

/// One record as JSON: `version`, `reservation_id`, `base_url`, `mode`, `idempotency_key`,
/// `recorded_at_ms`, `not_before_ms`, `commit_body` / `event_fallback_body` (each the body's
/// exact text as a JSON string, or null) and `extra_keys`.
pub fn record_value(r: &Record) -> Value {
    json!({
        "version": 1,
        "reservation_id": r.reservation_id,
        "base_url": r.base_url,
        "mode": r.mode.as_str(),
        "idempotency_key": r.idempotency_key(),
        "recorded_at_ms": r.recorded_at_ms,
        "not_before_ms": r.not_before_ms,
        "commit_body": r.commit_body.as_ref().map(|b| b.get()),
        "event_fallback_body": r.event_fallback_body.as_ref().map(|b| b.get()),
        "extra_keys": r.extra.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(),
    })
}

/// `Record::parse` of a record file's bytes, as [`record_value`] JSON text. A file that is
/// not a usable record is [`ErrorFields::journal_parse`] (INVALID_ARGUMENT, `details_json`
/// `{"journal_error": "corrupt" | "unsupported"}`).
pub fn parse_record(data: &[u8]) -> Result<String, ErrorFields> {
    let r = Record::parse(data).map_err(|e| ErrorFields::journal_parse(&e))?;
    Ok(record_value(&r).to_string())
}

/// The valid records of `journal` (a directory, or a `redis://` URL as `journal_url` takes
/// it: core's [`Place`]) as a JSON array of `{"reservation_id", "mode", "recorded_at_ms",
/// "not_before_ms", "file", "partition", "legacy"}`: of one identity's partition when
/// `base_url` and `api_key` are given, else of every partition. A missing directory has none;
/// a Redis that cannot be read, or a URL core refuses, is INVALID_ARGUMENT saying why.
pub fn pending(
    journal: &str,
    base_url: Option<&str>,
    api_key: Option<&str>,
    tenant: Option<&str>,
) -> Result<String, ErrorFields> {
    let identity = match (base_url, api_key) {
        (Some(url), Some(key)) => Some((url, key, tenant)),
        (None, None) => None,
        _ => {
            return Err(ErrorFields::invalid(
                "journal pending: give both base_url and api_key, or neither",
            ))
        }
    };
    let place = Place::parse(journal).map_err(ErrorFields::invalid)?;
    let found = place
        .pending(identity)
        .map_err(|e| ErrorFields::invalid(format!("cannot list the journal: {e}")))?;
    let out: Vec<Value> = found
        .iter()
        .map(|p| {
            json!({
                "reservation_id": p.record.reservation_id,
                "mode": p.record.mode.as_str(),
                "recorded_at_ms": p.record.recorded_at_ms,
                "not_before_ms": p.record.not_before_ms,
                "file": p.file,
                "partition": p.partition,
                "legacy": p.legacy,
            })
        })
        .collect();
    Ok(Value::Array(out).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn corrupt_records_carry_their_kind_and_missing_dirs_are_empty() {
        let e = parse_record(b"{").unwrap_err();
        assert_eq!(e.name, "INVALID_ARGUMENT");
        assert_eq!(
            e.details_json.as_deref(),
            Some(r#"{"journal_error":"corrupt"}"#)
        );
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing");
        assert_eq!(
            pending(missing.to_str().unwrap(), None, None, None).unwrap(),
            "[]"
        );
        assert!(pending("x", Some("http://h"), None, None).is_err());
    }
}
