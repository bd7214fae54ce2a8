//! GET /v1/balances: tenant-scoped balances matching the subject filters.

use super::query::{decode_cursor, encode_cursor};
use super::{auth_tenant, Ctx, Outcome};
use crate::config::ServerMode;
use crate::error::ApiError;
use crate::reference;
use crate::scope::{level_value, LEVELS};
use crate::shared::Shared;
use serde_json::{json, Value};

pub(super) fn balances(sh: &Shared, ctx: &Ctx) -> Result<Outcome, ApiError> {
    let tenant = auth_tenant(sh, ctx)?;
    let q = &ctx.query;
    if let Some(t) = q.non_blank("tenant") {
        if t != tenant {
            return Err(ApiError::forbidden(
                "tenant filter does not match the effective tenant",
            ));
        }
    }
    if LEVELS.iter().all(|l| q.non_blank(l).is_none()) {
        return Err(ApiError::invalid(
            "at least one of tenant, workspace, app, workflow, agent, toolset is required",
        ));
    }
    if let Some(v) = q.get("include_children") {
        if v != "true" && v != "false" {
            return Err(ApiError::invalid("include_children must be a boolean"));
        }
    }
    let limit = q.limit()?;
    let offset = decode_cursor(q.get("cursor"), None)?;
    let mut st = sh.state();
    st.sweep(sh.clock.now_ms());
    let rows: Vec<Value> = st
        .budgets
        .values()
        .filter(|b| level_value(&b.scope, "tenant") == Some(tenant.as_str()))
        .filter(|b| {
            LEVELS.iter().skip(1).all(|l| {
                q.non_blank(l)
                    .map_or(true, |v| level_value(&b.scope, l) == Some(v))
            })
        })
        .map(|b| b.to_json())
        .collect();
    let more = offset.saturating_add(limit) < rows.len();
    let page: Vec<Value> = rows.into_iter().skip(offset).take(limit).collect();
    let mut body = json!({"balances": page, "has_more": more});
    if more {
        body["next_cursor"] = json!(encode_cursor(offset + limit, None));
    }
    if sh.config.mode == ServerMode::Reference {
        reference::always_cursor(&mut body);
    }
    Ok(Outcome::ok(200, body, Some(tenant)))
}
