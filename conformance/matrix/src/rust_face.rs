//! The Rust face: `cycles-matrix face` serves `PROTOCOL.md` over core's typed API (the timing
//! functions and planners, the journal, `decode_response`, the guard and the settler), the
//! reference every other face is compared with. Values are encoded with the bridge's vector
//! encoders; every computation is a direct call of core, not of the bridge's JSON table, so
//! the bridge's argument mapping (what C and the JVM use) is itself under test.

use std::io::{BufRead, Write};
use std::sync::Arc;
use std::time::Duration;

use cycles_bridge::timing::{parse_failure, regime_name, retry_after_kind};
use cycles_bridge::timing_json::{self, decision_json, int_out, millis_out, signed_out};
use cycles_core::events::EventSink;
use cycles_core::guard::{Finished, Guard, GuardSpec};
use cycles_core::journal::{identity, names, ParseError};
use cycles_core::settle::{SettleConfig, SettleOutcome, Settler};
use cycles_core::timing::retry::{self, RetryAfter};
use cycles_core::timing::{
    fallback, primary, timeout, FallbackPlanner, Millis, PrimaryPlanner, SignedMillis,
};
use cycles_core::transport::decode::{decode_response, http_error, Operation};
use cycles_core::{Action, Amount, Config, CyclesClient, Error, Record, Subject};
use serde_json::{json, Value};

type R<T> = Result<T, String>;

// The vectors' argument and result encoding is the bridge's (shared by every face); only the
// calls below are this face's own.
fn e(err: Error) -> String {
    err.to_string()
}

fn arg<'a>(a: &'a Value, n: &str) -> R<&'a Value> {
    timing_json::arg(a, n).map_err(e)
}

fn ms(a: &Value, n: &str) -> R<Millis> {
    timing_json::millis_arg(a, n).map_err(e)
}

fn opt_ms(a: &Value, n: &str) -> R<Option<Millis>> {
    timing_json::opt_millis_in(a, n).map_err(e)
}

fn int<T: TryFrom<i128>>(a: &Value, n: &str) -> R<T> {
    timing_json::int_arg(a, n).map_err(e)
}

fn text<'a>(a: &'a Value, n: &str) -> R<&'a str> {
    timing_json::str_arg(a, n).map_err(e)
}

fn signed(a: &Value, n: &str) -> R<SignedMillis> {
    timing_json::signed_in(arg(a, n)?, n).map_err(e)
}

fn timing(f: &str, a: &Value) -> R<Value> {
    Ok(match f {
        "schedule" => {
            let s = primary::schedule(
                int(a, "remaining_ttl_ms")?,
                opt_ms(a, "rtt_ms")?,
                opt_ms(a, "max_rtt_ms")?,
                ms(a, "request_timeout_ms")?,
            );
            json!({"lead_floor_ms": millis_out(s.lead_floor),
                   "attempt_budget_ms": millis_out(s.attempt_budget),
                   "safety_margin_ms": millis_out(s.safety_margin),
                   "retry_reserve_ms": millis_out(s.retry_reserve),
                   "next_delay_ms": millis_out(s.next_delay)})
        }
        "lead_floor" => millis_out(primary::lead_floor(
            int(a, "remaining_ttl_ms")?,
            opt_ms(a, "rtt_ms")?,
        )),
        "attempt_budget" => millis_out(primary::attempt_budget(
            ms(a, "request_timeout_ms")?,
            opt_ms(a, "max_rtt_ms")?,
        )),
        "safety_margin" => millis_out(primary::safety_margin(opt_ms(a, "max_rtt_ms")?)),
        "retry_reserve" => millis_out(primary::retry_reserve(
            ms(a, "attempt_budget_ms")?,
            ms(a, "safety_margin_ms")?,
        )),
        "next_delay" => millis_out(primary::next_delay(
            ms(a, "lead_floor_ms")?,
            ms(a, "retry_reserve_ms")?,
        )),
        "current_lead_estimate" => millis_out(retry::current_lead_estimate(
            ms(a, "last_lead_floor_ms")?,
            ms(a, "elapsed_ms")?,
        )),
        "retry_window" => signed_out(retry::retry_window(
            ms(a, "current_lead_estimate_ms")?,
            ms(a, "attempt_budget_ms")?,
            ms(a, "safety_margin_ms")?,
        )),
        "transient_retry_delay" => millis_out(retry::transient_retry_delay(
            ms(a, "current_lead_estimate_ms")?,
            signed(a, "retry_window_ms")?,
        )),
        "parse_retry_after" => {
            let parsed = RetryAfter::parse(a.get("raw").and_then(Value::as_str));
            let (kind, secs) = retry_after_kind(parsed);
            json!({"kind": kind,
                   "seconds": secs.map(|s| int_out(s.into())),
                   "ms": parsed.to_millis().map(|m| int_out(m.into()))})
        }
        "extend_timeout" => {
            let lead = ms(a, "lead_floor_ms")?;
            let max_rtt = opt_ms(a, "max_rtt_ms")?;
            let t = timeout::extend_timeout(lead, max_rtt, ms(a, "configured_timeout_ms")?);
            json!({"timeout_ms": millis_out(t.timeout),
                   "source": t.source.name(),
                   "min_lead_floor_ms": millis_out(t.min_lead_floor),
                   "max_keeping_timeout_ms": timeout::max_keeping_timeout(lead, max_rtt).map(millis_out),
                   "target_timeout_ms": millis_out(timeout::target_timeout(lead, max_rtt)),
                   "attempt_cutoff_ms": millis_out(timeout::attempt_cutoff(t.timeout))})
        }
        "min_lead_floor" => millis_out(timeout::min_lead_floor(
            ms(a, "timeout_ms")?,
            opt_ms(a, "max_rtt_ms")?,
        )),
        "attempt_cutoff" => millis_out(timeout::attempt_cutoff(ms(a, "timeout_ms")?)),
        "classify_grant" => json!(regime_name(fallback::classify_grant(
            int(a, "grant_ms")?,
            ms(a, "elapsed_ms")?,
            int(a, "requested_ttl_ms")?,
        ))),
        "cadence" => {
            let regime = cycles_bridge::timing::parse_regime(text(a, "regime")?)
                .map_err(|e| e.to_string())?;
            millis_out(fallback::cadence(
                regime,
                int(a, "last_grant_ms")?,
                int(a, "requested_ttl_ms")?,
            ))
        }
        "delay_with_skips" => millis_out(fallback::delay_with_skips(
            int(a, "lead_min_now_ms")?,
            int(a, "last_grant_ms")?,
            ms(a, "cadence_ms")?,
        )),
        "is_permanent_stop_code" => json!(retry::is_permanent_stop_code(text(a, "code")?)),
        other => return Err(format!("unknown timing function {other}")),
    })
}

fn failure(step: &Value) -> R<Option<cycles_core::timing::ExtendFailure>> {
    if text(step, "event")? == "success" {
        return Ok(None);
    }
    let f = arg(step, "failure")?;
    let status = match f.get("status") {
        None | Some(Value::Null) => None,
        Some(_) => Some(int::<u16>(f, "status")?),
    };
    parse_failure(
        text(f, "kind")?,
        f.get("retry_after").and_then(Value::as_str),
        status,
        f.get("code").and_then(Value::as_str),
    )
    .map(Some)
    .map_err(|e| e.to_string())
}

fn primary_seq(r: &Value) -> R<Value> {
    let t = ms(r, "request_timeout_ms")?;
    let mut p = if r.get("derive").and_then(Value::as_bool) == Some(true) {
        PrimaryPlanner::with_derived_timeout(t)
    } else {
        PrimaryPlanner::new(t)
    };
    let mut out = Vec::new();
    for s in arg(r, "steps")?.as_array().ok_or("steps is not a list")? {
        let at = int(s, "at_us")?;
        let d = match failure(s)? {
            None => p.on_success(at, int(s, "remaining_ttl_ms")?, opt_ms(s, "rtt_ms")?),
            Some(f) => p.on_failure(at, &f),
        };
        out.push(json!({"decision": decision_json(&d),
                        "attempt_timeout_ms": millis_out(p.attempt_timeout())}));
    }
    Ok(Value::Array(out))
}

fn fallback_seq(r: &Value) -> R<Value> {
    let create = arg(r, "create")?;
    let mut p = FallbackPlanner::new(
        int(r, "requested_ttl_ms")?,
        int(create, "at_us")?,
        int(create, "expires_at_ms")?,
    );
    let first = decision_json(&p.first_beat(r.get("prime").and_then(Value::as_bool) == Some(true)));
    let mut steps = Vec::new();
    for s in arg(r, "steps")?.as_array().ok_or("steps is not a list")? {
        let at = int(s, "at_us")?;
        let d = match failure(s)? {
            None => p.on_success(at, int(s, "expires_at_ms")?),
            Some(f) => p.on_failure(at, &f),
        };
        steps.push(json!({"decision": decision_json(&d), "regime": regime_name(p.regime())}));
    }
    Ok(json!({"first": first, "steps": steps}))
}

fn parse_record(r: &Value) -> R<Value> {
    Ok(match Record::parse(text(r, "text")?.as_bytes()) {
        Ok(rec) => {
            let extra: Vec<&str> = rec.extra.iter().map(|(k, _)| k.as_str()).collect();
            json!({"ok": true, "reservation_id": rec.reservation_id, "base_url": rec.base_url,
                   "mode": rec.mode.as_str(), "idempotency_key": rec.idempotency_key(),
                   "recorded_at_ms": rec.recorded_at_ms, "not_before_ms": rec.not_before_ms,
                   "commit_body_wire": rec.commit_body.as_ref().map(|b| b.get()),
                   "event_fallback_body_wire": rec.event_fallback_body.as_ref().map(|b| b.get()),
                   "extra_keys": extra})
        }
        Err(ParseError::Corrupt(_)) => json!({"ok": false, "error": "corrupt"}),
        Err(ParseError::Unsupported(_)) => json!({"ok": false, "error": "unsupported"}),
    })
}

/// Error fields as PROTOCOL.md's `decode` shape.
pub fn error_fields(e: &Error) -> Value {
    json!({"kind": e.kind().name(), "status": e.http_status(), "error_code": e.server_code(),
           "request_id": e.request_id(), "retryable": e.retryable(),
           "retry_after_ms": e.retry_after().and_then(|r| r.delta_seconds).map(|s| int_out(i128::from(s) * 1000))})
}

fn decode(r: &Value) -> R<Value> {
    let x = arg(r, "exchange")?;
    let resp = arg(x, "response")?;
    let status: u16 = int(resp, "status")?;
    let headers: Vec<(&str, &str)> = arg(resp, "headers")?
        .as_object()
        .ok_or("headers")?
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str().unwrap_or("")))
        .collect();
    let body = text(resp, "body")?.as_bytes();
    let result = match x.get("operation").and_then(Value::as_str) {
        Some(op) => {
            let op = Operation::from_operation_id(op).ok_or("unknown operation")?;
            decode_response(op, status, &headers, body)
                .map(|d| serde_json::to_value(&d.body).expect("a decoded body serialises"))
        }
        None => Err(http_error(status, &headers, body)),
    };
    Ok(match result {
        Ok(v) => json!({"result": v}),
        Err(e) => json!({"error": error_fields(&e)}),
    })
}

fn config(r: &Value) -> R<Config> {
    let mut c =
        Config::new(text(r, "url")?, text(r, "api_key")?).with_journal_dir(text(r, "journal_dir")?);
    if let Some(t) = r.get("tenant").and_then(Value::as_str) {
        c = c.with_tenant(t);
    }
    Ok(with_journal_url(c, r))
}

/// The request's Redis journal (`journal_url`), when it names one.
pub fn with_journal_url(c: Config, r: &Value) -> Config {
    match r.get("journal_url").and_then(Value::as_str) {
        Some(u) => c.with_journal_url(u),
        None => c,
    }
}

fn quick_settle() -> SettleConfig {
    SettleConfig {
        max_attempts: 1,
        backoff_base: Duration::from_millis(10),
        backoff_cap: Duration::from_millis(50),
        ..SettleConfig::default()
    }
}

fn outcome_name(o: &SettleOutcome) -> &'static str {
    match o {
        SettleOutcome::Committed(_) => "committed",
        SettleOutcome::RecoveredViaEvent(_) => "recovered_via_event",
        SettleOutcome::Pending { .. } => "pending",
        SettleOutcome::Rejected(_) => "rejected",
    }
}

async fn write(r: &Value) -> R<Value> {
    let cfg = config(r)?;
    let case = arg(r, "case")?;
    let err = |e: Error| e.to_string();
    let client = Arc::new(CyclesClient::new(cfg.clone()).map_err(err)?);
    let guard = Guard::new(
        client,
        Settler::new(&cfg, quick_settle()).map_err(err)?,
        EventSink::tracing_only(),
    );
    let subject: Subject =
        serde_json::from_value(arg(case, "subject")?.clone()).map_err(|e| e.to_string())?;
    let action: Action =
        serde_json::from_value(arg(case, "action")?.clone()).map_err(|e| e.to_string())?;
    let estimate: Amount =
        serde_json::from_value(arg(case, "estimate")?.clone()).map_err(|e| e.to_string())?;
    let key = format!("matrix-rust-{}", text(case, "name")?);
    let actual: i64 = int(case, "actual")?;
    let metrics = case
        .get("metrics")
        .filter(|v| !v.is_null())
        .map(Value::to_string);
    let metadata = case
        .get("metadata")
        .filter(|v| !v.is_null())
        .map(Value::to_string);
    let done = guard
        .run(
            GuardSpec::new(key, subject, action, estimate),
            |usage| async move {
                usage.set_actual(actual)?;
                if let Some(m) = metrics {
                    usage.set_metrics_json(&m)?;
                }
                if let Some(m) = metadata {
                    usage.set_metadata_json(&m)?;
                }
                Ok::<_, Error>(())
            },
        )
        .await
        .map_err(|e| e.to_string())?;
    Ok(json!({"reservation_id": done.reservation_id, "outcome": outcome_name(&done.settlement)}))
}

/// One guarded action of the lifecycle contract (PROTOCOL.md, `guard`) through core's guard:
/// the spec from the client's defaults, the work's steps, the canonical answer.
async fn guard_case(r: &Value) -> R<Value> {
    let cfg = config(r)?.with_default_unit(text(r, "default_unit")?);
    let case = arg(r, "case")?;
    let err = |e: Error| e.to_string();
    let client = Arc::new(CyclesClient::new(cfg.clone()).map_err(err)?);
    let guard = Guard::new(
        client,
        Settler::new(&cfg, SettleConfig::default()).map_err(err)?,
        EventSink::tracing_only(),
    );
    let action = Action::new("llm.completion", "matrix");
    let mut spec = GuardSpec::with_defaults(&cfg, action, int(case, "estimate")?).map_err(err)?;
    if let Some(k) = case.get("idempotency_key").and_then(Value::as_str) {
        spec.idempotency_key = k.to_string();
    }
    if let Some(s) = case.get("subject").filter(|s| !s.is_null()) {
        spec.subject = serde_json::from_value(s.clone()).map_err(|e| e.to_string())?;
    }
    let mut out = json!({"decision": null, "caps": null, "steps": [], "outcome": null,
                         "released": null, "charged": null, "error": null});
    let active = match guard.begin(spec).await {
        Ok(a) => a,
        Err(e) => {
            out["error"] = json!(e.kind().name());
            return Ok(out);
        }
    };
    out["decision"] = json!(active.decision().as_str());
    out["caps"] = serde_json::to_value(active.caps()).map_err(|e| e.to_string())?;
    let steps = case
        .get("steps")
        .and_then(Value::as_array)
        .ok_or("case.steps must be a list")?;
    let mut results = Vec::new();
    let mut finished = None;
    for step in steps {
        let amount = || int::<i64>(step, "amount");
        let result = match text(step, "do")? {
            "add" => active.usage().add(amount()?),
            "set_actual" => active.usage().set_actual(amount()?),
            "release" => match active.check_release() {
                Ok(()) => {
                    results.push(Value::Null);
                    let reason = step
                        .get("reason")
                        .and_then(Value::as_str)
                        .map(str::to_string);
                    finished = Some((active.release(reason).await, false));
                    break;
                }
                Err(e) => Err(e),
            },
            "fail" => {
                results.push(Value::Null);
                finished = Some((active.finish(false).await, true));
                break;
            }
            "end" => {
                results.push(Value::Null);
                finished = Some((active.finish(true).await, false));
                break;
            }
            other => return Err(format!("unknown step {other:?}")),
        };
        results.push(result.err().map_or(Value::Null, |e| json!(e.kind().name())));
    }
    out["steps"] = Value::Array(results);
    let Some((done, work_failed)) = finished else {
        return Err("the case's steps never end the action".into());
    };
    let charged = |s: &SettleOutcome| s.charged().map(|a| a.amount);
    let (outcome, released, charged, error) = match &done {
        Finished::Settled { settlement, .. } => ("settled", None, charged(settlement), None),
        Finished::WorkFailed {
            settlement,
            release_error,
            ..
        } => (
            "work_failed",
            Some(settlement.is_none() && release_error.is_none()),
            settlement.as_ref().and_then(charged),
            Some("work"),
        ),
        Finished::MissingActual { release_error, .. } => (
            "missing_actual",
            Some(release_error.is_none()),
            None,
            Some("MISSING_ACTUAL"),
        ),
        Finished::InvalidActual { release_error, .. } => (
            "invalid_actual",
            Some(release_error.is_none()),
            None,
            Some("INVALID_ARGUMENT"),
        ),
        Finished::Released { release_error, .. } => {
            ("released", Some(release_error.is_none()), None, None)
        }
        Finished::HeartbeatLapsed { settlement, .. } => (
            "heartbeat_lapsed",
            None,
            charged(settlement),
            Some("HEARTBEAT_LAPSED"),
        ),
    };
    debug_assert!(!work_failed || outcome == "work_failed");
    out["outcome"] = json!(outcome);
    out["released"] = json!(released);
    out["charged"] = json!(charged);
    out["error"] = json!(error);
    Ok(out)
}

/// The lifecycle contract's options table (PROTOCOL.md, `client`): a client of the options
/// through core's typed API (`Config`, `SettleConfig`), then one guarded action (bare 5, actual
/// 3) under the case's key; the answer is the error name either raised, else null.
async fn client_case(r: &Value) -> R<Value> {
    let o = arg(r, "options")?;
    let ms = |k: &str| o.get(k).and_then(Value::as_u64).map(Duration::from_millis);
    let mut cfg =
        Config::new(text(r, "url")?, text(r, "api_key")?).with_journal_dir(text(r, "journal_dir")?);
    if let Some(t) = o.get("tenant").and_then(Value::as_str) {
        cfg = cfg.with_tenant(t);
    }
    if let Some(u) = o.get("default_unit").and_then(Value::as_str) {
        cfg = cfg.with_default_unit(u);
    }
    if let Some(d) = ms("request_timeout_ms") {
        cfg = cfg.with_request_timeout(d);
    }
    if let Some(d) = ms("connect_timeout_ms") {
        cfg = cfg.with_connect_timeout(d);
    }
    if let Some(n) = o.get("max_concurrent_requests").and_then(Value::as_u64) {
        cfg = cfg.with_max_concurrent_requests(n as usize);
    }
    if let Some(b) = o.get("journal_enabled").and_then(Value::as_bool) {
        cfg = cfg.with_journal_enabled(b);
    }
    let mut settle = SettleConfig::default();
    if let Some(n) = o.get("settle_max_attempts").and_then(Value::as_u64) {
        settle.max_attempts = n as u32;
    }
    if let Some(d) = ms("replay_interval_ms") {
        settle.replay_interval = d;
    }
    let named = |e: Error| json!({"error": e.kind().name()});
    let client = match CyclesClient::new(cfg.clone()) {
        Ok(c) => Arc::new(c),
        Err(e) => return Ok(named(e)),
    };
    let settler = match Settler::new(&cfg, settle) {
        Ok(s) => s,
        Err(e) => return Ok(named(e)),
    };
    let guard = Guard::new(client, settler, EventSink::tracing_only());
    let action = Action::new("llm.completion", "matrix");
    let mut spec = match GuardSpec::with_defaults(&cfg, action, 5) {
        Ok(s) => s,
        Err(e) => return Ok(named(e)),
    };
    spec.idempotency_key = text(r, "key")?.to_string();
    let done = guard
        .run(spec, |usage| async move { usage.set_actual(3) })
        .await;
    Ok(match done {
        Ok(_) => json!({"error": null}),
        Err(e) => json!({"error": e.kind().map_or("work", |k| k.name())}),
    })
}

/// A journal that cannot be written (PROTOCOL.md, `journal_fail`): one guarded action (bare 5,
/// actual 3, the case's key) whose first commit fails, then a flush; the settlement's fields,
/// the flush's unjournaled count and this reservation's events.
async fn journal_fail(r: &Value) -> R<Value> {
    use cycles_core::events::Event;
    let cfg = config(r)?.with_default_unit(text(r, "default_unit")?);
    let err = |e: Error| e.to_string();
    let seen: Arc<std::sync::Mutex<Vec<Event>>> = Arc::default();
    let sink = {
        let seen = seen.clone();
        EventSink::with_callback(move |e| seen.lock().unwrap().push(e.clone()))
    };
    let settler = Settler::new(
        &cfg,
        SettleConfig {
            events: sink.clone(),
            ..quick_settle()
        },
    )
    .map_err(err)?;
    let client = Arc::new(CyclesClient::new(cfg.clone()).map_err(err)?);
    let guard = Guard::new(client, settler.clone(), sink);
    let mut spec =
        GuardSpec::with_defaults(&cfg, Action::new("llm.completion", "matrix"), 5).map_err(err)?;
    spec.idempotency_key = text(r, "key")?.to_string();
    let done = guard
        .run(spec, |usage| async move { usage.set_actual(3) })
        .await
        .map_err(|e| e.to_string())?;
    let report = settler.flush().await;
    let SettleOutcome::Pending {
        journaled,
        journal_error,
        ..
    } = &done.settlement
    else {
        return Ok(json!({"status": outcome_name(&done.settlement)}));
    };
    let events: Vec<Value> = seen
        .lock()
        .unwrap()
        .iter()
        .filter(|e| {
            e.reservation_id() == done.reservation_id
                && matches!(
                    e.kind(),
                    "journal_io_failed" | "settlement_pending" | "settlement_settled"
                )
        })
        .map(|e| {
            let j = e.to_json();
            json!({"kind": e.kind(), "level": e.level().as_str(), "operation": j["operation"],
                   "journaled": j["journaled"]})
        })
        .collect();
    Ok(
        json!({"status": "pending", "journaled": journaled, "journal_error": journal_error,
              "flush_unjournaled": report.unjournaled.len(), "events": events}),
    )
}

/// The load run (PROTOCOL.md, `load`): `count` guarded actions at once on one client, each
/// its own tokio task under its own key, counted by outcome.
async fn load(r: &Value) -> R<Value> {
    let cfg = config(r)?.with_default_unit(text(r, "default_unit")?);
    let count: u64 = int(r, "count")?;
    let prefix = text(r, "key_prefix")?.to_string();
    let err = |e: Error| e.to_string();
    let client = Arc::new(CyclesClient::new(cfg.clone()).map_err(err)?);
    let guard = Arc::new(Guard::new(
        client,
        Settler::new(&cfg, SettleConfig::default()).map_err(err)?,
        EventSink::tracing_only(),
    ));
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..count {
        let guard = guard.clone();
        let mut spec = GuardSpec::with_defaults(&cfg, Action::new("llm.completion", "load"), 5)
            .map_err(err)?;
        spec.idempotency_key = format!("{prefix}-{i}");
        tasks.spawn(async move {
            match guard
                .run(spec, |usage| async move { usage.set_actual(3) })
                .await
            {
                Ok(done) => outcome_name(&done.settlement).to_string(),
                Err(e) => format!("error:{}", e.kind().map_or("work", |k| k.name())),
            }
        });
    }
    let mut outcomes = serde_json::Map::new();
    while let Some(done) = tasks.join_next().await {
        let name = done.map_err(|e| format!("a load task panicked: {e}"))?;
        let n = outcomes.get(&name).and_then(Value::as_u64).unwrap_or(0);
        outcomes.insert(name, json!(n + 1));
    }
    // No flush: pending settlements stay journaled for the orchestrator's drain.
    Ok(json!({ "outcomes": outcomes }))
}

async fn drain(r: &Value) -> R<Value> {
    let settler = Settler::new(&config(r)?, SettleConfig::default()).map_err(|e| e.to_string())?;
    let report = settler
        .drain(Duration::from_millis(int(r, "timeout_ms")?))
        .await;
    Ok(
        json!({"settled": report.settled(), "pending": report.remaining.len(),
              "quarantined": report.quarantined.len()}),
    )
}

/// A `pricing` request: core's pricing functions through the bridge's `pricing_json`, the one
/// JSON table every host calls (a Rust user calls `cycles_core::pricing` typed; the table is
/// a thin conversion over exactly those functions).
fn pricing(r: &Value) -> Value {
    let args = r.get("args").cloned().unwrap_or(json!({})).to_string();
    let Some(f) = r.get("fn").and_then(Value::as_str) else {
        return json!({"fail": "pricing needs fn"});
    };
    match cycles_bridge::pricing_json::call(f, &args) {
        Ok(text) => match serde_json::from_str::<Value>(&text) {
            Ok(v) => json!({"ok": v}),
            Err(e) => json!({"fail": e.to_string()}),
        },
        Err(e) => json!({"error": e.kind().name()}),
    }
}

fn answer(rt: &tokio::runtime::Runtime, r: &Value) -> Value {
    if r.get("op").and_then(Value::as_str) == Some("pricing") {
        // Answers `error` itself: a pricing error is a result the vectors expect.
        let mut out = pricing(r);
        out["id"] = r.get("id").cloned().unwrap_or(Value::Null);
        return out;
    }
    let a = r.get("args").cloned().unwrap_or(Value::Null);
    let res = match r.get("op").and_then(Value::as_str).unwrap_or("") {
        "timing" => text(r, "fn").and_then(|f| timing(f, &a)),
        "primary" => primary_seq(r),
        "fallback" => fallback_seq(r),
        "journal_names" => text(r, "reservation_id").map(|id| {
            json!({"standard": names::record_file_name(id), "legacy": names::legacy_file_name(id)})
        }),
        "fingerprint" => (|| {
            Ok(json!(identity::fp16_uncached(
                text(r, "base_url")?,
                text(r, "api_key")?,
                r.get("tenant").and_then(Value::as_str),
            )))
        })(),
        "parse_record" => parse_record(r),
        "decode" => decode(r),
        "write" => rt.block_on(write(r)),
        "drain" => rt.block_on(drain(r)),
        "guard" => rt.block_on(guard_case(r)),
        "load" => rt.block_on(load(r)),
        "client" => rt.block_on(client_case(r)),
        "work" => rt.block_on(crate::rust_work::work(r)),
        "journal_fail" => rt.block_on(journal_fail(r)),
        other => Err(format!("unknown op {other:?}")),
    };
    let mut out = match res {
        Ok(v) => json!({"ok": v}),
        Err(e) => json!({"fail": e}),
    };
    out["id"] = r.get("id").cloned().unwrap_or(Value::Null);
    out
}

/// Serves the protocol on stdin/stdout until stdin closes.
pub fn serve() -> R<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let stdin = std::io::stdin().lock();
    let mut stdout = std::io::BufWriter::new(std::io::stdout().lock());
    for line in stdin.lines() {
        let line = line.map_err(|e| e.to_string())?;
        if line.trim().is_empty() {
            continue;
        }
        let out = match serde_json::from_str::<Value>(&line) {
            Ok(r) => answer(&rt, &r),
            Err(e) => json!({"fail": format!("request is not JSON: {e}")}),
        };
        serde_json::to_writer(&mut stdout, &out).map_err(|e| e.to_string())?;
        stdout.write_all(b"\n").map_err(|e| e.to_string())?;
        stdout.flush().map_err(|e| e.to_string())?;
    }
    Ok(())
}
