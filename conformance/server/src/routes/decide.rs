//! POST /v1/decide (non-persisting) and POST /v1/events (post-only accounting).

use super::reserve::evaluate;
use super::{
    auth_tenant, check_subject_tenant, emit_evidence, fingerprint, parse_body, replay, store, Ctx,
    Outcome,
};
use crate::config::BudgetStatus;
use crate::error::ApiError;
use crate::scope;
use crate::shared::Shared;
use crate::validate;
use serde_json::{json, Value};

pub(super) fn decide(sh: &Shared, ctx: &Ctx) -> Result<Outcome, ApiError> {
    let tenant = auth_tenant(sh, ctx)?;
    let (body, key) = parse_body(ctx, validate::decision_request)?;
    check_subject_tenant(&body["subject"], &tenant)?;
    let fp = fingerprint(sh, &body);
    let mut st = sh.state();
    let now = sh.clock.now_ms();
    st.sweep(now);
    let ikey = (tenant.clone(), "decide".to_string(), key);
    if let Some(r) = replay(&st, &ikey, &fp, now) {
        return r;
    }
    let scopes = scope::derive(&body["subject"]);
    let unit = body["estimate"]["unit"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let amount = body["estimate"]["amount"].as_i64().unwrap_or(0);
    let (decision, reason, keys) = evaluate(&st, &tenant, &scopes, &unit, amount)?;
    let mut resp = json!({"decision": decision, "affected_scopes": scopes});
    if decision == "ALLOW_WITH_CAPS" {
        resp["caps"] = st.caps_json(&keys).unwrap_or_default();
    }
    if let Some(r) = reason {
        resp["reason_code"] = json!(r);
    }
    if let Some(ev) = emit_evidence(sh, &mut st, "decide", &body, &resp, now, &ctx.trace_id) {
        resp["cycles_evidence"] = ev;
    }
    let out = Outcome::ok(200, resp, Some(tenant));
    store(&mut st, ikey, fp, &out, None);
    Ok(out)
}

pub(super) fn event(sh: &Shared, ctx: &Ctx) -> Result<Outcome, ApiError> {
    let tenant = auth_tenant(sh, ctx)?;
    let (body, key) = parse_body(ctx, validate::event_request)?;
    check_subject_tenant(&body["subject"], &tenant)?;
    let fp = fingerprint(sh, &body);
    let mut st = sh.state();
    let now = sh.clock.now_ms();
    st.sweep(now);
    let ikey = (tenant.clone(), "createEvent".to_string(), key.clone());
    if let Some(r) = replay(&st, &ikey, &fp, now) {
        return r;
    }
    if st.tenant_closed(&tenant) {
        return Err(ApiError::conflict(
            "TENANT_CLOSED",
            format!("tenant {tenant} is closed"),
        ));
    }
    let scopes = scope::derive(&body["subject"]);
    let unit = body["actual"]["unit"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let amount = body["actual"]["amount"].as_i64().unwrap_or(0);
    let keys = st.resolve(&scopes, &unit)?;
    for b in st.budgets_of(&keys) {
        match b.status {
            BudgetStatus::Frozen => {
                return Err(ApiError::conflict(
                    "BUDGET_FROZEN",
                    format!("Budget is frozen for scope {}", b.scope),
                ))
            }
            BudgetStatus::Closed => {
                return Err(ApiError::conflict(
                    "BUDGET_CLOSED",
                    format!("Budget is closed for scope {}", b.scope),
                ))
            }
            BudgetStatus::Active => {}
        }
    }
    let policy = body
        .get("overage_policy")
        .and_then(Value::as_str)
        .unwrap_or("ALLOW_IF_AVAILABLE")
        .to_string();
    let (charged, capped) = st.settle(&keys, 0, 0, amount, &policy)?;
    let event_id = match sh.config.mode {
        crate::config::ServerMode::Reference => uuid::Uuid::new_v4().to_string(),
        crate::config::ServerMode::Spec => format!("evt_{}", uuid::Uuid::new_v4().simple()),
    };
    st.record(
        "event",
        &tenant,
        None,
        &key,
        Some(&unit),
        Some(charged),
        now,
    );
    let mut resp = json!({"status": "APPLIED", "event_id": event_id});
    if capped {
        resp["charged"] = json!({"unit": unit, "amount": charged});
    }
    resp["balances"] = st.balances_json(&keys);
    let out = Outcome::ok(201, resp, Some(tenant));
    store(&mut st, ikey, fp, &out, None);
    Ok(out)
}
