//! `cycles_error`: one failure's details (the bridge's `ErrorFields`), handed to the caller
//! through a `cycles_error **err` argument. No globals and no thread-locals: the error
//! belongs to the caller, who reads it from any thread and frees it once.

use std::ffi::{c_char, CString};
use std::ptr;

use cycles_bridge::ErrorFields;

use crate::handle::{free_box, set_opt, try_ref, with_ref, with_ref_out};
use crate::panic::or_default;
use crate::status::{cycles_status, of_code};
use crate::strings::c_string;

/// The details of one failure (opaque). Created by a failing call when its `err` argument is
/// not NULL; freed with `cycles_error_free`. Immutable: safe to read from any thread.
pub struct cycles_error {
    fields: ErrorFields,
    name: CString,
    message: CString,
    error_code: Option<CString>,
    request_id: Option<CString>,
    trace_id: Option<CString>,
    retry_after_raw: Option<CString>,
    details_json: Option<CString>,
    evidence_id: Option<CString>,
    evidence_url: Option<CString>,
    variant: Option<CString>,
    json: CString,
}

impl cycles_error {
    /// The C error of `fields`.
    pub fn new(fields: ErrorFields) -> cycles_error {
        let opt = |s: &Option<String>| s.as_deref().map(c_string);
        cycles_error {
            name: c_string(&fields.name),
            message: c_string(&fields.message),
            error_code: opt(&fields.error_code),
            request_id: opt(&fields.request_id),
            trace_id: opt(&fields.trace_id),
            retry_after_raw: opt(&fields.retry_after_raw),
            details_json: opt(&fields.details_json),
            evidence_id: fields
                .cycles_evidence
                .as_ref()
                .map(|ev| c_string(&ev.evidence_id)),
            evidence_url: fields
                .cycles_evidence
                .as_ref()
                .map(|ev| c_string(&ev.cycles_evidence_url)),
            variant: fields.variant.map(c_string),
            json: c_string(&fields.to_json().to_string()),
            fields,
        }
    }
}

/// Writes `fields` to `*err` (when `err` is not NULL) and returns its status.
///
/// # Safety
/// `err` is NULL or valid for a write.
pub unsafe fn report(err: *mut *mut cycles_error, fields: ErrorFields) -> cycles_status {
    let status = of_code(fields.code);
    set_opt(err, || Box::into_raw(Box::new(cycles_error::new(fields))));
    status
}

fn text(s: &Option<CString>) -> *const c_char {
    s.as_ref().map_or(ptr::null(), |c| c.as_ptr())
}

/// The status of the failure (core's stable code); `CYCLES_INVALID_ARGUMENT` for NULL.
///
/// # Safety
/// `e` is NULL or an error from this library, not yet freed.
#[no_mangle]
pub unsafe extern "C" fn cycles_error_status(e: *const cycles_error) -> cycles_status {
    match try_ref(e) {
        Ok(e) => or_default(|| of_code(e.fields.code)),
        Err(_) => cycles_status::CYCLES_INVALID_ARGUMENT,
    }
}

/// Core's stable numeric code (the `cycles_status` value); 0 for NULL.
///
/// # Safety
/// As `cycles_error_status`.
#[no_mangle]
pub unsafe extern "C" fn cycles_error_code(e: *const cycles_error) -> u32 {
    with_ref(e, |e| e.fields.code)
}

/// Core's stable kind name (`"NOT_FOUND"`). Owned by the error: valid until
/// `cycles_error_free`. NULL for a NULL error.
///
/// # Safety
/// As `cycles_error_status`.
#[no_mangle]
pub unsafe extern "C" fn cycles_error_name(e: *const cycles_error) -> *const c_char {
    with_ref(e, |e| e.name.as_ptr())
}

/// The human-readable message (never contains the API key). Owned by the error.
///
/// # Safety
/// As `cycles_error_status`.
#[no_mangle]
pub unsafe extern "C" fn cycles_error_message(e: *const cycles_error) -> *const c_char {
    with_ref(e, |e| e.message.as_ptr())
}

/// The HTTP status, or 0 when no response was received.
///
/// # Safety
/// As `cycles_error_status`.
#[no_mangle]
pub unsafe extern "C" fn cycles_error_http_status(e: *const cycles_error) -> u16 {
    with_ref(e, |e| e.fields.http_status.unwrap_or(0))
}

/// The server's `error` code (`"BUDGET_EXCEEDED"`), or NULL. Owned by the error.
///
/// # Safety
/// As `cycles_error_status`.
#[no_mangle]
pub unsafe extern "C" fn cycles_error_server_code(e: *const cycles_error) -> *const c_char {
    with_ref(e, |e| text(&e.error_code))
}

/// The server's `X-Request-Id`, or NULL. Owned by the error.
///
/// # Safety
/// As `cycles_error_status`.
#[no_mangle]
pub unsafe extern "C" fn cycles_error_request_id(e: *const cycles_error) -> *const c_char {
    with_ref(e, |e| text(&e.request_id))
}

/// The server's trace id, or NULL. Owned by the error.
///
/// # Safety
/// As `cycles_error_status`.
#[no_mangle]
pub unsafe extern "C" fn cycles_error_trace_id(e: *const cycles_error) -> *const c_char {
    with_ref(e, |e| text(&e.trace_id))
}

/// Whether core classifies the failure as retryable.
///
/// # Safety
/// As `cycles_error_status`.
#[no_mangle]
pub unsafe extern "C" fn cycles_error_retryable(e: *const cycles_error) -> bool {
    with_ref(e, |e| e.fields.retryable)
}

/// `Retry-After` exactly as received, or NULL. Owned by the error.
///
/// # Safety
/// As `cycles_error_status`.
#[no_mangle]
pub unsafe extern "C" fn cycles_error_retry_after_raw(e: *const cycles_error) -> *const c_char {
    with_ref(e, |e| text(&e.retry_after_raw))
}

/// `Retry-After` in seconds when it was a delta: returns true and writes `*out_seconds`;
/// false (nothing written) otherwise or for NULL arguments.
///
/// # Safety
/// `e` as `cycles_error_status`; `out_seconds` NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn cycles_error_retry_after_seconds(
    e: *const cycles_error,
    out_seconds: *mut u64,
) -> bool {
    with_ref_out(e, out_seconds, |e, out| {
        match e.fields.retry_after_seconds {
            Some(s) => {
                *out = s;
                true
            }
            None => false,
        }
    })
}

/// The server's `details` object as JSON text, or NULL. Owned by the error.
///
/// # Safety
/// As `cycles_error_status`.
#[no_mangle]
pub unsafe extern "C" fn cycles_error_details_json(e: *const cycles_error) -> *const c_char {
    with_ref(e, |e| text(&e.details_json))
}

/// The `evidence_id` (the signed envelope's sha256 content hash) of the server's
/// `cycles_evidence` reference on the error body, or NULL when it sent none (a live
/// reservation's 409 denial carries one). The `get_evidence` operation with this id returns
/// the envelope. Owned by the error.
///
/// # Safety
/// As `cycles_error_status`.
#[no_mangle]
pub unsafe extern "C" fn cycles_error_evidence_id(e: *const cycles_error) -> *const c_char {
    with_ref(e, |e| text(&e.evidence_id))
}

/// The `cycles_evidence_url` of the server's `cycles_evidence` reference on the error body,
/// or NULL when it sent none (exactly when `cycles_error_evidence_id` is NULL). Owned by the
/// error.
///
/// # Safety
/// As `cycles_error_status`.
#[no_mangle]
pub unsafe extern "C" fn cycles_error_evidence_url(e: *const cycles_error) -> *const c_char {
    with_ref(e, |e| text(&e.evidence_url))
}

/// A binding-level refinement of the kind (the bridge's `error_variants()`: `"closed"`, a call
/// on a closed client; `"call_not_sent"`, a provider call an integration refused), or NULL.
/// Owned by the error.
///
/// # Safety
/// As `cycles_error_status`.
#[no_mangle]
pub unsafe extern "C" fn cycles_error_variant(e: *const cycles_error) -> *const c_char {
    with_ref(e, |e| text(&e.variant))
}

/// Every field as one JSON object (docs/bindings.md, "Errors"). Owned by the error.
///
/// # Safety
/// As `cycles_error_status`.
#[no_mangle]
pub unsafe extern "C" fn cycles_error_json(e: *const cycles_error) -> *const c_char {
    with_ref(e, |e| e.json.as_ptr())
}

/// Frees an error. NULL is a no-op. Any thread; once per error.
///
/// # Safety
/// `e` is NULL or an error from this library, not yet freed.
#[no_mangle]
pub unsafe extern "C" fn cycles_error_free(e: *mut cycles_error) {
    free_box(e);
}
