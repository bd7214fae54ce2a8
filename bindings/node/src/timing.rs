//! `cycles-sdk/timing`: the pure heartbeat math of `cycles_core::timing`, unchanged.
//!
//! Values cross as JSON in the shared vectors' encoding (conformance/vectors/heartbeat.json):
//! an integer within ±(2^53 − 1) is a JSON number, a larger one a decimal string, the
//! infinities `"infinite"` / `"-infinite"`, absent `null`. The TypeScript layer maps them to
//! `number`, `bigint` and `±Infinity`. Decisions are `{"extend": {"delay_ms", "key"}}` or
//! `{"stop": reason, "detail": {...}}` (core's stable stop names and detail fields).

use std::sync::Mutex;

use cycles_bridge::timing::{
    key_use_name, parse_failure, parse_regime, regime_name, retry_after_kind,
};
use cycles_core::timing::fallback::{self, FallbackPlanner};
use cycles_core::timing::retry::{self, RetryAfter};
use cycles_core::timing::{primary, timeout, Decision, Millis, PrimaryPlanner, SignedMillis};
use napi_derive::napi;
use serde_json::{json, Value};

use crate::errors::{core, guard, invalid};

const SAFE: i128 = (1 << 53) - 1;

fn int_out(v: i128) -> Value {
    if (-SAFE..=SAFE).contains(&v) {
        json!(v as i64)
    } else {
        json!(v.to_string())
    }
}

fn millis_out(m: Millis) -> Value {
    match m {
        Millis::Finite(v) => int_out(v.into()),
        Millis::Infinite => json!("infinite"),
    }
}

fn signed_out(m: SignedMillis) -> Value {
    match m {
        SignedMillis::Finite(v) => int_out(v),
        SignedMillis::PosInfinite => json!("infinite"),
        SignedMillis::NegInfinite => json!("-infinite"),
    }
}

/// An integer of the encoding (`None` for anything else).
fn int_in(v: &Value) -> Option<i128> {
    match v {
        Value::Number(n) => n.as_i64().map(i128::from).or(n.as_u64().map(i128::from)),
        Value::String(s) => s.parse::<i128>().ok(),
        _ => None,
    }
}

/// The arguments of one call, read by position.
struct In<'a>(&'a [Value]);

impl In<'_> {
    fn at(&self, i: usize) -> &Value {
        self.0.get(i).unwrap_or(&Value::Null)
    }

    fn millis(&self, i: usize, name: &str) -> napi::Result<Millis> {
        let v = self.at(i);
        if v == "infinite" {
            return Ok(Millis::Infinite);
        }
        int_in(v)
            .and_then(|n| u64::try_from(n).ok())
            .map(Millis::ms)
            .ok_or_else(|| {
                invalid(format!(
                    "{name} must be a non-negative integer (milliseconds) below 2^64, or Infinity"
                ))
            })
    }

    fn opt_millis(&self, i: usize, name: &str) -> napi::Result<Option<Millis>> {
        if self.at(i).is_null() {
            return Ok(None);
        }
        self.millis(i, name).map(Some)
    }

    fn signed(&self, i: usize, name: &str) -> napi::Result<SignedMillis> {
        match self.at(i) {
            v if v == "infinite" => Ok(SignedMillis::PosInfinite),
            v if v == "-infinite" => Ok(SignedMillis::NegInfinite),
            v => int_in(v)
                .map(SignedMillis::Finite)
                .ok_or_else(|| invalid(format!("{name} must be an integer or ±Infinity"))),
        }
    }

    fn uint<T: TryFrom<i128>>(&self, i: usize, name: &str) -> napi::Result<T> {
        int_in(self.at(i))
            .and_then(|n| T::try_from(n).ok())
            .ok_or_else(|| invalid(format!("{name} must be an integer in range")))
    }

    fn opt_str(&self, i: usize) -> Option<&str> {
        self.at(i).as_str()
    }

    fn str(&self, i: usize, name: &str) -> napi::Result<&str> {
        self.opt_str(i)
            .ok_or_else(|| invalid(format!("{name} must be a string")))
    }

    /// `[kind, retry_after, status, code]` from position `i` on: an extend failure.
    fn failure(&self, i: usize) -> napi::Result<cycles_core::timing::ExtendFailure> {
        let status = if self.at(i + 2).is_null() {
            None
        } else {
            Some(self.uint::<u16>(i + 2, "status")?)
        };
        parse_failure(
            self.str(i, "failure kind")?,
            self.opt_str(i + 1),
            status,
            self.opt_str(i + 3),
        )
        .map_err(core)
    }
}

fn decision_out(d: &Decision) -> Value {
    match d {
        Decision::Extend { delay, key } => {
            json!({"extend": {"delay_ms": millis_out(*delay), "key": key_use_name(*key)}})
        }
        Decision::Stop(reason) => {
            use cycles_core::timing::StopReason as S;
            let detail = match reason {
                S::NoSafeRetryWindow { retry_window } => {
                    json!({"retry_window_ms": signed_out(*retry_window)})
                }
                S::RateLimitBeyondWindow {
                    retry_after,
                    retry_window,
                } => {
                    let (kind, secs) = retry_after_kind(*retry_after);
                    json!({"retry_after_kind": kind, "retry_after_seconds": secs,
                           "retry_window_ms": signed_out(*retry_window)})
                }
                S::Permanent(code) => json!({ "code": code }),
                S::Rejected { status, code } => json!({"status": status, "code": code}),
                _ => json!({}),
            };
            json!({"stop": reason.name(), "detail": detail})
        }
    }
}

fn parse_args(args_json: &str) -> napi::Result<Vec<Value>> {
    serde_json::from_str(args_json).map_err(|e| invalid(format!("timing arguments: {e}")))
}

/// One pure timing function by name, its arguments a JSON array; the result as JSON.
#[napi]
pub fn timing_call(name: String, args_json: String) -> napi::Result<String> {
    guard(|| {
        let args = parse_args(&args_json)?;
        let a = In(&args);
        let out = match name.as_str() {
            "from_micros_ceil" => millis_out(Millis::from_micros_ceil(a.uint(0, "micros")?)),
            "from_micros_floor" => millis_out(Millis::from_micros_floor(a.uint(0, "micros")?)),
            "schedule" => {
                let s = primary::schedule(
                    a.uint(0, "remaining_ttl_ms")?,
                    a.opt_millis(1, "rtt_ms")?,
                    a.opt_millis(2, "max_rtt_ms")?,
                    a.millis(3, "request_timeout_ms")?,
                );
                json!({
                    "lead_floor_ms": millis_out(s.lead_floor),
                    "attempt_budget_ms": millis_out(s.attempt_budget),
                    "safety_margin_ms": millis_out(s.safety_margin),
                    "retry_reserve_ms": millis_out(s.retry_reserve),
                    "next_delay_ms": millis_out(s.next_delay),
                })
            }
            "lead_floor" => millis_out(primary::lead_floor(
                a.uint(0, "remaining_ttl_ms")?,
                a.opt_millis(1, "rtt_ms")?,
            )),
            "attempt_budget" => millis_out(primary::attempt_budget(
                a.millis(0, "request_timeout_ms")?,
                a.opt_millis(1, "max_rtt_ms")?,
            )),
            "safety_margin" => millis_out(primary::safety_margin(a.opt_millis(0, "max_rtt_ms")?)),
            "retry_reserve" => millis_out(primary::retry_reserve(
                a.millis(0, "attempt_budget_ms")?,
                a.millis(1, "safety_margin_ms")?,
            )),
            "next_delay" => millis_out(primary::next_delay(
                a.millis(0, "lead_floor_ms")?,
                a.millis(1, "retry_reserve_ms")?,
            )),
            "current_lead_estimate" => millis_out(retry::current_lead_estimate(
                a.millis(0, "last_lead_floor_ms")?,
                a.millis(1, "elapsed_ms")?,
            )),
            "retry_window" => signed_out(retry::retry_window(
                a.millis(0, "current_lead_estimate_ms")?,
                a.millis(1, "attempt_budget_ms")?,
                a.millis(2, "safety_margin_ms")?,
            )),
            "transient_retry_delay" => millis_out(retry::transient_retry_delay(
                a.millis(0, "current_lead_estimate_ms")?,
                a.signed(1, "retry_window_ms")?,
            )),
            "parse_retry_after" => {
                let parsed = RetryAfter::parse(a.opt_str(0));
                let (kind, secs) = retry_after_kind(parsed);
                json!({"kind": kind, "seconds": secs, "ms": parsed.to_millis().map(|m| int_out(m.into()))})
            }
            "is_permanent_stop_code" => json!(retry::is_permanent_stop_code(a.str(0, "code")?)),
            "permanent_stop_codes" => json!(retry::PERMANENT_STOP_CODES),
            "classify_grant" => json!(regime_name(fallback::classify_grant(
                a.uint(0, "grant_ms")?,
                a.millis(1, "elapsed_ms")?,
                a.uint(2, "requested_ttl_ms")?,
            ))),
            "cadence" => millis_out(fallback::cadence(
                parse_regime(a.str(0, "regime")?).map_err(core)?,
                a.uint(1, "last_grant_ms")?,
                a.uint(2, "requested_ttl_ms")?,
            )),
            "delay_with_skips" => millis_out(fallback::delay_with_skips(
                a.uint(0, "lead_min_now_ms")?,
                a.uint(1, "last_grant_ms")?,
                a.millis(2, "cadence_ms")?,
            )),
            "extend_timeout" => {
                let lead = a.millis(0, "lead_floor_ms")?;
                let max_rtt = a.opt_millis(1, "max_rtt_ms")?;
                let t =
                    timeout::extend_timeout(lead, max_rtt, a.millis(2, "configured_timeout_ms")?);
                json!({
                    "timeout_ms": millis_out(t.timeout),
                    "source": t.source.name(),
                    "min_lead_floor_ms": millis_out(t.min_lead_floor),
                    "max_keeping_timeout_ms": timeout::max_keeping_timeout(lead, max_rtt).map(millis_out),
                    "target_timeout_ms": millis_out(timeout::target_timeout(lead, max_rtt)),
                    "attempt_cutoff_ms": millis_out(timeout::attempt_cutoff(t.timeout)),
                })
            }
            "min_lead_floor" => millis_out(timeout::min_lead_floor(
                a.millis(0, "timeout_ms")?,
                a.opt_millis(1, "max_rtt_ms")?,
            )),
            "attempt_cutoff" => millis_out(timeout::attempt_cutoff(a.millis(0, "timeout_ms")?)),
            other => return Err(invalid(format!("unknown timing function {other:?}"))),
        };
        Ok(out.to_string())
    })
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Core's primary heartbeat planner; methods take and return JSON in the vectors' encoding.
#[napi]
pub struct NativePrimaryPlanner {
    inner: Mutex<PrimaryPlanner>,
}

#[napi]
impl NativePrimaryPlanner {
    /// `[request_timeout_ms, derive_timeout]`.
    #[napi(constructor)]
    pub fn new(args_json: String) -> napi::Result<Self> {
        guard(|| {
            let args = parse_args(&args_json)?;
            let a = In(&args);
            let t = a.millis(0, "request_timeout_ms")?;
            let p = if a.at(1).as_bool().unwrap_or(false) {
                PrimaryPlanner::with_derived_timeout(t)
            } else {
                PrimaryPlanner::new(t)
            };
            Ok(NativePrimaryPlanner {
                inner: Mutex::new(p),
            })
        })
    }

    /// `on_success [received_us, remaining_ttl_ms, rtt_ms]`, `on_failure [now_us, kind,
    /// retry_after, status, code]`, `observe_rtt [rtt_ms]`, `attempt_timeout_ms []`,
    /// `max_rtt_ms []`, `failure_math [now_us]`.
    #[napi]
    pub fn call(&self, method: String, args_json: String) -> napi::Result<String> {
        guard(|| {
            let args = parse_args(&args_json)?;
            let a = In(&args);
            let mut p = lock(&self.inner);
            let out = match method.as_str() {
                "on_success" => decision_out(&p.on_success(
                    a.uint(0, "received_us")?,
                    a.uint(1, "remaining_ttl_ms")?,
                    a.opt_millis(2, "rtt_ms")?,
                )),
                "on_failure" => {
                    let f = a.failure(1)?;
                    decision_out(&p.on_failure(a.uint(0, "now_us")?, &f))
                }
                "observe_rtt" => {
                    p.observe_rtt(a.millis(0, "rtt_ms")?);
                    Value::Null
                }
                "attempt_timeout_ms" => millis_out(p.attempt_timeout()),
                "max_rtt_ms" => p.max_rtt().map_or(Value::Null, millis_out),
                "failure_math" => p
                    .failure_math(a.uint(0, "now_us")?)
                    .map_or(Value::Null, |m| {
                        json!({"elapsed_ms": millis_out(m.elapsed),
                           "current_lead_estimate_ms": millis_out(m.current_lead_estimate),
                           "retry_window_ms": signed_out(m.retry_window)})
                    }),
                other => return Err(invalid(format!("unknown planner method {other:?}"))),
            };
            Ok(out.to_string())
        })
    }
}

/// Core's fallback heartbeat planner (no `remaining_ttl_ms` from the server).
#[napi]
pub struct NativeFallbackPlanner {
    inner: Mutex<FallbackPlanner>,
}

#[napi]
impl NativeFallbackPlanner {
    /// `[requested_ttl_ms, reserve_received_us, expires_at_ms]`.
    #[napi(constructor)]
    pub fn new(args_json: String) -> napi::Result<Self> {
        guard(|| {
            let args = parse_args(&args_json)?;
            let a = In(&args);
            Ok(NativeFallbackPlanner {
                inner: Mutex::new(FallbackPlanner::new(
                    a.uint(0, "requested_ttl_ms")?,
                    a.uint(1, "reserve_received_us")?,
                    a.uint(2, "expires_at_ms")?,
                )),
            })
        })
    }

    /// `first_beat [prime]`, `on_success [received_us, expires_at_ms]`, `on_failure [now_us,
    /// kind, retry_after, status, code]`, `regime []`, `last_grant_ms []`, `lead_min_ms [now_us]`.
    #[napi]
    pub fn call(&self, method: String, args_json: String) -> napi::Result<String> {
        guard(|| {
            let args = parse_args(&args_json)?;
            let a = In(&args);
            let mut p = lock(&self.inner);
            let out = match method.as_str() {
                "first_beat" => decision_out(&p.first_beat(a.at(0).as_bool().unwrap_or(true))),
                "on_success" => decision_out(
                    &p.on_success(a.uint(0, "received_us")?, a.uint(1, "expires_at_ms")?),
                ),
                "on_failure" => {
                    let f = a.failure(1)?;
                    decision_out(&p.on_failure(a.uint(0, "now_us")?, &f))
                }
                "regime" => json!(regime_name(p.regime())),
                "last_grant_ms" => p.last_grant_ms().map_or(Value::Null, |g| int_out(g.into())),
                "lead_min_ms" => int_out(p.lead_min_ms(a.uint(0, "now_us")?)),
                other => return Err(invalid(format!("unknown planner method {other:?}"))),
            };
            Ok(out.to_string())
        })
    }
}
