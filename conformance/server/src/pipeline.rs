//! The per-request pipeline: log arrival, route, apply any matching fault around the handler,
//! and render the response with the correlation headers every response carries.

use crate::config::ServerMode;
use crate::error::ApiError;
use crate::faults::{Fault, Malformed, Operation};
use crate::http::ConnCtl;
use crate::records::RequestRecord;
use crate::reference;
use crate::routes::{self, Ctx, Outcome, Query};
use crate::shared::{lock, Shared};
use axum::body::Body;
use hyper::body::Incoming;
use hyper::{HeaderMap, Request, Response};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

/// What goes on the wire.
struct Rendered {
    status: u16,
    body: Vec<u8>,
    tenant: Option<String>,
    headers: Vec<(&'static str, String)>,
    replay: bool,
}

/// `reference` carries the request headers in reference mode (401 reason codes depend on
/// them), `None` in spec mode.
fn render_error(
    e: &ApiError,
    request_id: &str,
    trace_id: &str,
    reference: Option<&HeaderMap>,
) -> Rendered {
    let mut body = e.body(request_id, trace_id);
    if let Some(ev) = &e.evidence {
        body["cycles_evidence"] = (**ev).clone();
    }
    if let Some(headers) = reference {
        if e.status == 401 {
            body["message"] = Value::String(reference::unauthorized_reason(headers).into());
        }
        body = reference::reorder_error(e.status, body);
    }
    Rendered {
        status: e.status,
        body: body.to_string().into_bytes(),
        tenant: e.tenant.clone(),
        headers: Vec::new(),
        replay: false,
    }
}

fn render_ok(o: Outcome) -> Rendered {
    Rendered {
        status: o.status,
        body: o.body.to_string().into_bytes(),
        tenant: o.tenant,
        headers: o.headers,
        replay: o.replay,
    }
}

fn malform(op: Operation, shape: Malformed, ok: Option<Outcome>) -> Rendered {
    let (status, mut body, tenant) = match ok {
        Some(o) => (o.status, o.body, o.tenant),
        None => (200, json!({}), None),
    };
    let field = op.required_field();
    let (status, bytes) = match shape {
        Malformed::WrongStatusCode => (202, body.to_string().into_bytes()),
        Malformed::NotJson => (
            status,
            b"<html><body>upstream proxy says hello</body></html>".to_vec(),
        ),
        Malformed::MissingRequiredField => {
            if let Some(m) = body.as_object_mut() {
                m.remove(field);
            }
            (status, body.to_string().into_bytes())
        }
        Malformed::WrongFieldType => {
            let wrong = match body.get(field) {
                Some(Value::String(_)) => json!(12345),
                _ => json!("not-the-right-type"),
            };
            body[field] = wrong;
            (status, body.to_string().into_bytes())
        }
    };
    Rendered {
        status,
        body: bytes,
        tenant,
        headers: Vec::new(),
        replay: false,
    }
}

/// Reference-mode response headers: content type of filter-written bodies, the rate-limit
/// sentinels (`-1` / `0` = not limited; a 429 says `0` / epoch seconds), Cache-Control.
fn reference_headers(r: &mut Rendered, jwks: bool, now_s: i64) -> &'static str {
    let has = |r: &Rendered, k: &str| r.headers.iter().any(|(n, _)| *n == k);
    match r.status {
        401 => {}
        429 => {
            r.headers.push(("x-ratelimit-remaining", "0".into()));
            if !has(r, "x-ratelimit-reset") {
                r.headers.push(("x-ratelimit-reset", now_s.to_string()));
            }
        }
        _ => {
            r.headers.push(("x-ratelimit-remaining", "-1".into()));
            r.headers.push(("x-ratelimit-reset", "0".into()));
        }
    }
    if jwks && r.status == 200 {
        r.headers.retain(|(n, _)| *n != "cache-control");
        r.headers
            .push(("cache-control", reference::JWKS_CACHE_CONTROL.into()));
    } else if !has(r, "cache-control") {
        r.headers
            .push(("cache-control", reference::CACHE_CONTROL.into()));
    }
    if matches!(r.status, 401 | 429) {
        reference::FILTER_CONTENT_TYPE
    } else {
        "application/json"
    }
}

fn response(
    sh: &Shared,
    path: &str,
    mut r: Rendered,
    request_id: &str,
    trace_id: &str,
) -> Response<Body> {
    let content_type = if sh.config.mode == ServerMode::Reference {
        let jwks = path == "/v1/.well-known/cycles-jwks.json";
        reference_headers(&mut r, jwks, sh.clock.now_ms() / 1000)
    } else {
        "application/json"
    };
    let mut b = Response::builder()
        .status(r.status)
        .header("content-type", content_type)
        .header("x-request-id", request_id)
        .header("x-cycles-trace-id", trace_id);
    if let Some(t) = &r.tenant {
        b = b.header("x-cycles-tenant", t.as_str());
    }
    for (k, v) in &r.headers {
        b = b.header(*k, v.as_str());
    }
    b.body(Body::from(r.body))
        .unwrap_or_else(|_| Response::new(Body::empty()))
}

/// Handle one request. Never returns for reset faults: the connection task drops it.
pub(crate) async fn handle(
    sh: Arc<Shared>,
    req: Request<Incoming>,
    conn: Arc<ConnCtl>,
) -> Response<Body> {
    let method = req.method().as_str().to_string();
    let path = req.uri().path().to_string();
    let query = Query::parse(req.uri().query());
    if path.starts_with("/__cycles/") || path == "/__cycles" {
        let body = axum::body::to_bytes(Body::new(req.into_body()), 1 << 20)
            .await
            .unwrap_or_default();
        return crate::inspect::handle(&sh, &method, &path, &body);
    }
    let reference = sh.config.mode == ServerMode::Reference;
    if reference && reference::tomcat_rejects(&path) {
        return reference::tomcat_bad_request();
    }
    let headers = req.headers().clone();
    // Reference mode: the request headers, for the 401 reason codes.
    let dialect = reference.then(|| headers.clone());
    let dialect = dialect.as_ref();
    let trace_id = crate::trace::extract(&headers);
    let request_id = if reference {
        uuid::Uuid::new_v4().to_string()
    } else {
        format!("req_{}", uuid::Uuid::new_v4().simple())
    };
    let seq = {
        let mut log = lock(&sh.requests);
        let seq = log.len() as u64 + 1;
        log.push(RequestRecord {
            seq,
            operation: None,
            method: method.clone(),
            path: path.clone(),
            reservation_id: None,
            idempotency_key: headers
                .get("x-idempotency-key")
                .and_then(|v| v.to_str().ok())
                .map(str::to_string),
            received_at_ms: sh.clock.now_ms(),
            received_mono_us: sh.started.elapsed().as_micros() as u64,
            status: None,
            fault: None,
            replay: false,
            body: None,
        });
        seq
    };
    let update = |f: &dyn Fn(&mut RequestRecord)| {
        if let Some(r) = lock(&sh.requests).get_mut(seq as usize - 1) {
            f(r);
        }
    };
    let finish = |r: Rendered| {
        update(&|rec| {
            rec.status = Some(r.status);
            rec.replay = r.replay;
        });
        response(&sh, &path, r, &request_id, &trace_id)
    };

    let body = match axum::body::to_bytes(Body::new(req.into_body()), 1 << 20).await {
        Ok(b) => b,
        Err(_) => {
            return finish(render_error(
                &ApiError::invalid("request body too large or unreadable"),
                &request_id,
                &trace_id,
                dialect,
            ))
        }
    };
    let (op, rid) = match routes::route(&method, &path) {
        Ok(x) => x,
        // The reference server answers routing errors from its catch-all handler (after auth).
        Err(_) if reference => {
            let e = reference_internal_error(&sh, &headers);
            return finish(render_error(&e, &request_id, &trace_id, dialect));
        }
        Err(405) => {
            let e = ApiError::new(
                405,
                "INVALID_REQUEST",
                format!("method {method} not allowed on {path}"),
            );
            return finish(render_error(&e, &request_id, &trace_id, dialect));
        }
        Err(_) => {
            return finish(render_error(
                &ApiError::not_found(format!("no route for {path}")),
                &request_id,
                &trace_id,
                dialect,
            ))
        }
    };
    let text = std::str::from_utf8(&body)
        .ok()
        .filter(|t| !t.is_empty())
        .map(str::to_string);
    update(&|rec| rec.body = text.clone());
    // Reference mode: a non-JSON media type is a 500 (Spring's unhandled 415), after auth.
    if reference && method == "POST" && reference::unsupported_media_type(&headers) {
        let e = reference_internal_error(&sh, &headers);
        return finish(render_error(&e, &request_id, &trace_id, dialect));
    }
    let body_key = crate::body::parse(&body).ok().and_then(|v| {
        v.get("idempotency_key")
            .and_then(Value::as_str)
            .map(str::to_string)
    });
    let arrival = sh.arrivals.arrive(op);
    let fault = lock(&sh.faults).take(op, rid.as_deref());
    update(&|rec| {
        rec.operation = Some(op);
        // The evidence id travels in the same path slot but is not a reservation.
        rec.reservation_id = rid.clone().filter(|_| op != Operation::GetEvidence);
        if body_key.is_some() {
            rec.idempotency_key = body_key.clone();
        }
        rec.fault = fault.as_ref().map(|f| f.name().to_string());
    });
    let ctx = Ctx {
        op,
        rid,
        headers,
        query,
        body,
        request_id: request_id.clone(),
        trace_id: trace_id.clone(),
        assign_id: match &fault {
            Some(Fault::ReservationId { id }) => Some(id.clone()),
            _ => None,
        },
    };

    // Faults that act before (instead of) applying.
    match &fault {
        Some(Fault::ConnectionReset) => {
            conn.reset();
            return std::future::pending().await;
        }
        Some(Fault::ServerError { status }) => {
            let e = ApiError::new(*status, "INTERNAL_ERROR", "injected server error");
            return finish(render_error(&e, &request_id, &trace_id, dialect));
        }
        Some(Fault::RateLimited { retry_after }) => {
            let e = ApiError::new(429, "LIMIT_EXCEEDED", "injected rate limit");
            let mut r = render_error(&e, &request_id, &trace_id, dialect);
            if let Some(v) = retry_after {
                r.headers.push(("retry-after", v.clone()));
                if let Ok(secs) = v.trim().parse::<i64>() {
                    r.headers.push((
                        "x-ratelimit-reset",
                        (sh.clock.now_ms() / 1000 + secs).to_string(),
                    ));
                }
            }
            return finish(r);
        }
        Some(Fault::Error { status, code }) => {
            let e = ApiError::new(*status, code, "injected error");
            return finish(render_error(&e, &request_id, &trace_id, dialect));
        }
        Some(Fault::EchoApiKey { status, code }) => {
            let key = ctx.headers.get("x-cycles-api-key");
            let key = key.and_then(|v| v.to_str().ok()).unwrap_or_default();
            let e = crate::faults::echo_api_key(*status, code, key);
            return finish(render_error(&e, &request_id, &trace_id, dialect));
        }
        Some(Fault::Delay { ms }) => tokio::time::sleep(Duration::from_millis(*ms)).await,
        Some(Fault::Hold { ms }) => {
            sh.arrivals
                .later_than(op, arrival, Duration::from_millis(*ms))
                .await
        }
        _ => {}
    }

    let result = routes::dispatch(&sh, &ctx);

    // Faults that act after applying.
    match &fault {
        Some(Fault::DropResponseAfterApply) => {
            conn.reset();
            return std::future::pending().await;
        }
        Some(Fault::DelayAfterApply { ms }) => tokio::time::sleep(Duration::from_millis(*ms)).await,
        Some(Fault::MalformedSuccess { shape }) => return finish(malform(op, *shape, result.ok())),
        _ => {}
    }
    match result {
        Ok(o) => finish(render_ok(o)),
        Err(e) => finish(render_error(&e, &request_id, &trace_id, dialect)),
    }
}

/// The reference server's catch-all answer: 401 without a known key, else 500
/// `INTERNAL_ERROR` (with the caller's tenant header, as authenticated responses carry it).
fn reference_internal_error(sh: &Shared, headers: &HeaderMap) -> ApiError {
    match routes::key_principal(sh, headers) {
        None => ApiError::unauthorized(),
        Some(tenant) => {
            let mut e = ApiError::new(500, "INTERNAL_ERROR", "Internal error");
            e.tenant = tenant;
            e
        }
    }
}
