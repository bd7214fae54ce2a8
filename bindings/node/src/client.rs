//! `NativeClient`: one bridge `ClientHandle` (core's `CyclesClient`) per JavaScript client.
//! Requests go in as JSON through the bridge's operation table; each call returns a promise
//! settled from core's runtime with the reply envelope as JSON text.

use std::path::PathBuf;

use cycles_bridge::{decode_captured, ClientHandle, ClientOptions};
use napi::bindgen_prelude::Object;
use napi::Env;
use napi_derive::napi;

use crate::errors::{guard, to_js};
use crate::lifecycle::NativeLifecycle;
use crate::promise;

/// Client settings; unset fields keep core's defaults.
#[napi(object)]
pub struct NativeClientOptions {
    /// Base URL of the Cycles server.
    pub base_url: String,
    /// API key (redacted by core from everything the server sends back).
    pub api_key: String,
    /// Default tenant.
    pub tenant: Option<String>,
    /// Unit of estimates given as bare numbers (core validates it).
    pub default_unit: Option<String>,
    /// Per-attempt request timeout.
    pub request_timeout_ms: Option<u32>,
    /// Connect timeout.
    pub connect_timeout_ms: Option<u32>,
    /// Journal directory.
    pub journal_dir: Option<String>,
    /// Whether settlements are journaled.
    pub journal_enabled: Option<bool>,
    /// Bound on concurrent requests.
    pub max_concurrent_requests: Option<u32>,
}

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
}

#[napi]
impl NativeClient {
    /// A client of explicit options (core validates them).
    #[napi(constructor)]
    pub fn new(options: NativeClientOptions) -> napi::Result<NativeClient> {
        guard(|| {
            let config = ClientOptions {
                base_url: options.base_url,
                api_key: options.api_key,
                tenant: options.tenant,
                default_unit: options.default_unit,
                request_timeout_ms: options.request_timeout_ms.map(u64::from),
                connect_timeout_ms: options.connect_timeout_ms.map(u64::from),
                journal_dir: options.journal_dir.map(PathBuf::from),
                journal_enabled: options.journal_enabled,
                max_concurrent_requests: options.max_concurrent_requests.map(|n| n as usize),
            }
            .into_config();
            let handle = ClientHandle::new(config).map_err(to_js)?;
            Ok(NativeClient { handle })
        })
    }

    /// A client of the `CYCLES_*` environment; explicit journal settings override it.
    #[napi(factory)]
    pub fn from_env(
        journal_dir: Option<String>,
        journal_enabled: Option<bool>,
    ) -> napi::Result<NativeClient> {
        guard(|| {
            let handle = ClientHandle::from_env(journal_dir.map(PathBuf::from), journal_enabled)
                .map_err(to_js)?;
            Ok(NativeClient { handle })
        })
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
    #[napi(
        ts_args_type = "maxAttempts: number | undefined | null, replayIntervalMs: number | undefined | null, listener: (batch: string | null) => void"
    )]
    pub fn lifecycle(
        &self,
        max_attempts: Option<u32>,
        replay_interval_ms: Option<u32>,
        listener: napi::bindgen_prelude::Function<'_, Option<String>, ()>,
    ) -> napi::Result<NativeLifecycle> {
        guard(|| {
            let client = self.handle.live().map_err(to_js)?;
            NativeLifecycle::new(
                client,
                self.handle.config(),
                max_attempts,
                replay_interval_ms.map(u64::from),
                listener,
            )
        })
    }
}
