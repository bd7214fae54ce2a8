//! Strict request validation against the spec's schemas (additionalProperties: false,
//! required, types, bounds). Hand-written because the schemas are small and a schema engine
//! would be a heavy dependency; every failure is 400 INVALID_REQUEST with a precise message.

use crate::error::ApiError;
use crate::scope::LEVELS;
use serde_json::{Map, Value};

type R<T> = Result<T, ApiError>;

const UNITS: [&str; 4] = ["USD_MICROCENTS", "TOKENS", "CREDITS", "RISK_POINTS"];
const POLICIES: [&str; 3] = ["REJECT", "ALLOW_IF_AVAILABLE", "ALLOW_WITH_OVERDRAFT"];

fn bad(msg: String) -> ApiError {
    ApiError::invalid(msg)
}

fn object<'a>(v: &'a Value, ctx: &str) -> R<&'a Map<String, Value>> {
    v.as_object()
        .ok_or_else(|| bad(format!("{ctx} must be an object")))
}

fn keys(m: &Map<String, Value>, allowed: &[&str], required: &[&str], ctx: &str) -> R<()> {
    for k in m.keys() {
        if !allowed.contains(&k.as_str()) {
            return Err(bad(format!("{ctx}: unknown field '{k}'")));
        }
    }
    for r in required {
        if !m.contains_key(*r) {
            return Err(bad(format!("{ctx}: missing required field '{r}'")));
        }
    }
    Ok(())
}

fn string(v: &Value, min: usize, max: usize, ctx: &str) -> R<()> {
    let s = v
        .as_str()
        .ok_or_else(|| bad(format!("{ctx} must be a string")))?;
    let n = s.chars().count();
    if n < min || n > max {
        return Err(bad(format!("{ctx} length must be within {min}..={max}")));
    }
    Ok(())
}

fn integer(v: &Value, min: i64, max: i64, ctx: &str) -> R<i64> {
    let n = v
        .as_i64()
        .ok_or_else(|| bad(format!("{ctx} must be an integer")))?;
    if n < min || n > max {
        return Err(bad(format!("{ctx} must be within {min}..={max}")));
    }
    Ok(n)
}

fn opt<F: FnOnce(&Value) -> R<()>>(m: &Map<String, Value>, k: &str, f: F) -> R<()> {
    match m.get(k) {
        Some(v) => f(v),
        None => Ok(()),
    }
}

fn free_object(v: &Value, ctx: &str) -> R<()> {
    object(v, ctx).map(|_| ())
}

/// Subject charset (the reference server rejects out-of-pattern values, which the spec permits).
fn charset_ok(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.' || b == b'-')
}

pub(crate) fn subject(v: &Value) -> R<()> {
    let m = object(v, "subject")?;
    let mut allowed: Vec<&str> = LEVELS.to_vec();
    allowed.push("dimensions");
    keys(m, &allowed, &[], "subject")?;
    let mut any = false;
    for level in LEVELS {
        if let Some(x) = m.get(level) {
            string(x, 0, 128, &format!("subject.{level}"))?;
            if !charset_ok(x.as_str().unwrap_or_default()) {
                return Err(bad(format!("subject.{level} must match ^[a-zA-Z0-9_.-]+$")));
            }
            any = true;
        }
    }
    if let Some(d) = m.get("dimensions") {
        let dm = object(d, "subject.dimensions")?;
        if dm.len() > 16 {
            return Err(bad("subject.dimensions must have at most 16 entries".into()));
        }
        for (k, val) in dm {
            string(val, 0, 256, &format!("subject.dimensions.{k}"))?;
        }
    }
    if !any {
        return Err(bad(
            "subject must contain at least one of tenant, workspace, app, workflow, agent, toolset"
                .into(),
        ));
    }
    Ok(())
}

pub(crate) fn action(v: &Value) -> R<()> {
    let m = object(v, "action")?;
    keys(m, &["kind", "name", "tags"], &["kind", "name"], "action")?;
    string(&m["kind"], 0, 64, "action.kind")?;
    string(&m["name"], 0, 256, "action.name")?;
    opt(m, "tags", |t| {
        let arr = t
            .as_array()
            .ok_or_else(|| bad("action.tags must be an array".into()))?;
        if arr.len() > 10 {
            return Err(bad("action.tags must have at most 10 items".into()));
        }
        arr.iter()
            .try_for_each(|x| string(x, 0, 64, "action.tags[]"))
    })
}

pub(crate) fn amount(v: &Value, ctx: &str) -> R<()> {
    let m = object(v, ctx)?;
    keys(m, &["unit", "amount"], &["unit", "amount"], ctx)?;
    let unit = m["unit"]
        .as_str()
        .ok_or_else(|| bad(format!("{ctx}.unit must be a string")))?;
    if !UNITS.contains(&unit) {
        return Err(bad(format!("{ctx}.unit must be one of {UNITS:?}")));
    }
    integer(&m["amount"], 0, i64::MAX, &format!("{ctx}.amount")).map(|_| ())
}

fn metrics(v: &Value) -> R<()> {
    let m = object(v, "metrics")?;
    keys(
        m,
        &[
            "tokens_input",
            "tokens_output",
            "latency_ms",
            "model_version",
            "custom",
        ],
        &[],
        "metrics",
    )?;
    for k in ["tokens_input", "tokens_output", "latency_ms"] {
        opt(m, k, |x| {
            integer(x, 0, i64::MAX, &format!("metrics.{k}")).map(|_| ())
        })?;
    }
    opt(m, "model_version", |x| {
        string(x, 0, 128, "metrics.model_version")
    })?;
    opt(m, "custom", |x| free_object(x, "metrics.custom"))
}

fn idem(m: &Map<String, Value>) -> R<()> {
    string(&m["idempotency_key"], 1, 256, "idempotency_key")
}

fn policy(v: &Value) -> R<()> {
    match v.as_str() {
        Some(p) if POLICIES.contains(&p) => Ok(()),
        _ => Err(bad(format!("overage_policy must be one of {POLICIES:?}"))),
    }
}

fn boolean(v: &Value, ctx: &str) -> R<()> {
    v.as_bool()
        .map(|_| ())
        .ok_or_else(|| bad(format!("{ctx} must be a boolean")))
}

pub(crate) fn decision_request(v: &Value) -> R<()> {
    let m = object(v, "body")?;
    keys(
        m,
        &[
            "idempotency_key",
            "subject",
            "action",
            "estimate",
            "metadata",
        ],
        &["idempotency_key", "subject", "action", "estimate"],
        "body",
    )?;
    idem(m)?;
    subject(&m["subject"])?;
    action(&m["action"])?;
    amount(&m["estimate"], "estimate")?;
    opt(m, "metadata", |x| free_object(x, "metadata"))
}

pub(crate) fn create_request(v: &Value) -> R<()> {
    let m = object(v, "body")?;
    keys(
        m,
        &[
            "idempotency_key",
            "subject",
            "action",
            "estimate",
            "ttl_ms",
            "grace_period_ms",
            "overage_policy",
            "dry_run",
            "metadata",
        ],
        &["idempotency_key", "subject", "action", "estimate"],
        "body",
    )?;
    idem(m)?;
    subject(&m["subject"])?;
    action(&m["action"])?;
    amount(&m["estimate"], "estimate")?;
    opt(m, "ttl_ms", |x| {
        integer(x, 1000, 86_400_000, "ttl_ms").map(|_| ())
    })?;
    opt(m, "grace_period_ms", |x| {
        integer(x, 0, 60_000, "grace_period_ms").map(|_| ())
    })?;
    opt(m, "overage_policy", policy)?;
    opt(m, "dry_run", |x| boolean(x, "dry_run"))?;
    opt(m, "metadata", |x| free_object(x, "metadata"))
}

pub(crate) fn commit_request(v: &Value) -> R<()> {
    let m = object(v, "body")?;
    keys(
        m,
        &["idempotency_key", "actual", "metrics", "metadata"],
        &["idempotency_key", "actual"],
        "body",
    )?;
    idem(m)?;
    amount(&m["actual"], "actual")?;
    opt(m, "metrics", metrics)?;
    opt(m, "metadata", |x| free_object(x, "metadata"))
}

pub(crate) fn release_request(v: &Value) -> R<()> {
    let m = object(v, "body")?;
    keys(
        m,
        &["idempotency_key", "reason"],
        &["idempotency_key"],
        "body",
    )?;
    idem(m)?;
    opt(m, "reason", |x| string(x, 0, 256, "reason"))
}

pub(crate) fn extend_request(v: &Value) -> R<()> {
    let m = object(v, "body")?;
    keys(
        m,
        &["idempotency_key", "extend_by_ms", "metadata"],
        &["idempotency_key", "extend_by_ms"],
        "body",
    )?;
    idem(m)?;
    integer(&m["extend_by_ms"], 1, 86_400_000, "extend_by_ms")?;
    opt(m, "metadata", |x| free_object(x, "metadata"))
}

pub(crate) fn event_request(v: &Value) -> R<()> {
    let m = object(v, "body")?;
    keys(
        m,
        &[
            "idempotency_key",
            "subject",
            "action",
            "actual",
            "overage_policy",
            "metrics",
            "client_time_ms",
            "metadata",
        ],
        &["idempotency_key", "subject", "action", "actual"],
        "body",
    )?;
    idem(m)?;
    subject(&m["subject"])?;
    action(&m["action"])?;
    amount(&m["actual"], "actual")?;
    opt(m, "overage_policy", policy)?;
    opt(m, "metrics", metrics)?;
    opt(m, "client_time_ms", |x| {
        integer(x, 0, i64::MAX, "client_time_ms").map(|_| ())
    })?;
    opt(m, "metadata", |x| free_object(x, "metadata"))
}
