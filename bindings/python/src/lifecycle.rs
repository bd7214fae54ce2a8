//! The guarded lifecycle: the bridge's `Lifecycle` (core's two-phase `Guard::begin` /
//! `ActiveGuard::finish`, the durable `Settler` with flush, drain and background replay, and
//! the event pump) as Python objects. Behaviour is core's, the JSON shapes the bridge's.
//!
//! Events: core's callback only queues event JSON (bridge `EventPump`), never touching Python
//! or the GIL. A Python-side daemon thread drains the queue through
//! `NativeLifecycle.next_events`, which waits with the GIL released, and hands each event to
//! `logging` and the user's callback. Each event comes with its level, read here in Rust, so
//! Python parses only the events somebody listens to (by default a lifecycle's `debug` and
//! `info` events go nowhere: parsing them cost about a tenth of a sync lifecycle's CPU).

use std::sync::Arc;
use std::time::Duration;

use cycles_bridge::guard::{finished_head_text, settlement_body_text};
use cycles_bridge::task;
use cycles_bridge::{Active, ErrorFields, Lifecycle};
use cycles_core::events::Level;
use cycles_core::guard::Finished;
use cycles_core::{Config, CyclesClient};
use pyo3::prelude::*;

use crate::aio::awaitable;
use crate::client::wait;
use crate::errors::{core_err, guard, to_pyerr};
use crate::pricing::NativeProviderCall;

/// The guarded lifecycle of one client: guard, settler, background replay, event pump.
#[pyclass(module = "cycles._native", name = "NativeLifecycle", frozen)]
pub struct NativeLifecycle {
    inner: Lifecycle,
}

impl NativeLifecycle {
    pub fn new(
        client: Arc<CyclesClient>,
        config: &Config,
        max_attempts: Option<u32>,
        replay_interval_ms: Option<u64>,
    ) -> PyResult<NativeLifecycle> {
        Lifecycle::new(client, config, max_attempts, replay_interval_ms)
            .map(|inner| NativeLifecycle { inner })
            .map_err(to_pyerr)
    }
}

fn active(inner: Active) -> NativeActive {
    NativeActive { inner }
}

#[pymethods]
impl NativeLifecycle {
    /// Phase one: reserve and start the heartbeat (blocking, GIL released).
    fn begin(&self, py: Python<'_>, spec_json: &str) -> PyResult<NativeActive> {
        guard(|| {
            let work = self.inner.begin(spec_json).map_err(to_pyerr)?;
            let work = task::start(work).map_err(to_pyerr)?;
            wait(py, true, work)?.map(active).map_err(to_pyerr)
        })
    }

    /// Phase one as an awaitable.
    fn begin_async<'py>(&self, py: Python<'py>, spec_json: &str) -> PyResult<Bound<'py, PyAny>> {
        guard(|| {
            let work = self.inner.begin(spec_json).map_err(to_pyerr)?;
            awaitable(py, async move { work.await.map(active) })
        })
    }

    /// Replays every pending settlement once now; a JSON drain report.
    fn flush(&self, py: Python<'_>) -> PyResult<String> {
        guard(|| {
            let work = task::start(self.inner.flush()).map_err(to_pyerr)?;
            wait(py, true, work)
        })
    }

    fn flush_async<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        guard(|| {
            let work = self.inner.flush();
            awaitable(py, async move { Ok(work.await) })
        })
    }

    /// Replays until the journal is empty or `timeout_ms` passed; a JSON drain report.
    fn drain(&self, py: Python<'_>, timeout_ms: u64) -> PyResult<String> {
        guard(|| {
            let work = self.inner.drain(Duration::from_millis(timeout_ms));
            wait(py, true, task::start(work).map_err(to_pyerr)?)
        })
    }

    fn drain_async<'py>(&self, py: Python<'py>, timeout_ms: u64) -> PyResult<Bound<'py, PyAny>> {
        guard(|| {
            let work = self.inner.drain(Duration::from_millis(timeout_ms));
            awaitable(py, async move { Ok(work.await) })
        })
    }

    /// Stops the background replay, then drains for at most `timeout_ms` (0: no drain).
    /// Idempotent; later `begin` calls raise `ClientClosedError`.
    fn close(&self, py: Python<'_>, timeout_ms: u64) -> PyResult<String> {
        guard(|| {
            let work = self.inner.close(Duration::from_millis(timeout_ms));
            // Settling: not interruptible, abandoning it half-way helps nobody.
            wait(py, false, task::start(work).map_err(to_pyerr)?)
        })
    }

    #[getter]
    fn closed(&self) -> bool {
        self.inner.is_closed()
    }

    /// Events delivered so far as `(level, event_json)` (waits up to `timeout_ms` for the
    /// first, GIL released); `None` once the lifecycle is closed and nothing is left.
    fn next_events(&self, py: Python<'_>, timeout_ms: u64) -> Option<Vec<(&'static str, String)>> {
        py.detach(|| {
            self.inner
                .next_leveled_events(Duration::from_millis(timeout_ms))
                .map(|batch| {
                    batch
                        .into_iter()
                        .map(|(level, json)| (level.as_str(), json))
                        .collect()
                })
        })
    }

    /// The least level Python will look at (`"debug"`, `"info"`, `"warning"`, `"error"`);
    /// `None`: no event at all. Core builds no event below it.
    #[pyo3(signature = (level))]
    fn set_event_floor(&self, level: Option<&str>) -> PyResult<()> {
        let floor = match level {
            None => None,
            Some(name) => Some(Level::from_name(name).ok_or_else(|| {
                to_pyerr(ErrorFields::invalid(format!(
                    "unknown event level {name:?}"
                )))
            })?),
        };
        self.inner.set_event_floor(floor);
        Ok(())
    }
}

/// A running guarded action (core's `ActiveGuard`) and its `Usage`.
#[pyclass(module = "cycles._native", name = "NativeActive", frozen)]
pub struct NativeActive {
    pub(crate) inner: Active,
}

#[pymethods]
impl NativeActive {
    #[getter]
    fn reservation_id(&self) -> String {
        self.inner.reservation_id().to_string()
    }

    /// The estimate's unit, the unit of every actual.
    #[getter]
    fn unit(&self) -> String {
        self.inner.unit().to_string()
    }

    /// The server's decision: `ALLOW` or `ALLOW_WITH_CAPS`.
    #[getter]
    fn decision(&self) -> String {
        self.inner.decision().to_string()
    }

    /// The caps under `ALLOW_WITH_CAPS` as the spec's `Caps` JSON, `None` otherwise.
    #[getter]
    fn caps_json(&self) -> Option<String> {
        self.inner.caps_json().map(str::to_string)
    }

    /// Ends the action early, releasing the estimate (blocking, GIL released): the finished
    /// JSON (outcome `released`). INVALID_ARGUMENT, the action left running, once usage
    /// was reported or when already finished.
    #[pyo3(signature = (reason=None))]
    fn release(&self, py: Python<'_>, reason: Option<String>) -> PyResult<String> {
        guard(|| {
            let work = self.inner.release(reason).map_err(to_pyerr)?;
            // Like finish: a release half-way abandoned helps nobody.
            wait(py, false, task::start(work).map_err(to_pyerr)?)
        })
    }

    /// `release` as an awaitable.
    #[pyo3(signature = (reason=None))]
    fn release_async<'py>(
        &self,
        py: Python<'py>,
        reason: Option<String>,
    ) -> PyResult<Bound<'py, PyAny>> {
        guard(|| {
            let work = self.inner.release(reason).map_err(to_pyerr)?;
            awaitable(py, async move { Ok(work.await) })
        })
    }

    /// An integration's refusal to send a provider call (the bridge's `Active::refuse_call`:
    /// releases, blocking with the GIL released): the finished JSON with the `error` to raise.
    #[pyo3(signature = (why=None))]
    fn refuse_call(&self, py: Python<'_>, why: Option<String>) -> PyResult<String> {
        guard(|| {
            let work = self.inner.refuse_call(why).map_err(to_pyerr)?;
            wait(py, false, task::start(work).map_err(to_pyerr)?)
        })
    }

    /// `refuse_call` as an awaitable.
    #[pyo3(signature = (why=None))]
    fn refuse_call_async<'py>(
        &self,
        py: Python<'py>,
        why: Option<String>,
    ) -> PyResult<Bound<'py, PyAny>> {
        guard(|| {
            let work = self.inner.refuse_call(why).map_err(to_pyerr)?;
            awaitable(py, async move { Ok(work.await) })
        })
    }

    /// The caps rewrite of a provider request (the bridge's `Active::plan_caps`): `api`
    /// `chat_completions`, `responses` or `messages`; the plan as JSON text.
    fn plan_caps(&self, api: &str, request_json: &str) -> PyResult<String> {
        self.inner.plan_caps(api, request_json).map_err(to_pyerr)
    }

    /// INVALID_ARGUMENT once the action has finished (the report would not be settled).
    fn set_actual(&self, amount: i64) -> PyResult<()> {
        self.inner
            .usage()
            .set_actual(amount)
            .map_err(|e| core_err(&e))
    }

    /// As `set_actual`.
    fn add(&self, amount: i64) -> PyResult<()> {
        self.inner.usage().add(amount).map_err(|e| core_err(&e))
    }

    fn actual(&self) -> Option<i64> {
        self.inner.usage().actual()
    }

    /// `json` is Python's `json.dumps` text; core keeps `custom` exactly as written (big
    /// integers, `-0.0`, lone-surrogate escapes), never through a `serde_json::Value`.
    fn set_metrics(&self, json: &str) -> PyResult<()> {
        self.inner
            .usage()
            .set_metrics_json(json)
            .map_err(|e| core_err(&e))
    }

    /// As `set_metrics`: the metadata text reaches the journal and the wire unchanged.
    fn set_metadata(&self, json: &str) -> PyResult<()> {
        self.inner
            .usage()
            .set_metadata_json(json)
            .map_err(|e| core_err(&e))
    }

    /// True once the heartbeat cancelled the work (`cancel` policy).
    #[getter]
    fn cancelled(&self) -> bool {
        self.inner.usage().cancellation().is_cancelled()
    }

    #[getter]
    fn finished(&self) -> bool {
        self.inner.is_finished()
    }

    /// Phase two (blocking, GIL released): core's `Finished`, read as its report's head and,
    /// when asked, its settlement's body.
    fn finish(&self, py: Python<'_>, work_succeeded: bool) -> PyResult<NativeFinished> {
        guard(|| {
            let work = self.inner.finish_report(work_succeeded).map_err(to_pyerr)?;
            wait(py, false, task::start(work).map_err(to_pyerr)?).map(NativeFinished::new)
        })
    }

    /// Phase two of a provider call an integration guards (the bridge's
    /// `Active::finish_call`: core's settlement rule on the call's meter; blocking, GIL
    /// released): the finished JSON.
    fn finish_call(
        &self,
        py: Python<'_>,
        call: &NativeProviderCall,
        work_succeeded: bool,
    ) -> PyResult<NativeFinished> {
        guard(|| {
            let work = self
                .inner
                .finish_call_report(&call.inner, work_succeeded)
                .map_err(to_pyerr)?;
            wait(py, false, task::start(work).map_err(to_pyerr)?).map(NativeFinished::new)
        })
    }

    /// `finish_call` as an awaitable.
    fn finish_call_async<'py>(
        &self,
        py: Python<'py>,
        call: &NativeProviderCall,
        work_succeeded: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        guard(|| {
            let work = self
                .inner
                .finish_call_report(&call.inner, work_succeeded)
                .map_err(to_pyerr)?;
            awaitable(py, async move { Ok(NativeFinished::new(work.await)) })
        })
    }

    fn finish_async<'py>(
        &self,
        py: Python<'py>,
        work_succeeded: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        guard(|| {
            let work = self.inner.finish_report(work_succeeded).map_err(to_pyerr)?;
            awaitable(py, async move { Ok(NativeFinished::new(work.await)) })
        })
    }
}

/// How a guarded action ended (core's `Finished`): `head()` is the bridge's finished report
/// without the settlement's body, `settlement_body()` that body (the server's commit or event
/// response) or `None`; together they are the report every other host reads as one text.
/// Python reads the head at once and the body only when the settlement is read, so a guarded
/// call that never reads it neither writes nor parses it.
#[pyclass(module = "cycles._native", name = "NativeFinished", frozen)]
pub struct NativeFinished {
    inner: Finished,
}

impl NativeFinished {
    fn new(inner: Finished) -> NativeFinished {
        NativeFinished { inner }
    }
}

#[pymethods]
impl NativeFinished {
    fn head(&self) -> String {
        finished_head_text(&self.inner)
    }

    fn settlement_body(&self) -> Option<String> {
        settlement_body_text(&self.inner)
    }
}
