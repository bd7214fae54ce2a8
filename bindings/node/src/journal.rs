//! `cycles-sdk/journal`: the durable settlement journal's identity partition, file names,
//! record parsing and pending listing (core's `journal`), as JSON text.

use std::path::Path;

use cycles_bridge::ErrorFields;
use cycles_core::journal::{identity, names, Journal, Record};
use napi::bindgen_prelude::Buffer;
use napi_derive::napi;
use serde_json::json;

use crate::errors::{guard, invalid, to_js};

/// The identity partition (fp16) of a server URL, API key and tenant.
#[napi]
pub fn journal_fingerprint(
    base_url: String,
    api_key: String,
    tenant: Option<String>,
) -> napi::Result<String> {
    guard(|| Ok(identity::partition(&base_url, &api_key, tenant.as_deref())))
}

/// The record file name of a reservation.
#[napi]
pub fn journal_file_name(reservation_id: String) -> napi::Result<String> {
    guard(|| Ok(names::record_file_name(&reservation_id)))
}

/// The legacy record file name of a reservation (still read).
#[napi]
pub fn journal_legacy_file_name(reservation_id: String) -> napi::Result<String> {
    guard(|| Ok(names::legacy_file_name(&reservation_id)))
}

/// One record file parsed as core parses it (JSON; bodies as their exact wire text), or
/// INVALID_ARGUMENT with `details.journal_error` `corrupt` / `unsupported`.
#[napi]
pub fn journal_parse_record(data: Buffer) -> napi::Result<String> {
    guard(|| {
        let r = Record::parse(&data).map_err(|e| to_js(ErrorFields::journal_parse(&e)))?;
        let extra: Vec<&str> = r.extra.iter().map(|(k, _)| k.as_str()).collect();
        Ok(json!({
            "version": 1,
            "reservation_id": r.reservation_id,
            "base_url": r.base_url,
            "mode": r.mode.as_str(),
            "idempotency_key": r.idempotency_key(),
            "recorded_at_ms": r.recorded_at_ms,
            "not_before_ms": r.not_before_ms,
            "commit_body": r.commit_body.as_ref().map(|b| b.get()),
            "event_fallback_body": r.event_fallback_body.as_ref().map(|b| b.get()),
            "extra_keys": extra,
        })
        .to_string())
    })
}

/// The pending records under `journal_dir` (JSON array): one identity's partition when
/// `base_url` and `api_key` are given, every partition when neither is.
#[napi]
pub fn journal_pending(
    journal_dir: String,
    base_url: Option<String>,
    api_key: Option<String>,
    tenant: Option<String>,
) -> napi::Result<String> {
    guard(|| {
        let root = Path::new(&journal_dir);
        let journals: Vec<Journal> = match (base_url, api_key) {
            (Some(url), Some(key)) => vec![Journal::new(root, &url, &key, tenant.as_deref())],
            (None, None) => Journal::partitions(root)
                .map_err(|e| invalid(format!("cannot list the journal directory: {e}")))?
                .iter()
                .map(|p| Journal::for_partition(root, p, ""))
                .collect(),
            _ => {
                return Err(invalid(
                    "journal pending: give both baseUrl and apiKey, or neither",
                ))
            }
        };
        let mut out = Vec::new();
        for j in &journals {
            let scan = j
                .scan()
                .map_err(|e| invalid(format!("cannot scan the journal partition: {e}")))?;
            for s in &scan.records {
                out.push(json!({
                    "reservation_id": s.record.reservation_id,
                    "mode": s.record.mode.as_str(),
                    "recorded_at_ms": s.record.recorded_at_ms,
                    "not_before_ms": s.record.not_before_ms,
                    "file": s.file,
                    "partition": j.partition(),
                    "legacy": s.legacy,
                }));
            }
        }
        Ok(serde_json::Value::Array(out).to_string())
    })
}
