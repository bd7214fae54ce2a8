//! Reservation state machine, expiry and grace, overage policies, events and TTL regimes.
#![allow(clippy::field_reassign_with_default)]

mod common;
use common::*;
use cycles_local_server::{ExtendClamp, ServerConfig};
use serde_json::json;

#[tokio::test]
async fn commit_below_reserved_releases_the_rest() {
    let h = H::with(budget_cfg(10_000, 0)).await;
    let rid = h.reserve_id("k", 1000, json!({})).await;
    let b = h.balance("tenant:acme").await;
    assert_eq!(
        (
            b["reserved"]["amount"].as_i64(),
            b["remaining"]["amount"].as_i64()
        ),
        (Some(1000), Some(9000))
    );
    let r = h.commit(&rid, "c", 600).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["status"], "COMMITTED");
    assert_eq!(r.body["charged"], usd(600));
    assert_eq!(r.body["released"], usd(400));
    assert_invariant(&r.body["balances"][0]);
    let b = h.balance("tenant:acme").await;
    assert_eq!(
        (
            b["spent"]["amount"].as_i64(),
            b["reserved"]["amount"].as_i64()
        ),
        (Some(600), Some(0))
    );
    // Finalized: commit/release/extend with new keys -> 409.
    assert_eq!(
        h.commit(&rid, "c2", 1).await.code(),
        "RESERVATION_FINALIZED"
    );
    assert_eq!(h.release(&rid, "r2").await.code(), "RESERVATION_FINALIZED");
    let x = h.extend(&rid, "x2", 1000).await;
    assert_eq!((x.status, x.code()), (409, "RESERVATION_FINALIZED"));
    let d = h.get(&format!("/v1/reservations/{rid}")).await;
    assert_eq!(d.body["status"], "COMMITTED");
    assert_eq!(d.body["committed"], usd(600));
    assert!(d.body["finalized_at_ms"].is_i64());
    let kinds: Vec<String> = h.server.ledger().into_iter().map(|e| e.kind).collect();
    assert_eq!(kinds, ["reserve", "commit"]);
}

#[tokio::test]
async fn release_returns_everything() {
    let h = H::with(budget_cfg(10_000, 0)).await;
    let rid = h.reserve_id("k", 1000, json!({})).await;
    let r = h.release(&rid, "r").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["released"], usd(1000));
    let b = h.balance("tenant:acme").await;
    assert_eq!(
        (
            b["remaining"]["amount"].as_i64(),
            b["spent"]["amount"].as_i64()
        ),
        (Some(10_000), Some(0))
    );
    assert_eq!(h.commit(&rid, "c", 1).await.code(), "RESERVATION_FINALIZED");
}

#[tokio::test]
async fn commit_unit_mismatch() {
    let h = H::new().await;
    let rid = h.reserve_id("k", 10, json!({})).await;
    let r = h
        .post(
            &format!("/v1/reservations/{rid}/commit"),
            &json!({"idempotency_key": "c", "actual": {"unit": "TOKENS", "amount": 5}}),
        )
        .await;
    assert_eq!((r.status, r.code()), (400, "UNIT_MISMATCH"));
    assert_eq!(
        r.body["details"]["expected_units"],
        json!(["USD_MICROCENTS"])
    );
}

#[tokio::test]
async fn overage_reject() {
    let h = H::with(budget_cfg(1000, 0)).await;
    let rid = h
        .reserve_id("k", 500, json!({"overage_policy": "REJECT"}))
        .await;
    let r = h.commit(&rid, "c", 1200).await;
    assert_eq!((r.status, r.code()), (409, "BUDGET_EXCEEDED"));
    // Within remaining it is fine, and still ACTIVE after the failed attempt.
    let r = h.commit(&rid, "c2", 900).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["charged"], usd(900));
}

#[tokio::test]
async fn overage_allow_if_available_caps_and_marks_over_limit() {
    let h = H::with(budget_cfg(1000, 0)).await;
    let rid = h.reserve_id("k", 500, json!({})).await;
    let r = h.commit(&rid, "c", 1500).await;
    assert_eq!(r.status, 200, "{}", r.body);
    // delta 1000, only 500 available -> charged = 500 + 500.
    assert_eq!(r.body["charged"], usd(1000));
    let b = h.balance("tenant:acme").await;
    assert_eq!(b["is_over_limit"], true);
    assert_eq!(b["debt"]["amount"], 0);
    assert_invariant(&b);
    let r = h
        .post("/v1/reservations", &reserve_body("next", 0, json!({})))
        .await;
    assert_eq!((r.status, r.code()), (409, "OVERDRAFT_LIMIT_EXCEEDED"));
    let d = h.post("/v1/decide", &reserve_body("d", 0, json!({}))).await;
    assert_eq!(d.body["reason_code"], "OVERDRAFT_LIMIT_EXCEEDED");
}

#[tokio::test]
async fn overage_allow_with_overdraft() {
    let h = H::with(budget_cfg(1000, 300)).await;
    let a = h
        .reserve_id("a", 500, json!({"overage_policy": "ALLOW_WITH_OVERDRAFT"}))
        .await;
    let b = h
        .reserve_id("b", 400, json!({"overage_policy": "ALLOW_WITH_OVERDRAFT"}))
        .await;
    // remaining 100; delta 200 > 100 -> debt += 200 (<= 300).
    let r = h.commit(&a, "ca", 700).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["charged"], usd(700));
    let bal = h.balance("tenant:acme").await;
    assert_eq!(bal["debt"]["amount"], 200);
    assert_eq!(bal["remaining"]["amount"], -100);
    assert_eq!(bal["is_over_limit"], false);
    assert_invariant(&bal);
    // Debt outstanding blocks new reservations (409) and denies decide.
    let r = h
        .post("/v1/reservations", &reserve_body("c", 1, json!({})))
        .await;
    assert_eq!((r.status, r.code()), (409, "DEBT_OUTSTANDING"));
    assert_eq!(
        h.post("/v1/decide", &reserve_body("d", 1, json!({})))
            .await
            .body["reason_code"],
        "DEBT_OUTSTANDING"
    );
    // debt 200 + delta 200 > 300 -> 409 OVERDRAFT_LIMIT_EXCEEDED.
    let r = h.commit(&b, "cb", 600).await;
    assert_eq!((r.status, r.code()), (409, "OVERDRAFT_LIMIT_EXCEEDED"));
    // Existing reservations can still be committed within the reservation.
    assert_eq!(h.commit(&b, "cb2", 400).await.status, 200);
}

#[tokio::test]
async fn overdraft_policy_without_overdraft_limit_behaves_as_allow_if_available() {
    let h = H::with(budget_cfg(1000, 0)).await;
    let rid = h
        .reserve_id("a", 500, json!({"overage_policy": "ALLOW_WITH_OVERDRAFT"}))
        .await;
    let r = h.commit(&rid, "c", 2000).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["charged"], usd(1000));
    let b = h.balance("tenant:acme").await;
    assert_eq!(
        (b["debt"]["amount"].as_i64(), b["is_over_limit"].as_bool()),
        (Some(0), Some(true))
    );
}

#[tokio::test]
async fn events_apply_with_policies() {
    let h = H::with(budget_cfg(1000, 500)).await;
    let r = h
        .post("/v1/events", &event_body("e1", 300, json!({})))
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(r.body["status"], "APPLIED");
    assert!(r.body["event_id"].is_string());
    assert!(r.body.get("charged").is_none());
    let r = h
        .post(
            "/v1/events",
            &event_body("e2", 800, json!({"overage_policy": "REJECT"})),
        )
        .await;
    assert_eq!((r.status, r.code()), (409, "BUDGET_EXCEEDED"));
    // Capped: 700 remaining.
    let r = h
        .post(
            "/v1/events",
            &event_body("e3", 800, json!({"overage_policy": "ALLOW_IF_AVAILABLE"})),
        )
        .await;
    assert_eq!(r.status, 201);
    assert_eq!(r.body["charged"], usd(700));
    assert_eq!(h.balance("tenant:acme").await["is_over_limit"], true);
    let h = H::with(budget_cfg(1000, 500)).await;
    assert_eq!(
        h.post("/v1/events", &event_body("o0", 800, json!({})))
            .await
            .status,
        201
    );
    // remaining 200 < 400; debt 0 + 400 <= 500 -> debt accrues, remaining goes negative.
    let r = h
        .post(
            "/v1/events",
            &event_body("o1", 400, json!({"overage_policy": "ALLOW_WITH_OVERDRAFT"})),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let b = h.balance("tenant:acme").await;
    assert_eq!(
        (
            b["debt"]["amount"].as_i64(),
            b["remaining"]["amount"].as_i64()
        ),
        (Some(400), Some(-200))
    );
    assert_eq!(b["is_over_limit"], false);
    assert_invariant(&b);
    // debt 400 + 200 > 500 -> 409.
    let r = h
        .post(
            "/v1/events",
            &event_body("o2", 200, json!({"overage_policy": "ALLOW_WITH_OVERDRAFT"})),
        )
        .await;
    assert_eq!((r.status, r.code()), (409, "OVERDRAFT_LIMIT_EXCEEDED"));
    let kinds: Vec<String> = h.server.ledger().into_iter().map(|e| e.kind).collect();
    assert_eq!(kinds, ["event", "event"]);
}

#[tokio::test]
async fn expiry_grace_and_lazy_release() {
    let h = H::with(budget_cfg(10_000, 0)).await;
    let a = h
        .reserve_id("a", 1000, json!({"ttl_ms": 1000, "grace_period_ms": 2000}))
        .await;
    let b = h
        .reserve_id("b", 1000, json!({"ttl_ms": 1000, "grace_period_ms": 2000}))
        .await;
    let c = h
        .reserve_id("c", 1000, json!({"ttl_ms": 1000, "grace_period_ms": 0}))
        .await;
    h.server.advance_clock(1500);
    // Past expiry, within grace: extend is refused, commit and release are accepted.
    let x = h.extend(&a, "x", 1000).await;
    assert_eq!((x.status, x.code()), (410, "RESERVATION_EXPIRED"));
    assert_eq!(h.commit(&a, "ca", 10).await.status, 200);
    assert_eq!(
        h.get(&format!("/v1/reservations/{b}")).await.body["status"],
        "ACTIVE"
    );
    // No grace: expired already.
    let r = h.commit(&c, "cc", 10).await;
    assert_eq!((r.status, r.code()), (410, "RESERVATION_EXPIRED"));
    h.server.advance_clock(1600);
    let r = h.release(&b, "rb").await;
    assert_eq!((r.status, r.code()), (410, "RESERVATION_EXPIRED"));
    let g = h.get(&format!("/v1/reservations/{b}")).await;
    assert_eq!((g.status, g.code()), (410, "RESERVATION_EXPIRED"));
    // The expired amounts are back in the budget.
    let bal = h.balance("tenant:acme").await;
    assert_eq!(
        (
            bal["reserved"]["amount"].as_i64(),
            bal["spent"]["amount"].as_i64()
        ),
        (Some(0), Some(10))
    );
    let l = h.get("/v1/reservations?status=EXPIRED").await;
    assert_eq!(l.body["reservations"].as_array().unwrap().len(), 2);
    assert!(l.body["reservations"][0].get("finalized_at_ms").is_none());
}

#[tokio::test]
async fn default_ttl_and_grace() {
    let h = H::new().await;
    let now = h.server.now_ms();
    let r = h.reserve("k", 1, json!({})).await;
    let exp = r["expires_at_ms"].as_i64().unwrap();
    assert!(exp >= now + 60_000 && exp <= h.server.now_ms() + 60_000);
    assert_eq!(r["remaining_ttl_ms"], 60_000);
    let rid = r["reservation_id"].as_str().unwrap();
    // Just inside expires + grace (default 5000): still accepted.
    h.server
        .advance_clock((exp + 5_000 - 50 - h.server.now_ms()) as u64);
    assert_eq!(
        h.commit(rid, "c", 1).await.status,
        200,
        "commit within the default grace is accepted"
    );
}

#[tokio::test]
async fn extend_additive() {
    let h = H::new().await;
    let r = h.reserve("k", 1, json!({"ttl_ms": 10_000})).await;
    let rid = r["reservation_id"].as_str().unwrap();
    let exp = r["expires_at_ms"].as_i64().unwrap();
    h.server.advance_clock(4000);
    let x = h.extend(rid, "x1", 10_000).await;
    assert_eq!(x.status, 200, "{}", x.body);
    assert_eq!(x.body["status"], "ACTIVE");
    assert_eq!(x.body["expires_at_ms"], exp + 10_000);
    let lead = x.body["remaining_ttl_ms"].as_i64().unwrap();
    assert!((15_900..=16_000).contains(&lead), "lead {lead}");
    // Extension is relative to the current expiry, not to now.
    let x = h.extend(rid, "x2", 1).await;
    assert_eq!(x.body["expires_at_ms"], exp + 10_001);
    let kinds: Vec<String> = h.server.ledger().into_iter().map(|e| e.kind).collect();
    assert_eq!(kinds, ["reserve", "extend", "extend"]);
}

#[tokio::test]
async fn extend_grant_cap_and_initial_cap() {
    let mut cfg = ServerConfig::default();
    cfg.regime.extend = ExtendClamp::GrantCap { max_grant_ms: 2000 };
    cfg.regime.initial_ttl_cap_ms = Some(3000);
    let h = H::with(cfg).await;
    let r = h.reserve("k", 1, json!({"ttl_ms": 86_400_000})).await;
    assert_eq!(r["remaining_ttl_ms"], 3000);
    let exp = r["expires_at_ms"].as_i64().unwrap();
    let x = h
        .extend(r["reservation_id"].as_str().unwrap(), "x", 60_000)
        .await;
    assert_eq!(x.body["expires_at_ms"], exp + 2000);
    let x2 = h
        .extend(r["reservation_id"].as_str().unwrap(), "x2", 500)
        .await;
    assert_eq!(x2.body["expires_at_ms"], exp + 2500);
}

#[tokio::test]
async fn extend_max_lead() {
    let mut cfg = ServerConfig::default();
    cfg.regime.extend = ExtendClamp::MaxLead {
        max_lead_ms: 20_000,
    };
    let h = H::with(cfg).await;
    let r = h.reserve("k", 1, json!({"ttl_ms": 10_000})).await;
    let rid = r["reservation_id"].as_str().unwrap();
    let exp = r["expires_at_ms"].as_i64().unwrap();
    // Immediately: min(exp + 60000, now + 20000) ~= now + 20000.
    let x = h.extend(rid, "x1", 60_000).await;
    let lead = x.body["remaining_ttl_ms"].as_i64().unwrap();
    assert!((19_900..=20_000).contains(&lead), "lead {lead}");
    // Small extensions are not clamped.
    let e1 = x.body["expires_at_ms"].as_i64().unwrap();
    h.server.advance_clock(15_000);
    let x = h.extend(rid, "x2", 1000).await;
    assert_eq!(x.body["expires_at_ms"], e1 + 1000);
    assert!(e1 > exp);
}

#[tokio::test]
async fn max_extensions_and_no_remaining_ttl_regime() {
    let mut cfg = ServerConfig::default();
    cfg.regime.max_extensions = Some(2);
    cfg.regime.emit_remaining_ttl = false;
    let h = H::with(cfg).await;
    let r = h.reserve("k", 1, json!({})).await;
    assert!(r.get("remaining_ttl_ms").is_none());
    let rid = r["reservation_id"].as_str().unwrap();
    for i in 0..2 {
        let x = h.extend(rid, &format!("x{i}"), 1000).await;
        assert_eq!(x.status, 200);
        assert!(x.body.get("remaining_ttl_ms").is_none());
    }
    let x = h.extend(rid, "x3", 1000).await;
    assert_eq!((x.status, x.code()), (409, "MAX_EXTENSIONS_EXCEEDED"));
    // A replay of an accepted extension is still a replay, not a new extension.
    assert_eq!(h.extend(rid, "x0", 1000).await.status, 200);
}

#[tokio::test]
async fn defaults_of_server_config() {
    let c = ServerConfig::default();
    assert_eq!(c.bind.to_string(), "127.0.0.1:0");
    assert_eq!(c.tenants[0].id, "acme");
    assert_eq!(c.tenants[0].api_keys, ["cycles-local-key"]);
    assert_eq!(c.admin_api_key.as_deref(), Some("cycles-local-admin"));
    assert_eq!(
        (
            c.budgets[0].scope.as_str(),
            c.budgets[0].unit.as_str(),
            c.budgets[0].allocated
        ),
        ("tenant:acme", "USD_MICROCENTS", 10_000_000_000)
    );
    assert!(c.regime.emit_remaining_ttl && c.evidence);
    assert_eq!(c.regime.max_extensions, Some(10));
    // A sparse JSON file is a valid config.
    let parsed: ServerConfig = serde_json::from_str(
        r#"{"regime": {"extend": {"kind": "max_lead", "max_lead_ms": 5}}, "evidence": false}"#,
    )
    .unwrap();
    assert_eq!(
        parsed.regime.extend,
        ExtendClamp::MaxLead { max_lead_ms: 5 }
    );
    assert_eq!(parsed.regime.max_extensions, Some(10));
    assert_eq!(parsed.tenants, c.tenants);
    let round: ServerConfig = serde_json::from_value(serde_json::to_value(&c).unwrap()).unwrap();
    assert_eq!(round.budgets, c.budgets);
}
