//! Core's pure heartbeat math (`cycles_core::timing`) as JSON in, JSON out, through the
//! bridge's `timing_json` (the shared vectors' encoding: integers, decimal strings beyond
//! 2^53 - 1, `"infinite"` / `"-infinite"`). Nothing here blocks; every function is
//! thread-safe (a planner is used by one thread at a time).

use std::ffi::c_char;
use std::sync::Mutex;

use cycles_bridge::timing_json::{self, FallbackJson, PrimaryJson};
use cycles_bridge::ErrorFields;

use crate::error::cycles_error;
use crate::handle::{free_box, try_out, try_ref, with_ref, with_ref_out};
use crate::panic::guard;
use crate::status::cycles_status;
use crate::strings::{arg, into_raw};

/// Writes a JSON result to `*out` (NULL first, so a failure leaves no stale pointer).
pub(crate) unsafe fn put(
    out: *mut *mut c_char,
    s: Result<String, cycles_core::Error>,
) -> Result<(), ErrorFields> {
    let out = try_out(out, "out_json")?;
    *out = into_raw(&s?);
    Ok(())
}

/// One pure timing function by name with its arguments as a JSON object (docs/c.md lists
/// them: `schedule`, `lead_floor`, `attempt_budget`, `safety_margin`, `retry_reserve`,
/// `next_delay`, `current_lead_estimate`, `retry_window`, `transient_retry_delay`,
/// `parse_retry_after`, `extend_timeout`, `min_lead_floor`, `attempt_cutoff`,
/// `classify_grant`, `cadence`, `delay_with_skips`, `is_permanent_stop_code`). `*out_json`
/// is the result as JSON (freed with `cycles_string_free`).
#[no_mangle]
pub unsafe extern "C" fn cycles_timing_call(
    name: *const c_char,
    args_json: *const c_char,
    out_json: *mut *mut c_char,
    err: *mut *mut cycles_error,
) -> cycles_status {
    guard(err, || {
        let r = timing_json::call(arg(name, "name")?, arg(args_json, "args_json")?);
        put(out_json, r)
    })
}

/// Core's normative heartbeat planner (opaque; `PrimaryPlanner`). Free with
/// `cycles_primary_planner_free`.
pub struct cycles_primary_planner(Mutex<PrimaryJson>);

/// A primary planner with `request_timeout_json` (a duration in JSON: `10000`,
/// `"infinite"`); `derive_timeout` derives the enforced timeout from short leases.
#[no_mangle]
pub unsafe extern "C" fn cycles_primary_planner_new(
    request_timeout_json: *const c_char,
    derive_timeout: bool,
    out: *mut *mut cycles_primary_planner,
    err: *mut *mut cycles_error,
) -> cycles_status {
    guard(err, || {
        let out = try_out(out, "out")?;
        let p = PrimaryJson::new(
            arg(request_timeout_json, "request_timeout_json")?,
            derive_timeout,
        )?;
        *out = Box::into_raw(Box::new(cycles_primary_planner(Mutex::new(p))));
        Ok(())
    })
}

/// One step: `{"event": "success", "at_us", "remaining_ttl_ms", "rtt_ms"}` or
/// `{"event": "failure", "at_us", "failure": {"kind": "transient" | "rate_limited" |
/// "error", "retry_after", "status", "code"}}`. `*out_json` is the decision:
/// `{"extend": {"delay_ms", "key"}}` or `{"stop": reason, ...}`.
#[no_mangle]
pub unsafe extern "C" fn cycles_primary_planner_step(
    p: *const cycles_primary_planner,
    step_json: *const c_char,
    out_json: *mut *mut c_char,
    err: *mut *mut cycles_error,
) -> cycles_status {
    guard(err, || {
        let p = try_ref(p)?;
        let step = arg(step_json, "step_json")?;
        let r = p.0.lock().unwrap_or_else(|e| e.into_inner()).step(step);
        put(out_json, r)
    })
}

/// The enforced timeout of the next extend attempt, as a JSON duration.
#[no_mangle]
pub unsafe extern "C" fn cycles_primary_planner_attempt_timeout(
    p: *const cycles_primary_planner,
    out_json: *mut *mut c_char,
    err: *mut *mut cycles_error,
) -> cycles_status {
    guard(err, || {
        let p = try_ref(p)?;
        let t =
            p.0.lock()
                .unwrap_or_else(|e| e.into_inner())
                .attempt_timeout();
        put(out_json, Ok(t))
    })
}

/// Frees a primary planner (NULL: no-op).
#[no_mangle]
pub unsafe extern "C" fn cycles_primary_planner_free(p: *mut cycles_primary_planner) {
    free_box(p);
}

/// The fallback planner for servers without `remaining_ttl_ms` (opaque; `FallbackPlanner`).
pub struct cycles_fallback_planner(Mutex<FallbackJson>);

/// A fallback planner of a reservation requested with `requested_ttl_ms`, its response
/// received at `reserve_received_us` (monotonic microseconds), expiring at `expires_at_ms`.
#[no_mangle]
pub unsafe extern "C" fn cycles_fallback_planner_new(
    requested_ttl_ms: u64,
    reserve_received_us: u64,
    expires_at_ms: i64,
    out: *mut *mut cycles_fallback_planner,
    err: *mut *mut cycles_error,
) -> cycles_status {
    guard(err, || {
        let out = try_out(out, "out")?;
        let p = FallbackJson::new(requested_ttl_ms, reserve_received_us, expires_at_ms);
        *out = Box::into_raw(Box::new(cycles_fallback_planner(Mutex::new(p))));
        Ok(())
    })
}

/// The first beat's decision JSON (`prime`: extend at once).
#[no_mangle]
pub unsafe extern "C" fn cycles_fallback_planner_first_beat(
    p: *const cycles_fallback_planner,
    prime: bool,
    out_json: *mut *mut c_char,
    err: *mut *mut cycles_error,
) -> cycles_status {
    guard(err, || {
        let d = try_ref(p)?
            .0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .first_beat(prime);
        put(out_json, Ok(d))
    })
}

/// One step (success: `{"event": "success", "at_us", "expires_at_ms"}`; failure as the
/// primary planner's); `*out_json` is the decision.
#[no_mangle]
pub unsafe extern "C" fn cycles_fallback_planner_step(
    p: *const cycles_fallback_planner,
    step_json: *const c_char,
    out_json: *mut *mut c_char,
    err: *mut *mut cycles_error,
) -> cycles_status {
    guard(err, || {
        let p = try_ref(p)?;
        let step = arg(step_json, "step_json")?;
        let r = p.0.lock().unwrap_or_else(|e| e.into_inner()).step(step);
        put(out_json, r)
    })
}

/// The current regime (`unknown`, `normal`, `grant_clamped`, `max_lead_clamped`): a static
/// string (never freed); NULL for NULL.
#[no_mangle]
pub unsafe extern "C" fn cycles_fallback_planner_regime(
    p: *const cycles_fallback_planner,
) -> *const c_char {
    with_ref(p, |p| {
        let name = p.0.lock().unwrap_or_else(|e| e.into_inner()).regime();
        match name {
            "unknown" => c"unknown".as_ptr(),
            "normal" => c"normal".as_ptr(),
            "grant_clamped" => c"grant_clamped".as_ptr(),
            _ => c"max_lead_clamped".as_ptr(),
        }
    })
}

/// The lower bound of the lead at `now_us`: true and `*out` when it fits an `int64_t`.
#[no_mangle]
pub unsafe extern "C" fn cycles_fallback_planner_lead_min_ms(
    p: *const cycles_fallback_planner,
    now_us: u64,
    out: *mut i64,
) -> bool {
    with_ref_out(p, out, |p, out| {
        let v =
            p.0.lock()
                .unwrap_or_else(|e| e.into_inner())
                .lead_min_ms(now_us);
        match i64::try_from(v) {
            Ok(v) => {
                *out = v;
                true
            }
            Err(_) => false,
        }
    })
}

/// Frees a fallback planner (NULL: no-op).
#[no_mangle]
pub unsafe extern "C" fn cycles_fallback_planner_free(p: *mut cycles_fallback_planner) {
    free_box(p);
}
