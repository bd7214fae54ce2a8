//! Core's pure pricing functions (`cycles_core::pricing`) as JSON in, JSON out, through the
//! bridge's `pricing_json` (the shared vectors' encoding: `conformance/vectors/pricing.json`).
//! Nothing here blocks; every function is thread-safe.

use std::ffi::c_char;

use cycles_bridge::pricing_json;

use crate::error::cycles_error;
use crate::panic::guard;
use crate::status::cycles_status;
use crate::strings::arg;
use crate::timing::put;

/// One pure pricing function by name with its arguments as a JSON object (docs/c.md lists
/// them: `text_tokens`, `prompt_texts`, `prompt_tokens`, `output_bound`, `lookup_price`,
/// `cost`, `estimate`, `estimate_request`, `actual`, `settlement`, `lower_bound`,
/// `tool_allowed`, `filter_tools`, `plan_caps`, `usage`, `stream_request`, `call_failed`,
/// `observe`).
/// `*out_json` is the result as JSON (freed with `cycles_string_free`); a bad argument is
/// `CYCLES_INVALID_ARGUMENT`.
#[no_mangle]
pub unsafe extern "C" fn cycles_pricing_call(
    name: *const c_char,
    args_json: *const c_char,
    out_json: *mut *mut c_char,
    err: *mut *mut cycles_error,
) -> cycles_status {
    guard(err, || {
        let r = pricing_json::call(arg(name, "name")?, arg(args_json, "args_json")?);
        put(out_json, r)
    })
}
