//! Public evidence surface: GET /v1/evidence/{id} and the JWKS.

use super::{Ctx, Outcome};
use crate::error::ApiError;
use crate::shared::Shared;

pub(super) fn get(sh: &Shared, ctx: &Ctx) -> Result<Outcome, ApiError> {
    let id = ctx.rid.clone().unwrap_or_default();
    if id.len() != 64
        || !id
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        return Err(ApiError::invalid(
            "evidence_id must be 64 lowercase hex characters",
        ));
    }
    let text = sh
        .state()
        .evidence
        .get(&id)
        .cloned()
        .ok_or_else(|| ApiError::not_found(format!("Evidence {id} not found")))?;
    let env = serde_json::from_str(&text).expect("a stored envelope is JSON");
    let mut out = Outcome::ok(200, env, None);
    out.headers
        .push(("cache-control", "public, immutable".to_string()));
    Ok(out)
}

pub(super) fn jwks(sh: &Shared, _ctx: &Ctx) -> Result<Outcome, ApiError> {
    if !sh.config.evidence {
        return Err(ApiError::not_found(
            "This server does not publish a JWK Set",
        ));
    }
    let mut out = Outcome::ok(200, sh.signer.jwks(), None);
    out.headers
        .push(("cache-control", "public, max-age=300".to_string()));
    Ok(out)
}
