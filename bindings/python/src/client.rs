//! `NativeClient`: one bridge `ClientHandle` (a `cycles_core::CyclesClient`) per Python client.
//! Requests arrive as JSON and responses leave as JSON plus transport facts, through the
//! bridge's operation table. The sync path blocks on the core runtime with the GIL released;
//! the async path returns an asyncio future completed on its event-loop thread (`aio`).

use std::path::PathBuf;
use std::time::Duration;

use cycles_bridge::options::{host_client, PYTHON};
use cycles_bridge::task::{self, Wait};
use cycles_bridge::{decode_captured, ClientHandle, Connection, SettleOverrides};
use pyo3::prelude::*;

use crate::aio::awaitable;
use crate::errors::{guard, to_pyerr};

/// How often a blocking call wakes up to check for signals (Ctrl-C).
pub const SIGNAL_POLL: Duration = Duration::from_millis(50);

/// `(status, request_id, trace_id, rtt_us, body_json)` of one schema-valid success.
pub type Out = (u16, Option<String>, Option<String>, u64, String);

/// Waits for a started call with the GIL released, in slices (on this thread: a thread that
/// keeps calling has its calls driven on itself, see `task::start`). When `interruptible`, a pending
/// signal (Ctrl-C) aborts the work and raises; otherwise (settling) the wait goes on, because
/// abandoning a settlement half-way helps nobody.
pub fn wait<T: Send>(
    py: Python<'_>,
    interruptible: bool,
    mut work: task::Blocking<T>,
) -> PyResult<T> {
    loop {
        match py.detach(|| work.wait(SIGNAL_POLL)) {
            Wait::Ready(v) => return Ok(v),
            Wait::Failed(f) => return Err(to_pyerr(f)),
            Wait::Pending => {
                if interruptible {
                    if let Err(interrupt) = py.check_signals() {
                        work.abort();
                        return Err(interrupt);
                    }
                }
            }
        }
    }
}

/// Decodes one captured response through core's own response path
/// (`cycles_core::decode_response`), without a network: `(status, request_id, trace_id, 0,
/// body_json)` of the schema-valid success, or the exception the client would raise.
/// `operation` is the spec's operationId; `None` (a response that matched no operation)
/// is only valid for a non-2xx status.
#[pyfunction]
#[pyo3(signature = (operation, status, headers, body))]
pub fn decode_response(
    operation: Option<&str>,
    status: u16,
    headers: Vec<(String, String)>,
    body: &[u8],
) -> PyResult<Out> {
    guard(|| {
        let headers: Vec<(&str, &str)> = headers
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_str()))
            .collect();
        decode_captured(operation, status, &headers, body)
            .map(|r| r.into_tuple())
            .map_err(to_pyerr)
    })
}

/// The native half of `cycles.Client` and `cycles.AsyncClient`.
#[pyclass(module = "cycles._native", name = "NativeClient", frozen)]
pub struct NativeClient {
    handle: ClientHandle,
    settle: SettleOverrides,
    close_timeout_ms: u64,
}

#[pymethods]
impl NativeClient {
    /// A client of the Python options as JSON (snake_case, durations in seconds), checked by
    /// the bridge: one table, one error text for every language. `from_env`: the `CYCLES_*`
    /// environment gives the endpoint, and the options apply over it.
    #[new]
    #[pyo3(signature = (options_json, from_env=false))]
    fn new(options_json: &str, from_env: bool) -> PyResult<NativeClient> {
        guard(|| {
            let connection = if from_env {
                Connection::Env
            } else {
                Connection::InOptions
            };
            let host = host_client(options_json, PYTHON, connection).map_err(to_pyerr)?;
            Ok(NativeClient {
                handle: host.client,
                settle: host.settle,
                close_timeout_ms: host.close_timeout_ms,
            })
        })
    }

    /// The subject a request without one is for, as JSON (core's
    /// `GuardSpec::default_subject`: the client's tenant; INVALID_ARGUMENT without one), so
    /// a decorator can refuse early with the error every call would raise.
    fn default_subject(&self) -> PyResult<String> {
        guard(|| {
            let subject = cycles_core::guard::GuardSpec::default_subject(
                self.handle.config().tenant.as_deref(),
            )
            .map_err(|e| to_pyerr(e.into()))?;
            serde_json::to_string(&subject)
                .map_err(|e| to_pyerr(cycles_bridge::ErrorFields::invalid(e.to_string())))
        })
    }

    /// The drain bound of a `close()` given none, in milliseconds (`close_timeout`, else the
    /// bridge's default).
    #[getter]
    fn close_timeout_ms(&self) -> u64 {
        self.close_timeout_ms
    }

    /// Journal directory in use.
    #[getter]
    fn journal_dir(&self) -> PathBuf {
        self.handle.config().journal.dir.clone()
    }

    /// The unit of a bare estimate (`default_unit=` or `CYCLES_UNIT`), `None`: the bridge's
    /// fallback, `USD_MICROCENTS`.
    #[getter]
    fn default_unit(&self) -> Option<String> {
        self.handle
            .config()
            .default_unit
            .as_ref()
            .map(|u| u.as_str().to_string())
    }

    /// Whether settlements are journaled.
    #[getter]
    fn journal_enabled(&self) -> bool {
        self.handle.config().journal.enabled
    }

    /// The guarded lifecycle of this client (a Guard, a Settler and its background replay).
    fn lifecycle(&self) -> PyResult<crate::lifecycle::NativeLifecycle> {
        guard(|| {
            let client = self.handle.live().map_err(to_pyerr)?;
            crate::lifecycle::NativeLifecycle::new(
                client,
                self.handle.config(),
                self.settle.max_attempts,
                self.settle.replay_interval_ms,
            )
        })
    }

    #[getter]
    fn base_url(&self) -> String {
        self.handle.config().base_url.clone()
    }

    #[getter]
    fn tenant(&self) -> Option<String> {
        self.handle.config().tenant.clone()
    }

    #[getter]
    fn request_timeout_ms(&self) -> u64 {
        self.handle.request_timeout_ms()
    }

    #[getter]
    fn connect_timeout_ms(&self) -> u64 {
        self.handle.connect_timeout_ms()
    }

    #[getter]
    fn closed(&self) -> bool {
        self.handle.is_closed()
    }

    /// Drops this handle's reference to the core client. Calls already in flight keep their
    /// own reference and complete; new calls raise `ClientClosedError`. Idempotent.
    fn close(&self) {
        self.handle.close();
    }

    /// One operation, blocking the calling thread on the core runtime with the GIL released.
    /// Signals are checked every 50 ms, so Ctrl-C raises `KeyboardInterrupt` promptly (the
    /// attempt is aborted: its outcome is unknown, like a timeout's).
    fn call(&self, py: Python<'_>, op: &str, args: &str) -> PyResult<Out> {
        guard(|| {
            let call = self.handle.prepare(op, args).map_err(to_pyerr)?;
            let work = task::start(call.run()).map_err(to_pyerr)?;
            match wait(py, true, work)? {
                Ok(reply) => Ok(reply.into_tuple()),
                Err(f) => Err(to_pyerr(f)),
            }
        })
    }

    /// One operation as an asyncio future, completed on the event-loop thread.
    fn call_async<'py>(
        &self,
        py: Python<'py>,
        op: &str,
        args: &str,
    ) -> PyResult<Bound<'py, PyAny>> {
        guard(|| {
            let call = self.handle.prepare(op, args).map_err(to_pyerr)?;
            awaitable(py, async move { call.run().await.map(|r| r.into_tuple()) })
        })
    }

    fn __repr__(&self) -> String {
        let c = self.handle.config();
        format!(
            "NativeClient(base_url={:?}, tenant={:?}, closed={})",
            c.base_url,
            c.tenant,
            self.closed()
        )
    }
}
