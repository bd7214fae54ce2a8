//! Core's pure heartbeat math as JSON in, JSON out, for hosts without a typed timing surface
//! of their own (C, the JVM and Node). Values use the shared vectors' encoding
//! (`conformance/vectors/heartbeat.json`): durations are integers, a value beyond 2^53 - 1 is a
//! decimal string, `"infinite"` / `"-infinite"` are the infinities. Behaviour is core's; this
//! only converts.

use cycles_core::timing::fallback::{self, FallbackPlanner};
use cycles_core::timing::retry::{self, RetryAfter};
use cycles_core::timing::{
    primary, timeout, Decision, ExtendFailure, Millis, PrimaryPlanner, SignedMillis, StopReason,
};
use cycles_core::Error;
use serde_json::{json, Map, Value};

use crate::timing::{key_use_name, parse_failure, parse_regime, regime_name, retry_after_kind};

/// The largest integer every JSON reader represents exactly (JavaScript's safe integer).
const MAX_EXACT: u128 = (1 << 53) - 1;

fn bad(name: &str, what: &str) -> Error {
    Error::invalid_argument(format!("{name} must be {what}"))
}

fn int_text(v: &Value) -> Option<String> {
    match v {
        Value::Number(n) if n.is_i64() || n.is_u64() => Some(n.to_string()),
        Value::String(s) => Some(s.clone()),
        _ => None,
    }
}

/// A duration in the vector encoding (integer, decimal string or `"infinite"`).
pub fn millis_in(v: &Value, name: &str) -> Result<Millis, Error> {
    if v.as_str() == Some("infinite") {
        return Ok(Millis::Infinite);
    }
    int_text(v)
        .and_then(|t| t.parse::<u64>().ok())
        .map(Millis::ms)
        .ok_or_else(|| {
            bad(
                name,
                "a non-negative integer (milliseconds) or \"infinite\"",
            )
        })
}

/// The optional duration member `name` of `args` (absent or null: `None`).
pub fn opt_millis_in(args: &Value, name: &str) -> Result<Option<Millis>, Error> {
    match args.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => millis_in(v, name).map(Some),
    }
}

/// A signed duration in the vector encoding (integer, decimal string, `"infinite"` or
/// `"-infinite"`).
pub fn signed_in(v: &Value, name: &str) -> Result<SignedMillis, Error> {
    match v.as_str() {
        Some("infinite") => return Ok(SignedMillis::PosInfinite),
        Some("-infinite") => return Ok(SignedMillis::NegInfinite),
        _ => {}
    }
    int_text(v)
        .and_then(|t| t.parse::<i128>().ok())
        .map(SignedMillis::Finite)
        .ok_or_else(|| bad(name, "an integer, \"infinite\" or \"-infinite\""))
}

/// An integer in the vector encoding (a decimal string beyond 2^53 - 1).
pub fn int_out(v: i128) -> Value {
    if v.unsigned_abs() <= MAX_EXACT {
        json!(v as i64)
    } else {
        json!(v.to_string())
    }
}

/// A duration in the vector encoding.
pub fn millis_out(m: Millis) -> Value {
    match m {
        Millis::Finite(v) => int_out(i128::from(v)),
        Millis::Infinite => json!("infinite"),
    }
}

/// A signed duration in the vector encoding.
pub fn signed_out(m: SignedMillis) -> Value {
    match m {
        SignedMillis::Finite(v) => int_out(v),
        SignedMillis::PosInfinite => json!("infinite"),
        SignedMillis::NegInfinite => json!("-infinite"),
    }
}

/// The member `name` of `args`; missing or null is INVALID_ARGUMENT.
pub fn arg<'a>(args: &'a Value, name: &str) -> Result<&'a Value, Error> {
    args.get(name)
        .filter(|v| !v.is_null())
        .ok_or_else(|| Error::invalid_argument(format!("missing {name}")))
}

/// The duration member `name` of `args` (vector encoding).
pub fn millis_arg(args: &Value, name: &str) -> Result<Millis, Error> {
    millis_in(arg(args, name)?, name)
}

/// The integer member `name` of `args` (vector encoding) converted to `T`; a missing, null,
/// non-integer or out-of-range value is INVALID_ARGUMENT.
pub fn int_arg<T: TryFrom<i128>>(args: &Value, name: &str) -> Result<T, Error> {
    int_text(arg(args, name)?)
        .and_then(|t| t.parse::<i128>().ok())
        .and_then(|n| T::try_from(n).ok())
        .ok_or_else(|| bad(name, "an integer in range"))
}

/// A microsecond count (u128: wider than `int_arg`'s i128).
fn micros_arg(args: &Value) -> Result<u128, Error> {
    int_text(arg(args, "micros")?)
        .and_then(|t| t.parse::<u128>().ok())
        .ok_or_else(|| bad("micros", "a non-negative integer in range"))
}

/// The string member `name` of `args`.
pub fn str_arg<'a>(args: &'a Value, name: &str) -> Result<&'a str, Error> {
    arg(args, name)?
        .as_str()
        .ok_or_else(|| bad(name, "a string"))
}

/// A decision: `{"extend": {"delay_ms", "key"}}` or `{"stop": reason, ...detail}` (detail:
/// `code`, `status`, `retry_window_ms`, `retry_after_kind`, `retry_after_seconds` as they
/// apply; the names are core's `StopReason::name`).
pub fn decision_json(d: &Decision) -> Value {
    match d {
        Decision::Extend { delay, key } => {
            json!({"extend": {"delay_ms": millis_out(*delay), "key": key_use_name(*key)}})
        }
        Decision::Stop(reason) => {
            let mut o = Map::new();
            o.insert("stop".into(), json!(reason.name()));
            match reason {
                StopReason::NoSafeRetryWindow { retry_window } => {
                    o.insert("retry_window_ms".into(), signed_out(*retry_window));
                }
                StopReason::RateLimitBeyondWindow {
                    retry_after,
                    retry_window,
                } => {
                    let (kind, secs) = retry_after_kind(*retry_after);
                    o.insert("retry_after_kind".into(), json!(kind));
                    // The vectors' encoding: a header's seconds may exceed 2^53 - 1.
                    let secs = secs.map(|s| int_out(i128::from(s)));
                    o.insert("retry_after_seconds".into(), json!(secs));
                    o.insert("retry_window_ms".into(), signed_out(*retry_window));
                }
                StopReason::Permanent(code) => {
                    o.insert("code".into(), json!(code));
                }
                StopReason::Rejected { status, code } => {
                    o.insert("status".into(), json!(status));
                    o.insert("code".into(), json!(code));
                }
                StopReason::LeaseShorterThanRetryBudget
                | StopReason::ZeroWindowRetryFailed
                | StopReason::NoProgress
                | StopReason::NoValidResponse => {}
            }
            Value::Object(o)
        }
    }
}

/// `text` parsed as a JSON object (`what` names it in the INVALID_ARGUMENT otherwise).
pub fn parse(text: &str, what: &str) -> Result<Value, Error> {
    let v: Value = serde_json::from_str(text).map_err(|e| {
        Error::invalid_argument(format!("{what}: {}", cycles_core::error::json_reason(&e)))
    })?;
    if v.is_object() {
        Ok(v)
    } else {
        Err(Error::invalid_argument(format!(
            "{what}: expected a JSON object"
        )))
    }
}

/// One pure timing function by name, its arguments a JSON object, its result JSON text.
///
/// | name | arguments | result |
/// |---|---|---|
/// | `schedule` | `remaining_ttl_ms`, `rtt_ms`?, `max_rtt_ms`?, `request_timeout_ms` | object of `lead_floor_ms`, `attempt_budget_ms`, `safety_margin_ms`, `retry_reserve_ms`, `next_delay_ms` |
/// | `lead_floor` | `remaining_ttl_ms`, `rtt_ms`? | duration |
/// | `attempt_budget` | `request_timeout_ms`, `max_rtt_ms`? | duration |
/// | `safety_margin` | `max_rtt_ms`? | duration |
/// | `retry_reserve` | `attempt_budget_ms`, `safety_margin_ms` | duration |
/// | `next_delay` | `lead_floor_ms`, `retry_reserve_ms` | duration |
/// | `current_lead_estimate` | `last_lead_floor_ms`, `elapsed_ms` | duration |
/// | `retry_window` | `current_lead_estimate_ms`, `attempt_budget_ms`, `safety_margin_ms` | signed duration |
/// | `transient_retry_delay` | `current_lead_estimate_ms`, `retry_window_ms` | duration |
/// | `parse_retry_after` | `raw` (string or null) | `{"kind", "seconds", "ms"}` |
/// | `extend_timeout` | `lead_floor_ms`, `max_rtt_ms`?, `configured_timeout_ms` | `{"timeout_ms", "source", "min_lead_floor_ms", "max_keeping_timeout_ms", "target_timeout_ms", "attempt_cutoff_ms"}` |
/// | `min_lead_floor` | `timeout_ms`, `max_rtt_ms`? | duration |
/// | `attempt_cutoff` | `timeout_ms` | duration |
/// | `classify_grant` | `grant_ms`, `elapsed_ms`, `requested_ttl_ms` | regime name |
/// | `cadence` | `regime`, `last_grant_ms`, `requested_ttl_ms` | duration |
/// | `delay_with_skips` | `lead_min_now_ms`, `last_grant_ms`, `cadence_ms` | duration |
/// | `is_permanent_stop_code` | `code` | bool |
/// | `permanent_stop_codes` | none | array of strings |
/// | `from_micros_ceil` | `micros` (u128) | duration |
/// | `from_micros_floor` | `micros` (u128) | duration |
pub fn call(name: &str, args_json: &str) -> Result<String, Error> {
    let a = parse(args_json, "arguments")?;
    let out = match name {
        "schedule" => {
            let s = primary::schedule(
                int_arg(&a, "remaining_ttl_ms")?,
                opt_millis_in(&a, "rtt_ms")?,
                opt_millis_in(&a, "max_rtt_ms")?,
                millis_arg(&a, "request_timeout_ms")?,
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
            int_arg(&a, "remaining_ttl_ms")?,
            opt_millis_in(&a, "rtt_ms")?,
        )),
        "attempt_budget" => millis_out(primary::attempt_budget(
            millis_arg(&a, "request_timeout_ms")?,
            opt_millis_in(&a, "max_rtt_ms")?,
        )),
        "safety_margin" => millis_out(primary::safety_margin(opt_millis_in(&a, "max_rtt_ms")?)),
        "retry_reserve" => millis_out(primary::retry_reserve(
            millis_arg(&a, "attempt_budget_ms")?,
            millis_arg(&a, "safety_margin_ms")?,
        )),
        "next_delay" => millis_out(primary::next_delay(
            millis_arg(&a, "lead_floor_ms")?,
            millis_arg(&a, "retry_reserve_ms")?,
        )),
        "current_lead_estimate" => millis_out(retry::current_lead_estimate(
            millis_arg(&a, "last_lead_floor_ms")?,
            millis_arg(&a, "elapsed_ms")?,
        )),
        "retry_window" => signed_out(retry::retry_window(
            millis_arg(&a, "current_lead_estimate_ms")?,
            millis_arg(&a, "attempt_budget_ms")?,
            millis_arg(&a, "safety_margin_ms")?,
        )),
        "transient_retry_delay" => millis_out(retry::transient_retry_delay(
            millis_arg(&a, "current_lead_estimate_ms")?,
            signed_in(arg(&a, "retry_window_ms")?, "retry_window_ms")?,
        )),
        "parse_retry_after" => {
            let raw = match a.get("raw") {
                None | Some(Value::Null) => None,
                Some(Value::String(s)) => Some(s.as_str()),
                Some(_) => return Err(bad("raw", "a string or null")),
            };
            let parsed = RetryAfter::parse(raw);
            let (kind, secs) = retry_after_kind(parsed);
            let ms = parsed.to_millis().map(|m| int_out(i128::from(m)));
            json!({"kind": kind, "seconds": secs.map(|s| int_out(i128::from(s))), "ms": ms})
        }
        "extend_timeout" => {
            let lead = millis_arg(&a, "lead_floor_ms")?;
            let max_rtt = opt_millis_in(&a, "max_rtt_ms")?;
            let t =
                timeout::extend_timeout(lead, max_rtt, millis_arg(&a, "configured_timeout_ms")?);
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
            millis_arg(&a, "timeout_ms")?,
            opt_millis_in(&a, "max_rtt_ms")?,
        )),
        "attempt_cutoff" => millis_out(timeout::attempt_cutoff(millis_arg(&a, "timeout_ms")?)),
        "classify_grant" => json!(regime_name(fallback::classify_grant(
            int_arg(&a, "grant_ms")?,
            millis_arg(&a, "elapsed_ms")?,
            int_arg(&a, "requested_ttl_ms")?,
        ))),
        "cadence" => millis_out(fallback::cadence(
            parse_regime(str_arg(&a, "regime")?)?,
            int_arg(&a, "last_grant_ms")?,
            int_arg(&a, "requested_ttl_ms")?,
        )),
        "delay_with_skips" => millis_out(fallback::delay_with_skips(
            int_arg(&a, "lead_min_now_ms")?,
            int_arg(&a, "last_grant_ms")?,
            millis_arg(&a, "cadence_ms")?,
        )),
        "is_permanent_stop_code" => json!(retry::is_permanent_stop_code(str_arg(&a, "code")?)),
        "permanent_stop_codes" => json!(retry::PERMANENT_STOP_CODES),
        "from_micros_ceil" => millis_out(Millis::from_micros_ceil(micros_arg(&a)?)),
        "from_micros_floor" => millis_out(Millis::from_micros_floor(micros_arg(&a)?)),
        other => {
            return Err(Error::invalid_argument(format!(
                "unknown timing function {other:?}"
            )))
        }
    };
    Ok(out.to_string())
}

/// One planner step of its JSON (the vectors' step objects): `{"event": "success", "at_us",
/// ...}` or `{"event": "failure", "at_us", "failure": {"kind", "retry_after"?, "status"?,
/// "code"?}}`.
struct Step {
    at_us: u64,
    v: Value,
    failure: Option<ExtendFailure>,
}

fn step(text: &str) -> Result<Step, Error> {
    let v = parse(text, "step")?;
    let at_us = int_arg(&v, "at_us")?;
    let failure = match str_arg(&v, "event")? {
        "success" => None,
        "failure" => {
            let f = arg(&v, "failure")?;
            let opt_str = |n: &str| f.get(n).and_then(Value::as_str);
            let status = match f.get("status") {
                None | Some(Value::Null) => None,
                Some(_) => Some(int_arg::<u16>(f, "status")?),
            };
            Some(parse_failure(
                str_arg(f, "kind")?,
                opt_str("retry_after"),
                status,
                opt_str("code"),
            )?)
        }
        other => {
            return Err(Error::invalid_argument(format!(
                "event must be \"success\" or \"failure\", not {other:?}"
            )))
        }
    };
    Ok(Step { at_us, v, failure })
}

/// Core's `PrimaryPlanner` driven by JSON steps.
pub struct PrimaryJson(PrimaryPlanner);

impl PrimaryJson {
    /// A planner with `request_timeout` (vector encoding); `derive` derives the enforced
    /// timeout from a short lease (`PrimaryPlanner::with_derived_timeout`).
    pub fn new(request_timeout: &str, derive: bool) -> Result<PrimaryJson, Error> {
        let v: Value = serde_json::from_str(request_timeout)
            .map_err(|e| Error::invalid_argument(format!("request_timeout_ms: {e}")))?;
        let t = millis_in(&v, "request_timeout_ms")?;
        Ok(PrimaryJson(if derive {
            PrimaryPlanner::with_derived_timeout(t)
        } else {
            PrimaryPlanner::new(t)
        }))
    }

    /// One step (success: `remaining_ttl_ms`, `rtt_ms`?); the decision JSON.
    pub fn step(&mut self, step_json: &str) -> Result<String, Error> {
        let s = step(step_json)?;
        let d = match &s.failure {
            None => self.0.on_success(
                s.at_us,
                int_arg(&s.v, "remaining_ttl_ms")?,
                opt_millis_in(&s.v, "rtt_ms")?,
            ),
            Some(f) => self.0.on_failure(s.at_us, f),
        };
        Ok(decision_json(&d).to_string())
    }

    /// The enforced timeout of the next attempt (vector encoding, as JSON text).
    pub fn attempt_timeout(&self) -> String {
        millis_out(self.0.attempt_timeout()).to_string()
    }

    /// Records a round trip (`rtt_ms`, a JSON duration) without a decision.
    pub fn observe_rtt(&mut self, rtt_ms: &str) -> Result<(), Error> {
        let v: Value = serde_json::from_str(rtt_ms)
            .map_err(|e| Error::invalid_argument(format!("rtt_ms: {e}")))?;
        self.0.observe_rtt(millis_in(&v, "rtt_ms")?);
        Ok(())
    }

    /// The largest round trip seen (JSON duration, or `null` before any).
    pub fn max_rtt(&self) -> String {
        self.0.max_rtt().map_or(Value::Null, millis_out).to_string()
    }

    /// The failure arithmetic at `now_us` as `{"elapsed_ms", "current_lead_estimate_ms",
    /// "retry_window_ms"}`, or `null` before any schema-valid response.
    pub fn failure_math(&self, now_us: u64) -> String {
        self.0
            .failure_math(now_us)
            .map_or(Value::Null, |m| {
                json!({
                    "elapsed_ms": millis_out(m.elapsed),
                    "current_lead_estimate_ms": millis_out(m.current_lead_estimate),
                    "retry_window_ms": signed_out(m.retry_window),
                })
            })
            .to_string()
    }
}

/// Core's `FallbackPlanner` (servers without `remaining_ttl_ms`) driven by JSON steps.
pub struct FallbackJson(FallbackPlanner);

impl FallbackJson {
    /// A planner of a reservation created with `requested_ttl_ms`, received at
    /// `reserve_received_us`, expiring at `expires_at_ms`.
    pub fn new(
        requested_ttl_ms: u64,
        reserve_received_us: u64,
        expires_at_ms: i64,
    ) -> FallbackJson {
        FallbackJson(FallbackPlanner::new(
            requested_ttl_ms,
            reserve_received_us,
            expires_at_ms,
        ))
    }

    /// The first beat's decision JSON (`prime`: extend at once).
    pub fn first_beat(&self, prime: bool) -> String {
        decision_json(&self.0.first_beat(prime)).to_string()
    }

    /// One step (success: `expires_at_ms`); the decision JSON.
    pub fn step(&mut self, step_json: &str) -> Result<String, Error> {
        let s = step(step_json)?;
        let d = match &s.failure {
            None => self.0.on_success(s.at_us, int_arg(&s.v, "expires_at_ms")?),
            Some(f) => self.0.on_failure(s.at_us, f),
        };
        Ok(decision_json(&d).to_string())
    }

    /// The current regime's name.
    pub fn regime(&self) -> &'static str {
        regime_name(self.0.regime())
    }

    /// The lower bound of the lead at `now_us`.
    pub fn lead_min_ms(&self, now_us: u64) -> i128 {
        self.0.lead_min_ms(now_us)
    }

    /// The last grant in milliseconds (JSON integer, or `null` before any success).
    pub fn last_grant_ms(&self) -> String {
        self.0
            .last_grant_ms()
            .map_or(Value::Null, |g| int_out(i128::from(g)))
            .to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoding_round_trips_big_and_infinite() {
        assert_eq!(millis_out(Millis::Infinite), json!("infinite"));
        assert_eq!(
            millis_out(Millis::ms(u64::MAX)),
            json!(u64::MAX.to_string())
        );
        assert_eq!(millis_out(Millis::ms(5)), json!(5));
        assert_eq!(
            millis_in(&json!("18446744073709551615"), "x").unwrap(),
            Millis::ms(u64::MAX)
        );
        assert_eq!(
            signed_in(&json!("-infinite"), "x").unwrap(),
            SignedMillis::NegInfinite
        );
        assert!(millis_in(&json!(-1), "x")
            .unwrap_err()
            .message()
            .starts_with("x must be"));
    }

    #[test]
    fn spec_example_schedule() {
        let out = call(
            "schedule",
            r#"{"remaining_ttl_ms":60000,"rtt_ms":0,"max_rtt_ms":1500,"request_timeout_ms":10000}"#,
        )
        .unwrap();
        let v: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["retry_reserve_ms"], json!(23000));
        assert_eq!(v["next_delay_ms"], json!(37000));
        let e = call("nope", "{}").unwrap_err();
        assert_eq!(e.message(), "unknown timing function \"nope\"");
        assert_eq!(
            call("lead_floor", "{}").unwrap_err().message(),
            "missing remaining_ttl_ms"
        );
    }

    #[test]
    fn planner_steps_and_stops() {
        let mut p = PrimaryJson::new("10000", false).unwrap();
        let d = p
            .step(r#"{"event":"failure","at_us":0,"failure":{"kind":"transient"}}"#)
            .unwrap();
        assert_eq!(d, r#"{"stop":"no_valid_response"}"#);
        let d = p
            .step(r#"{"event":"success","at_us":0,"remaining_ttl_ms":60000,"rtt_ms":1500}"#)
            .unwrap();
        assert_eq!(d, r#"{"extend":{"delay_ms":35500,"key":"fresh"}}"#);
        assert_eq!(p.attempt_timeout(), "10000");
        assert!(p.step(r#"{"event":"oops","at_us":0}"#).is_err());
        let f = FallbackJson::new(60000, 0, 60000);
        assert_eq!(
            f.first_beat(true),
            r#"{"extend":{"delay_ms":0,"key":"fresh"}}"#
        );
        assert_eq!(f.regime(), "unknown");
        assert_eq!(f.last_grant_ms(), "null");
    }

    #[test]
    fn micros_stop_codes_and_planner_state() {
        assert_eq!(call("from_micros_ceil", r#"{"micros":1001}"#).unwrap(), "2");
        assert_eq!(
            call("from_micros_floor", r#"{"micros":1999}"#).unwrap(),
            "1"
        );
        let max = u128::MAX.to_string();
        assert_eq!(
            call("from_micros_ceil", &format!(r#"{{"micros":"{max}"}}"#)).unwrap(),
            r#""infinite""#
        );
        assert!(call("from_micros_floor", r#"{"micros":-1}"#).is_err());
        let codes: Vec<String> =
            serde_json::from_str(&call("permanent_stop_codes", "{}").unwrap()).unwrap();
        assert_eq!(codes, retry::PERMANENT_STOP_CODES);
        let mut p = PrimaryJson::new("10000", false).unwrap();
        assert_eq!(p.max_rtt(), "null");
        assert_eq!(p.failure_math(0), "null");
        p.observe_rtt("1500").unwrap();
        assert_eq!(p.max_rtt(), "1500");
        assert!(p.observe_rtt("-1").is_err());
        p.step(r#"{"event":"success","at_us":0,"remaining_ttl_ms":60000,"rtt_ms":0}"#)
            .unwrap();
        assert_eq!(
            p.failure_math(2_000_001),
            r#"{"elapsed_ms":2001,"current_lead_estimate_ms":57999,"retry_window_ms":44999}"#
        );
        let mut f = FallbackJson::new(60000, 0, 60000);
        f.step(r#"{"event":"success","at_us":1000,"expires_at_ms":61000}"#)
            .unwrap();
        assert_eq!(f.last_grant_ms(), "1000");
    }

    #[test]
    fn huge_retry_after_seconds_keep_the_encoding() {
        let mut p = PrimaryJson::new("10000", false).unwrap();
        p.step(r#"{"event":"success","at_us":0,"remaining_ttl_ms":60000,"rtt_ms":0}"#)
            .unwrap();
        let d = p
            .step(r#"{"event":"failure","at_us":1000,"failure":{"kind":"rate_limited","retry_after":"18446744073709551615"}}"#)
            .unwrap();
        let v: Value = serde_json::from_str(&d).unwrap();
        assert_eq!(v["stop"], json!("rate_limit_beyond_window"));
        assert_eq!(v["retry_after_seconds"], json!("18446744073709551615"));
    }

    /// Fuzz finding (scripts/fuzz.sh timing): the JSON takes any i128 lead, which overflowed
    /// core's skip rule; the extremes now give the saturated delay.
    #[test]
    fn delay_with_skips_takes_any_i128_lead() {
        let min = i128::MIN.to_string();
        let max = i128::MAX.to_string();
        let args = |lead: &str, grant: i64| {
            format!(r#"{{"lead_min_now_ms":"{lead}","last_grant_ms":{grant},"cadence_ms":1}}"#)
        };
        assert_eq!(
            call("delay_with_skips", &args(&min, i64::MAX)).unwrap(),
            "1"
        );
        assert_eq!(
            call("delay_with_skips", &args(&max, i64::MIN)).unwrap(),
            r#""infinite""#
        );
    }
}
