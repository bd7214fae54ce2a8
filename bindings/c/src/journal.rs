//! The journal helpers of `cycles_core::journal` (file names, identity fingerprint, record
//! parsing, the pending list), unchanged. Thread-safe; only `cycles_journal_pending` touches
//! the file system (it reads).

use std::ffi::c_char;

use cycles_bridge::journal_json;
use cycles_bridge::ErrorFields;
use cycles_core::journal::{identity, names};

use crate::error::cycles_error;
use crate::handle::{bytes, try_out};
use crate::panic::guard;
use crate::status::cycles_status;
use crate::strings::{arg, into_raw, opt_arg};

unsafe fn put(out: *mut *mut c_char, s: Result<String, ErrorFields>) -> Result<(), ErrorFields> {
    let out = try_out(out, "out")?;
    *out = into_raw(&s?);
    Ok(())
}

/// The identity partition (`fp16`, 16 hex digits) of (base URL, API key, tenant; NULL
/// tenant: none): the journal subdirectory of that identity. `*out` is freed by the caller.
#[no_mangle]
pub unsafe extern "C" fn cycles_journal_fingerprint(
    base_url: *const c_char,
    api_key: *const c_char,
    tenant: *const c_char,
    out: *mut *mut c_char,
    err: *mut *mut cycles_error,
) -> cycles_status {
    guard(err, || {
        let fp = identity::partition(
            arg(base_url, "base_url")?,
            arg(api_key, "api_key")?,
            opt_arg(tenant, "tenant")?,
        );
        put(out, Ok(fp))
    })
}

/// The record file name (v2) of a reservation. `*out` is freed by the caller.
#[no_mangle]
pub unsafe extern "C" fn cycles_journal_file_name(
    reservation_id: *const c_char,
    out: *mut *mut c_char,
    err: *mut *mut cycles_error,
) -> cycles_status {
    guard(err, || {
        put(
            out,
            Ok(names::record_file_name(arg(
                reservation_id,
                "reservation_id",
            )?)),
        )
    })
}

/// The legacy (pre-v2) record file name of a reservation. `*out` is freed by the caller.
#[no_mangle]
pub unsafe extern "C" fn cycles_journal_legacy_file_name(
    reservation_id: *const c_char,
    out: *mut *mut c_char,
    err: *mut *mut cycles_error,
) -> cycles_status {
    guard(err, || {
        put(
            out,
            Ok(names::legacy_file_name(arg(
                reservation_id,
                "reservation_id",
            )?)),
        )
    })
}

/// Parses a record file's `len` bytes: `*out_json` is `{"version", "reservation_id",
/// "base_url", "mode", "idempotency_key", "recorded_at_ms", "not_before_ms", "commit_body",
/// "event_fallback_body", "extra_keys"}` (each body its exact text as a JSON string). A file
/// that is not a usable record is `CYCLES_INVALID_ARGUMENT` whose details are
/// `{"journal_error":"corrupt"}` or `{"journal_error":"unsupported"}`.
#[no_mangle]
pub unsafe extern "C" fn cycles_journal_parse_record(
    data: *const u8,
    len: usize,
    out_json: *mut *mut c_char,
    err: *mut *mut cycles_error,
) -> cycles_status {
    guard(err, || {
        put(
            out_json,
            journal_json::parse_record(bytes(data, len, "data")?),
        )
    })
}

/// The valid pending records in `journal_dir` (a directory, or a `redis://` URL as the
/// `journal_url` option takes it) as a JSON array (`reservation_id`, `mode`, `recorded_at_ms`,
/// `not_before_ms`, `file`, `partition`, `legacy`): of one identity when `base_url` and
/// `api_key` are given, of every partition when both are NULL.
#[no_mangle]
pub unsafe extern "C" fn cycles_journal_pending(
    journal_dir: *const c_char,
    base_url: *const c_char,
    api_key: *const c_char,
    tenant: *const c_char,
    out_json: *mut *mut c_char,
    err: *mut *mut cycles_error,
) -> cycles_status {
    guard(err, || {
        let r = journal_json::pending(
            arg(journal_dir, "journal_dir")?,
            opt_arg(base_url, "base_url")?,
            opt_arg(api_key, "api_key")?,
            opt_arg(tenant, "tenant")?,
        );
        put(out_json, r)
    })
}
