//! One error model: every `cycles_core::Error` (and every panic caught at the boundary)
//! becomes an instance of the `cycles.errors` hierarchy, built by
//! `cycles.errors._from_native` from the core's stable code and name.

use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};

use cycles_core::Error;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// Code of a panic caught at the boundary: core's `ErrorKind::Internal` (checked by a test).
pub const INTERNAL_CODE: u32 = 4;
/// Name of a panic caught at the boundary: core's `ErrorKind::Internal`.
pub const INTERNAL_NAME: &str = "INTERNAL";

/// The fields handed to `cycles.errors._from_native`.
#[derive(Debug, Default)]
pub struct Fields {
    pub code: u32,
    pub name: String,
    pub message: String,
    pub http_status: Option<u16>,
    pub error_code: Option<String>,
    pub request_id: Option<String>,
    pub trace_id: Option<String>,
    pub retryable: bool,
    pub retry_after_raw: Option<String>,
    pub retry_after_seconds: Option<u64>,
    pub details_json: Option<String>,
    /// A binding-level refinement of the kind ("closed" for a closed client).
    pub variant: Option<&'static str>,
}

impl From<&Error> for Fields {
    fn from(e: &Error) -> Fields {
        Fields {
            code: e.code(),
            name: e.kind().name().to_string(),
            message: e.message().to_string(),
            http_status: e.http_status(),
            error_code: e.server_code().map(str::to_string),
            request_id: e.request_id().map(str::to_string),
            trace_id: e.trace_id().map(str::to_string),
            retryable: e.retryable(),
            retry_after_raw: e.retry_after().map(|r| r.raw.clone()),
            retry_after_seconds: e.retry_after().and_then(|r| r.delta_seconds),
            details_json: e.details().and_then(|d| serde_json::to_string(d).ok()),
            variant: None,
        }
    }
}

fn build(py: Python<'_>, f: &Fields) -> PyResult<PyErr> {
    let factory = py.import("cycles.errors")?.getattr("_from_native")?;
    let kw = PyDict::new(py);
    kw.set_item("code", f.code)?;
    kw.set_item("name", &f.name)?;
    kw.set_item("message", &f.message)?;
    kw.set_item("http_status", f.http_status)?;
    kw.set_item("error_code", &f.error_code)?;
    kw.set_item("request_id", &f.request_id)?;
    kw.set_item("trace_id", &f.trace_id)?;
    kw.set_item("retryable", f.retryable)?;
    kw.set_item("retry_after_raw", &f.retry_after_raw)?;
    kw.set_item("retry_after_seconds", f.retry_after_seconds)?;
    kw.set_item("details_json", &f.details_json)?;
    kw.set_item("variant", f.variant)?;
    let exc = factory.call((), Some(&kw))?;
    Ok(PyErr::from_value(exc))
}

/// The Python exception for `fields` (falls back to `RuntimeError` only if the pure-Python
/// package cannot be imported, e.g. the native module loaded on its own).
pub fn to_pyerr(fields: Fields) -> PyErr {
    Python::attach(|py| {
        build(py, &fields).unwrap_or_else(|_| {
            PyRuntimeError::new_err(format!("[{}] {}", fields.name, fields.message))
        })
    })
}

/// The Python exception of a core error.
pub fn core_err(e: &Error) -> PyErr {
    to_pyerr(Fields::from(e))
}

/// The Python exception of a panic caught at the boundary.
pub fn internal(message: impl Into<String>) -> PyErr {
    to_pyerr(Fields {
        code: INTERNAL_CODE,
        name: INTERNAL_NAME.to_string(),
        message: message.into(),
        ..Fields::default()
    })
}

/// An invalid-argument error (core kind, so Python sees code 2 / INVALID_ARGUMENT).
pub fn invalid(message: impl Into<String>) -> PyErr {
    core_err(&Error::invalid_argument(message))
}

/// A human-readable panic payload.
pub fn panic_message(payload: &(dyn Any + Send)) -> String {
    let what = payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic payload".to_string());
    format!("internal error in the cycles native module (a bug; please report it): {what}")
}

/// Runs `f`, turning a panic into `InternalError` instead of letting pyo3 raise its
/// `PanicException` (a `BaseException`). Every exported function goes through this.
pub fn guard<T>(f: impl FnOnce() -> PyResult<T>) -> PyResult<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(payload) => Err(internal(panic_message(payload.as_ref()))),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn internal_code_is_cores() {
        let k = cycles_core::ErrorKind::Internal;
        assert_eq!(
            (super::INTERNAL_CODE, super::INTERNAL_NAME),
            (k.code(), k.name())
        );
    }
}
