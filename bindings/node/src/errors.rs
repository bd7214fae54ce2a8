//! One error model: every failure crosses to JavaScript as a plain `Error` whose message is
//! [`MARKER`] followed by the bridge's `ErrorFields` JSON; `node/src/errors.ts` rebuilds the
//! `CyclesError` subclass from it (napi's own error keeps only a `Status` string).

use cycles_bridge::{catch_panic, ErrorFields};
use napi::{Error, Status};

/// Prefix of every error message this module produces (the TypeScript layer parses the rest).
pub const MARKER: &str = "CYCLES_ERROR:";

/// The JavaScript error of `fields`.
pub fn to_js(fields: ErrorFields) -> Error {
    Error::new(
        Status::GenericFailure,
        format!("{MARKER}{}", fields.to_json()),
    )
}

/// The JavaScript error of a core error.
pub fn core(e: cycles_core::Error) -> Error {
    to_js(ErrorFields::from(e))
}

/// An INVALID_ARGUMENT error (core's kind).
pub fn invalid(message: impl Into<String>) -> Error {
    to_js(ErrorFields::invalid(message))
}

/// Runs `f`, turning a panic into an INTERNAL error: a panic in a sync export would otherwise
/// abort the process. Every export goes through this: the bridge's panic boundary
/// (`catch_panic`), adapted to napi's result.
pub fn guard<T>(f: impl FnOnce() -> napi::Result<T>) -> napi::Result<T> {
    catch_panic(f).unwrap_or_else(|internal| Err(to_js(internal)))
}
