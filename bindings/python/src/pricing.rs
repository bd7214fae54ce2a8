//! `cycles.pricing`: core's pure pricing functions through the bridge's `pricing_json` (one
//! table serves every binding; `python/cycles/pricing.py` gives them Python signatures).

use cycles_core::pricing::Pricing;
use pyo3::prelude::*;

use crate::errors::core_err;

/// One pricing function by name (`pricing_json::call`'s table), its arguments a JSON object;
/// the result as JSON text.
#[pyfunction]
fn pricing_call(name: &str, args_json: &str) -> PyResult<String> {
    cycles_bridge::pricing_json::call(name, args_json).map_err(|e| core_err(&e))
}

/// A pricing parsed once (`pricing_json::parse_pricing`): a guard prices each of its calls
/// with it instead of sending the table, to be parsed again, on every crossing.
#[pyclass(frozen, module = "cycles._native")]
struct ParsedPricing {
    inner: Pricing,
}

#[pymethods]
impl ParsedPricing {
    #[new]
    fn new(json: &str) -> PyResult<Self> {
        let inner = cycles_bridge::pricing_json::parse_pricing(json).map_err(|e| core_err(&e))?;
        Ok(Self { inner })
    }

    /// `pricing_call` with this pricing (the arguments carry none).
    fn call(&self, name: &str, args_json: &str) -> PyResult<String> {
        cycles_bridge::pricing_json::call_with(name, Some(&self.inner), args_json)
            .map_err(|e| core_err(&e))
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(pricing_call, m)?)?;
    m.add_class::<ParsedPricing>()
}
