//! `cycles.testing.LocalServer`: `cycles-local-server` in-process, served on the core runtime.

use std::sync::Mutex;

use cycles_core::runtime;
use cycles_local_server::{FaultRule, LocalServer, ServerConfig};
use pyo3::prelude::*;

use crate::errors::{core_err, guard, invalid};

/// The native half of `cycles.testing.LocalServer`.
#[pyclass(module = "cycles._native", name = "NativeLocalServer", frozen)]
pub struct NativeLocalServer {
    inner: Mutex<Option<LocalServer>>,
    url: String,
}

impl NativeLocalServer {
    fn with<T>(&self, f: impl FnOnce(&LocalServer) -> T) -> PyResult<T> {
        let guard = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        match guard.as_ref() {
            Some(s) => Ok(f(s)),
            None => Err(invalid("the local server is stopped")),
        }
    }
}

fn json<T: serde::Serialize>(v: &T) -> PyResult<String> {
    serde_json::to_string(v).map_err(|e| invalid(format!("cannot encode: {e}")))
}

#[pymethods]
impl NativeLocalServer {
    /// Starts a server on 127.0.0.1 (ephemeral port unless `bind` is set in the config JSON,
    /// a `ServerConfig`; omitted fields take their defaults).
    #[new]
    #[pyo3(signature = (config_json=None))]
    fn new(py: Python<'_>, config_json: Option<&str>) -> PyResult<Self> {
        guard(|| {
            let config: ServerConfig = match config_json {
                Some(j) => serde_json::from_str(j)
                    .map_err(|e| invalid(format!("invalid server config: {e}")))?,
                None => ServerConfig::default(),
            };
            let rt = runtime::handle().map_err(|e| core_err(&e))?;
            let server = py
                .detach(|| rt.block_on(LocalServer::start(config)))
                .map_err(|e| invalid(format!("cannot start the local server: {e}")))?;
            let url = server.url();
            Ok(NativeLocalServer {
                inner: Mutex::new(Some(server)),
                url,
            })
        })
    }

    #[getter]
    fn url(&self) -> String {
        self.url.clone()
    }

    #[getter]
    fn running(&self) -> bool {
        self.inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some()
    }

    /// Adds a `FaultRule` given as JSON.
    fn add_fault(&self, rule_json: &str) -> PyResult<()> {
        guard(|| {
            let rule: FaultRule = serde_json::from_str(rule_json)
                .map_err(|e| invalid(format!("invalid fault rule: {e}")))?;
            self.with(|s| s.add_fault(rule))
        })
    }

    fn clear_faults(&self) -> PyResult<()> {
        guard(|| self.with(|s| s.clear_faults()))
    }

    /// The ledger (`LedgerEntry[]`) as JSON.
    fn ledger(&self) -> PyResult<String> {
        guard(|| json(&self.with(|s| s.ledger())?))
    }

    /// The request log (`RequestRecord[]`) as JSON.
    fn requests(&self) -> PyResult<String> {
        guard(|| json(&self.with(|s| s.requests())?))
    }

    fn advance_clock(&self, ms: u64) -> PyResult<()> {
        guard(|| self.with(|s| s.advance_clock(ms)))
    }

    fn now_ms(&self) -> PyResult<i64> {
        guard(|| self.with(|s| s.now_ms()))
    }

    fn set_tenant_closed(&self, tenant: &str, closed: bool) -> PyResult<()> {
        guard(|| self.with(|s| s.set_tenant_closed(tenant, closed)))
    }

    /// Shuts the server down (GIL released while it drains). Idempotent.
    fn stop(&self, py: Python<'_>) -> PyResult<()> {
        guard(|| {
            let server = self.inner.lock().unwrap_or_else(|p| p.into_inner()).take();
            if let Some(server) = server {
                match runtime::handle() {
                    Ok(rt) => py.detach(|| rt.block_on(server.shutdown())),
                    // After fork() the runtime's threads are gone: just forget the handle.
                    Err(_) => std::mem::forget(server),
                }
            }
            Ok(())
        })
    }
}
