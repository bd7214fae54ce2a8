//! `cycles.pricing`: core's pure pricing functions through the bridge's `pricing_json` (one
//! table serves every binding; `python/cycles/pricing.py` gives them Python signatures).

use pyo3::prelude::*;

use crate::errors::core_err;

/// One pricing function by name (`pricing_json::call`'s table), its arguments a JSON object;
/// the result as JSON text.
#[pyfunction]
fn pricing_call(name: &str, args_json: &str) -> PyResult<String> {
    cycles_bridge::pricing_json::call(name, args_json).map_err(|e| core_err(&e))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(pricing_call, m)?)
}
