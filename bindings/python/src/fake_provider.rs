//! `cycles.testing.FakeProvider`: a thin wrapper of the bridge's `fake_provider::Provider`
//! (its config and fault-rule checks, its errors), served on the core runtime. Only syntax
//! is translated here.

use cycles_bridge::fake_provider::Provider;
use cycles_core::runtime;
use pyo3::prelude::*;

use crate::errors::{core_err, guard, to_pyerr};

/// The native half of `cycles.testing.FakeProvider`.
#[pyclass(module = "cycles._native", name = "NativeFakeProvider", frozen)]
pub struct NativeFakeProvider {
    inner: Provider,
}

#[pymethods]
impl NativeFakeProvider {
    /// Starts a fake provider on 127.0.0.1 (a `FakeConfig` as JSON; unknown keys are
    /// INVALID_ARGUMENT from the bridge).
    #[new]
    #[pyo3(signature = (config_json=None))]
    fn new(py: Python<'_>, config_json: Option<&str>) -> PyResult<Self> {
        guard(|| {
            let work = Provider::start(config_json).map_err(to_pyerr)?;
            let rt = runtime::handle().map_err(|e| core_err(&e))?;
            // On core's runtime itself, never `task::start` (see server.rs).
            let inner = py
                .detach(|| rt.block_on(work).map_err(Box::new))
                .map_err(|e| to_pyerr(*e))?;
            Ok(NativeFakeProvider { inner })
        })
    }

    #[getter]
    fn url(&self) -> String {
        self.inner.url().to_string()
    }

    #[getter]
    fn running(&self) -> bool {
        self.inner.is_running()
    }

    /// The request log (`RequestRecord[]`) as JSON.
    fn requests(&self) -> PyResult<String> {
        guard(|| self.inner.requests_json().map_err(to_pyerr))
    }

    fn reset(&self) -> PyResult<()> {
        guard(|| self.inner.reset().map_err(to_pyerr))
    }

    /// Adds a fault rule given as JSON.
    fn add_fault(&self, rule_json: &str) -> PyResult<()> {
        guard(|| self.inner.add_fault(rule_json).map_err(to_pyerr))
    }

    fn clear_faults(&self) -> PyResult<()> {
        guard(|| self.inner.clear_faults().map_err(to_pyerr))
    }

    /// Shuts the provider down (GIL released while it drains). Idempotent.
    fn stop(&self, py: Python<'_>) -> PyResult<()> {
        guard(|| {
            if let Some(work) = self.inner.stop() {
                match runtime::handle() {
                    Ok(rt) => py.detach(|| rt.block_on(work)),
                    // After fork() the runtime's threads are gone: just forget the shutdown.
                    Err(_) => std::mem::forget(work),
                }
            }
            Ok(())
        })
    }
}
