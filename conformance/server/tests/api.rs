//! Auth, tenancy, validation, tracing headers, budget resolution and denial codes.
#![allow(clippy::field_reassign_with_default)]

mod common;
use common::*;
use cycles_local_server::{BudgetSeed, BudgetStatus, ServerConfig, TenantSeed};
use serde_json::{json, Value};

fn is_hex32(s: &str) -> bool {
    s.len() == 32
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

fn assert_error_envelope(r: &Resp, status: u16, code: &str) {
    assert_eq!(r.status, status, "body: {}", r.body);
    assert_eq!(r.code(), code, "body: {}", r.body);
    assert!(r.body["message"].is_string());
    let rid = r.headers["x-request-id"].to_str().unwrap();
    assert_eq!(r.body["request_id"], rid);
    let tid = r.headers["x-cycles-trace-id"].to_str().unwrap();
    assert_eq!(r.body["trace_id"], tid);
    assert!(is_hex32(tid));
}

fn two_tenants() -> ServerConfig {
    let mut c = ServerConfig::default();
    c.tenants.push(TenantSeed {
        id: "globex".into(),
        api_keys: vec!["globex-key".into()],
        closed: false,
    });
    c.budgets.push(BudgetSeed {
        scope: "tenant:globex".into(),
        ..BudgetSeed::default()
    });
    c
}

#[tokio::test]
async fn missing_or_unknown_key_is_401() {
    let h = H::new().await;
    let body = reserve_body("k", 10, json!({}));
    assert_error_envelope(
        &h.post_as(None, "/v1/reservations", &body).await,
        401,
        "UNAUTHORIZED",
    );
    assert_error_envelope(
        &h.post_as(Some("nope"), "/v1/reservations", &body).await,
        401,
        "UNAUTHORIZED",
    );
    assert_error_envelope(
        &h.get_as(None, "/v1/balances?tenant=acme").await,
        401,
        "UNAUTHORIZED",
    );
}

#[tokio::test]
async fn subject_tenant_mismatch_is_403_everywhere() {
    let h = H::new().await;
    let mut b = reserve_body("k", 10, json!({}));
    b["subject"]["tenant"] = json!("globex");
    assert_error_envelope(&h.post("/v1/reservations", &b).await, 403, "FORBIDDEN");
    assert_error_envelope(&h.post("/v1/decide", &b).await, 403, "FORBIDDEN");
    let mut e = event_body("e", 10, json!({}));
    e["subject"]["tenant"] = json!("globex");
    assert_error_envelope(&h.post("/v1/events", &e).await, 403, "FORBIDDEN");
    assert_error_envelope(&h.get("/v1/balances?tenant=globex").await, 403, "FORBIDDEN");
    assert_error_envelope(
        &h.get("/v1/reservations?tenant=globex").await,
        403,
        "FORBIDDEN",
    );
}

#[tokio::test]
async fn cross_tenant_reservation_is_403() {
    let h = H::with(two_tenants()).await;
    let rid = h.reserve_id("k", 10, json!({})).await;
    let g = Some("globex-key");
    assert_error_envelope(
        &h.get_as(g, &format!("/v1/reservations/{rid}")).await,
        403,
        "FORBIDDEN",
    );
    for (op, body) in [
        ("commit", json!({"idempotency_key": "x", "actual": usd(1)})),
        ("release", json!({"idempotency_key": "x"})),
        (
            "extend",
            json!({"idempotency_key": "x", "extend_by_ms": 1000}),
        ),
    ] {
        let r = h
            .post_as(g, &format!("/v1/reservations/{rid}/{op}"), &body)
            .await;
        assert_error_envelope(&r, 403, "FORBIDDEN");
    }
    // globex sees none of acme's reservations.
    let l = h.get_as(g, "/v1/reservations").await;
    assert_eq!(l.body["reservations"].as_array().unwrap().len(), 0);
}

#[tokio::test]
async fn admin_key_on_list_get_release() {
    let h = H::new().await;
    let rid = h.reserve_id("k", 10, json!({})).await;
    let admin = |rb: reqwest::RequestBuilder| rb.header("X-Admin-API-Key", ADMIN);
    let r = h
        .send(admin(h.c.get(format!("{}/v1/reservations", h.url))))
        .await;
    assert_error_envelope(&r, 400, "INVALID_REQUEST");
    assert_eq!(
        r.body["message"],
        "tenant query parameter is required when using admin key authentication"
    );
    let r = h
        .send(admin(
            h.c.get(format!("{}/v1/reservations?tenant=acme", h.url)),
        ))
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["reservations"][0]["reservation_id"], rid.as_str());
    let r = h
        .send(admin(h.c.get(format!("{}/v1/reservations/{rid}", h.url))))
        .await;
    assert_eq!(r.status, 200);
    // Admin may not commit.
    let r = h
        .send(
            admin(h.c.post(format!("{}/v1/reservations/{rid}/commit", h.url)))
                .json(&json!({"idempotency_key": "c", "actual": usd(1)})),
        )
        .await;
    assert_error_envelope(&r, 401, "UNAUTHORIZED");
    let r = h
        .send(
            admin(h.c.post(format!("{}/v1/reservations/{rid}/release", h.url)))
                .json(&json!({"idempotency_key": "r", "reason": "[INCIDENT_FORCE_RELEASE]"})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["status"], "RELEASED");
}

#[tokio::test]
async fn strict_validation_is_400() {
    let h = H::new().await;
    let base = reserve_body("k", 10, json!({}));
    let mut cases: Vec<Value> = Vec::new();
    let mut unknown = base.clone();
    unknown["surprise"] = json!(1);
    cases.push(unknown);
    let mut missing = base.clone();
    missing.as_object_mut().unwrap().remove("action");
    cases.push(missing);
    for (k, v) in [
        ("ttl_ms", json!(999)),
        ("ttl_ms", json!(86_400_001)),
        ("ttl_ms", json!("60000")),
        ("grace_period_ms", json!(60_001)),
        ("grace_period_ms", json!(-1)),
        ("overage_policy", json!("SOMETIMES")),
        ("dry_run", json!("yes")),
        ("idempotency_key", json!("")),
        ("idempotency_key", json!("x".repeat(257))),
        ("subject", json!({"dimensions": {"cost_center": "x"}})),
        ("subject", json!({})),
        ("subject", json!({"tenant": "acme", "team": "x"})),
        ("subject", json!({"tenant": "ac me"})),
        ("estimate", json!({"unit": "USD_MICROCENTS", "amount": -1})),
        ("estimate", json!({"unit": "DOLLARS", "amount": 1})),
        ("estimate", json!({"unit": "USD_MICROCENTS"})),
        ("estimate", json!({"unit": "USD_MICROCENTS", "amount": 1.5})),
        ("action", json!({"kind": "x"})),
        (
            "action",
            json!({"kind": "x", "name": "y", "tags": ["a","b","c","d","e","f","g","h","i","j","k"]}),
        ),
        ("metadata", json!("not-an-object")),
    ] {
        let mut b = base.clone();
        b[k] = v;
        cases.push(b);
    }
    for b in cases {
        let r = h.post("/v1/reservations", &b).await;
        assert_error_envelope(&r, 400, "INVALID_REQUEST");
    }
    // Not JSON at all.
    let r = h
        .send(
            h.c.post(format!("{}/v1/reservations", h.url))
                .header("X-Cycles-API-Key", KEY)
                .body("{nope"),
        )
        .await;
    assert_error_envelope(&r, 400, "INVALID_REQUEST");
    // Other operations.
    let r = h
        .post(
            "/v1/reservations/rsv_x/extend",
            &json!({"idempotency_key": "e", "extend_by_ms": 0}),
        )
        .await;
    assert_error_envelope(&r, 400, "INVALID_REQUEST");
    let r = h
        .post(
            "/v1/reservations/rsv_x/release",
            &json!({"idempotency_key": "e", "reason": "x".repeat(257)}),
        )
        .await;
    assert_error_envelope(&r, 400, "INVALID_REQUEST");
    let r = h
        .post(
            "/v1/reservations/rsv_x/commit",
            &json!({"idempotency_key": "e", "actual": usd(1), "metrics": {"tokens_input": -1}}),
        )
        .await;
    assert_error_envelope(&r, 400, "INVALID_REQUEST");
    let r = h
        .post(
            "/v1/events",
            &event_body("e", 1, json!({"client_time_ms": -5})),
        )
        .await;
    assert_error_envelope(&r, 400, "INVALID_REQUEST");
    let r = h
        .post("/v1/decide", &reserve_body("d", 1, json!({"ttl_ms": 5000})))
        .await;
    assert_error_envelope(&r, 400, "INVALID_REQUEST");
    // Dimensions round-trip and tags are fine.
    let mut ok = base.clone();
    ok["subject"]["dimensions"] = json!({"cost_center": "cc-1"});
    ok["action"]["tags"] = json!(["prod"]);
    let rid = h
        .reserve_id(
            "dims",
            1,
            json!({"subject": ok["subject"], "action": ok["action"]}),
        )
        .await;
    let g = h.get(&format!("/v1/reservations/{rid}")).await;
    assert_eq!(g.body["subject"]["dimensions"]["cost_center"], "cc-1");
}

#[tokio::test]
async fn header_and_body_key_must_match() {
    let h = H::new().await;
    let b = reserve_body("body-key", 10, json!({}));
    let rb =
        h.c.post(format!("{}/v1/reservations", h.url))
            .header("X-Cycles-API-Key", KEY)
            .header("X-Idempotency-Key", "other")
            .json(&b);
    assert_error_envelope(&h.send(rb).await, 400, "INVALID_REQUEST");
    let rb =
        h.c.post(format!("{}/v1/reservations", h.url))
            .header("X-Cycles-API-Key", KEY)
            .header("X-Idempotency-Key", "body-key")
            .json(&b);
    assert_eq!(h.send(rb).await.status, 200);
}

#[tokio::test]
async fn trace_id_precedence() {
    let h = H::new().await;
    let tp_trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    let flat = "0af7651916cd43dd8448eb211c80319c";
    let get = |hdrs: Vec<(&'static str, String)>| {
        let mut rb =
            h.c.get(format!("{}/v1/balances?tenant=acme", h.url))
                .header("X-Cycles-API-Key", KEY);
        for (k, v) in hdrs {
            rb = rb.header(k, v);
        }
        rb
    };
    let tid = |r: &Resp| r.headers["x-cycles-trace-id"].to_str().unwrap().to_string();
    let tp = format!("00-{tp_trace}-00f067aa0ba902b7-01");
    // traceparent wins over X-Cycles-Trace-Id.
    let r = h
        .send(get(vec![
            ("traceparent", tp.clone()),
            ("x-cycles-trace-id", flat.into()),
        ]))
        .await;
    assert_eq!(tid(&r), tp_trace);
    // Flat header alone.
    let r = h.send(get(vec![("x-cycles-trace-id", flat.into())])).await;
    assert_eq!(tid(&r), flat);
    // Malformed traceparent falls through to the flat header; never rejected.
    let r = h
        .send(get(vec![
            ("traceparent", "garbage".into()),
            ("x-cycles-trace-id", flat.into()),
        ]))
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(tid(&r), flat);
    let zero_span = format!("00-{tp_trace}-0000000000000000-01");
    let r = h
        .send(get(vec![
            ("traceparent", zero_span),
            ("x-cycles-trace-id", flat.into()),
        ]))
        .await;
    assert_eq!(tid(&r), flat);
    // All-zero / uppercase flat values are ignored; a fresh id is generated.
    for bad in [
        "00000000000000000000000000000000",
        "4BF92F3577B34DA6A3CE929D0E0E4736",
    ] {
        let r = h.send(get(vec![("x-cycles-trace-id", bad.into())])).await;
        assert_ne!(tid(&r), bad);
        assert!(is_hex32(&tid(&r)));
    }
    // Errors carry the same trace id in the body; every response has X-Request-Id.
    let r = h
        .send(
            h.c.get(format!("{}/v1/balances", h.url))
                .header("X-Cycles-API-Key", KEY)
                .header("traceparent", tp),
        )
        .await;
    assert_error_envelope(&r, 400, "INVALID_REQUEST");
    assert_eq!(r.body["trace_id"], tp_trace);
    let r = h.get("/v1/nope").await;
    assert_error_envelope(&r, 404, "NOT_FOUND");
}

#[tokio::test]
async fn budget_resolution_not_found_and_unit_mismatch() {
    let mut cfg = ServerConfig::default();
    cfg.budgets = vec![BudgetSeed {
        scope: "tenant:acme/workspace:prod".into(),
        unit: "TOKENS".into(),
        allocated: 1000,
        ..BudgetSeed::default()
    }];
    let h = H::with(cfg).await;
    // Wrong unit at a derived scope: 400 UNIT_MISMATCH with details, on reserve, dry-run, decide, events.
    for (path, body) in [
        ("/v1/reservations", reserve_body("a", 1, json!({}))),
        (
            "/v1/reservations",
            reserve_body("b", 1, json!({"dry_run": true})),
        ),
        ("/v1/decide", reserve_body("c", 1, json!({}))),
        ("/v1/events", event_body("d", 1, json!({}))),
    ] {
        let mut body = body;
        if let Some(m) = body.as_object_mut() {
            m.remove("dry_run")
                .filter(|_| path != "/v1/reservations")
                .map(|v| m.insert("dry_run".into(), v));
        }
        let r = h.post(path, &body).await;
        assert_error_envelope(&r, 400, "UNIT_MISMATCH");
        assert_eq!(r.body["details"]["scope"], "tenant:acme/workspace:prod");
        assert_eq!(r.body["details"]["requested_unit"], "USD_MICROCENTS");
        assert_eq!(r.body["details"]["expected_units"], json!(["TOKENS"]));
    }
    // No budget in any unit: 404 on reserve/events, DENY BUDGET_NOT_FOUND on dry-run/decide.
    let mut other = reserve_body("e", 1, json!({}));
    other["subject"] = json!({"tenant": "acme", "workspace": "staging"});
    let r = h.post("/v1/reservations", &other).await;
    assert_error_envelope(&r, 404, "NOT_FOUND");
    assert_eq!(r.headers["x-cycles-tenant"], "acme");
    assert!(r.body["message"]
        .as_str()
        .unwrap()
        .starts_with("Budget not found for provided scope"));
    other["idempotency_key"] = json!("f");
    let r = h.post("/v1/decide", &other).await;
    assert_eq!(r.body["decision"], "DENY");
    assert_eq!(r.body["reason_code"], "BUDGET_NOT_FOUND");
    let mut ev = event_body("g", 1, json!({}));
    ev["subject"] = other["subject"].clone();
    assert_error_envelope(&h.post("/v1/events", &ev).await, 404, "NOT_FOUND");
    // Gaps are skipped: {tenant, agent} derives tenant:acme/agent:bot.
    let mut gap = reserve_body("h", 1, json!({"dry_run": true}));
    gap["subject"] = json!({"tenant": "acme", "agent": "bot"});
    gap["estimate"] = json!({"unit": "TOKENS", "amount": 1});
    let r = h.post("/v1/reservations", &gap).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["scope_path"], "tenant:acme/agent:bot");
    assert_eq!(
        r.body["affected_scopes"],
        json!(["tenant:acme", "tenant:acme/agent:bot"])
    );
}

#[tokio::test]
async fn denials_are_409_live_and_deny_on_dry_run_and_decide() {
    let h = H::with(budget_cfg(1000, 0)).await;
    // Insufficient budget.
    let r = h
        .post("/v1/reservations", &reserve_body("big", 1001, json!({})))
        .await;
    assert_error_envelope(&r, 409, "BUDGET_EXCEEDED");
    assert!(r.body["cycles_evidence"]["evidence_id"].is_string());
    for (path, body) in [
        (
            "/v1/reservations",
            reserve_body("big-dry", 1001, json!({"dry_run": true})),
        ),
        ("/v1/decide", reserve_body("big-d", 1001, json!({}))),
    ] {
        let mut body = body;
        if path == "/v1/decide" {
            body.as_object_mut().unwrap().remove("dry_run");
        }
        let r = h.post(path, &body).await;
        assert_eq!(r.status, 200, "{}", r.body);
        assert_eq!(r.body["decision"], "DENY");
        assert_eq!(r.body["reason_code"], "BUDGET_EXCEEDED");
        assert!(r.body.get("reservation_id").is_none());
        assert!(r.body.get("expires_at_ms").is_none());
        assert!(r.body.get("remaining_ttl_ms").is_none());
        assert!(r.body["affected_scopes"].is_array());
    }
    // Dry-run ALLOW does not reserve.
    let r = h
        .post(
            "/v1/reservations",
            &reserve_body("ok-dry", 1000, json!({"dry_run": true})),
        )
        .await;
    assert_eq!(r.body["decision"], "ALLOW");
    assert!(r.body.get("remaining_ttl_ms").is_none());
    assert!(r.body.get("reservation_id").is_none());
    assert_eq!(h.balance("tenant:acme").await["reserved"]["amount"], 0);
    assert!(h.server.ledger().is_empty());
}

#[tokio::test]
async fn frozen_and_closed_budgets() {
    for (status, code) in [
        (BudgetStatus::Frozen, "BUDGET_FROZEN"),
        (BudgetStatus::Closed, "BUDGET_CLOSED"),
    ] {
        let mut cfg = ServerConfig::default();
        cfg.budgets[0].status = status;
        let h = H::with(cfg).await;
        assert_error_envelope(
            &h.post("/v1/reservations", &reserve_body("a", 1, json!({})))
                .await,
            409,
            code,
        );
        let r = h.post("/v1/decide", &reserve_body("b", 1, json!({}))).await;
        assert_eq!(
            (r.body["decision"].as_str(), r.body["reason_code"].as_str()),
            (Some("DENY"), Some(code))
        );
        assert_error_envelope(
            &h.post("/v1/events", &event_body("c", 1, json!({}))).await,
            409,
            code,
        );
    }
}

#[tokio::test]
async fn closed_tenant_guard() {
    let h = H::new().await;
    let rid = h.reserve_id("r1", 10, json!({})).await;
    let rid2 = h.reserve_id("r2", 10, json!({})).await;
    assert_eq!(h.commit(&rid2, "c2", 5).await.status, 200);
    h.server.set_tenant_closed("acme", true);
    // Persisting surface: 409 TENANT_CLOSED.
    assert_error_envelope(
        &h.post("/v1/reservations", &reserve_body("r3", 1, json!({})))
            .await,
        409,
        "TENANT_CLOSED",
    );
    assert_error_envelope(&h.commit(&rid, "c1", 1).await, 409, "TENANT_CLOSED");
    assert_error_envelope(&h.release(&rid, "l1").await, 409, "TENANT_CLOSED");
    assert_error_envelope(&h.extend(&rid, "x1", 1000).await, 409, "TENANT_CLOSED");
    assert_error_envelope(
        &h.post("/v1/events", &event_body("e1", 1, json!({}))).await,
        409,
        "TENANT_CLOSED",
    );
    // Precedence over RESERVATION_FINALIZED for a fresh key...
    assert_error_envelope(&h.commit(&rid2, "c2-new", 5).await, 409, "TENANT_CLOSED");
    // ...but a same-key replay of a pre-close success still returns the stored response.
    let replay = h.commit(&rid2, "c2", 5).await;
    assert_eq!(replay.status, 200);
    assert_eq!(replay.body["status"], "COMMITTED");
    let replay = h
        .post("/v1/reservations", &reserve_body("r1", 10, json!({})))
        .await;
    assert_eq!(replay.body["reservation_id"], rid.as_str());
    // Non-persisting: DENY TENANT_CLOSED.
    for (path, body) in [
        (
            "/v1/reservations",
            reserve_body("d1", 1, json!({"dry_run": true})),
        ),
        ("/v1/decide", reserve_body("d2", 1, json!({}))),
    ] {
        let r = h.post(path, &body).await;
        assert_eq!(r.status, 200);
        assert_eq!(r.body["decision"], "DENY");
        assert_eq!(r.body["reason_code"], "TENANT_CLOSED");
    }
    // Reads stay available.
    assert_eq!(h.get(&format!("/v1/reservations/{rid}")).await.status, 200);
    assert_eq!(h.get("/v1/reservations").await.status, 200);
}

#[tokio::test]
async fn balances_filters_and_invariant() {
    let mut cfg = ServerConfig::default();
    cfg.budgets.push(BudgetSeed {
        scope: "tenant:acme/workspace:prod".into(),
        allocated: 5000,
        ..BudgetSeed::default()
    });
    cfg.budgets.push(BudgetSeed {
        scope: "tenant:acme/workspace:dev".into(),
        allocated: 5000,
        ..BudgetSeed::default()
    });
    let h = H::with(cfg).await;
    assert_error_envelope(&h.get("/v1/balances").await, 400, "INVALID_REQUEST");
    assert_error_envelope(&h.get("/v1/balances?tenant=").await, 400, "INVALID_REQUEST");
    assert_error_envelope(
        &h.get("/v1/balances?tenant=acme&limit=0").await,
        400,
        "INVALID_REQUEST",
    );
    let rid = h.reserve_id("k", 700, json!({})).await;
    let r = h.get("/v1/balances?workspace=prod").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.headers["x-cycles-tenant"], "acme");
    let rows = r.body["balances"].as_array().unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["reserved"]["amount"], 700);
    assert_invariant(&rows[0]);
    // Pagination over the three rows.
    let p1 = h.get("/v1/balances?tenant=acme&limit=2").await;
    assert_eq!(p1.body["balances"].as_array().unwrap().len(), 2);
    assert_eq!(p1.body["has_more"], true);
    let cur = p1.body["next_cursor"].as_str().unwrap();
    let p2 = h
        .get(&format!("/v1/balances?tenant=acme&limit=2&cursor={cur}"))
        .await;
    assert_eq!(p2.body["balances"].as_array().unwrap().len(), 1);
    assert_eq!(p2.body["has_more"], false);
    assert_eq!(h.commit(&rid, "c", 300).await.status, 200);
    for b in h.get("/v1/balances?tenant=acme").await.body["balances"]
        .as_array()
        .unwrap()
    {
        assert_invariant(b);
    }
    let prod = h.balance("tenant:acme/workspace:prod").await;
    assert_eq!(
        (
            prod["spent"]["amount"].as_i64(),
            prod["reserved"]["amount"].as_i64()
        ),
        (Some(300), Some(0))
    );
}

#[tokio::test]
async fn unknown_reservation_and_percent_encoded_ids() {
    let h = H::new().await;
    assert_error_envelope(
        &h.get("/v1/reservations/rsv_missing").await,
        404,
        "NOT_FOUND",
    );
    assert_error_envelope(&h.commit("rsv_missing", "c", 1).await, 404, "NOT_FOUND");
    assert_error_envelope(&h.release("rsv_missing", "c").await, 404, "NOT_FOUND");
    assert_error_envelope(&h.extend("rsv_missing", "c", 10).await, 404, "NOT_FOUND");
    let rid = h.reserve_id("k", 1, json!({})).await;
    let encoded = rid.replace('_', "%5F");
    let r = h.get(&format!("/v1/reservations/{encoded}")).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["reservation_id"], rid.as_str());
    let r = h.commit(&encoded, "c", 1).await;
    assert_eq!(r.status, 200);
    let rec = h.server.requests().into_iter().last().unwrap();
    assert_eq!(rec.reservation_id.as_deref(), Some(rid.as_str()));
}
