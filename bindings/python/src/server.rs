//! `cycles.testing.LocalServer`: a thin wrapper of the bridge's `server::Server` (the one
//! local-server wrapper every host shares: its config and fault-rule checks, its errors),
//! served on the core runtime. Only syntax is translated here.

use cycles_bridge::server::Server;
use cycles_core::runtime;
use pyo3::prelude::*;

use crate::errors::{core_err, guard, to_pyerr};

/// The native half of `cycles.testing.LocalServer`.
#[pyclass(module = "cycles._native", name = "NativeLocalServer", frozen)]
pub struct NativeLocalServer {
    inner: Server,
}

#[pymethods]
impl NativeLocalServer {
    /// Starts a server on 127.0.0.1 (ephemeral port unless `bind` is set in the config JSON,
    /// a `ServerConfig`; omitted fields take their defaults, unknown ones are
    /// INVALID_ARGUMENT from the bridge).
    #[new]
    #[pyo3(signature = (config_json=None))]
    fn new(py: Python<'_>, config_json: Option<&str>) -> PyResult<Self> {
        guard(|| {
            let work = Server::start(config_json).map_err(to_pyerr)?;
            let rt = runtime::handle().map_err(|e| core_err(&e))?;
            // On core's runtime itself, never `task::start`: that may drive the work on this
            // thread, and the server's tasks spawned there would then run only while Python
            // waits on this thread (its `stop` would wait for them forever).
            // Boxed across the detach: the error fields are large for a closure's result.
            let inner = py
                .detach(|| rt.block_on(work).map_err(Box::new))
                .map_err(|e| to_pyerr(*e))?;
            Ok(NativeLocalServer { inner })
        })
    }

    #[getter]
    fn url(&self) -> String {
        self.inner.url().to_string()
    }

    /// The first API key of the first configured tenant.
    #[getter]
    fn api_key(&self) -> String {
        self.inner.api_key().to_string()
    }

    /// The first configured tenant.
    #[getter]
    fn tenant(&self) -> String {
        self.inner.tenant().to_string()
    }

    #[getter]
    fn running(&self) -> bool {
        self.inner.is_running()
    }

    /// Adds a `FaultRule` given as JSON.
    fn add_fault(&self, rule_json: &str) -> PyResult<()> {
        guard(|| self.inner.add_fault(rule_json).map_err(to_pyerr))
    }

    fn clear_faults(&self) -> PyResult<()> {
        guard(|| self.inner.clear_faults().map_err(to_pyerr))
    }

    /// The ledger (`LedgerEntry[]`) as JSON.
    fn ledger(&self) -> PyResult<String> {
        guard(|| self.inner.ledger_json().map_err(to_pyerr))
    }

    /// The request log (`RequestRecord[]`) as JSON.
    fn requests(&self) -> PyResult<String> {
        guard(|| self.inner.requests_json().map_err(to_pyerr))
    }

    fn advance_clock(&self, ms: u64) -> PyResult<()> {
        guard(|| self.inner.advance_clock(ms).map_err(to_pyerr))
    }

    fn now_ms(&self) -> PyResult<i64> {
        guard(|| self.inner.now_ms().map_err(to_pyerr))
    }

    fn set_tenant_closed(&self, tenant: &str, closed: bool) -> PyResult<()> {
        guard(|| {
            self.inner
                .set_tenant_closed(tenant, closed)
                .map_err(to_pyerr)
        })
    }

    /// Shuts the server down (GIL released while it drains). Idempotent.
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
