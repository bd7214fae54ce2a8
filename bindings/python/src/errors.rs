//! One error model: every `cycles_core::Error` (and every panic caught at the boundary)
//! becomes an instance of the `cycles.errors` hierarchy, built by
//! `cycles.errors._from_native` from the bridge's error fields (core's stable code and name).

use cycles_bridge::{catch_panic, ErrorFields};
use cycles_core::Error;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

fn build(py: Python<'_>, f: &ErrorFields) -> PyResult<PyErr> {
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
    // A plain dict: `_from_native` turns it into the package's `EvidenceRef` model.
    let evidence = match &f.cycles_evidence {
        Some(ev) => {
            let d = PyDict::new(py);
            d.set_item("evidence_id", &ev.evidence_id)?;
            d.set_item("cycles_evidence_url", &ev.cycles_evidence_url)?;
            Some(d)
        }
        None => None,
    };
    kw.set_item("cycles_evidence", evidence)?;
    kw.set_item("variant", f.variant)?;
    let exc = factory.call((), Some(&kw))?;
    Ok(PyErr::from_value(exc))
}

/// The Python exception for `fields` (falls back to `RuntimeError` only if the pure-Python
/// package cannot be imported, e.g. the native module loaded on its own).
pub fn to_pyerr(fields: ErrorFields) -> PyErr {
    Python::attach(|py| {
        build(py, &fields).unwrap_or_else(|_| {
            PyRuntimeError::new_err(format!("[{}] {}", fields.name, fields.message))
        })
    })
}

/// The Python exception of a core error.
pub fn core_err(e: &Error) -> PyErr {
    to_pyerr(ErrorFields::from(e))
}

/// An invalid-argument error (core kind, so Python sees code 2 / INVALID_ARGUMENT).
pub fn invalid(message: impl Into<String>) -> PyErr {
    to_pyerr(ErrorFields::invalid(message))
}

/// Runs `f`, turning a panic into `InternalError` instead of letting pyo3 raise its
/// `PanicException` (a `BaseException`). Every exported function goes through this: the
/// bridge's panic boundary (`catch_panic`), adapted to pyo3's result.
pub fn guard<T>(f: impl FnOnce() -> PyResult<T>) -> PyResult<T> {
    catch_panic(f).unwrap_or_else(|internal| Err(to_pyerr(internal)))
}
