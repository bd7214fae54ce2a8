//! `cycles.timing`: the pure heartbeat math of `cycles_core::timing`, unchanged.
//!
//! Durations cross as Python ints; positive infinity (`Millis::Infinite`, and the positive
//! infinite `SignedMillis`) is `math.inf`, negative infinity is `-math.inf`. Decisions cross
//! as tuples: `("extend", delay, "fresh"|"same")` or `("stop", reason, detail_dict)`.

use std::sync::Mutex;

use cycles_bridge::timing::{
    key_use_name, parse_failure, parse_regime, regime_name, retry_after_kind,
};
use cycles_core::timing::fallback::{self, FallbackPlanner};
use cycles_core::timing::primary;
use cycles_core::timing::retry::{self, RetryAfter};
use cycles_core::timing::timeout;
use cycles_core::timing::{Decision, Millis, SignedMillis, StopReason};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use crate::errors::{core_err, guard, invalid};

fn millis_in(v: &Bound<'_, PyAny>, name: &str) -> PyResult<Millis> {
    if let Ok(n) = v.extract::<u64>() {
        return Ok(Millis::ms(n));
    }
    match v.extract::<f64>() {
        Ok(f) if f.is_infinite() && f > 0.0 => Ok(Millis::Infinite),
        _ => Err(invalid(format!(
            "{name} must be a non-negative integer (milliseconds) below 2**64, or math.inf"
        ))),
    }
}

fn opt_millis_in(v: Option<&Bound<'_, PyAny>>, name: &str) -> PyResult<Option<Millis>> {
    match v {
        None => Ok(None),
        Some(v) if v.is_none() => Ok(None),
        Some(v) => millis_in(v, name).map(Some),
    }
}

fn signed_in(v: &Bound<'_, PyAny>, name: &str) -> PyResult<SignedMillis> {
    if let Ok(n) = v.extract::<i128>() {
        return Ok(SignedMillis::Finite(n));
    }
    match v.extract::<f64>() {
        Ok(f) if f == f64::INFINITY => Ok(SignedMillis::PosInfinite),
        Ok(f) if f == f64::NEG_INFINITY => Ok(SignedMillis::NegInfinite),
        _ => Err(invalid(format!(
            "{name} must be an integer, math.inf or -math.inf"
        ))),
    }
}

fn millis_out(py: Python<'_>, m: Millis) -> PyResult<Py<PyAny>> {
    Ok(match m {
        Millis::Finite(v) => v.into_pyobject(py)?.into_any().unbind(),
        Millis::Infinite => f64::INFINITY.into_pyobject(py)?.into_any().unbind(),
    })
}

fn signed_out(py: Python<'_>, m: SignedMillis) -> PyResult<Py<PyAny>> {
    Ok(match m {
        SignedMillis::Finite(v) => v.into_pyobject(py)?.into_any().unbind(),
        SignedMillis::PosInfinite => f64::INFINITY.into_pyobject(py)?.into_any().unbind(),
        SignedMillis::NegInfinite => f64::NEG_INFINITY.into_pyobject(py)?.into_any().unbind(),
    })
}

fn decision_out(py: Python<'_>, d: &Decision) -> PyResult<Py<PyAny>> {
    match d {
        Decision::Extend { delay, key } => {
            let key = key_use_name(*key);
            let t = PyTuple::new(
                py,
                [
                    "extend".into_pyobject(py)?.into_any(),
                    millis_out(py, *delay)?.into_bound(py),
                    key.into_pyobject(py)?.into_any(),
                ],
            )?;
            Ok(t.into_any().unbind())
        }
        Decision::Stop(reason) => {
            let detail = PyDict::new(py);
            // The name is core's (the same in every binding); the detail keeps Python's own
            // types (float infinities for unbounded windows).
            let name = reason.name();
            match reason {
                StopReason::NoSafeRetryWindow { retry_window } => {
                    detail.set_item("retry_window_ms", signed_out(py, *retry_window)?)?;
                }
                StopReason::RateLimitBeyondWindow {
                    retry_after,
                    retry_window,
                } => {
                    let (kind, secs) = retry_after_kind(*retry_after);
                    detail.set_item("retry_after_kind", kind)?;
                    detail.set_item("retry_after_seconds", secs)?;
                    detail.set_item("retry_window_ms", signed_out(py, *retry_window)?)?;
                }
                StopReason::Permanent(code) => detail.set_item("code", code)?,
                StopReason::Rejected { status, code } => {
                    detail.set_item("status", status)?;
                    detail.set_item("code", code)?;
                }
                StopReason::LeaseShorterThanRetryBudget
                | StopReason::ZeroWindowRetryFailed
                | StopReason::NoProgress
                | StopReason::NoValidResponse => {}
            }
            let t = PyTuple::new(
                py,
                [
                    "stop".into_pyobject(py)?.into_any(),
                    name.into_pyobject(py)?.into_any(),
                    detail.into_any(),
                ],
            )?;
            Ok(t.into_any().unbind())
        }
    }
}

/// `Millis::from_micros_ceil`: microseconds rounded up to whole milliseconds.
#[pyfunction]
fn from_micros_ceil(py: Python<'_>, micros: u128) -> PyResult<Py<PyAny>> {
    guard(|| millis_out(py, Millis::from_micros_ceil(micros)))
}

/// `Millis::from_micros_floor`: microseconds rounded down to whole milliseconds.
#[pyfunction]
fn from_micros_floor(py: Python<'_>, micros: u128) -> PyResult<Py<PyAny>> {
    guard(|| millis_out(py, Millis::from_micros_floor(micros)))
}

/// `primary::schedule` as a dict of its five values.
#[pyfunction]
#[pyo3(signature = (remaining_ttl_ms, rtt_ms, max_rtt_ms, request_timeout_ms))]
fn schedule<'py>(
    py: Python<'py>,
    remaining_ttl_ms: u64,
    rtt_ms: Option<&Bound<'py, PyAny>>,
    max_rtt_ms: Option<&Bound<'py, PyAny>>,
    request_timeout_ms: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyDict>> {
    guard(|| {
        let s = primary::schedule(
            remaining_ttl_ms,
            opt_millis_in(rtt_ms, "rtt_ms")?,
            opt_millis_in(max_rtt_ms, "max_rtt_ms")?,
            millis_in(request_timeout_ms, "request_timeout_ms")?,
        );
        let d = PyDict::new(py);
        d.set_item("lead_floor_ms", millis_out(py, s.lead_floor)?)?;
        d.set_item("attempt_budget_ms", millis_out(py, s.attempt_budget)?)?;
        d.set_item("safety_margin_ms", millis_out(py, s.safety_margin)?)?;
        d.set_item("retry_reserve_ms", millis_out(py, s.retry_reserve)?)?;
        d.set_item("next_delay_ms", millis_out(py, s.next_delay)?)?;
        Ok(d)
    })
}

#[pyfunction]
#[pyo3(signature = (remaining_ttl_ms, rtt_ms))]
fn lead_floor(
    py: Python<'_>,
    remaining_ttl_ms: u64,
    rtt_ms: Option<&Bound<'_, PyAny>>,
) -> PyResult<Py<PyAny>> {
    guard(|| {
        millis_out(
            py,
            primary::lead_floor(remaining_ttl_ms, opt_millis_in(rtt_ms, "rtt_ms")?),
        )
    })
}

#[pyfunction]
#[pyo3(signature = (request_timeout_ms, max_rtt_ms))]
fn attempt_budget(
    py: Python<'_>,
    request_timeout_ms: &Bound<'_, PyAny>,
    max_rtt_ms: Option<&Bound<'_, PyAny>>,
) -> PyResult<Py<PyAny>> {
    guard(|| {
        millis_out(
            py,
            primary::attempt_budget(
                millis_in(request_timeout_ms, "request_timeout_ms")?,
                opt_millis_in(max_rtt_ms, "max_rtt_ms")?,
            ),
        )
    })
}

#[pyfunction]
#[pyo3(signature = (max_rtt_ms))]
fn safety_margin(py: Python<'_>, max_rtt_ms: Option<&Bound<'_, PyAny>>) -> PyResult<Py<PyAny>> {
    guard(|| {
        millis_out(
            py,
            primary::safety_margin(opt_millis_in(max_rtt_ms, "max_rtt_ms")?),
        )
    })
}

#[pyfunction]
fn retry_reserve(
    py: Python<'_>,
    attempt_budget_ms: &Bound<'_, PyAny>,
    safety_margin_ms: &Bound<'_, PyAny>,
) -> PyResult<Py<PyAny>> {
    guard(|| {
        millis_out(
            py,
            primary::retry_reserve(
                millis_in(attempt_budget_ms, "attempt_budget_ms")?,
                millis_in(safety_margin_ms, "safety_margin_ms")?,
            ),
        )
    })
}

#[pyfunction]
fn next_delay(
    py: Python<'_>,
    lead_floor_ms: &Bound<'_, PyAny>,
    retry_reserve_ms: &Bound<'_, PyAny>,
) -> PyResult<Py<PyAny>> {
    guard(|| {
        millis_out(
            py,
            primary::next_delay(
                millis_in(lead_floor_ms, "lead_floor_ms")?,
                millis_in(retry_reserve_ms, "retry_reserve_ms")?,
            ),
        )
    })
}

#[pyfunction]
fn current_lead_estimate(
    py: Python<'_>,
    last_lead_floor_ms: &Bound<'_, PyAny>,
    elapsed_ms: &Bound<'_, PyAny>,
) -> PyResult<Py<PyAny>> {
    guard(|| {
        millis_out(
            py,
            retry::current_lead_estimate(
                millis_in(last_lead_floor_ms, "last_lead_floor_ms")?,
                millis_in(elapsed_ms, "elapsed_ms")?,
            ),
        )
    })
}

#[pyfunction]
fn retry_window(
    py: Python<'_>,
    current_lead_estimate_ms: &Bound<'_, PyAny>,
    attempt_budget_ms: &Bound<'_, PyAny>,
    safety_margin_ms: &Bound<'_, PyAny>,
) -> PyResult<Py<PyAny>> {
    guard(|| {
        signed_out(
            py,
            retry::retry_window(
                millis_in(current_lead_estimate_ms, "current_lead_estimate_ms")?,
                millis_in(attempt_budget_ms, "attempt_budget_ms")?,
                millis_in(safety_margin_ms, "safety_margin_ms")?,
            ),
        )
    })
}

#[pyfunction]
fn transient_retry_delay(
    py: Python<'_>,
    current_lead_estimate_ms: &Bound<'_, PyAny>,
    retry_window_ms: &Bound<'_, PyAny>,
) -> PyResult<Py<PyAny>> {
    guard(|| {
        millis_out(
            py,
            retry::transient_retry_delay(
                millis_in(current_lead_estimate_ms, "current_lead_estimate_ms")?,
                signed_in(retry_window_ms, "retry_window_ms")?,
            ),
        )
    })
}

/// `(kind, seconds, ms)` of a raw Retry-After value (`None` = header absent).
#[pyfunction]
#[pyo3(signature = (raw))]
fn parse_retry_after(raw: Option<&str>) -> PyResult<(&'static str, Option<u64>, Option<u64>)> {
    guard(|| {
        let parsed = RetryAfter::parse(raw);
        let (kind, secs) = retry_after_kind(parsed);
        Ok((kind, secs, parsed.to_millis()))
    })
}

#[pyfunction]
fn is_permanent_stop_code(code: &str) -> bool {
    retry::is_permanent_stop_code(code)
}

#[pyfunction]
fn permanent_stop_codes() -> Vec<&'static str> {
    retry::PERMANENT_STOP_CODES.to_vec()
}

#[pyfunction]
fn classify_grant(
    grant_ms: i64,
    elapsed_ms: &Bound<'_, PyAny>,
    requested_ttl_ms: u64,
) -> PyResult<&'static str> {
    guard(|| {
        Ok(regime_name(fallback::classify_grant(
            grant_ms,
            millis_in(elapsed_ms, "elapsed_ms")?,
            requested_ttl_ms,
        )))
    })
}

#[pyfunction]
fn cadence(
    py: Python<'_>,
    regime: &str,
    last_grant_ms: i64,
    requested_ttl_ms: u64,
) -> PyResult<Py<PyAny>> {
    guard(|| {
        millis_out(
            py,
            fallback::cadence(
                parse_regime(regime).map_err(|e| core_err(&e))?,
                last_grant_ms,
                requested_ttl_ms,
            ),
        )
    })
}

#[pyfunction]
fn delay_with_skips(
    py: Python<'_>,
    lead_min_now_ms: i128,
    last_grant_ms: i64,
    cadence_ms: &Bound<'_, PyAny>,
) -> PyResult<Py<PyAny>> {
    guard(|| {
        millis_out(
            py,
            fallback::delay_with_skips(
                lead_min_now_ms,
                last_grant_ms,
                millis_in(cadence_ms, "cadence_ms")?,
            ),
        )
    })
}

/// `timeout::extend_timeout` as a dict: `timeout_ms`, `source` (`configured`, `derived`,
/// `too_short`), `min_lead_floor_ms`, plus `max_keeping_timeout_ms` (None when no timeout
/// keeps the lead alive), `target_timeout_ms` and `attempt_cutoff_ms`.
#[pyfunction]
#[pyo3(signature = (lead_floor_ms, max_rtt_ms, configured_timeout_ms))]
fn extend_timeout<'py>(
    py: Python<'py>,
    lead_floor_ms: &Bound<'py, PyAny>,
    max_rtt_ms: Option<&Bound<'py, PyAny>>,
    configured_timeout_ms: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyDict>> {
    guard(|| {
        let lead = millis_in(lead_floor_ms, "lead_floor_ms")?;
        let max_rtt = opt_millis_in(max_rtt_ms, "max_rtt_ms")?;
        let configured = millis_in(configured_timeout_ms, "configured_timeout_ms")?;
        let t = timeout::extend_timeout(lead, max_rtt, configured);
        let d = PyDict::new(py);
        d.set_item("timeout_ms", millis_out(py, t.timeout)?)?;
        d.set_item("source", t.source.name())?;
        d.set_item("min_lead_floor_ms", millis_out(py, t.min_lead_floor)?)?;
        d.set_item(
            "max_keeping_timeout_ms",
            timeout::max_keeping_timeout(lead, max_rtt)
                .map(|m| millis_out(py, m))
                .transpose()?,
        )?;
        d.set_item(
            "target_timeout_ms",
            millis_out(py, timeout::target_timeout(lead, max_rtt))?,
        )?;
        d.set_item(
            "attempt_cutoff_ms",
            millis_out(py, timeout::attempt_cutoff(t.timeout))?,
        )?;
        Ok(d)
    })
}

/// `timeout::min_lead_floor`: the smallest lead a given timeout keeps alive.
#[pyfunction]
#[pyo3(signature = (timeout_ms, max_rtt_ms))]
fn min_lead_floor(
    py: Python<'_>,
    timeout_ms: &Bound<'_, PyAny>,
    max_rtt_ms: Option<&Bound<'_, PyAny>>,
) -> PyResult<Py<PyAny>> {
    guard(|| {
        millis_out(
            py,
            timeout::min_lead_floor(
                millis_in(timeout_ms, "timeout_ms")?,
                opt_millis_in(max_rtt_ms, "max_rtt_ms")?,
            ),
        )
    })
}

/// `timeout::attempt_cutoff`: where an attempt with this budget is cut off.
#[pyfunction]
fn attempt_cutoff(py: Python<'_>, timeout_ms: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
    guard(|| {
        millis_out(
            py,
            timeout::attempt_cutoff(millis_in(timeout_ms, "timeout_ms")?),
        )
    })
}

/// `(elapsed_ms, current_lead_estimate_ms, retry_window_ms)`.
type Triple = (Py<PyAny>, Py<PyAny>, Py<PyAny>);

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// `cycles_core::timing::PrimaryPlanner` (the normative heartbeat state machine).
#[pyclass(module = "cycles._native", name = "PrimaryPlanner", frozen)]
pub struct PyPrimaryPlanner {
    inner: Mutex<cycles_core::timing::PrimaryPlanner>,
}

#[pymethods]
impl PyPrimaryPlanner {
    #[new]
    #[pyo3(signature = (request_timeout_ms, derive_timeout=false))]
    fn new(request_timeout_ms: &Bound<'_, PyAny>, derive_timeout: bool) -> PyResult<Self> {
        guard(|| {
            let t = millis_in(request_timeout_ms, "request_timeout_ms")?;
            let p = if derive_timeout {
                cycles_core::timing::PrimaryPlanner::with_derived_timeout(t)
            } else {
                cycles_core::timing::PrimaryPlanner::new(t)
            };
            Ok(PyPrimaryPlanner {
                inner: Mutex::new(p),
            })
        })
    }

    /// The enforced timeout the next extend attempt must use.
    #[getter]
    fn attempt_timeout_ms(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        guard(|| millis_out(py, lock(&self.inner).attempt_timeout()))
    }

    #[pyo3(signature = (received_us, remaining_ttl_ms, rtt_ms))]
    fn on_success(
        &self,
        py: Python<'_>,
        received_us: u64,
        remaining_ttl_ms: u64,
        rtt_ms: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        guard(|| {
            let rtt = opt_millis_in(rtt_ms, "rtt_ms")?;
            let d = lock(&self.inner).on_success(received_us, remaining_ttl_ms, rtt);
            decision_out(py, &d)
        })
    }

    #[pyo3(signature = (now_us, kind, retry_after=None, status=None, code=None))]
    fn on_failure(
        &self,
        py: Python<'_>,
        now_us: u64,
        kind: &str,
        retry_after: Option<&str>,
        status: Option<u16>,
        code: Option<&str>,
    ) -> PyResult<Py<PyAny>> {
        guard(|| {
            let f = parse_failure(kind, retry_after, status, code).map_err(|e| core_err(&e))?;
            let d = lock(&self.inner).on_failure(now_us, &f);
            decision_out(py, &d)
        })
    }

    fn observe_rtt(&self, rtt_ms: &Bound<'_, PyAny>) -> PyResult<()> {
        guard(|| {
            let rtt = millis_in(rtt_ms, "rtt_ms")?;
            lock(&self.inner).observe_rtt(rtt);
            Ok(())
        })
    }

    #[getter]
    fn max_rtt_ms(&self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        guard(|| {
            let m = lock(&self.inner).max_rtt();
            m.map(|m| millis_out(py, m)).transpose()
        })
    }

    /// `(elapsed_ms, current_lead_estimate_ms, retry_window_ms)` at `now_us`, or None before
    /// any success.
    fn failure_math(&self, py: Python<'_>, now_us: u64) -> PyResult<Option<Triple>> {
        guard(|| {
            let m = lock(&self.inner).failure_math(now_us);
            m.map(|m| {
                Ok((
                    millis_out(py, m.elapsed)?,
                    millis_out(py, m.current_lead_estimate)?,
                    signed_out(py, m.retry_window)?,
                ))
            })
            .transpose()
        })
    }
}

/// `cycles_core::timing::FallbackPlanner` (servers without `remaining_ttl_ms`).
#[pyclass(module = "cycles._native", name = "FallbackPlanner", frozen)]
pub struct PyFallbackPlanner {
    inner: Mutex<FallbackPlanner>,
}

#[pymethods]
impl PyFallbackPlanner {
    #[new]
    fn new(requested_ttl_ms: u64, reserve_received_us: u64, expires_at_ms: i64) -> Self {
        PyFallbackPlanner {
            inner: Mutex::new(FallbackPlanner::new(
                requested_ttl_ms,
                reserve_received_us,
                expires_at_ms,
            )),
        }
    }

    fn first_beat(&self, py: Python<'_>, prime: bool) -> PyResult<Py<PyAny>> {
        guard(|| decision_out(py, &lock(&self.inner).first_beat(prime)))
    }

    fn on_success(
        &self,
        py: Python<'_>,
        received_us: u64,
        expires_at_ms: i64,
    ) -> PyResult<Py<PyAny>> {
        guard(|| {
            let d = lock(&self.inner).on_success(received_us, expires_at_ms);
            decision_out(py, &d)
        })
    }

    #[pyo3(signature = (now_us, kind, retry_after=None, status=None, code=None))]
    fn on_failure(
        &self,
        py: Python<'_>,
        now_us: u64,
        kind: &str,
        retry_after: Option<&str>,
        status: Option<u16>,
        code: Option<&str>,
    ) -> PyResult<Py<PyAny>> {
        guard(|| {
            let f = parse_failure(kind, retry_after, status, code).map_err(|e| core_err(&e))?;
            let d = lock(&self.inner).on_failure(now_us, &f);
            decision_out(py, &d)
        })
    }

    #[getter]
    fn regime(&self) -> &'static str {
        regime_name(lock(&self.inner).regime())
    }

    #[getter]
    fn last_grant_ms(&self) -> Option<i64> {
        lock(&self.inner).last_grant_ms()
    }

    fn lead_min_ms(&self, now_us: u64) -> i128 {
        lock(&self.inner).lead_min_ms(now_us)
    }
}

/// Registers the timing functions and planners on the native module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(from_micros_ceil, m)?)?;
    m.add_function(wrap_pyfunction!(from_micros_floor, m)?)?;
    m.add_function(wrap_pyfunction!(schedule, m)?)?;
    m.add_function(wrap_pyfunction!(lead_floor, m)?)?;
    m.add_function(wrap_pyfunction!(attempt_budget, m)?)?;
    m.add_function(wrap_pyfunction!(safety_margin, m)?)?;
    m.add_function(wrap_pyfunction!(retry_reserve, m)?)?;
    m.add_function(wrap_pyfunction!(next_delay, m)?)?;
    m.add_function(wrap_pyfunction!(current_lead_estimate, m)?)?;
    m.add_function(wrap_pyfunction!(retry_window, m)?)?;
    m.add_function(wrap_pyfunction!(transient_retry_delay, m)?)?;
    m.add_function(wrap_pyfunction!(parse_retry_after, m)?)?;
    m.add_function(wrap_pyfunction!(is_permanent_stop_code, m)?)?;
    m.add_function(wrap_pyfunction!(permanent_stop_codes, m)?)?;
    m.add_function(wrap_pyfunction!(classify_grant, m)?)?;
    m.add_function(wrap_pyfunction!(cadence, m)?)?;
    m.add_function(wrap_pyfunction!(delay_with_skips, m)?)?;
    m.add_function(wrap_pyfunction!(extend_timeout, m)?)?;
    m.add_function(wrap_pyfunction!(min_lead_floor, m)?)?;
    m.add_function(wrap_pyfunction!(attempt_cutoff, m)?)?;
    m.add_class::<PyPrimaryPlanner>()?;
    m.add_class::<PyFallbackPlanner>()?;
    Ok(())
}
