//! HTTP inspection and control under `/__cycles/` (not part of the Cycles API), so tests in
//! any language can script faults, read the ledger and move the clock.

use crate::faults::FaultRule;
use crate::shared::{lock, Shared};
use axum::body::Body;
use hyper::Response;
use serde_json::{json, Value};

fn reply(status: u16, body: Value) -> Response<Body> {
    Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(Body::from(body.to_string()))
        .unwrap_or_else(|_| Response::new(Body::empty()))
}

fn bad(msg: String) -> Response<Body> {
    reply(400, json!({"error": "INVALID_REQUEST", "message": msg}))
}

pub(crate) fn handle(sh: &Shared, method: &str, path: &str, body: &[u8]) -> Response<Body> {
    let rest = path.trim_start_matches("/__cycles").trim_start_matches('/');
    let segs: Vec<&str> = rest.split('/').collect();
    match (method, segs.as_slice()) {
        ("GET", ["ledger"]) => reply(200, json!(sh.state().ledger)),
        ("GET", ["requests"]) => reply(200, json!(*lock(&sh.requests))),
        ("POST", ["faults"]) => match serde_json::from_slice::<FaultRule>(body) {
            Ok(rule) => {
                lock(&sh.faults).add(rule);
                reply(200, json!({"ok": true}))
            }
            Err(e) => bad(format!("invalid fault rule: {e}")),
        },
        ("DELETE", ["faults"]) => {
            lock(&sh.faults).clear();
            reply(200, json!({"ok": true}))
        }
        ("GET", ["clock"]) => reply(200, json!({"now_ms": sh.clock.now_ms()})),
        ("POST", ["clock", "advance"]) => match serde_json::from_slice::<Value>(body)
            .ok()
            .and_then(|v| v["ms"].as_u64())
        {
            Some(ms) => {
                sh.clock.advance(ms);
                reply(200, json!({"now_ms": sh.clock.now_ms()}))
            }
            None => bad("body must be {\"ms\": <non-negative integer>}".into()),
        },
        ("POST", ["tenants", id, "closed"]) => match serde_json::from_slice::<Value>(body)
            .ok()
            .and_then(|v| v["closed"].as_bool())
        {
            Some(closed) => {
                let id = percent_encoding::percent_decode_str(id)
                    .decode_utf8_lossy()
                    .into_owned();
                sh.state().tenants.entry(id).or_default().closed = closed;
                reply(200, json!({"ok": true}))
            }
            None => bad("body must be {\"closed\": <bool>}".into()),
        },
        ("GET", ["config"]) => reply(200, json!(sh.config)),
        _ => reply(
            404,
            json!({"error": "NOT_FOUND", "message": format!("no inspection route {method} {path}")}),
        ),
    }
}
