//! `cycles.pricing`: core's pure pricing functions through the bridge's `pricing_json` (one
//! table serves every binding; `python/cycles/pricing.py` gives them Python signatures), and
//! the bridge's `ProviderCall`, the per-call meter the integrations hold.

use std::sync::Arc;

use cycles_bridge::provider_call::ProviderCall;
use cycles_core::pricing::{Pricing, Usage};
use cycles_core::{Amount, Unit};
use pyo3::prelude::*;

use crate::errors::core_err;
use crate::lifecycle::NativeActive;

/// One pricing function by name (`pricing_json::call`'s table), its arguments a JSON object;
/// the result as JSON text.
#[pyfunction]
fn pricing_call(name: &str, args_json: &str) -> PyResult<String> {
    cycles_bridge::pricing_json::call(name, args_json).map_err(|e| core_err(&e))
}

/// A pricing parsed once (`pricing_json::parse_pricing`): a guard prices each of its calls
/// with it instead of sending the table, to be parsed again, on every crossing.
#[pyclass(frozen, module = "cycles._native")]
pub struct ParsedPricing {
    inner: Arc<Pricing>,
}

#[pymethods]
impl ParsedPricing {
    #[new]
    fn new(json: &str) -> PyResult<Self> {
        let inner = cycles_bridge::pricing_json::parse_pricing(json).map_err(|e| core_err(&e))?;
        Ok(Self {
            inner: Arc::new(inner),
        })
    }

    /// `pricing_call` with this pricing (the arguments carry none).
    fn call(&self, name: &str, args_json: &str) -> PyResult<String> {
        cycles_bridge::pricing_json::call_with(name, Some(&self.inner), args_json)
            .map_err(|e| core_err(&e))
    }

    /// The unit its amounts are in.
    #[getter]
    fn unit(&self) -> String {
        self.inner.unit().as_str().to_string()
    }
}

/// One guarded provider call (the bridge's `ProviderCall`): its estimate, the usage of each
/// body folded and reported to the running action, settled by `NativeActive.finish_call`.
#[pyclass(frozen, module = "cycles._native", name = "NativeProviderCall")]
pub struct NativeProviderCall {
    pub(crate) inner: ProviderCall,
}

#[pymethods]
impl NativeProviderCall {
    /// A call estimated by core from its request body (JSON text); `text_tokens_json` a
    /// tokenizer's counts of the prompt's texts (JSON), or `None`.
    #[staticmethod]
    #[pyo3(signature = (pricing, api, model, request_json, default_output_bound=None, text_tokens_json=None))]
    fn for_request(
        pricing: &ParsedPricing,
        api: &str,
        model: &str,
        request_json: &str,
        default_output_bound: Option<u64>,
        text_tokens_json: Option<&str>,
    ) -> PyResult<Self> {
        ProviderCall::for_request(
            pricing.inner.clone(),
            api,
            model,
            request_json,
            default_output_bound,
            text_tokens_json,
        )
        .map(|inner| Self { inner })
        .map_err(|e| core_err(&e))
    }

    /// A call reserving the caller's own `estimate`, in `unit` (default: the pricing's; core
    /// refuses another).
    #[staticmethod]
    #[pyo3(signature = (pricing, api, model, estimate, unit=None))]
    fn with_estimate(
        pricing: &ParsedPricing,
        api: &str,
        model: &str,
        estimate: i64,
        unit: Option<&str>,
    ) -> PyResult<Self> {
        let unit = unit.map_or_else(|| pricing.inner.unit(), Unit::from);
        let amount = Amount::new(unit, estimate);
        ProviderCall::with_estimate(pricing.inner.clone(), api, model, amount)
            .map(|inner| Self { inner })
            .map_err(|e| core_err(&e))
    }

    /// Reads the bodies and events that follow as `api`'s.
    fn read_as(&self, api: &str) -> PyResult<()> {
        self.inner.read_as(api).map_err(|e| core_err(&e))
    }

    /// The amount to reserve, in the pricing's unit.
    #[getter]
    fn estimate(&self) -> i64 {
        self.inner.estimate().amount
    }

    /// Folds one body or stream event (JSON text) and reports a grown actual to `active`;
    /// whether a body said the call failed so far.
    fn observe(&self, body_json: &str, active: &NativeActive) -> PyResult<bool> {
        self.inner
            .observe(body_json, active.inner.usage())
            .map_err(|e| core_err(&e))
    }

    /// Takes the counts as the usage so far and reports a changed actual to `active`.
    #[pyo3(signature = (input_tokens, output_tokens, active))]
    fn take_usage(
        &self,
        input_tokens: Option<u64>,
        output_tokens: Option<u64>,
        active: &NativeActive,
    ) -> PyResult<()> {
        let usage = Usage {
            input_tokens,
            output_tokens,
        };
        self.inner
            .take_usage(usage, active.inner.usage())
            .map_err(|e| core_err(&e))
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(pricing_call, m)?)?;
    m.add_class::<ParsedPricing>()?;
    m.add_class::<NativeProviderCall>()
}
