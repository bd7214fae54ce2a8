//! POST /v1/reservations: live reserve and dry-run evaluation.

use super::{
    auth_tenant, check_subject_tenant, emit_evidence, error_with_evidence, fingerprint, parse_body,
    replay, store, Ctx, Outcome,
};
use crate::budget::deny_reason;
use crate::error::ApiError;
use crate::scope;
use crate::shared::Shared;
use crate::state::{Reservation, State, Status};
use crate::validate;
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// `(decision, reason_code, budget keys)` of a non-persisting evaluation.
pub(super) type Evaluation = (&'static str, Option<&'static str>, Vec<(String, String)>);

/// Non-persisting evaluation shared by dry_run and /decide: `(decision, reason_code, budget keys)`.
/// Budget-state problems become DENY; a wrong unit stays a 400 (spec case (a)/(d)).
pub(super) fn evaluate(
    st: &State,
    tenant: &str,
    scopes: &[String],
    unit: &str,
    amount: i64,
) -> Result<Evaluation, ApiError> {
    if st.tenant_closed(tenant) {
        return Ok(("DENY", Some("TENANT_CLOSED"), Vec::new()));
    }
    let keys = match st.resolve(scopes, unit) {
        Ok(k) => k,
        Err(e) if e.code == "NOT_FOUND" => {
            return Ok(("DENY", Some("BUDGET_NOT_FOUND"), Vec::new()))
        }
        Err(e) => return Err(e),
    };
    match deny_reason(&st.budgets_of(&keys), amount) {
        Some((code, _)) => Ok(("DENY", Some(code), keys)),
        None if st.caps_json(&keys).is_some() => Ok(("ALLOW_WITH_CAPS", None, keys)),
        None => Ok(("ALLOW", None, keys)),
    }
}

pub(super) fn create(sh: &Shared, ctx: &Ctx) -> Result<Outcome, ApiError> {
    let tenant = auth_tenant(sh, ctx)?;
    let (body, key) = parse_body(ctx, validate::create_request)?;
    check_subject_tenant(&body["subject"], &tenant)?;
    let fp = fingerprint(sh, &body);
    let mut st = sh.state();
    let now = sh.clock.now_ms();
    st.sweep(now);
    let ikey = (tenant.clone(), "createReservation".to_string(), key.clone());
    if let Some(r) = replay(&st, &ikey, &fp, now) {
        return r;
    }
    let scopes = scope::derive(&body["subject"]);
    let scope_path = scopes.last().cloned().unwrap_or_default();
    let estimate = body["estimate"].clone();
    let unit = estimate["unit"].as_str().unwrap_or_default().to_string();
    let amount = estimate["amount"].as_i64().unwrap_or(0);

    if body
        .get("dry_run")
        .and_then(Value::as_bool)
        .unwrap_or(false)
    {
        let (decision, reason, keys) = evaluate(&st, &tenant, &scopes, &unit, amount)?;
        let mut resp = json!({
            "decision": decision,
            "reserved": estimate,
            "scope_path": scope_path,
            "affected_scopes": scopes,
        });
        if !keys.is_empty() {
            resp["balances"] = st.balances_json(&keys);
        }
        if decision == "ALLOW_WITH_CAPS" {
            resp["caps"] = st.caps_json(&keys).unwrap_or_default();
        }
        if let Some(r) = reason {
            resp["reason_code"] = json!(r);
        }
        if let Some(ev) = emit_evidence(sh, &mut st, "reserve", &body, &resp, now, &ctx.trace_id) {
            resp["cycles_evidence"] = ev;
        }
        let out = Outcome::ok(200, resp, Some(tenant));
        store(&mut st, ikey, fp, &out, None);
        return Ok(out);
    }

    if st.tenant_closed(&tenant) {
        return Err(ApiError::conflict(
            "TENANT_CLOSED",
            format!("tenant {tenant} is closed"),
        ));
    }
    let keys = st.resolve(&scopes, &unit)?;
    if let Some((code, msg)) = deny_reason(&st.budgets_of(&keys), amount) {
        let err = ApiError::conflict(code, msg);
        return Err(error_with_evidence(sh, &mut st, ctx, &body, err, now));
    }
    for k in &keys {
        if let Some(b) = st.budgets.get_mut(k) {
            b.reserved += amount;
        }
    }
    let mut ttl = body.get("ttl_ms").and_then(Value::as_i64).unwrap_or(60_000);
    if let Some(cap) = sh.config.regime.initial_ttl_cap_ms {
        ttl = ttl.min(i64::try_from(cap).unwrap_or(i64::MAX));
    }
    let expires = now.saturating_add(ttl);
    // The reference server's ids are bare UUIDv4 strings.
    let id = match (&ctx.assign_id, sh.config.mode) {
        (Some(id), _) => id.clone(),
        (None, crate::config::ServerMode::Reference) => uuid::Uuid::new_v4().to_string(),
        (None, crate::config::ServerMode::Spec) => format!("rsv_{}", uuid::Uuid::new_v4().simple()),
    };
    st.next_reservation_seq += 1;
    let seq = st.next_reservation_seq;
    let mut res = Reservation {
        id: id.clone(),
        seq,
        tenant: tenant.clone(),
        subject: body["subject"].clone(),
        action: body["action"].clone(),
        unit: unit.clone(),
        amount,
        created_at_ms: now,
        expires_at_ms: expires,
        grace_ms: body
            .get("grace_period_ms")
            .and_then(Value::as_i64)
            .unwrap_or(5_000),
        overage_policy: body
            .get("overage_policy")
            .and_then(Value::as_str)
            .unwrap_or("ALLOW_IF_AVAILABLE")
            .to_string(),
        status: Status::Active,
        idempotency_key: key.clone(),
        scope_path: scope_path.clone(),
        affected_scopes: scopes.clone(),
        budget_keys: keys.clone(),
        committed: None,
        finalized_at_ms: None,
        metadata: body.get("metadata").cloned(),
        committed_metadata: None,
        evidence: BTreeMap::new(),
        extensions: 0,
    };
    st.record(
        "reserve",
        &tenant,
        Some(&id),
        &key,
        Some(&unit),
        Some(amount),
        now,
    );
    let caps = st.caps_json(&keys);
    let mut resp = json!({
        "decision": if caps.is_some() { "ALLOW_WITH_CAPS" } else { "ALLOW" },
        "reservation_id": id,
        "reserved": estimate,
        "expires_at_ms": expires,
        "scope_path": scope_path,
        "affected_scopes": scopes,
        "balances": st.balances_json(&keys),
    });
    if let Some(c) = caps {
        resp["caps"] = c;
    }
    // Evidence is computed before transport-only fields (remaining_ttl_ms, cycles_evidence) are stamped.
    if let Some(ev) = emit_evidence(sh, &mut st, "reserve", &body, &resp, now, &ctx.trace_id) {
        res.evidence.insert("reserve", ev.clone());
        resp["cycles_evidence"] = ev;
    }
    if sh.config.regime.emit_remaining_ttl {
        resp["remaining_ttl_ms"] = json!(expires.saturating_sub(now).max(0));
    }
    st.reservations.insert(id.clone(), res);
    st.track_deadline(&id);
    let out = Outcome::ok(200, resp, Some(tenant));
    store(&mut st, ikey, fp, &out, Some(id));
    Ok(out)
}
