//! Reference mode over HTTP: each client-visible quirk of the reference server that the
//! mode reproduces (conformance/server/README.md, "Reference mode"), and spec mode unchanged.

mod common;

use common::*;
use cycles_local_server::{ServerConfig, ServerMode};
use serde_json::{json, Value};

fn reference() -> ServerConfig {
    ServerConfig {
        mode: ServerMode::Reference,
        ..ServerConfig::default()
    }
}

fn header<'a>(r: &'a Resp, name: &str) -> Option<&'a str> {
    r.headers.get(name).and_then(|v| v.to_str().ok())
}

#[tokio::test]
async fn rows_carry_explicit_nulls_and_last_pages_a_null_cursor() {
    let h = H::with(reference()).await;
    let body = json!({"idempotency_key": "k1", "subject": {"tenant": "acme"},
                      "action": {"kind": "llm.completion", "name": "m"}, "estimate": usd(5)});
    let r = h.post("/v1/reservations", &body).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let id = r.body["reservation_id"].as_str().unwrap().to_string();
    assert!(uuid::Uuid::parse_str(&id).is_ok(), "bare UUID id: {id}");

    let g = h.get(&format!("/v1/reservations/{id}")).await;
    assert_eq!(g.status, 200);
    assert_eq!(
        g.body["subject"],
        json!({"tenant": "acme", "workspace": null, "app": null, "workflow": null,
               "agent": null, "toolset": null, "dimensions": null})
    );
    assert_eq!(g.body["action"]["tags"], Value::Null);
    assert!(g.body["action"].as_object().unwrap().contains_key("tags"));

    let l = h.get("/v1/reservations?limit=10").await;
    assert_eq!(l.status, 200);
    let o = l.body.as_object().unwrap();
    assert_eq!(o.get("next_cursor"), Some(&Value::Null));
    assert_eq!(o.get("has_more"), Some(&json!(false)));
    assert_eq!(
        l.body["reservations"][0]["subject"]["workspace"],
        Value::Null
    );

    let b = h.get("/v1/balances?tenant=acme").await;
    assert_eq!(b.status, 200);
    assert_eq!(
        b.body.as_object().unwrap().get("next_cursor"),
        Some(&Value::Null)
    );
    // Headers: rate-limit sentinels, Cache-Control, plain JSON content type.
    assert_eq!(header(&b, "x-ratelimit-remaining"), Some("-1"));
    assert_eq!(header(&b, "x-ratelimit-reset"), Some("0"));
    assert_eq!(
        header(&b, "cache-control"),
        Some("no-cache, no-store, max-age=0, must-revalidate")
    );
    assert_eq!(header(&b, "content-type"), Some("application/json"));
    assert!(uuid::Uuid::parse_str(header(&b, "x-request-id").unwrap()).is_ok());
}

#[tokio::test]
async fn unauthorized_says_a_reason_code_in_filter_order() {
    let h = H::with(reference()).await;
    let missing = h.get_as(None, "/v1/balances?tenant=acme").await;
    assert_eq!(missing.status, 401);
    assert_eq!(missing.body["message"], "Missing API key");
    assert_eq!(
        header(&missing, "content-type"),
        Some("application/json;charset=UTF-8")
    );
    assert_eq!(header(&missing, "x-ratelimit-remaining"), None);
    let wrong = h.get_as(Some("nope"), "/v1/balances?tenant=acme").await;
    assert_eq!(wrong.body["message"], "KEY_NOT_FOUND");
    let keys: Vec<&String> = wrong.body.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["message", "error", "request_id", "trace_id"]);
    assert_eq!(
        wrong.body["request_id"].as_str(),
        header(&wrong, "x-request-id")
    );
}

#[tokio::test]
async fn routing_errors_are_500_after_auth() {
    let h = H::with(reference()).await;
    let unknown = h.get("/v1/nope").await;
    assert_eq!((unknown.status, unknown.code()), (500, "INTERNAL_ERROR"));
    assert_eq!(header(&unknown, "x-cycles-tenant"), Some("acme"));
    let no_key = h.get_as(None, "/v1/nope").await;
    assert_eq!((no_key.status, no_key.code()), (401, "UNAUTHORIZED"));
    let wrong_method = h.get("/v1/decide").await;
    assert_eq!(
        (wrong_method.status, wrong_method.code()),
        (500, "INTERNAL_ERROR")
    );
    assert!(wrong_method.headers.get("allow").is_none());
    let delete = h
        .send(
            h.c.delete(format!("{}/v1/reservations/x", h.url))
                .header("X-Cycles-API-Key", KEY),
        )
        .await;
    assert_eq!(delete.status, 500);
    let text = h
        .send(
            h.c.post(format!("{}/v1/reservations", h.url))
                .header("X-Cycles-API-Key", KEY)
                .header("content-type", "text/plain")
                .body("{}"),
        )
        .await;
    assert_eq!((text.status, text.code()), (500, "INTERNAL_ERROR"));
    let cursor = h.get("/v1/reservations?cursor=%%%garbage").await;
    assert_eq!((cursor.status, cursor.code()), (500, "INTERNAL_ERROR"));
}

#[tokio::test]
async fn encoded_slash_is_a_tomcat_html_400() {
    let h = H::with(reference()).await;
    let r =
        h.c.get(format!("{}/v1/reservations/rsv%2F1", h.url))
            .header("X-Cycles-API-Key", KEY)
            .send()
            .await
            .unwrap();
    assert_eq!(r.status().as_u16(), 400);
    assert_eq!(
        r.headers().get("content-type").unwrap(),
        "text/html;charset=utf-8"
    );
    assert!(r.headers().get("x-request-id").is_none());
    assert!(r.text().await.unwrap().starts_with("<!doctype html>"));
}

#[tokio::test]
async fn rate_limited_and_jwks_headers() {
    let h = H::with(reference()).await;
    let jwks = h.get_as(None, "/v1/.well-known/cycles-jwks.json").await;
    assert_eq!(jwks.status, 200);
    assert_eq!(header(&jwks, "cache-control"), Some("max-age=300, public"));
    h.server.add_fault(cycles_local_server::FaultRule {
        operation: cycles_local_server::Operation::GetEvidenceJwks,
        reservation_id: None,
        skip: 0,
        times: 1,
        every: 1,
        fault: cycles_local_server::Fault::RateLimited {
            retry_after: Some("14".into()),
        },
    });
    let limited = h.get_as(None, "/v1/.well-known/cycles-jwks.json").await;
    assert_eq!(limited.status, 429);
    assert_eq!(header(&limited, "retry-after"), Some("14"));
    assert_eq!(header(&limited, "x-ratelimit-remaining"), Some("0"));
    let reset: i64 = header(&limited, "x-ratelimit-reset")
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        reset > 1_000_000_000 && reset < 100_000_000_000,
        "epoch seconds: {reset}"
    );
    assert_eq!(
        header(&limited, "content-type"),
        Some("application/json;charset=UTF-8")
    );
    let keys: Vec<&String> = limited.body.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["error", "request_id", "trace_id", "message"]);
}

#[tokio::test]
async fn spec_mode_is_unchanged() {
    let h = H::new().await;
    let id = h.reserve_id("k1", 5, json!({})).await;
    assert!(id.starts_with("rsv_"));
    let g = h.get(&format!("/v1/reservations/{id}")).await;
    assert!(!g.body["subject"].as_object().unwrap().contains_key("app"));
    assert!(!g.body["action"].as_object().unwrap().contains_key("tags"));
    let l = h.get("/v1/reservations").await;
    assert!(!l.body.as_object().unwrap().contains_key("next_cursor"));
    assert_eq!(h.get("/v1/nope").await.status, 404);
    assert_eq!(h.get("/v1/decide").await.status, 405);
    let missing = h.get_as(None, "/v1/balances?tenant=acme").await;
    assert_eq!(header(&missing, "content-type"), Some("application/json"));
    assert!(missing.headers.get("cache-control").is_none());
    let cfg: ServerConfig = serde_json::from_str(r#"{"mode": "reference"}"#).unwrap();
    assert_eq!(cfg.mode, ServerMode::Reference);
    assert_eq!(ServerConfig::default().mode, ServerMode::Spec);
}
