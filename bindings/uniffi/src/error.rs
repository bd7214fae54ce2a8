//! The one error every export raises: the bridge's `ErrorFields`, field for field (Kotlin:
//! `CyclesNativeException.Failure`, Swift: `CyclesNativeError.Failure`; the idiomatic layers
//! turn it into their `CyclesException`). Panics never cross: [`ffi`] runs a synchronous
//! export inside the bridge's `catch`, and async work is joined on core's runtime
//! ([`crate::work`]), both of which turn a panic into INTERNAL.

use std::fmt;

use cycles_bridge::{catch, error_codes as bridge_error_codes, ErrorFields};

/// An error of the cycles core, as the bridge hands it to every host (docs/bindings.md,
/// "Errors").
#[derive(Debug, uniffi::Error)]
pub enum CyclesNativeError {
    /// The only variant: one shape for every kind; `name` and `code` say which kind.
    Failure {
        /// Core's stable numeric code of the kind.
        code: u32,
        /// Core's stable name of the kind (`INVALID_ARGUMENT`, `BUDGET_EXCEEDED`, ...).
        name: String,
        /// The message (the API key already redacted by core).
        reason: String,
        /// The HTTP status, when a response was received.
        http_status: Option<u16>,
        /// The server's `error` code, when its body had one.
        error_code: Option<String>,
        /// The server's request id.
        request_id: Option<String>,
        /// The server's trace id.
        trace_id: Option<String>,
        /// Whether core classifies the failure as retryable.
        retryable: bool,
        /// `Retry-After` exactly as received.
        retry_after_raw: Option<String>,
        /// `Retry-After` as delta seconds, when it was one.
        retry_after_seconds: Option<u64>,
        /// The server's `details` object as JSON text.
        details_json: Option<String>,
        /// The error body's evidence reference as JSON text (`{"evidence_id", ...}`).
        evidence_json: Option<String>,
        /// A binding-level refinement: `closed` for a closed client.
        variant: Option<String>,
    },
}

impl fmt::Display for CyclesNativeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let CyclesNativeError::Failure { name, reason, .. } = self;
        write!(f, "{name}: {reason}")
    }
}

impl std::error::Error for CyclesNativeError {}

impl From<ErrorFields> for CyclesNativeError {
    fn from(e: ErrorFields) -> CyclesNativeError {
        CyclesNativeError::Failure {
            code: e.code,
            name: e.name,
            reason: e.message,
            http_status: e.http_status,
            error_code: e.error_code,
            request_id: e.request_id,
            trace_id: e.trace_id,
            retryable: e.retryable,
            retry_after_raw: e.retry_after_raw,
            retry_after_seconds: e.retry_after_seconds,
            details_json: e.details_json,
            evidence_json: e
                .cycles_evidence
                .and_then(|r| serde_json::to_string(&r).ok()),
            variant: e.variant.map(str::to_string),
        }
    }
}

impl From<cycles_core::Error> for CyclesNativeError {
    fn from(e: cycles_core::Error) -> CyclesNativeError {
        ErrorFields::from(e).into()
    }
}

/// What an export returns.
pub type Result<T> = std::result::Result<T, CyclesNativeError>;

/// Runs a synchronous export's body inside the bridge's panic boundary.
pub fn ffi<T>(f: impl FnOnce() -> std::result::Result<T, ErrorFields>) -> Result<T> {
    catch(f).map_err(CyclesNativeError::from)
}

/// One kind of core's error table.
#[derive(Debug, uniffi::Record)]
pub struct ErrorCode {
    /// The stable name.
    pub name: String,
    /// The stable numeric code.
    pub code: u32,
}

/// Core's error table, in core's order: hosts build their error types from it.
#[uniffi::export]
pub fn error_codes() -> Vec<ErrorCode> {
    bridge_error_codes()
        .into_iter()
        .map(|(name, code)| ErrorCode {
            name: name.to_string(),
            code,
        })
        .collect()
}
