//! `cycles.journal`: the core's journal naming, identity partition, record parsing and scan,
//! unchanged (`cycles_core::journal`). Nothing here re-implements a rule.
//!
//! A record crosses as a dict; its bodies cross as their exact JSON text. A file that is not a
//! usable record raises `InvalidArgumentError` whose `details` is
//! `{"journal_error": "corrupt" | "unsupported"}` (core's `ParseError`).

use cycles_bridge::ErrorFields;
use cycles_core::journal::{identity, names, ParseError, Place, Record};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::errors::{guard, to_pyerr};

fn parse_err(e: &ParseError) -> PyErr {
    to_pyerr(ErrorFields::journal_parse(e))
}

fn record_dict<'py>(py: Python<'py>, r: &Record) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("version", 1u32)?;
    d.set_item("reservation_id", &r.reservation_id)?;
    d.set_item("base_url", r.base_url.as_deref())?;
    d.set_item("mode", r.mode.as_str())?;
    d.set_item("idempotency_key", r.idempotency_key())?;
    d.set_item("recorded_at_ms", r.recorded_at_ms)?;
    d.set_item("not_before_ms", r.not_before_ms)?;
    d.set_item("commit_body", r.commit_body.as_ref().map(|b| b.get()))?;
    d.set_item(
        "event_fallback_body",
        r.event_fallback_body.as_ref().map(|b| b.get()),
    )?;
    let extra: Vec<&str> = r.extra.iter().map(|(k, _)| k.as_str()).collect();
    d.set_item("extra_keys", extra)?;
    Ok(d)
}

/// `identity::partition`: the identity partition (`fp16`) of (base URL, API key, tenant).
#[pyfunction]
#[pyo3(signature = (base_url, api_key, tenant=None))]
fn journal_fingerprint(
    py: Python<'_>,
    base_url: &str,
    api_key: &str,
    tenant: Option<&str>,
) -> PyResult<String> {
    guard(|| Ok(py.detach(|| identity::partition(base_url, api_key, tenant))))
}

/// `names::record_file_name`: the standard (v2) record file name of a reservation.
#[pyfunction]
fn journal_file_name(reservation_id: &str) -> PyResult<String> {
    guard(|| Ok(names::record_file_name(reservation_id)))
}

/// `names::legacy_file_name`: the legacy (pre-v2) record file name of a reservation.
#[pyfunction]
fn journal_legacy_file_name(reservation_id: &str) -> PyResult<String> {
    guard(|| Ok(names::legacy_file_name(reservation_id)))
}

/// `Record::parse` of a record file's bytes.
#[pyfunction]
fn journal_parse_record<'py>(py: Python<'py>, data: &[u8]) -> PyResult<Bound<'py, PyDict>> {
    guard(|| {
        let r = Record::parse(data).map_err(|e| parse_err(&e))?;
        record_dict(py, &r)
    })
}

/// The valid records of `journal` (a directory, or a `redis://` URL: core's `Place::pending`):
/// of one identity's partition when `base_url` and `api_key` are given, else of every partition.
#[pyfunction]
#[pyo3(signature = (journal, base_url=None, api_key=None, tenant=None))]
fn journal_pending<'py>(
    py: Python<'py>,
    journal: &str,
    base_url: Option<&str>,
    api_key: Option<&str>,
    tenant: Option<&str>,
) -> PyResult<Vec<Bound<'py, PyDict>>> {
    guard(|| {
        let identity = match (base_url, api_key) {
            (Some(url), Some(key)) => Some((url, key, tenant)),
            (None, None) => None,
            _ => {
                return Err(crate::errors::invalid(
                    "journal_pending: give both base_url and api_key, or neither",
                ))
            }
        };
        let place = Place::parse(journal).map_err(crate::errors::invalid)?;
        let found = py
            .detach(|| place.pending(identity))
            .map_err(|e| crate::errors::invalid(format!("cannot list the journal: {e}")))?;
        let mut out = Vec::new();
        for p in &found {
            let d = PyDict::new(py);
            d.set_item("reservation_id", &p.record.reservation_id)?;
            d.set_item("mode", p.record.mode.as_str())?;
            d.set_item("recorded_at_ms", p.record.recorded_at_ms)?;
            d.set_item("not_before_ms", p.record.not_before_ms)?;
            d.set_item("file", &p.file)?;
            d.set_item("partition", &p.partition)?;
            d.set_item("legacy", p.legacy)?;
            out.push(d);
        }
        Ok(out)
    })
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(journal_fingerprint, m)?)?;
    m.add_function(wrap_pyfunction!(journal_file_name, m)?)?;
    m.add_function(wrap_pyfunction!(journal_legacy_file_name, m)?)?;
    m.add_function(wrap_pyfunction!(journal_parse_record, m)?)?;
    m.add_function(wrap_pyfunction!(journal_pending, m)?)?;
    Ok(())
}
