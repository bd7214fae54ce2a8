//! `cycles-sdk/testing`'s `FakeProvider`: the bridge's fake model provider wrapper
//! (`cycles_bridge::fake_provider::Provider`: config and fault rules checked there, the
//! request log as JSON) on core's runtime. Only the syntax is Node's.

use cycles_bridge::fake_provider::Provider;
use cycles_core::runtime;
use napi_derive::napi;

use crate::errors::{core, guard, to_js};

/// The native half of `FakeProvider`.
#[napi]
pub struct NativeFakeProvider {
    inner: Provider,
}

#[napi]
impl NativeFakeProvider {
    /// Starts a fake provider on 127.0.0.1 (a `FakeConfig` as JSON; an unknown key is
    /// INVALID_ARGUMENT naming it). Blocks while it binds, a few milliseconds.
    #[napi(constructor)]
    pub fn new(config_json: Option<String>) -> napi::Result<Self> {
        guard(|| {
            let start = Provider::start(config_json.as_deref()).map_err(to_js)?;
            let rt = runtime::handle().map_err(core)?;
            let inner = rt.block_on(start).map_err(to_js)?;
            Ok(NativeFakeProvider { inner })
        })
    }

    /// The provider's base URL (no trailing slash, no `/v1`).
    #[napi(getter)]
    pub fn url(&self) -> String {
        self.inner.url().to_string()
    }

    /// Whether the provider is still running.
    #[napi(getter)]
    pub fn running(&self) -> bool {
        self.inner.is_running()
    }

    /// The request log (`RequestRecord[]`) as JSON.
    #[napi]
    pub fn requests(&self) -> napi::Result<String> {
        guard(|| self.inner.requests_json().map_err(to_js))
    }

    /// Empties the request log and restores the configured fault rules.
    #[napi]
    pub fn reset(&self) -> napi::Result<()> {
        guard(|| self.inner.reset().map_err(to_js))
    }

    /// Adds a fault rule given as JSON.
    #[napi]
    pub fn add_fault(&self, rule_json: String) -> napi::Result<()> {
        guard(|| self.inner.add_fault(&rule_json).map_err(to_js))
    }

    /// Removes every fault rule.
    #[napi]
    pub fn clear_faults(&self) -> napi::Result<()> {
        guard(|| self.inner.clear_faults().map_err(to_js))
    }

    /// Shuts the provider down. Idempotent.
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
