//! The guarded lifecycle: core's two-phase `Guard::begin` / `ActiveGuard::finish`, the
//! durable `Settler` (flush, drain, background replay) and the event stream. Behaviour is
//! core's; this module translates to JSON and Python objects only.
//!
//! Events: core calls the `EventSink` callback on a runtime worker; the callback only pushes
//! the event (as JSON) into a channel, never touching Python or the GIL. A Python-side daemon
//! thread drains the channel through `NativeLifecycle.next_events`, which waits with the GIL
//! released, and hands each event to `logging` and the user's callback.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cycles_core::events::{Event, EventSink};
use cycles_core::guard::{ActiveGuard, Finished, Guard, GuardSpec, Usage};
use cycles_core::lease::{FailurePolicy, LeaseReport};
use cycles_core::runtime::runtime;
use cycles_core::settle::{DrainReport, ReplayHandle, SettleConfig, SettleOutcome, Settler};
use cycles_core::{Config, CyclesClient, Error};
use pyo3::prelude::*;
use serde::de::DeserializeOwned;
use serde_json::{json, Value};

use crate::errors::{core_err, guard, internal, invalid, panic_message};

const SIGNAL_POLL: Duration = Duration::from_millis(50);

/// Runs `fut` on the core runtime and waits for it with the GIL released. When
/// `interruptible`, a pending signal (Ctrl-C) aborts the task and raises; otherwise (settling)
/// the wait goes on, because abandoning a settlement half-way helps nobody.
fn block<T: Send + 'static>(
    py: Python<'_>,
    interruptible: bool,
    fut: impl Future<Output = T> + Send + 'static,
) -> PyResult<T> {
    let rt = runtime().map_err(|e| core_err(&e))?;
    let (tx, mut rx) = mpsc::channel();
    let task = rt.spawn(async move {
        let _ = tx.send(fut.await);
    });
    loop {
        let (back, got) = py.detach(move || {
            let got = rx.recv_timeout(SIGNAL_POLL);
            (rx, got)
        });
        rx = back;
        match got {
            Ok(v) => return Ok(v),
            Err(RecvTimeoutError::Timeout) => {
                if interruptible {
                    if let Err(interrupt) = py.check_signals() {
                        task.abort();
                        return Err(interrupt);
                    }
                }
            }
            Err(RecvTimeoutError::Disconnected) => {
                return Err(match py.detach(|| rt.block_on(task)) {
                    Err(join) if join.is_panic() => {
                        internal(panic_message(join.into_panic().as_ref()))
                    }
                    _ => internal("the operation ended without a result"),
                });
            }
        }
    }
}

/// `fut` as an asyncio awaitable completed from the core runtime.
fn awaitable<'py, T>(
    py: Python<'py>,
    fut: impl Future<Output = PyResult<T>> + Send + 'static,
) -> PyResult<Bound<'py, PyAny>>
where
    T: for<'a> IntoPyObject<'a> + Send + 'static,
{
    let rt = runtime().map_err(|e| core_err(&e))?;
    let _ = pyo3_async_runtimes::tokio::init_with_runtime(rt);
    pyo3_async_runtimes::tokio::future_into_py(py, async move {
        match rt.spawn(fut).await {
            Ok(r) => r,
            Err(join) if join.is_panic() => {
                Err(internal(panic_message(join.into_panic().as_ref())))
            }
            Err(_) => Err(internal("the operation was cancelled")),
        }
    })
}

fn decode<T: DeserializeOwned>(v: Option<&Value>, what: &str) -> Result<T, Error> {
    let v = v.ok_or_else(|| Error::invalid_argument(format!("missing {what}")))?;
    serde_json::from_value(v.clone())
        .map_err(|e| Error::invalid_argument(format!("invalid {what}: {e}")))
}

fn opt<T: DeserializeOwned>(v: &Value, name: &str) -> Result<Option<T>, Error> {
    match v.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(x) => decode(Some(x), name).map(Some),
    }
}

fn policy(name: &str) -> Result<FailurePolicy, Error> {
    Ok(match name {
        "warn" => FailurePolicy::Warn,
        "fail_on_finalize" => FailurePolicy::FailOnFinalize,
        "cancel" => FailurePolicy::Cancel,
        other => {
            return Err(Error::invalid_argument(format!(
                "heartbeat policy must be warn, fail_on_finalize or cancel, not {other:?}"
            )))
        }
    })
}

fn spec(json: &str) -> Result<GuardSpec, Error> {
    let v: Value = serde_json::from_str(json)
        .map_err(|e| Error::invalid_argument(format!("guard spec: {e}")))?;
    let mut spec = GuardSpec::new(
        decode::<String>(v.get("idempotency_key"), "idempotency_key")?,
        decode(v.get("subject"), "subject")?,
        decode(v.get("action"), "action")?,
        decode(v.get("estimate"), "estimate")?,
    );
    if let Some(ttl) = opt::<i64>(&v, "ttl_ms")? {
        spec.ttl_ms = ttl;
    }
    spec.grace_period_ms = opt(&v, "grace_period_ms")?;
    spec.overage_policy = opt(&v, "overage_policy")?;
    spec.metadata = opt(&v, "metadata")?;
    if let Some(hb) = opt::<bool>(&v, "heartbeat")? {
        spec.heartbeat = hb;
    }
    if let Some(p) = opt::<String>(&v, "policy")? {
        spec.policy = policy(&p)?;
    }
    Ok(spec)
}

fn outcome_json(o: &SettleOutcome) -> Value {
    match o {
        SettleOutcome::Committed(r) => json!({
            "status": "committed",
            "charged": o.charged(),
            "body": serde_json::to_value(r).unwrap_or(Value::Null),
        }),
        SettleOutcome::RecoveredViaEvent(r) => json!({
            "status": "recovered_via_event",
            "charged": o.charged(),
            "body": serde_json::to_value(&r.response).unwrap_or(Value::Null),
        }),
        SettleOutcome::Pending {
            reason,
            last_error,
            journaled,
            not_before_ms,
        } => json!({
            "status": "pending",
            "reason": reason,
            "error_kind": last_error.as_ref().map(|k| k.name()),
            "journaled": journaled,
            "not_before_ms": not_before_ms,
        }),
        SettleOutcome::Rejected(r) => json!({
            "status": "rejected",
            "error_kind": r.kind.name(),
            "reason": r.message,
            "http_status": r.http_status,
            "error_code": r.server_code,
        }),
    }
}

fn lease_json(l: Option<&LeaseReport>) -> Value {
    l.map_or(Value::Null, |l| {
        json!({
            "extensions": l.extensions,
            "failures": l.failures,
            "path": format!("{:?}", l.path).to_ascii_lowercase(),
            "stopped_early": l.stopped_early(),
            "end": format!("{:?}", l.end),
            "last_error": l.last_error.as_ref().map(|(k, m)| json!([k, m])),
        })
    })
}

fn finished_json(f: &Finished) -> Value {
    match f {
        Finished::Settled {
            reservation_id,
            actual,
            settlement,
            lease,
        } => json!({
            "outcome": "settled",
            "reservation_id": reservation_id,
            "actual": actual.amount,
            "settlement": outcome_json(settlement),
            "lease": lease_json(lease.as_ref()),
        }),
        Finished::WorkFailed {
            reservation_id,
            settlement,
            release_error,
            lease,
        } => json!({
            "outcome": "work_failed",
            "reservation_id": reservation_id,
            "settlement": settlement.as_ref().map(outcome_json),
            "release_error": release_error.as_ref().map(|e| json!({"error_kind": e.kind().name(), "message": e.message()})),
            "lease": lease_json(lease.as_ref()),
        }),
        Finished::MissingActual {
            reservation_id,
            lease,
        } => json!({
            "outcome": "missing_actual",
            "reservation_id": reservation_id,
            "lease": lease_json(lease.as_ref()),
        }),
        Finished::InvalidActual {
            reservation_id,
            actual,
        } => json!({
            "outcome": "invalid_actual",
            "reservation_id": reservation_id,
            "actual": actual,
        }),
        Finished::HeartbeatLapsed { lapse, settlement } => json!({
            "outcome": "heartbeat_lapsed",
            "reservation_id": lapse.reservation_id,
            "reason": format!("{:?}", lapse.reason),
            "message": lapse.to_string(),
            "settlement": outcome_json(settlement),
        }),
    }
}

fn drain_json(r: &DrainReport) -> String {
    json!({
        "outcomes": r.outcomes.iter().map(|(id, o)| json!({"reservation_id": id, "settlement": outcome_json(o)})).collect::<Vec<_>>(),
        "remaining": r.remaining.iter().map(|p| json!({
            "reservation_id": p.reservation_id,
            "mode": p.mode.to_string(),
            "recorded_at_ms": p.recorded_at_ms,
            "not_before_ms": p.not_before_ms,
            "file": p.file,
        })).collect::<Vec<_>>(),
        "quarantined": r.quarantined,
    })
    .to_string()
}

/// One event as JSON: core's stable event object (`Event::to_json`, see docs/events.md).
fn event_json(e: &Event) -> String {
    e.to_json().to_string()
}

/// The guarded lifecycle of one client: guard, settler, background replay, event channel.
#[pyclass(module = "cycles._native", name = "NativeLifecycle", frozen)]
pub struct NativeLifecycle {
    guard: Guard,
    replay: Mutex<Option<ReplayHandle>>,
    events: Mutex<Receiver<String>>,
    closed: AtomicBool,
    /// Set when `close` has finished draining: no event can follow, so the forwarding thread
    /// may stop once the channel is empty (`closed` alone is set before the drain's events).
    drained: AtomicBool,
}

impl NativeLifecycle {
    pub fn new(
        client: Arc<CyclesClient>,
        config: &Config,
        max_attempts: Option<u32>,
        replay_interval_ms: Option<u64>,
    ) -> PyResult<NativeLifecycle> {
        let (tx, rx) = mpsc::channel::<String>();
        // Runs on a runtime worker: only a channel send, never Python, never the GIL.
        let sink = EventSink::with_callback(move |e| {
            let _ = tx.send(event_json(e));
        });
        let mut settings = SettleConfig {
            events: sink.clone(),
            ..SettleConfig::default()
        };
        if let Some(n) = max_attempts {
            settings.max_attempts = n.max(1);
        }
        if let Some(ms) = replay_interval_ms {
            settings.replay_interval = Duration::from_millis(ms.max(1));
        }
        let settler = Settler::new(config, settings).map_err(|e| core_err(&e))?;
        let rt = runtime().map_err(|e| core_err(&e))?;
        let replay = {
            let _entered = rt.enter();
            settler.start_replay()
        };
        Ok(NativeLifecycle {
            guard: Guard::new(client, settler, sink),
            replay: Mutex::new(Some(replay)),
            events: Mutex::new(rx),
            closed: AtomicBool::new(false),
            drained: AtomicBool::new(false),
        })
    }

    fn open(&self) -> PyResult<()> {
        if self.closed.load(Ordering::SeqCst) {
            return Err(crate::errors::to_pyerr(crate::errors::Fields {
                code: 3,
                name: "RUNTIME".into(),
                message: "the client is closed".into(),
                variant: Some("closed"),
                ..Default::default()
            }));
        }
        Ok(())
    }
}

fn active(a: ActiveGuard) -> NativeActive {
    NativeActive {
        reservation_id: a.reservation_id().to_string(),
        usage: a.usage().clone(),
        active: Mutex::new(Some(a)),
    }
}

#[pymethods]
impl NativeLifecycle {
    /// Phase one: reserve and start the heartbeat (blocking, GIL released).
    fn begin(&self, py: Python<'_>, spec_json: &str) -> PyResult<NativeActive> {
        guard(|| {
            self.open()?;
            let spec = spec(spec_json).map_err(|e| core_err(&e))?;
            let g = self.guard.clone();
            match block(py, true, async move { g.begin(spec).await })? {
                Ok(a) => Ok(active(a)),
                Err(e) => Err(core_err(&e)),
            }
        })
    }

    /// Phase one as an awaitable.
    fn begin_async<'py>(&self, py: Python<'py>, spec_json: &str) -> PyResult<Bound<'py, PyAny>> {
        guard(|| {
            self.open()?;
            let spec = spec(spec_json).map_err(|e| core_err(&e))?;
            let g = self.guard.clone();
            awaitable(py, async move {
                g.begin(spec).await.map(active).map_err(|e| core_err(&e))
            })
        })
    }

    /// Replays every pending settlement once now; a JSON drain report.
    fn flush(&self, py: Python<'_>) -> PyResult<String> {
        guard(|| {
            let s = self.guard.settler().clone();
            block(py, true, async move { drain_json(&s.flush().await) })
        })
    }

    fn flush_async<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        guard(|| {
            let s = self.guard.settler().clone();
            awaitable(py, async move { Ok(drain_json(&s.flush().await)) })
        })
    }

    /// Replays until the journal is empty or `timeout_ms` passed; a JSON drain report.
    fn drain(&self, py: Python<'_>, timeout_ms: u64) -> PyResult<String> {
        guard(|| {
            let s = self.guard.settler().clone();
            let t = Duration::from_millis(timeout_ms);
            block(py, true, async move { drain_json(&s.drain(t).await) })
        })
    }

    fn drain_async<'py>(&self, py: Python<'py>, timeout_ms: u64) -> PyResult<Bound<'py, PyAny>> {
        guard(|| {
            let s = self.guard.settler().clone();
            let t = Duration::from_millis(timeout_ms);
            awaitable(py, async move { Ok(drain_json(&s.drain(t).await)) })
        })
    }

    /// Stops the background replay, then drains for at most `timeout_ms` (0: no drain).
    /// Idempotent; later `begin` calls raise `ClientClosedError`.
    fn close(&self, py: Python<'_>, timeout_ms: u64) -> PyResult<String> {
        guard(|| {
            self.closed.store(true, Ordering::SeqCst);
            let replay = self.replay.lock().unwrap_or_else(|p| p.into_inner()).take();
            let s = self.guard.settler().clone();
            let t = Duration::from_millis(timeout_ms);
            let report = block(py, false, async move {
                if let Some(r) = replay {
                    r.stop().await;
                }
                if t.is_zero() {
                    drain_json(&DrainReport {
                        remaining: s.pending().await,
                        ..DrainReport::default()
                    })
                } else {
                    drain_json(&s.drain(t).await)
                }
            });
            self.drained.store(true, Ordering::SeqCst);
            report
        })
    }

    #[getter]
    fn closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// Events delivered so far (waits up to `timeout_ms` for the first, GIL released); `None`
    /// once the lifecycle is closed and nothing is left.
    fn next_events(&self, py: Python<'_>, timeout_ms: u64) -> Option<Vec<String>> {
        let closed = self.drained.load(Ordering::SeqCst);
        py.detach(|| {
            let rx = self.events.lock().unwrap_or_else(|p| p.into_inner());
            let mut out = Vec::new();
            if closed {
                // Closed: hand over what is queued, then report the end without waiting.
                out.extend(rx.try_iter());
                return (!out.is_empty()).then_some(out);
            }
            match rx.recv_timeout(Duration::from_millis(timeout_ms)) {
                Ok(e) => out.push(e),
                Err(RecvTimeoutError::Timeout) => return Some(out),
                Err(RecvTimeoutError::Disconnected) => return None,
            }
            while let Ok(e) = rx.try_recv() {
                out.push(e);
            }
            Some(out)
        })
    }
}

/// A running guarded action (core's `ActiveGuard`) and its `Usage`.
#[pyclass(module = "cycles._native", name = "NativeActive", frozen)]
pub struct NativeActive {
    reservation_id: String,
    usage: Usage,
    active: Mutex<Option<ActiveGuard>>,
}

impl NativeActive {
    fn take(&self) -> PyResult<ActiveGuard> {
        self.active
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
            .ok_or_else(|| invalid("this guarded action has already finished"))
    }
}

#[pymethods]
impl NativeActive {
    #[getter]
    fn reservation_id(&self) -> String {
        self.reservation_id.clone()
    }

    fn set_actual(&self, amount: i64) {
        self.usage.set_actual(amount);
    }

    fn add(&self, amount: i64) {
        self.usage.add(amount);
    }

    fn actual(&self) -> Option<i64> {
        self.usage.actual()
    }

    /// `json` is Python's `json.dumps` text; core keeps `custom` exactly as written (big
    /// integers, `-0.0`, lone-surrogate escapes), never through a `serde_json::Value`.
    fn set_metrics(&self, json: &str) -> PyResult<()> {
        self.usage.set_metrics_json(json).map_err(|e| core_err(&e))
    }

    /// As `set_metrics`: the metadata text reaches the journal and the wire unchanged.
    fn set_metadata(&self, json: &str) -> PyResult<()> {
        self.usage.set_metadata_json(json).map_err(|e| core_err(&e))
    }

    /// True once the heartbeat cancelled the work (`cancel` policy).
    #[getter]
    fn cancelled(&self) -> bool {
        self.usage.cancellation().is_cancelled()
    }

    #[getter]
    fn finished(&self) -> bool {
        self.active
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_none()
    }

    /// Phase two (blocking, GIL released): a JSON description of core's `Finished`.
    fn finish(&self, py: Python<'_>, work_succeeded: bool) -> PyResult<String> {
        guard(|| {
            let a = self.take()?;
            block(py, false, async move {
                finished_json(&a.finish(work_succeeded).await).to_string()
            })
        })
    }

    fn finish_async<'py>(
        &self,
        py: Python<'py>,
        work_succeeded: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        guard(|| {
            let a = self.take()?;
            awaitable(py, async move {
                Ok(finished_json(&a.finish(work_succeeded).await).to_string())
            })
        })
    }
}
