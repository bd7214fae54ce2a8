//! Request routing and the plumbing every operation shares: auth, body parsing and
//! validation, idempotency replay, evidence emission.

mod balances;
mod decide;
mod evidence;
mod list;
mod mutate;
mod query;
mod reserve;

use crate::error::ApiError;
use crate::faults::Operation;
use crate::shared::Shared;
use crate::state::{IdemRecord, State, Status};
use axum::body::Bytes;
use hyper::HeaderMap;
use serde_json::{json, Value};

pub(crate) use query::Query;

/// Everything a handler needs about one request.
pub(crate) struct Ctx {
    pub op: Operation,
    pub rid: Option<String>,
    pub headers: HeaderMap,
    pub query: Query,
    pub body: Bytes,
    pub request_id: String,
    pub trace_id: String,
    /// The id a `reservation_id` fault assigns to the reservation this request creates.
    pub assign_id: Option<String>,
}

/// A successful (or replayed) response.
pub(crate) struct Outcome {
    pub status: u16,
    pub body: Value,
    pub tenant: Option<String>,
    pub replay: bool,
    pub headers: Vec<(&'static str, String)>,
}

impl Outcome {
    pub fn ok(status: u16, body: Value, tenant: Option<String>) -> Self {
        Outcome {
            status,
            body,
            tenant,
            replay: false,
            headers: Vec::new(),
        }
    }
}

/// Map method + path to an operation and the decoded reservation id.
/// `Err(405)` when the path exists with another method, `Err(404)` when it does not exist.
pub(crate) fn route(method: &str, path: &str) -> Result<(Operation, Option<String>), u16> {
    let segs: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let decode = |s: &str| {
        percent_encoding::percent_decode_str(s)
            .decode_utf8_lossy()
            .into_owned()
    };
    let (op, rid) = match segs.as_slice() {
        ["v1", "decide"] => (Some(("POST", Operation::Decide)), None),
        ["v1", "reservations"] => match method {
            "GET" => (Some(("GET", Operation::ListReservations)), None),
            _ => (Some(("POST", Operation::CreateReservation)), None),
        },
        ["v1", "reservations", id] if !id.is_empty() => {
            (Some(("GET", Operation::GetReservation)), Some(decode(id)))
        }
        ["v1", "reservations", id, action] if !id.is_empty() => {
            let op = match *action {
                "commit" => Operation::CommitReservation,
                "release" => Operation::ReleaseReservation,
                "extend" => Operation::ExtendReservation,
                _ => return Err(404),
            };
            (Some(("POST", op)), Some(decode(id)))
        }
        ["v1", "events"] => (Some(("POST", Operation::CreateEvent)), None),
        ["v1", "balances"] => (Some(("GET", Operation::GetBalances)), None),
        ["v1", "evidence", id] if !id.is_empty() => {
            (Some(("GET", Operation::GetEvidence)), Some(decode(id)))
        }
        ["v1", ".well-known", "cycles-jwks.json"] => {
            (Some(("GET", Operation::GetEvidenceJwks)), None)
        }
        _ => (None, None),
    };
    match op {
        Some((m, op)) if m == method => Ok((op, rid)),
        Some(_) => Err(405),
        None => Err(404),
    }
}

/// Run the operation's handler.
pub(crate) fn dispatch(sh: &Shared, ctx: &Ctx) -> Result<Outcome, ApiError> {
    run(sh, ctx).map_err(|mut e| {
        // The spec declares X-Cycles-Tenant on some error responses (404 create/events, 410 get).
        if let Ok(Principal::Tenant(t)) = auth(sh, ctx, false) {
            e.tenant = Some(t);
        }
        e
    })
}

fn run(sh: &Shared, ctx: &Ctx) -> Result<Outcome, ApiError> {
    match ctx.op {
        Operation::Decide => decide::decide(sh, ctx),
        Operation::CreateReservation => reserve::create(sh, ctx),
        Operation::ListReservations => list::list(sh, ctx),
        Operation::GetReservation => list::get(sh, ctx),
        Operation::CommitReservation => mutate::commit(sh, ctx),
        Operation::ReleaseReservation => mutate::release(sh, ctx),
        Operation::ExtendReservation => mutate::extend(sh, ctx),
        Operation::CreateEvent => decide::event(sh, ctx),
        Operation::GetBalances => balances::balances(sh, ctx),
        Operation::GetEvidence => evidence::get(sh, ctx),
        Operation::GetEvidenceJwks => evidence::jwks(sh, ctx),
    }
}

/// Who is calling.
pub(crate) enum Principal {
    Tenant(String),
    Admin,
}

fn header<'a>(h: &'a HeaderMap, name: &str) -> Option<&'a str> {
    h.get(name).and_then(|v| v.to_str().ok())
}

/// Authenticate; `admin_ok` for the operations that also accept `X-Admin-API-Key`.
pub(crate) fn auth(sh: &Shared, ctx: &Ctx, admin_ok: bool) -> Result<Principal, ApiError> {
    if let Some(k) = header(&ctx.headers, "x-cycles-api-key") {
        if let Some(t) = sh.state().api_keys.get(k) {
            return Ok(Principal::Tenant(t.clone()));
        }
    }
    if admin_ok {
        if let (Some(k), Some(admin)) = (
            header(&ctx.headers, "x-admin-api-key"),
            &sh.config.admin_api_key,
        ) {
            if k == admin {
                return Ok(Principal::Admin);
            }
        }
    }
    Err(ApiError::unauthorized())
}

/// The caller of a request that matched no operation: `Some(Some(tenant))` for a tenant
/// key, `Some(None)` for the admin key, `None` when no key is known.
pub(crate) fn key_principal(sh: &Shared, headers: &HeaderMap) -> Option<Option<String>> {
    if let Some(k) = header(headers, "x-cycles-api-key") {
        if let Some(t) = sh.state().api_keys.get(k) {
            return Some(Some(t.clone()));
        }
    }
    match (header(headers, "x-admin-api-key"), &sh.config.admin_api_key) {
        (Some(k), Some(admin)) if k == admin => Some(None),
        _ => None,
    }
}

/// Authenticate with a tenant API key only.
pub(crate) fn auth_tenant(sh: &Shared, ctx: &Ctx) -> Result<String, ApiError> {
    match auth(sh, ctx, false)? {
        Principal::Tenant(t) => Ok(t),
        Principal::Admin => Err(ApiError::unauthorized()),
    }
}

/// Parse and validate a POST body; returns it with its idempotency key, enforcing that an
/// `X-Idempotency-Key` header equals the body key (the spec says MUST match; 400 otherwise).
pub(crate) fn parse_body(
    ctx: &Ctx,
    validator: fn(&Value) -> Result<(), ApiError>,
) -> Result<(Value, String), ApiError> {
    let body: Value = crate::body::parse(&ctx.body)
        .map_err(|e| ApiError::invalid(format!("request body is not valid JSON: {e}")))?;
    validator(&body)?;
    let key = body["idempotency_key"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    if let Some(h) = ctx.headers.get("x-idempotency-key") {
        if h.to_str().ok() != Some(key.as_str()) {
            return Err(ApiError::invalid(
                "X-Idempotency-Key header does not match body idempotency_key",
            ));
        }
    }
    Ok((body, key))
}

/// 403 when `subject.tenant` is given and differs from the effective tenant.
pub(crate) fn check_subject_tenant(subject: &Value, tenant: &str) -> Result<(), ApiError> {
    match subject.get("tenant").and_then(Value::as_str) {
        Some(t) if t != tenant => Err(ApiError::forbidden(format!(
            "subject.tenant '{t}' does not match the effective tenant"
        ))),
        _ => Ok(()),
    }
}

/// The payload identity used to detect same-key/different-payload reuse.
pub(crate) fn fingerprint(sh: &Shared, body: &Value) -> String {
    match sh.config.idempotency_compare {
        crate::config::IdempotencyCompare::Exact => body.to_string(),
        crate::config::IdempotencyCompare::Canonical => crate::evidence::canonical_json(body),
    }
}

pub(crate) type IdemKey = (String, String, String);

/// A stored success for this key: replay it (recomputing `remaining_ttl_ms`), or 409 on a
/// different payload. `None` when the key is fresh.
pub(crate) fn replay(
    st: &State,
    key: &IdemKey,
    fp: &str,
    now: i64,
) -> Option<Result<Outcome, ApiError>> {
    let rec = st.idempotency.get(key)?;
    if rec.fingerprint != fp {
        return Some(Err(ApiError::conflict(
            "IDEMPOTENCY_MISMATCH",
            "idempotency_key was already used with a different request payload",
        )));
    }
    let mut body: Value = serde_json::from_str(&rec.body).expect("a stored reply is JSON");
    if body.get("remaining_ttl_ms").is_some() {
        let active = rec
            .reservation_id
            .as_ref()
            .and_then(|id| st.reservations.get(id))
            .map(|r| r.status == Status::Active)
            .unwrap_or(false);
        let expires = body["expires_at_ms"].as_i64().unwrap_or(0);
        let remaining = if active {
            expires.saturating_sub(now).max(0)
        } else {
            0
        };
        body["remaining_ttl_ms"] = json!(remaining);
    }
    Some(Ok(Outcome {
        status: rec.status,
        body,
        tenant: Some(key.0.clone()),
        replay: true,
        headers: Vec::new(),
    }))
}

pub(crate) fn store(
    st: &mut State,
    key: IdemKey,
    fp: String,
    out: &Outcome,
    reservation_id: Option<String>,
) {
    st.idempotency.insert(
        key,
        IdemRecord {
            fingerprint: fp,
            status: out.status,
            body: out.body.to_string(),
            reservation_id,
        },
    );
}

/// Issue and store an envelope attesting `request` and `response` (sans transport fields);
/// returns the `cycles_evidence` ref, or `None` when evidence is disabled.
pub(crate) fn emit_evidence(
    sh: &Shared,
    st: &mut State,
    artifact: &str,
    request: &Value,
    response: &Value,
    now: i64,
    trace_id: &str,
) -> Option<Value> {
    if !sh.config.evidence {
        return None;
    }
    let payload = json!({"request": request, "response": response});
    let (id, env) = sh.signer.issue(artifact, payload, now, trace_id);
    let url = sh.signer.url(&id);
    st.evidence.insert(id.clone(), env.to_string());
    Some(json!({"evidence_id": id, "cycles_evidence_url": url}))
}

/// Attach error evidence (live reserve denials) to an ApiError.
pub(crate) fn error_with_evidence(
    sh: &Shared,
    st: &mut State,
    ctx: &Ctx,
    request: &Value,
    mut err: ApiError,
    now: i64,
) -> ApiError {
    let body = err.body(&ctx.request_id, &ctx.trace_id);
    err.evidence = emit_evidence(sh, st, "error", request, &body, now, &ctx.trace_id).map(Box::new);
    err
}
