//! Reference mode ([`crate::ServerMode::Reference`]): the client-visible ways the reference
//! server (runcycles/cycles-server 0.1.25.59, see the corpus README in
//! `shared/fixtures/reference-server/`) departs from the spec, so client suites can run
//! against what real deployments send. Each function is one quirk; the pipeline and the
//! handlers call them only in reference mode.

use axum::body::Body;
use hyper::{HeaderMap, Response};
use serde_json::{Map, Value};

/// `Cache-Control` on every response but the two below.
pub(crate) const CACHE_CONTROL: &str = "no-cache, no-store, max-age=0, must-revalidate";
/// `Cache-Control` of a JWKS 200.
pub(crate) const JWKS_CACHE_CONTROL: &str = "max-age=300, public";
/// `Content-Type` of the 401 and 429 bodies (written by a servlet filter, not Spring MVC).
pub(crate) const FILTER_CONTENT_TYPE: &str = "application/json;charset=UTF-8";

const SUBJECT_FIELDS: [&str; 7] = [
    "tenant",
    "workspace",
    "app",
    "workflow",
    "agent",
    "toolset",
    "dimensions",
];

/// A reservation row (getReservation / listReservations) with every unset subject member
/// and `action.tags` as explicit `null`, in the Java model's field order.
pub(crate) fn fill_row_nulls(row: &mut Value) {
    if let Some(subject) = row.get_mut("subject").and_then(Value::as_object_mut) {
        let mut full = Map::new();
        for f in SUBJECT_FIELDS {
            full.insert(f.into(), subject.remove(f).unwrap_or(Value::Null));
        }
        full.append(subject);
        *subject = full;
    }
    if let Some(action) = row.get_mut("action").and_then(Value::as_object_mut) {
        action.entry("tags").or_insert(Value::Null);
    }
}

/// A list or balances page: `next_cursor` is always sent, `null` on the last page.
pub(crate) fn always_cursor(body: &mut Value) {
    if let Some(o) = body.as_object_mut() {
        o.entry("next_cursor").or_insert(Value::Null);
    }
}

/// The 401 `message`: a reason code instead of prose.
pub(crate) fn unauthorized_reason(headers: &HeaderMap) -> &'static str {
    if headers.contains_key("x-cycles-api-key") {
        "KEY_NOT_FOUND"
    } else {
        "Missing API key"
    }
}

/// The error body in the reference server's member order: 401s put `message` first, 429s
/// last (both come from a `Map.of`, whose order varies between server starts).
pub(crate) fn reorder_error(status: u16, body: Value) -> Value {
    let Value::Object(mut o) = body else {
        return body;
    };
    let order: &[&str] = match status {
        401 => &["message", "error", "request_id", "trace_id"],
        429 => &["error", "request_id", "trace_id", "message"],
        _ => return Value::Object(o),
    };
    let mut out = Map::new();
    for k in order {
        if let Some(v) = o.remove(*k) {
            out.insert((*k).to_string(), v);
        }
    }
    out.append(&mut o);
    Value::Object(out)
}

/// True for a raw (still percent-encoded) path that Tomcat rejects before the application:
/// an encoded slash.
pub(crate) fn tomcat_rejects(raw_path: &str) -> bool {
    raw_path.to_ascii_lowercase().contains("%2f")
}

/// Tomcat's own 400: an HTML body, no correlation or rate-limit headers, no Cache-Control.
pub(crate) fn tomcat_bad_request() -> Response<Body> {
    let html = "<!doctype html><html lang=\"en\"><head><title>HTTP Status 400 – Bad Request\
                </title></head><body><h1>HTTP Status 400 – Bad Request</h1></body></html>";
    Response::builder()
        .status(400)
        .header("content-type", "text/html;charset=utf-8")
        .body(Body::from(html))
        .unwrap_or_else(|_| Response::new(Body::empty()))
}

/// True when a POST body's declared media type is one Spring would refuse (it answers 500,
/// not 415). A missing Content-Type is left to body parsing.
pub(crate) fn unsupported_media_type(headers: &HeaderMap) -> bool {
    match headers.get("content-type").and_then(|v| v.to_str().ok()) {
        None => false,
        Some(ct) => !ct
            .trim_start()
            .to_ascii_lowercase()
            .starts_with("application/json"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn rows_get_every_subject_member_and_tags() {
        let mut row =
            json!({"subject": {"agent": "a", "tenant": "t"}, "action": {"kind": "k", "name": "n"}});
        fill_row_nulls(&mut row);
        assert_eq!(
            row.to_string(),
            r#"{"subject":{"tenant":"t","workspace":null,"app":null,"workflow":null,"agent":"a","toolset":null,"dimensions":null},"action":{"kind":"k","name":"n","tags":null}}"#
        );
        let mut tagged = json!({"action": {"kind": "k", "name": "n", "tags": ["x"]}});
        fill_row_nulls(&mut tagged);
        assert_eq!(tagged["action"]["tags"], json!(["x"]));
    }

    #[test]
    fn error_member_order_and_reasons() {
        let body =
            json!({"error": "UNAUTHORIZED", "message": "m", "request_id": "r", "trace_id": "t"});
        assert_eq!(
            reorder_error(401, body.clone()).to_string(),
            r#"{"message":"m","error":"UNAUTHORIZED","request_id":"r","trace_id":"t"}"#
        );
        assert_eq!(
            reorder_error(429, body.clone()).to_string(),
            r#"{"error":"UNAUTHORIZED","request_id":"r","trace_id":"t","message":"m"}"#
        );
        assert_eq!(reorder_error(400, body.clone()), body);
        let mut h = HeaderMap::new();
        assert_eq!(unauthorized_reason(&h), "Missing API key");
        h.insert("x-cycles-api-key", "nope".parse().unwrap());
        assert_eq!(unauthorized_reason(&h), "KEY_NOT_FOUND");
        assert!(tomcat_rejects("/v1/reservations/rsv%2F1"));
        assert!(!tomcat_rejects("/v1/reservations/rsv%20a"));
    }
}
