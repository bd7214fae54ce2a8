//! `LocalServer`: the bridge's local Cycles server wrapper (config and fault rules checked
//! there) for users' tests. Start and stop block the caller on core's runtime, as every host's
//! `LocalServer` does (never driven on the caller's thread: the server's tasks need the
//! runtime).

use cycles_bridge::server::Server;
use cycles_core::runtime;
use std::sync::Arc;

use crate::error::{ffi, Result};

/// A local Cycles server on 127.0.0.1.
#[derive(uniffi::Object)]
pub struct LocalServer {
    inner: Server,
}

#[uniffi::export]
impl LocalServer {
    /// Starts a server (a `ServerConfig` as JSON; none: the defaults; an unknown key is
    /// INVALID_ARGUMENT naming it). Blocks while it binds.
    #[uniffi::constructor]
    pub fn start(config_json: Option<String>) -> Result<Arc<LocalServer>> {
        ffi(|| {
            let start = Server::start(config_json.as_deref())?;
            let inner = runtime::handle()?.block_on(start)?;
            Ok(Arc::new(LocalServer { inner }))
        })
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        self.inner.url().to_string()
    }

    /// The first API key of the first configured tenant.
    pub fn api_key(&self) -> String {
        self.inner.api_key().to_string()
    }

    /// The first configured tenant.
    pub fn tenant(&self) -> String {
        self.inner.tenant().to_string()
    }

    /// Whether the server was not stopped.
    pub fn is_running(&self) -> bool {
        self.inner.is_running()
    }

    /// Adds a fault rule given as JSON (conformance/server/README.md).
    pub fn add_fault(&self, rule_json: String) -> Result<()> {
        ffi(|| self.inner.add_fault(&rule_json))
    }

    /// Removes every fault rule.
    pub fn clear_faults(&self) -> Result<()> {
        ffi(|| self.inner.clear_faults())
    }

    /// Every applied mutation as JSON (the ledger tests assert "settled exactly once" on).
    pub fn ledger_json(&self) -> Result<String> {
        ffi(|| self.inner.ledger_json())
    }

    /// The requests received as JSON.
    pub fn requests_json(&self) -> Result<String> {
        ffi(|| self.inner.requests_json())
    }

    /// Moves the server's clock forward by `ms`.
    pub fn advance_clock(&self, ms: u64) -> Result<()> {
        ffi(|| self.inner.advance_clock(ms))
    }

    /// The server's clock (epoch ms).
    pub fn now_ms(&self) -> Result<i64> {
        ffi(|| self.inner.now_ms())
    }

    /// Opens or closes a tenant (a closed tenant's persisting calls get 409 TENANT_CLOSED).
    pub fn set_tenant_closed(&self, tenant: String, closed: bool) -> Result<()> {
        ffi(|| self.inner.set_tenant_closed(&tenant, closed))
    }

    /// Stops the server (blocks while it drains its connections); idempotent.
    pub fn stop(&self) -> Result<()> {
        ffi(|| {
            if let Some(w) = self.inner.stop() {
                runtime::handle()?.block_on(w);
            }
            Ok(())
        })
    }
}
