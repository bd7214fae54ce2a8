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
use crate::shared::Shared;
use crate::state::{IdemRecord, State, Status};
use axum::body::Bytes;
use hyper::HeaderMap;
use serde::{Deserialize, Serialize};
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

/// The server's operation table, its one list of operations: each runtime operation's
/// operationId, HTTP method and path template (the spec's, checked against the pinned spec by
/// `tests::the_table_is_the_specs`; the server does not take them from core, whose client it tests),
/// the member its success schema requires (the one a malformed-2xx fault removes) and its
/// handler. It makes [`Operation`] (the fault rules name it), [`route`] and the dispatch;
/// adding an operation is its line here and its handler.
macro_rules! operations {
    ($($(#[$doc:meta])* $variant:ident = $id:literal, $method:literal $path:literal,
        $required:literal => $handler:path;)*) => {
        /// A runtime operation; serialized as the spec's operationId (the variant's name,
        /// `CommitReservation`, is read too).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum Operation {
            $($(#[$doc])* $variant,)*
        }

        impl Operation {
            /// Every operation, in the table's order.
            pub const ALL: &'static [Operation] = &[$(Operation::$variant),*];

            /// The spec's operationId.
            pub fn operation_id(self) -> &'static str {
                match self { $(Operation::$variant => $id,)* }
            }

            /// The variant's name (`CommitReservation`), also accepted in fault rules.
            fn variant_name(self) -> &'static str {
                match self { $(Operation::$variant => stringify!($variant),)* }
            }

            /// The HTTP method.
            pub fn method(self) -> &'static str {
                match self { $(Operation::$variant => $method,)* }
            }

            /// The path template, its parameter in braces.
            pub fn path(self) -> &'static str {
                match self { $(Operation::$variant => $path,)* }
            }

            /// The member the success schema requires (a malformed response removes it).
            pub(crate) fn required_field(self) -> &'static str {
                match self { $(Operation::$variant => $required,)* }
            }
        }

        fn run(sh: &Shared, ctx: &Ctx) -> Result<Outcome, ApiError> {
            match ctx.op { $(Operation::$variant => $handler(sh, ctx),)* }
        }
    };
}

operations! {
    /// `POST /v1/decide`.
    Decide = "decide", "POST" "/v1/decide", "decision" => decide::decide;
    /// `POST /v1/reservations`.
    CreateReservation = "createReservation", "POST" "/v1/reservations", "decision" => reserve::create;
    /// `GET /v1/reservations`.
    ListReservations = "listReservations", "GET" "/v1/reservations", "reservations" => list::list;
    /// `GET /v1/reservations/{reservation_id}`.
    GetReservation = "getReservation", "GET" "/v1/reservations/{reservation_id}", "reservation_id"
        => list::get;
    /// `POST /v1/reservations/{reservation_id}/commit`.
    CommitReservation = "commitReservation", "POST" "/v1/reservations/{reservation_id}/commit",
        "charged" => mutate::commit;
    /// `POST /v1/reservations/{reservation_id}/release`.
    ReleaseReservation = "releaseReservation", "POST" "/v1/reservations/{reservation_id}/release",
        "released" => mutate::release;
    /// `POST /v1/reservations/{reservation_id}/extend`.
    ExtendReservation = "extendReservation", "POST" "/v1/reservations/{reservation_id}/extend",
        "expires_at_ms" => mutate::extend;
    /// `POST /v1/events`.
    CreateEvent = "createEvent", "POST" "/v1/events", "event_id" => decide::event;
    /// `GET /v1/balances`.
    GetBalances = "getBalances", "GET" "/v1/balances", "balances" => balances::balances;
    /// `GET /v1/evidence/{evidence_id}`.
    GetEvidence = "getEvidence", "GET" "/v1/evidence/{evidence_id}", "signature" => evidence::get;
    /// `GET /v1/.well-known/cycles-jwks.json`.
    GetEvidenceJwks = "getEvidenceJwks", "GET" "/v1/.well-known/cycles-jwks.json", "keys"
        => evidence::jwks;
}

impl Serialize for Operation {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.operation_id())
    }
}

impl<'de> Deserialize<'de> for Operation {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        Operation::ALL
            .iter()
            .copied()
            .find(|o| o.operation_id() == name || o.variant_name() == name)
            .ok_or_else(|| {
                let known: Vec<&str> = Operation::ALL.iter().map(|o| o.operation_id()).collect();
                serde::de::Error::custom(format!(
                    "unknown variant `{name}`, expected one of `{}`",
                    known.join("`, `")
                ))
            })
    }
}

/// The path's parameter when `segs` match `template` (`Some(None)`: a match without one).
fn matches<'a>(template: &str, segs: &[&'a str]) -> Option<Option<&'a str>> {
    let parts: Vec<&str> = template.trim_start_matches('/').split('/').collect();
    if parts.len() != segs.len() {
        return None;
    }
    let mut param = None;
    for (t, s) in parts.iter().zip(segs) {
        if t.starts_with('{') {
            if s.is_empty() {
                return None;
            }
            param = Some(*s);
        } else if t != s {
            return None;
        }
    }
    Some(param)
}

/// Map method + path to an operation and its decoded path parameter (the reservation id, or
/// the evidence id). `Err(405)` when the path exists with another method, `Err(404)` when it
/// does not exist.
pub(crate) fn route(method: &str, path: &str) -> Result<(Operation, Option<String>), u16> {
    let segs: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let decode = |s: &str| {
        percent_encoding::percent_decode_str(s)
            .decode_utf8_lossy()
            .into_owned()
    };
    let mut exists = false;
    for &op in Operation::ALL {
        let Some(param) = matches(op.path(), &segs) else {
            continue;
        };
        if op.method() == method {
            return Ok((op, param.map(decode)));
        }
        exists = true;
    }
    Err(if exists { 405 } else { 404 })
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The table is the pinned spec's (`../shared/spec/cycles-protocol-v0.yaml` beside the
    /// repository): every operation, method and path, and nothing else.
    #[test]
    fn the_table_is_the_specs() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../../shared/spec/cycles-protocol-v0.yaml");
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("missing ../shared/spec/cycles-protocol-v0.yaml ({e})"));
        let spec: Value = serde_yaml_ng::from_str(&text).unwrap();
        let mut seen = Vec::new();
        for (p, ops) in spec["paths"].as_object().unwrap() {
            for (method, op) in ops.as_object().unwrap() {
                let Some(id) = op.get("operationId").and_then(Value::as_str) else {
                    continue;
                };
                let concrete = p
                    .replace("{reservation_id}", "r%2F1")
                    .replace("{evidence_id}", "e1");
                let (found, param) = route(&method.to_uppercase(), &concrete).unwrap();
                assert_eq!(found.operation_id(), id);
                assert_eq!(found.path(), p);
                assert_eq!(found.method(), method.to_uppercase());
                if p.contains('{') {
                    assert!(matches!(param.as_deref(), Some("r/1") | Some("e1")), "{id}");
                }
                seen.push(found);
            }
        }
        assert_eq!(seen.len(), Operation::ALL.len());
    }

    #[test]
    fn unknown_paths_are_404_and_other_methods_405() {
        assert_eq!(route("GET", "/v1/nope").unwrap_err(), 404);
        assert_eq!(route("GET", "/v1/reservations/").unwrap_err(), 404);
        assert_eq!(route("POST", "/v1/reservations/r1/undo").unwrap_err(), 404);
        assert_eq!(route("POST", "/v1/reservations/r1").unwrap_err(), 405);
        assert_eq!(route("PUT", "/v1/reservations").unwrap_err(), 405);
        assert_eq!(route("GET", "/v1/decide").unwrap_err(), 405);
    }

    #[test]
    fn fault_rules_name_operations_by_operation_id_or_variant() {
        let a: Operation = serde_json::from_value(json!("commitReservation")).unwrap();
        let b: Operation = serde_json::from_value(json!("CommitReservation")).unwrap();
        assert_eq!(a, Operation::CommitReservation);
        assert_eq!(a, b);
        assert_eq!(serde_json::to_value(a).unwrap(), json!("commitReservation"));
        assert!(serde_json::from_value::<Operation>(json!("commit")).is_err());
    }
}
