//! `cycles-sdk/testing`'s `LocalServer`: `cycles-local-server` in-process on core's runtime.

use std::sync::Mutex;

use cycles_core::runtime;
use cycles_local_server::{FaultRule, LocalServer, ServerConfig};
use napi_derive::napi;

use crate::errors::{core, guard, invalid};

/// The native half of `LocalServer`.
#[napi]
pub struct NativeLocalServer {
    inner: Mutex<Option<LocalServer>>,
    url: String,
}

impl NativeLocalServer {
    fn with<T>(&self, f: impl FnOnce(&LocalServer) -> T) -> napi::Result<T> {
        let guard = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        match guard.as_ref() {
            Some(s) => Ok(f(s)),
            None => Err(invalid("the local server is stopped")),
        }
    }
}

fn json<T: serde::Serialize>(v: &T) -> napi::Result<String> {
    serde_json::to_string(v).map_err(|e| invalid(format!("cannot encode: {e}")))
}

#[napi]
impl NativeLocalServer {
    /// Starts a server on 127.0.0.1 (a `ServerConfig` as JSON; omitted fields default).
    /// Blocks while it binds, which takes a few milliseconds.
    #[napi(constructor)]
    pub fn new(config_json: Option<String>) -> napi::Result<Self> {
        guard(|| {
            let config: ServerConfig = match config_json {
                Some(j) => serde_json::from_str(&j)
                    .map_err(|e| invalid(format!("invalid server config: {e}")))?,
                None => ServerConfig::default(),
            };
            let rt = runtime::handle().map_err(core)?;
            let server = rt
                .block_on(LocalServer::start(config))
                .map_err(|e| invalid(format!("cannot start the local server: {e}")))?;
            let url = server.url();
            Ok(NativeLocalServer {
                inner: Mutex::new(Some(server)),
                url,
            })
        })
    }

    /// The server's base URL.
    #[napi(getter)]
    pub fn url(&self) -> String {
        self.url.clone()
    }

    /// Whether the server is still running.
    #[napi(getter)]
    pub fn running(&self) -> bool {
        self.inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some()
    }

    /// Adds a `FaultRule` given as JSON.
    #[napi]
    pub fn add_fault(&self, rule_json: String) -> napi::Result<()> {
        guard(|| {
            let rule: FaultRule = serde_json::from_str(&rule_json)
                .map_err(|e| invalid(format!("invalid fault rule: {e}")))?;
            self.with(|s| s.add_fault(rule))
        })
    }

    /// Removes every fault rule.
    #[napi]
    pub fn clear_faults(&self) -> napi::Result<()> {
        guard(|| self.with(|s| s.clear_faults()))
    }

    /// The ledger (`LedgerEntry[]`) as JSON.
    #[napi]
    pub fn ledger(&self) -> napi::Result<String> {
        guard(|| json(&self.with(|s| s.ledger())?))
    }

    /// The request log (`RequestRecord[]`) as JSON.
    #[napi]
    pub fn requests(&self) -> napi::Result<String> {
        guard(|| json(&self.with(|s| s.requests())?))
    }

    /// Moves the server's clock forward.
    #[napi]
    pub fn advance_clock(&self, ms: u32) -> napi::Result<()> {
        guard(|| self.with(|s| s.advance_clock(ms.into())))
    }

    /// The server's clock in epoch milliseconds.
    #[napi]
    pub fn now_ms(&self) -> napi::Result<i64> {
        guard(|| self.with(|s| s.now_ms()))
    }

    /// Closes or reopens a tenant.
    #[napi]
    pub fn set_tenant_closed(&self, tenant: String, closed: bool) -> napi::Result<()> {
        guard(|| self.with(|s| s.set_tenant_closed(&tenant, closed)))
    }

    /// Shuts the server down. Idempotent.
    #[napi]
    pub fn stop(&self) -> napi::Result<()> {
        guard(|| {
            let server = self.inner.lock().unwrap_or_else(|p| p.into_inner()).take();
            if let Some(server) = server {
                match runtime::handle() {
                    Ok(rt) => rt.block_on(server.shutdown()),
                    // After a runtime shutdown its threads are gone: just forget the handle.
                    Err(_) => std::mem::forget(server),
                }
            }
            Ok(())
        })
    }
}
