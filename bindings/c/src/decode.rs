//! `cycles_decode_captured`: one captured HTTP response through core's own response path
//! (the bridge's `decode_captured`), without a network. The reference-server corpus runs
//! through it in C; users can check their own captures the same way. Pure and thread-safe.

use std::ffi::c_char;

use cycles_bridge::{decode_captured, headers_from_json};

use crate::error::cycles_error;
use crate::handle::{bytes, clear_opt, set_opt};
use crate::panic::guard;
use crate::status::cycles_status;
use crate::strings::{into_raw, opt_arg};

/// Decodes one captured response as the client would (no request is sent): `operation` is
/// the spec's operationId (`"getReservation"`; NULL: the response matched no operation, only
/// valid for a non-2xx status), `status` the HTTP status, `headers_json` a JSON object of
/// header names to string values (NULL: none), `body`/`len` the body bytes (`body` may be
/// NULL when `len` is 0). A schema-valid success is `CYCLES_OK` with `*out_json` (NULL: not
/// wanted) as `cycles_client_call`'s (`rtt_us` 0; freed with `cycles_string_free`); any other
/// response is the error the client would return, with every field (`cycles_error_*`).
/// Any thread; does not block.
#[no_mangle]
pub unsafe extern "C" fn cycles_decode_captured(
    operation: *const c_char,
    status: u16,
    headers_json: *const c_char,
    body: *const u8,
    len: usize,
    out_json: *mut *mut c_char,
    err: *mut *mut cycles_error,
) -> cycles_status {
    clear_opt(out_json);
    guard(err, || {
        let bytes = bytes(body, len, "body")?;
        let owned = headers_from_json(opt_arg(headers_json, "headers_json")?, "headers_json")?;
        let pairs: Vec<(&str, &str)> = owned
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let operation = opt_arg(operation, "operation")?;
        let reply = decode_captured(operation, status, &pairs, bytes)?;
        set_opt(out_json, || into_raw(&reply.to_json()));
        Ok(())
    })
}
