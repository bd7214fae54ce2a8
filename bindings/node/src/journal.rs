//! `cycles-sdk/journal`: the durable settlement journal's identity partition, file names,
//! record parsing and pending listing (core's `journal`, through the bridge's `journal_json`),
//! as JSON text.

use cycles_bridge::journal_json;
use cycles_core::journal::{identity, names};
use napi::bindgen_prelude::Buffer;
use napi_derive::napi;

use crate::errors::{guard, to_js};

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

/// One record file parsed as core parses it (the bridge's `journal_json` record: bodies as
/// their exact wire text), or INVALID_ARGUMENT with `details.journal_error` `corrupt` /
/// `unsupported`.
#[napi]
pub fn journal_parse_record(data: Buffer) -> napi::Result<String> {
    guard(|| journal_json::parse_record(&data).map_err(to_js))
}

/// The pending records under `journal_dir` (the bridge's `journal_json::pending` JSON array):
/// one identity's partition when `base_url` and `api_key` are given, every partition when
/// neither is.
#[napi]
pub fn journal_pending(
    journal_dir: String,
    base_url: Option<String>,
    api_key: Option<String>,
    tenant: Option<String>,
) -> napi::Result<String> {
    guard(|| {
        journal_json::pending(
            &journal_dir,
            base_url.as_deref(),
            api_key.as_deref(),
            tenant.as_deref(),
        )
        .map_err(to_js)
    })
}
