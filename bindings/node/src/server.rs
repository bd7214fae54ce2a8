//! `cycles-sdk/testing`'s `LocalServer`: the bridge's local server wrapper
//! (`cycles_bridge::server::Server`: config and fault rules checked there, the ledger and the
//! request log as JSON) on core's runtime. Only the syntax is Node's.

use cycles_bridge::server::Server;
use cycles_core::runtime;
use napi_derive::napi;

use crate::errors::{core, guard, to_js};

/// The native half of `LocalServer`.
#[napi]
pub struct NativeLocalServer {
    inner: Server,
}

#[napi]
impl NativeLocalServer {
    /// Starts a server on 127.0.0.1 (a `ServerConfig` as JSON; omitted fields default, an
    /// unknown key is INVALID_ARGUMENT naming it). Blocks while it binds, which takes a few
    /// milliseconds.
    #[napi(constructor)]
    pub fn new(config_json: Option<String>) -> napi::Result<Self> {
        guard(|| {
            let start = Server::start(config_json.as_deref()).map_err(to_js)?;
            let rt = runtime::handle().map_err(core)?;
            let inner = rt.block_on(start).map_err(to_js)?;
            Ok(NativeLocalServer { inner })
        })
    }

    /// The server's base URL.
    #[napi(getter)]
    pub fn url(&self) -> String {
        self.inner.url().to_string()
    }

    /// The first API key of the first configured tenant.
    #[napi(getter)]
    pub fn api_key(&self) -> String {
        self.inner.api_key().to_string()
    }

    /// The first configured tenant.
    #[napi(getter)]
    pub fn tenant(&self) -> String {
        self.inner.tenant().to_string()
    }

    /// Whether the server is still running.
    #[napi(getter)]
    pub fn running(&self) -> bool {
        self.inner.is_running()
    }

    /// Adds a `FaultRule` given as JSON.
    #[napi]
    pub fn add_fault(&self, rule_json: String) -> napi::Result<()> {
        guard(|| self.inner.add_fault(&rule_json).map_err(to_js))
    }

    /// Removes every fault rule.
    #[napi]
    pub fn clear_faults(&self) -> napi::Result<()> {
        guard(|| self.inner.clear_faults().map_err(to_js))
    }

    /// The ledger (`LedgerEntry[]`) as JSON.
    #[napi]
    pub fn ledger(&self) -> napi::Result<String> {
        guard(|| self.inner.ledger_json().map_err(to_js))
    }

    /// The request log (`RequestRecord[]`) as JSON.
    #[napi]
    pub fn requests(&self) -> napi::Result<String> {
        guard(|| self.inner.requests_json().map_err(to_js))
    }

    /// Moves the server's clock forward.
    #[napi]
    pub fn advance_clock(&self, ms: u32) -> napi::Result<()> {
        guard(|| self.inner.advance_clock(ms.into()).map_err(to_js))
    }

    /// The server's clock in epoch milliseconds.
    #[napi]
    pub fn now_ms(&self) -> napi::Result<i64> {
        guard(|| self.inner.now_ms().map_err(to_js))
    }

    /// Closes or reopens a tenant.
    #[napi]
    pub fn set_tenant_closed(&self, tenant: String, closed: bool) -> napi::Result<()> {
        guard(|| self.inner.set_tenant_closed(&tenant, closed).map_err(to_js))
    }

    /// Shuts the server down. Idempotent.
    #[napi]
    pub fn stop(&self) -> napi::Result<()> {
        guard(|| {
            if let Some(shutdown) = self.inner.stop() {
                match runtime::handle() {
                    Ok(rt) => rt.block_on(shutdown),
                    // After a runtime shutdown its threads are gone: just forget the work.
                    Err(_) => std::mem::forget(shutdown),
                }
            }
            Ok(())
        })
    }
}
