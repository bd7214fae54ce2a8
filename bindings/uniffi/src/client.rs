//! `Client`: a bridge `ClientHandle` built from the host's options (camelCase in ms, the
//! bridge's `options::UNIFFI` spelling), every runtime operation through the bridge's
//! dispatch, the client half of the guarded lifecycle (created on first use, as on the JVM)
//! and its event queue.

use std::sync::Arc;
use std::time::Duration;

use cycles_bridge::options::{host_client, UNIFFI};
use cycles_bridge::{
    ClientHandle, Connection, ErrorFields, LazyLifecycle, Lifecycle, SettleOverrides,
};
use cycles_core::events::Level;
use serde_json::json;

use crate::error::{ffi, Result};
use crate::guard::Guard;
use crate::work::{run, run_ok};

/// The least level of the events a host looks at.
#[derive(Clone, Copy, Debug, uniffi::Enum)]
pub enum EventLevel {
    /// Routine progress (a heartbeat beat).
    Debug,
    /// A normal outcome worth a line.
    Info,
    /// Something failed but is being handled.
    Warning,
    /// Something needs attention.
    Error,
}

impl From<EventLevel> for Level {
    fn from(l: EventLevel) -> Level {
        match l {
            EventLevel::Debug => Level::Debug,
            EventLevel::Info => Level::Info,
            EventLevel::Warning => Level::Warning,
            EventLevel::Error => Level::Error,
        }
    }
}

/// A Cycles client: operations, guarded actions, drains, events.
#[derive(uniffi::Object)]
pub struct Client {
    handle: ClientHandle,
    settle: SettleOverrides,
    close_timeout_ms: u64,
    life: LazyLifecycle,
}

impl Client {
    fn of(options_json: &str, connection: Connection<'_>) -> Result<Arc<Client>> {
        ffi(|| {
            let host = host_client(options_json, UNIFFI, connection)?;
            Ok(Arc::new(Client {
                handle: host.client,
                settle: host.settle,
                close_timeout_ms: host.close_timeout_ms,
                life: LazyLifecycle::default(),
            }))
        })
    }

    /// The lifecycle, created on first use (the closed error once the client is closed).
    fn life(&self) -> std::result::Result<Arc<Lifecycle>, ErrorFields> {
        self.life.get(&self.handle, self.settle)
    }

    fn existing_life(&self) -> Option<Arc<Lifecycle>> {
        self.life.existing()
    }
}

#[uniffi::export]
impl Client {
    /// A client from options JSON in camelCase with durations in ms (`baseUrl`, `apiKey`,
    /// `tenant`, `defaultUnit`, `requestTimeoutMs`, `journalDir`, ..., `closeTimeoutMs`: the
    /// bridge's one options table; an unknown member is INVALID_ARGUMENT naming it).
    #[uniffi::constructor]
    pub fn new(options_json: String) -> Result<Arc<Client>> {
        Client::of(&options_json, Connection::InOptions)
    }

    /// A client from the `CYCLES_*` environment, the options JSON (without `baseUrl` and
    /// `apiKey`) overriding it.
    #[uniffi::constructor]
    pub fn from_env(options_json: String) -> Result<Arc<Client>> {
        Client::of(&options_json, Connection::Env)
    }

    /// The client's settings as JSON (`base_url`, `tenant`, timeouts, the close drain's
    /// default bound), never the key.
    pub fn info_json(&self) -> String {
        let cfg = self.handle.config();
        json!({
            "base_url": cfg.base_url,
            "tenant": cfg.tenant,
            "request_timeout_ms": self.handle.request_timeout_ms(),
            "connect_timeout_ms": self.handle.connect_timeout_ms(),
            "close_timeout_ms": self.close_timeout_ms,
        })
        .to_string()
    }

    /// One runtime operation by name with its arguments as JSON (docs/bindings.md,
    /// "Operations"): the reply JSON (`status`, `request_id`, `trace_id`, `rtt_us`, `body`).
    pub async fn call(&self, operation: String, args_json: String) -> Result<String> {
        let call = ffi(|| self.handle.prepare(&operation, &args_json))?;
        run(Box::pin(
            async move { call.run().await.map(|r| r.to_json()) },
        ))
        .await
    }

    /// Phase one of a guarded action: reserve (the spec's JSON, docs/bindings.md "Guarded
    /// lifecycle") and start the heartbeat.
    pub async fn begin(&self, spec_json: String) -> Result<Arc<Guard>> {
        let work = ffi(|| {
            if self.handle.is_closed() {
                return Err(ErrorFields::closed());
            }
            self.life()?.begin(&spec_json)
        })?;
        Ok(Arc::new(Guard::new(run(work).await?)))
    }

    /// Replays every pending settlement once: the drain report JSON.
    pub async fn flush(&self) -> Result<String> {
        let work = ffi(|| Ok(self.life()?.flush()))?;
        run_ok(work).await
    }

    /// Replays until nothing is pending or `timeout_ms` passed: the drain report JSON.
    pub async fn drain(&self, timeout_ms: u64) -> Result<String> {
        let work = ffi(|| Ok(self.life()?.drain(Duration::from_millis(timeout_ms))))?;
        run_ok(work).await
    }

    /// Closes the client (idempotent): the lifecycle's close drain within `timeout_ms` (none:
    /// the `closeTimeoutMs` option, default 5 s), its report JSON (none when the lifecycle
    /// was never used). Later calls fail with the closed error.
    pub async fn shutdown(&self, timeout_ms: Option<u64>) -> Result<Option<String>> {
        let t = Duration::from_millis(timeout_ms.unwrap_or(self.close_timeout_ms));
        let work = self.existing_life().map(|l| l.close(t));
        let report = match work {
            Some(w) => Some(run_ok(w).await?),
            None => None,
        };
        self.handle.close();
        Ok(report)
    }

    /// [`Client::shutdown`], blocking the calling thread (for `AutoCloseable.close`).
    pub fn shutdown_blocking(&self, timeout_ms: Option<u64>) -> Result<Option<String>> {
        ffi(|| {
            let t = Duration::from_millis(timeout_ms.unwrap_or(self.close_timeout_ms));
            let report = match self.existing_life() {
                Some(l) => Some(cycles_bridge::task::start(l.close(t))?.finish()?),
                None => None,
            };
            self.handle.close();
            Ok(report)
        })
    }

    /// Whether the client was closed.
    pub fn is_closed(&self) -> bool {
        self.handle.is_closed()
    }

    /// The events delivered so far (JSON texts, docs/events.md), waiting up to `timeout_ms`
    /// for the first; none once the client is closed and nothing is left. Blocking: call it
    /// from a thread of the host's own (Kotlin: `Dispatchers.IO`), never a UI thread.
    pub fn next_events(&self, timeout_ms: u64) -> Option<Vec<String>> {
        let life = match self.existing_life() {
            Some(l) => l,
            None if self.handle.is_closed() => return None,
            None => self.life().ok()?,
        };
        life.next_events(Duration::from_millis(timeout_ms))
    }

    /// The least level of the events the host looks at (none: no event is even built).
    pub fn set_event_floor(&self, floor: Option<EventLevel>) -> Result<()> {
        ffi(|| {
            self.life()?.set_event_floor(floor.map(Level::from));
            Ok(())
        })
    }
}
