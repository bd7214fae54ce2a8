//! GET /v1/reservations (filters, windows, sorting, cursor pagination) and GET /v1/reservations/{id}.

use super::query::{decode_cursor, encode_cursor};
use super::{auth, Ctx, Outcome, Principal};
use crate::config::ServerMode;
use crate::error::ApiError;
use crate::reference;
use crate::scope::LEVELS;
use crate::shared::Shared;
use crate::state::{Reservation, Status};
use crate::timefmt::parse_rfc3339_ms;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

const SORT_KEYS: [&str; 7] = [
    "reservation_id",
    "tenant",
    "scope_path",
    "status",
    "reserved",
    "created_at_ms",
    "expires_at_ms",
];
const WINDOWS: [(&str, &str); 3] = [
    ("from", "to"),
    ("expires_from", "expires_to"),
    ("finalized_from", "finalized_to"),
];

type Window = (Option<i64>, Option<i64>);

fn window(ctx: &Ctx, lo: &str, hi: &str) -> Result<Window, ApiError> {
    let parse = |name: &str| -> Result<Option<i64>, ApiError> {
        match ctx.query.non_blank(name) {
            None => Ok(None),
            Some(v) => parse_rfc3339_ms(v)
                .map(Some)
                .ok_or_else(|| ApiError::invalid(format!("{name} must be an RFC 3339 date-time"))),
        }
    };
    let (a, b) = (parse(lo)?, parse(hi)?);
    if let (Some(x), Some(y)) = (a, b) {
        if x > y {
            return Err(ApiError::invalid(format!("{lo} must not be after {hi}")));
        }
    }
    Ok((a, b))
}

fn in_window(v: Option<i64>, w: Window) -> bool {
    match w {
        (None, None) => true,
        (lo, hi) => match v {
            None => false,
            Some(v) => lo.map_or(true, |l| v >= l) && hi.map_or(true, |h| v <= h),
        },
    }
}

pub(super) fn list(sh: &Shared, ctx: &Ctx) -> Result<Outcome, ApiError> {
    let principal = auth(sh, ctx, true)?;
    let q = &ctx.query;
    let tenant = match (&principal, q.non_blank("tenant")) {
        (Principal::Tenant(t), Some(p)) if p != t => {
            return Err(ApiError::forbidden(
                "tenant filter does not match the effective tenant",
            ))
        }
        (Principal::Tenant(t), _) => t.clone(),
        (Principal::Admin, Some(p)) => p.to_string(),
        (Principal::Admin, None) => {
            return Err(ApiError::invalid(
                "tenant query parameter is required when using admin key authentication",
            ))
        }
    };
    let limit = q.limit()?;
    let status = match q.non_blank("status") {
        None => None,
        Some(s) if ["ACTIVE", "COMMITTED", "RELEASED", "EXPIRED"].contains(&s) => {
            Some(s.to_string())
        }
        Some(_) => {
            return Err(ApiError::invalid(
                "status must be one of ACTIVE, COMMITTED, RELEASED, EXPIRED",
            ))
        }
    };
    let sort_by = match q.non_blank("sort_by") {
        None => None,
        Some(s) if SORT_KEYS.contains(&s) => Some(s.to_string()),
        Some(_) => {
            return Err(ApiError::invalid(format!(
                "sort_by must be one of {SORT_KEYS:?}"
            )))
        }
    };
    let desc = match q.non_blank("sort_dir") {
        None => sort_by.is_some(),
        Some("asc") => false,
        Some("desc") => true,
        Some(_) => return Err(ApiError::invalid("sort_dir must be asc or desc")),
    };
    let mut windows = Vec::new();
    for (lo, hi) in WINDOWS {
        windows.push(window(ctx, lo, hi)?);
    }
    // Sorted-path cursors are bound to the window tuple; legacy cursors carry no filter state.
    let bound = sort_by.as_ref().map(|_| {
        let tuple: Vec<String> = WINDOWS
            .iter()
            .flat_map(|(a, b)| [a, b])
            .map(|n| q.non_blank(n).unwrap_or("").to_string())
            .collect();
        hex::encode(&Sha256::digest(tuple.join("\u{1f}").as_bytes())[..8])
    });
    let reference = sh.config.mode == ServerMode::Reference;
    let offset = decode_cursor(q.get("cursor"), bound.as_deref()).map_err(|e| {
        // The reference server hands an undecodable cursor to Redis SCAN, which fails: 500.
        if reference && e.message == "invalid cursor" {
            ApiError::new(500, "INTERNAL_ERROR", "Internal error")
        } else {
            e
        }
    })?;
    let include = q.tokens("include");
    let inc = |t: &str| include.iter().any(|x| x == t);
    let idem = q.non_blank("idempotency_key");

    let mut st = sh.state();
    st.sweep(sh.clock.now_ms());
    let mut rows: Vec<&Reservation> = st
        .reservations
        .values()
        .filter(|r| r.tenant == tenant)
        .filter(|r| status.as_deref().map_or(true, |s| r.status.as_str() == s))
        .filter(|r| idem.map_or(true, |k| r.idempotency_key == k))
        .filter(|r| {
            LEVELS.iter().skip(1).all(|l| {
                q.non_blank(l).map_or(true, |v| {
                    r.subject.get(*l).and_then(Value::as_str) == Some(v)
                })
            })
        })
        .filter(|r| in_window(Some(r.created_at_ms), windows[0]))
        .filter(|r| in_window(Some(r.expires_at_ms), windows[1]))
        .filter(|r| in_window(r.finalized_at_ms, windows[2]))
        .collect();
    rows.sort_by(|a, b| {
        let ord = match sort_by.as_deref() {
            Some("reservation_id") => a.id.cmp(&b.id),
            Some("tenant") => a.tenant.cmp(&b.tenant),
            Some("scope_path") => a.scope_path.cmp(&b.scope_path),
            Some("status") => a.status.as_str().cmp(b.status.as_str()),
            Some("reserved") => a.amount.cmp(&b.amount),
            Some("expires_at_ms") => a.expires_at_ms.cmp(&b.expires_at_ms),
            _ => a.created_at_ms.cmp(&b.created_at_ms),
        }
        .then(a.seq.cmp(&b.seq));
        if desc {
            ord.reverse()
        } else {
            ord
        }
    });
    let page: Vec<Value> = rows
        .iter()
        .skip(offset)
        .take(limit)
        .map(|r| {
            let mut row = r.to_json(inc("metadata"), inc("committed_metadata"), inc("evidence"));
            if reference {
                reference::fill_row_nulls(&mut row);
            }
            row
        })
        .collect();
    let more = offset.saturating_add(limit) < rows.len();
    let mut body = json!({"reservations": page, "has_more": more});
    if more {
        body["next_cursor"] = json!(encode_cursor(offset + limit, bound.as_deref()));
    }
    if reference {
        reference::always_cursor(&mut body);
    }
    Ok(Outcome::ok(200, body, Some(tenant)))
}

pub(super) fn get(sh: &Shared, ctx: &Ctx) -> Result<Outcome, ApiError> {
    let principal = auth(sh, ctx, true)?;
    let rid = ctx.rid.clone().unwrap_or_default();
    if rid.chars().count() > 128 {
        return Err(ApiError::invalid(
            "reservation_id must be at most 128 characters",
        ));
    }
    let mut st = sh.state();
    st.sweep(sh.clock.now_ms());
    let r = st
        .reservations
        .get(&rid)
        .ok_or_else(|| ApiError::not_found(format!("Reservation {rid} not found")))?;
    if let Principal::Tenant(t) = &principal {
        if *t != r.tenant {
            return Err(ApiError::forbidden(
                "reservation is owned by another tenant",
            ));
        }
    }
    if r.status == Status::Expired {
        return Err(ApiError::new(
            410,
            "RESERVATION_EXPIRED",
            format!("Reservation {rid} has expired"),
        ));
    }
    let mut row = r.to_json(true, true, true);
    if sh.config.mode == ServerMode::Reference {
        reference::fill_row_nulls(&mut row);
    }
    Ok(Outcome::ok(200, row, Some(r.tenant.clone())))
}
