//! `NativeClient`: one bridge `ClientHandle` (core's `CyclesClient`) per JavaScript client.
//! Requests go in as JSON through the bridge's operation table; each call returns a promise
//! settled from core's runtime with the reply envelope as JSON text.

use cycles_bridge::options::{host_client, HostClient, NODE};
use cycles_bridge::{decode_captured, ClientHandle, Connection, SettleOverrides};
use napi::bindgen_prelude::Object;
use napi::Env;
use napi_derive::napi;

use crate::errors::{guard, to_js};
use crate::lifecycle::NativeLifecycle;
use crate::promise;

/// Decodes one captured response through core's response path without a network: the reply
/// envelope JSON, or the error the client would raise. `operation` is the spec's operationId.
#[napi]
pub fn decode_captured_response(
    operation: Option<String>,
    status: u32,
    headers: Vec<Vec<String>>,
    body: String,
) -> napi::Result<String> {
    guard(|| {
        let status = u16::try_from(status).map_err(|_| crate::errors::invalid("bad status"))?;
        let pairs: Vec<(&str, &str)> = headers
            .iter()
            .filter_map(|h| match h.as_slice() {
                [n, v] => Some((n.as_str(), v.as_str())),
                _ => None,
            })
            .collect();
        decode_captured(operation.as_deref(), status, &pairs, body.as_bytes())
            .map(|r| r.to_json())
            .map_err(to_js)
    })
}

/// The native half of `Client`.
#[napi]
pub struct NativeClient {
    handle: ClientHandle,
    settle: SettleOverrides,
    close_timeout_ms: u64,
}

impl NativeClient {
    fn of(host: HostClient) -> NativeClient {
        NativeClient {
            handle: host.client,
            settle: host.settle,
            close_timeout_ms: host.close_timeout_ms,
        }
    }
}

#[napi]
impl NativeClient {
    /// A client of `ClientOptions` as JSON (camelCase, `onEvent` left out), checked by the
    /// bridge: one table, one error text for every language.
    #[napi(constructor)]
    pub fn new(options_json: String) -> napi::Result<NativeClient> {
        guard(|| {
            host_client(&options_json, NODE, Connection::InOptions)
                .map(NativeClient::of)
                .map_err(to_js)
        })
    }

    /// A client of the `CYCLES_*` environment, the options (as JSON) applied over it.
    #[napi(factory)]
    pub fn from_env(options_json: String) -> napi::Result<NativeClient> {
        guard(|| {
            host_client(&options_json, NODE, Connection::Env)
                .map(NativeClient::of)
                .map_err(to_js)
        })
    }

    /// The drain bound of a `close()` given none (`closeTimeoutMs`, else the bridge's 5000).
    #[napi(getter)]
    pub fn close_timeout_ms(&self) -> u32 {
        u32::try_from(self.close_timeout_ms).unwrap_or(u32::MAX)
    }

    /// Base URL.
    #[napi(getter)]
    pub fn base_url(&self) -> String {
        self.handle.config().base_url.clone()
    }

    /// Default tenant.
    #[napi(getter)]
    pub fn tenant(&self) -> Option<String> {
        self.handle.config().tenant.clone()
    }

    /// Unit of estimates given as bare numbers (`USD_MICROCENTS` when none was configured).
    #[napi(getter)]
    pub fn default_unit(&self) -> String {
        self.handle.config().unit().as_str().to_string()
    }

    /// Journal directory in use.
    #[napi(getter)]
    pub fn journal_dir(&self) -> String {
        self.handle.config().journal.dir.display().to_string()
    }

    /// Whether settlements are journaled.
    #[napi(getter)]
    pub fn journal_enabled(&self) -> bool {
        self.handle.config().journal.enabled
    }

    /// Request timeout in milliseconds.
    #[napi(getter)]
    pub fn request_timeout_ms(&self) -> f64 {
        self.handle.request_timeout_ms() as f64
    }

    /// Connect timeout in milliseconds.
    #[napi(getter)]
    pub fn connect_timeout_ms(&self) -> f64 {
        self.handle.connect_timeout_ms() as f64
    }

    /// Whether `close` was called.
    #[napi(getter)]
    pub fn closed(&self) -> bool {
        self.handle.is_closed()
    }

    /// Drops this handle's reference to core's client; calls in flight complete, later calls
    /// fail with the closed error. Idempotent.
    #[napi]
    pub fn close(&self) {
        self.handle.close();
    }

    /// One operation (`op` a bridge operation name, `args` its JSON); the promise resolves
    /// with the reply envelope JSON.
    #[napi(ts_return_type = "Promise<string>")]
    pub fn call<'e>(&self, env: &'e Env, op: String, args: String) -> napi::Result<Object<'e>> {
        guard(|| {
            let call = self.handle.prepare(&op, &args).map_err(to_js)?;
            promise::spawn(env, call.run(), |r| r.to_json())
        })
    }

    /// The guarded lifecycle of this client (guard, settler, background replay). `listener`
    /// receives each event batch as a JSON array text, and `null` once the lifecycle is
    /// closed and drained; it never keeps the process alive.
    #[napi(ts_args_type = "listener: (batch: string | null) => void")]
    pub fn lifecycle(
        &self,
        listener: napi::bindgen_prelude::Function<'_, Option<String>, ()>,
    ) -> napi::Result<NativeLifecycle> {
        guard(|| {
            let client = self.handle.live().map_err(to_js)?;
            NativeLifecycle::new(
                client,
                self.handle.config(),
                self.settle.max_attempts,
                self.settle.replay_interval_ms,
                listener,
            )
        })
    }
}
