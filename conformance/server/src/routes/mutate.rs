//! Commit, release and extend of an existing reservation.

use super::{
    auth, emit_evidence, fingerprint, parse_body, replay, store, Ctx, IdemKey, Outcome, Principal,
};
use crate::config::ExtendClamp;
use crate::error::ApiError;
use crate::shared::Shared;
use crate::state::{Reservation, State, Status};
use crate::validate;
use serde_json::{json, Value};
use std::sync::MutexGuard;

/// Locate the reservation and enforce ownership; returns the owner tenant.
fn owner(st: &State, rid: &str, principal: &Principal) -> Result<String, ApiError> {
    if rid.chars().count() > 128 {
        return Err(ApiError::invalid(
            "reservation_id must be at most 128 characters",
        ));
    }
    let r = st
        .reservations
        .get(rid)
        .ok_or_else(|| ApiError::not_found(format!("Reservation {rid} not found")))?;
    if let Principal::Tenant(t) = principal {
        if *t != r.tenant {
            return Err(ApiError::forbidden(
                "reservation is owned by another tenant",
            ));
        }
    }
    Ok(r.tenant.clone())
}

/// The checks every persisting reservation mutation shares, after replay lookup:
/// TENANT_CLOSED first (it beats the reservation-state errors), then finalized, then expired.
fn guard(st: &State, rid: &str, owner: &str, now: i64, grace: bool) -> Result<(), ApiError> {
    if st.tenant_closed(owner) {
        return Err(ApiError::conflict(
            "TENANT_CLOSED",
            format!("tenant {owner} is closed"),
        ));
    }
    let r = &st.reservations[rid];
    match r.status {
        Status::Committed | Status::Released => Err(ApiError::conflict(
            "RESERVATION_FINALIZED",
            format!("Reservation {rid} is already {}", r.status.as_str()),
        )),
        Status::Expired => Err(ApiError::new(
            410,
            "RESERVATION_EXPIRED",
            format!("Reservation {rid} has expired"),
        )),
        Status::Active => {
            let limit = if grace {
                r.expires_at_ms.saturating_add(r.grace_ms)
            } else {
                r.expires_at_ms
            };
            if now > limit {
                Err(ApiError::new(
                    410,
                    "RESERVATION_EXPIRED",
                    format!("Reservation {rid} has expired"),
                ))
            } else {
                Ok(())
            }
        }
    }
}

fn ikey(owner: &str, op: &str, rid: &str, key: &str) -> IdemKey {
    // Keyed per concrete reservation so one key string cannot replay another reservation's outcome.
    (owner.to_string(), format!("{op}:{rid}"), key.to_string())
}

/// What commit, release and extend share before their own effect: auth, the validated body,
/// the state lock with expiry swept, the owner, the idempotency key, and then either the stored
/// replay or the state guard. `Err` is the early answer (a replay or an error) to return as is.
struct Mutation<'a> {
    st: MutexGuard<'a, State>,
    body: Value,
    key: String,
    rid: String,
    fp: String,
    owner: String,
    ik: IdemKey,
    now: i64,
}

type Early = Result<Outcome, ApiError>;

fn begin<'a>(
    sh: &'a Shared,
    ctx: &Ctx,
    op: &str,
    admin_ok: bool,
    validator: fn(&Value) -> Result<(), ApiError>,
    grace: bool,
) -> Result<Mutation<'a>, Box<Early>> {
    let early = |e: ApiError| Box::new(Err(e));
    let principal = auth(sh, ctx, admin_ok).map_err(early)?;
    let (body, key) = parse_body(ctx, validator).map_err(early)?;
    let rid = ctx.rid.clone().unwrap_or_default();
    let fp = fingerprint(sh, &body);
    let mut st = sh.state();
    let now = sh.clock.now_ms();
    st.sweep(now);
    let owner = owner(&st, &rid, &principal).map_err(early)?;
    let ik = ikey(&owner, op, &rid, &key);
    if let Some(r) = replay(&st, &ik, &fp, now) {
        return Err(Box::new(r));
    }
    guard(&st, &rid, &owner, now, grace).map_err(early)?;
    Ok(Mutation {
        st,
        body,
        key,
        rid,
        fp,
        owner,
        ik,
        now,
    })
}

/// What a commit or release needs to finish once its effect is applied.
struct Finalized {
    rid: String,
    owner: String,
    ik: IdemKey,
    fp: String,
    now: i64,
    /// `Committed` or `Released`; also names the evidence artifact.
    status: Status,
}

/// Ends a commit or release: emits the artifact's evidence over the response, finalizes the
/// reservation (`update` sets the artifact's own fields), and stores the response for
/// idempotent replay.
fn finalize(
    sh: &Shared,
    ctx: &Ctx,
    mut st: MutexGuard<'_, State>,
    done: Finalized,
    body: &Value,
    mut resp: Value,
    update: impl FnOnce(&mut Reservation),
) -> Result<Outcome, ApiError> {
    let Finalized {
        rid,
        owner,
        ik,
        fp,
        now,
        status,
    } = done;
    let artifact = if status == Status::Committed {
        "commit"
    } else {
        "release"
    };
    let ev = emit_evidence(sh, &mut st, artifact, body, &resp, now, &ctx.trace_id);
    let res = st.reservations.get_mut(&rid).expect("reservation exists");
    res.status = status;
    res.finalized_at_ms = Some(now);
    update(res);
    if let Some(ev) = ev {
        res.evidence.insert(artifact, ev.clone());
        resp["cycles_evidence"] = ev;
    }
    let out = Outcome::ok(200, resp, Some(owner));
    store(&mut st, ik, fp, &out, Some(rid));
    Ok(out)
}

pub(super) fn commit(sh: &Shared, ctx: &Ctx) -> Result<Outcome, ApiError> {
    let Mutation {
        mut st,
        body,
        key,
        rid,
        fp,
        owner,
        ik,
        now,
    } = match begin(sh, ctx, "commit", false, validate::commit_request, true) {
        Ok(m) => m,
        Err(early) => return *early,
    };
    let r = st.reservations[&rid].clone();
    let unit = body["actual"]["unit"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    if unit != r.unit {
        return Err(ApiError::new(
            400,
            "UNIT_MISMATCH",
            format!(
                "actual.unit {unit} differs from the reservation unit {}",
                r.unit
            ),
        )
        .with_details(
            json!({"scope": r.scope_path, "requested_unit": unit, "expected_units": [r.unit]}),
        ));
    }
    let actual = body["actual"]["amount"].as_i64().unwrap_or(0);
    let (charged, _) = if actual <= r.amount {
        st.settle(&r.budget_keys, r.amount, actual, 0, &r.overage_policy)?
    } else {
        st.settle(
            &r.budget_keys,
            r.amount,
            r.amount,
            actual - r.amount,
            &r.overage_policy,
        )?
    };
    st.record(
        "commit",
        &owner,
        Some(&rid),
        &key,
        Some(&unit),
        Some(charged),
        now,
    );
    let mut resp = json!({"status": "COMMITTED", "charged": {"unit": unit, "amount": charged}});
    if actual < r.amount {
        resp["released"] = json!({"unit": unit, "amount": r.amount - actual});
    }
    resp["balances"] = st.balances_json(&r.budget_keys);
    let status = Status::Committed;
    let done = Finalized {
        rid,
        owner,
        ik,
        fp,
        now,
        status,
    };
    finalize(sh, ctx, st, done, &body, resp, |res| {
        res.committed = Some(charged);
        res.committed_metadata = body.get("metadata").cloned();
    })
}

pub(super) fn release(sh: &Shared, ctx: &Ctx) -> Result<Outcome, ApiError> {
    let Mutation {
        mut st,
        body,
        key,
        rid,
        fp,
        owner,
        ik,
        now,
    } = match begin(sh, ctx, "release", true, validate::release_request, true) {
        Ok(m) => m,
        Err(early) => return *early,
    };
    let r = st.reservations[&rid].clone();
    for k in &r.budget_keys {
        if let Some(b) = st.budgets.get_mut(k) {
            b.reserved -= r.amount;
        }
    }
    st.record(
        "release",
        &owner,
        Some(&rid),
        &key,
        Some(&r.unit),
        Some(r.amount),
        now,
    );
    let resp = json!({
        "status": "RELEASED",
        "released": {"unit": r.unit, "amount": r.amount},
        "balances": st.balances_json(&r.budget_keys),
    });
    let status = Status::Released;
    let done = Finalized {
        rid,
        owner,
        ik,
        fp,
        now,
        status,
    };
    finalize(sh, ctx, st, done, &body, resp, |_| {})
}

pub(super) fn extend(sh: &Shared, ctx: &Ctx) -> Result<Outcome, ApiError> {
    let Mutation {
        mut st,
        body,
        key,
        rid,
        fp,
        owner,
        ik,
        now,
    } = match begin(sh, ctx, "extend", false, validate::extend_request, false) {
        Ok(m) => m,
        Err(early) => return *early,
    };
    let regime = &sh.config.regime;
    let r = &st.reservations[&rid];
    if let Some(max) = regime.max_extensions {
        if r.extensions >= max {
            return Err(ApiError::conflict(
                "MAX_EXTENSIONS_EXCEEDED",
                format!("Reservation {rid} reached {max} extensions"),
            ));
        }
    }
    let by = body["extend_by_ms"].as_i64().unwrap_or(0);
    let cur = r.expires_at_ms;
    let new_expires = match regime.extend {
        ExtendClamp::Additive => cur.saturating_add(by),
        ExtendClamp::GrantCap { max_grant_ms } => {
            cur.saturating_add(by.min(i64::try_from(max_grant_ms).unwrap_or(i64::MAX)))
        }
        // Never shorten a lease: an extension only moves expiry outward.
        ExtendClamp::MaxLead { max_lead_ms } => cur
            .saturating_add(by)
            .min(now.saturating_add(i64::try_from(max_lead_ms).unwrap_or(i64::MAX)))
            .max(cur),
    };
    let unit = r.unit.clone();
    {
        let res = st.reservations.get_mut(&rid).expect("reservation exists");
        res.expires_at_ms = new_expires;
        res.extensions += 1;
    }
    st.track_deadline(&rid);
    st.record("extend", &owner, Some(&rid), &key, Some(&unit), None, now);
    let mut resp = json!({"status": "ACTIVE", "expires_at_ms": new_expires});
    if regime.emit_remaining_ttl {
        resp["remaining_ttl_ms"] = json!(new_expires.saturating_sub(now).max(0));
    }
    let out = Outcome::ok(200, resp, Some(owner));
    store(&mut st, ik, fp, &out, Some(rid));
    Ok(out)
}
