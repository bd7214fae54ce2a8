//! Idempotent replay (verbatim, with the remaining_ttl_ms recompute), mismatch detection,
//! payload comparison modes, and listing/pagination.
#![allow(clippy::field_reassign_with_default)]

mod common;
use common::*;
use cycles_local_server::{IdempotencyCompare, ServerConfig};
use serde_json::{json, Value};

#[tokio::test]
async fn create_replay_is_verbatim_except_remaining_ttl() {
    let h = H::new().await;
    let body = reserve_body("k", 100, json!({"ttl_ms": 30_000}));
    let first = h.post("/v1/reservations", &body).await;
    assert_eq!(first.status, 200);
    assert_eq!(first.body["remaining_ttl_ms"], 30_000);
    h.server.advance_clock(10_000);
    let again = h.post("/v1/reservations", &body).await;
    assert_eq!(again.status, 200);
    let mut a = again.body.clone();
    let mut f = first.body.clone();
    let lead = a
        .as_object_mut()
        .unwrap()
        .remove("remaining_ttl_ms")
        .unwrap()
        .as_i64()
        .unwrap();
    f.as_object_mut().unwrap().remove("remaining_ttl_ms");
    assert_eq!(a, f, "all other fields replay verbatim");
    let expected = first.body["expires_at_ms"].as_i64().unwrap() - h.server.now_ms();
    assert!(
        (expected..=expected + 50).contains(&lead),
        "recomputed lead {lead} vs {expected}"
    );
    // No second reservation and no second ledger entry.
    assert_eq!(h.server.ledger().len(), 1);
    assert_eq!(
        h.get("/v1/reservations").await.body["reservations"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    let recs = h.server.requests();
    assert_eq!(
        recs.iter().map(|r| r.replay).collect::<Vec<_>>(),
        [false, true, false]
    );
    // After the reservation is finalized the replayed lead is 0.
    let rid = first.body["reservation_id"].as_str().unwrap();
    assert_eq!(h.release(rid, "r").await.status, 200);
    assert_eq!(
        h.post("/v1/reservations", &body).await.body["remaining_ttl_ms"],
        0
    );
}

#[tokio::test]
async fn extend_replay_recomputes_and_is_not_reapplied() {
    let h = H::new().await;
    let rid = h.reserve_id("k", 1, json!({"ttl_ms": 10_000})).await;
    let x1 = h.extend(&rid, "x", 5000).await;
    assert_eq!(x1.status, 200);
    h.server.advance_clock(3000);
    let x2 = h.extend(&rid, "x", 5000).await;
    assert_eq!(x2.body["expires_at_ms"], x1.body["expires_at_ms"]);
    let l1 = x1.body["remaining_ttl_ms"].as_i64().unwrap();
    let l2 = x2.body["remaining_ttl_ms"].as_i64().unwrap();
    assert!(l1 - l2 >= 3000 && l1 - l2 < 3100, "{l1} vs {l2}");
    assert_eq!(
        h.server
            .ledger()
            .iter()
            .filter(|e| e.kind == "extend")
            .count(),
        1
    );
    // Past expiry the replayed lead clamps to 0.
    h.server.advance_clock(20_000);
    assert_eq!(h.extend(&rid, "x", 5000).await.body["remaining_ttl_ms"], 0);
}

#[tokio::test]
async fn commit_and_event_replays() {
    let h = H::new().await;
    let rid = h.reserve_id("k", 100, json!({})).await;
    let c1 = h.commit(&rid, "c", 50).await;
    let c2 = h.commit(&rid, "c", 50).await;
    assert_eq!(c2.status, 200);
    assert_eq!(c1.body, c2.body);
    let e = event_body("e", 10, json!({}));
    let e1 = h.post("/v1/events", &e).await;
    let e2 = h.post("/v1/events", &e).await;
    assert_eq!((e1.status, e2.status), (201, 201));
    assert_eq!(e1.body["event_id"], e2.body["event_id"]);
    // The same key on another endpoint is a different key.
    let e3 = h.post("/v1/events", &event_body("c", 10, json!({}))).await;
    assert_eq!(e3.status, 201);
    let kinds: Vec<String> = h.server.ledger().into_iter().map(|e| e.kind).collect();
    assert_eq!(kinds, ["reserve", "commit", "event", "event"]);
}

#[tokio::test]
async fn mismatch_and_failures_not_cached() {
    let h = H::new().await;
    assert_eq!(
        h.post("/v1/reservations", &reserve_body("k", 100, json!({})))
            .await
            .status,
        200
    );
    let r = h
        .post("/v1/reservations", &reserve_body("k", 101, json!({})))
        .await;
    assert_eq!((r.status, r.code()), (409, "IDEMPOTENCY_MISMATCH"));
    let d = h.post("/v1/decide", &reserve_body("d", 1, json!({}))).await;
    assert_eq!(d.status, 200);
    assert_eq!(
        h.post("/v1/decide", &reserve_body("d", 2, json!({})))
            .await
            .code(),
        "IDEMPOTENCY_MISMATCH"
    );
    // A failed attempt is not cached: the same key can then succeed with another payload.
    let rid = h.reserve_id("k2", 100, json!({})).await;
    let bad = h
        .post(
            &format!("/v1/reservations/{rid}/commit"),
            &json!({"idempotency_key": "c", "actual": {"unit": "TOKENS", "amount": 1}}),
        )
        .await;
    assert_eq!(bad.code(), "UNIT_MISMATCH");
    assert_eq!(h.commit(&rid, "c", 1).await.status, 200);
    assert_eq!(h.commit(&rid, "c", 2).await.code(), "IDEMPOTENCY_MISMATCH");
}

async fn reorder_case(mode: IdempotencyCompare) -> u16 {
    let mut cfg = ServerConfig::default();
    cfg.idempotency_compare = mode;
    let h = H::with(cfg).await;
    let a = r#"{"idempotency_key":"k","subject":{"tenant":"acme"},"action":{"kind":"a","name":"b"},"estimate":{"unit":"USD_MICROCENTS","amount":5}}"#;
    let b = r#"{"estimate":{"amount":5,"unit":"USD_MICROCENTS"},"idempotency_key":"k","action":{"name":"b","kind":"a"},"subject":{"tenant":"acme"}}"#;
    let send = |s: &'static str| {
        h.c.post(format!("{}/v1/reservations", h.url))
            .header("X-Cycles-API-Key", KEY)
            .header("content-type", "application/json")
            .body(s)
    };
    assert_eq!(h.send(send(a)).await.status, 200);
    h.send(send(b)).await.status
}

#[tokio::test]
async fn exact_vs_canonical_comparison() {
    assert_eq!(
        reorder_case(IdempotencyCompare::Exact).await,
        409,
        "Exact: key order is significant"
    );
    assert_eq!(
        reorder_case(IdempotencyCompare::Canonical).await,
        200,
        "Canonical: key order is not"
    );
}

#[tokio::test]
async fn list_filters_sorting_and_pagination() {
    let h = H::new().await;
    let mut ids = Vec::new();
    for i in 0..5 {
        let mut extra = json!({"metadata": {"i": i}});
        if i % 2 == 1 {
            extra["subject"] = json!({"tenant": "acme", "workspace": "dev"});
        }
        ids.push(h.reserve_id(&format!("k{i}"), 100 + i, extra).await);
        h.server.advance_clock(10);
    }
    assert_eq!(h.commit(&ids[0], "c", 1).await.status, 200);
    // Default order = creation order; pages of 2.
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let path = match &cursor {
            Some(c) => format!("/v1/reservations?limit=2&cursor={c}"),
            None => "/v1/reservations?limit=2".to_string(),
        };
        let r = h.get(&path).await;
        assert_eq!(r.status, 200, "{}", r.body);
        assert!(r.body["reservations"].as_array().unwrap().len() <= 2);
        seen.extend(
            r.body["reservations"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x["reservation_id"].as_str().unwrap().to_string()),
        );
        if r.body["has_more"] == true {
            cursor = Some(r.body["next_cursor"].as_str().unwrap().to_string());
        } else {
            assert!(r.body.get("next_cursor").is_none());
            break;
        }
    }
    assert_eq!(seen, ids);
    // Filters.
    let count = |v: &Value| v["reservations"].as_array().unwrap().len();
    assert_eq!(
        count(&h.get("/v1/reservations?status=COMMITTED").await.body),
        1
    );
    assert_eq!(
        count(&h.get("/v1/reservations?workspace=dev").await.body),
        2
    );
    let k = h.get("/v1/reservations?idempotency_key=k3").await;
    assert_eq!(k.body["reservations"][0]["reservation_id"], ids[3].as_str());
    assert_eq!(h.get("/v1/reservations?status=BOGUS").await.status, 400);
    assert_eq!(h.get("/v1/reservations?limit=201").await.status, 400);
    assert_eq!(h.get("/v1/reservations?limit=abc").await.status, 400);
    // Sorting: sort_by without sort_dir is desc.
    let r = h.get("/v1/reservations?sort_by=reserved").await;
    let amounts: Vec<i64> = r.body["reservations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["reserved"]["amount"].as_i64().unwrap())
        .collect();
    assert_eq!(amounts, [104, 103, 102, 101, 100]);
    let r = h
        .get("/v1/reservations?sort_by=reserved&sort_dir=asc&limit=2")
        .await;
    assert_eq!(r.body["reservations"][0]["reserved"]["amount"], 100);
    // include projection: metadata only on request; committed always.
    let plain = h.get("/v1/reservations?status=COMMITTED").await;
    assert!(plain.body["reservations"][0].get("metadata").is_none());
    assert!(plain.body["reservations"][0].get("evidence").is_none());
    assert_eq!(plain.body["reservations"][0]["committed"], usd(1));
    let inc = h
        .get("/v1/reservations?status=COMMITTED&include=metadata,,evidence,bogus")
        .await;
    assert_eq!(inc.body["reservations"][0]["metadata"], json!({"i": 0}));
    assert!(inc.body["reservations"][0]["evidence"]["commit"].is_object());
    // Window filters: inclusive, blank = unset, from > to = 400, finalized excludes open rows.
    assert_eq!(count(&h.get("/v1/reservations?from=&to=").await.body), 5);
    assert_eq!(
        h.get("/v1/reservations?from=2030-01-02T00:00:00Z&to=2030-01-01T00:00:00Z")
            .await
            .code(),
        "INVALID_REQUEST"
    );
    assert_eq!(
        h.get("/v1/reservations?expires_from=2030-01-02T00:00:00Z&expires_to=2030-01-01T00:00:00Z")
            .await
            .status,
        400
    );
    assert_eq!(
        h.get("/v1/reservations?finalized_from=not-a-date")
            .await
            .status,
        400
    );
    assert_eq!(
        count(
            &h.get("/v1/reservations?finalized_from=2000-01-01T00:00:00Z")
                .await
                .body
        ),
        1
    );
    assert_eq!(
        count(&h.get("/v1/reservations?to=2000-01-01T00:00:00Z").await.body),
        0
    );
    assert_eq!(
        count(
            &h.get("/v1/reservations?from=2000-01-01T00:00:00%2B01:00")
                .await
                .body
        ),
        5
    );
    // Sorted cursors are bound to the window tuple; include does not bind.
    let p = h
        .get("/v1/reservations?sort_by=created_at_ms&limit=2&from=2000-01-01T00:00:00Z")
        .await;
    let c = p.body["next_cursor"].as_str().unwrap();
    let ok = h.get(&format!("/v1/reservations?sort_by=created_at_ms&limit=2&from=2000-01-01T00:00:00Z&include=metadata&cursor={c}")).await;
    assert_eq!(ok.status, 200);
    let bad = h
        .get(&format!(
            "/v1/reservations?sort_by=created_at_ms&limit=2&from=2001-01-01T00:00:00Z&cursor={c}"
        ))
        .await;
    assert_eq!((bad.status, bad.code()), (400, "INVALID_REQUEST"));
    assert_eq!(h.get("/v1/reservations?cursor=%%%").await.status, 400);
}

/// POSTs `body` byte for byte (a `Value` cannot hold what these bodies hold).
async fn post_raw(h: &H, path: &str, body: &str) -> Resp {
    h.send(
        h.c.post(format!("{}{path}", h.url))
            .header("X-Cycles-API-Key", KEY)
            .header("Content-Type", "application/json")
            .body(body.to_string()),
    )
    .await
}

/// What the reference server accepts (checked by hand against 0.1.25.59): lone-surrogate
/// escapes, a 30-digit integer and `-0.0` in metadata. Commit 200, same-key replay 200 (the
/// payload comparison works on such bodies, in both modes), event 201.
#[tokio::test]
async fn lone_surrogates_and_big_numbers_are_accepted_and_replayed() {
    for mode in [IdempotencyCompare::Exact, IdempotencyCompare::Canonical] {
        let mut cfg = ServerConfig::default();
        cfg.idempotency_compare = mode;
        let h = H::with(cfg).await;
        let rid = h.reserve_id("r", 100, json!({})).await;
        let commit = r#"{"idempotency_key":"c-lone","actual":{"unit":"USD_MICROCENTS","amount":40},"metadata":{"s":"ab\ud800","n":123456789012345678901234567890,"z":-0.0}}"#;
        let path = format!("/v1/reservations/{rid}/commit");
        let first = post_raw(&h, &path, commit).await;
        assert_eq!(first.status, 200, "{mode:?}: {}", first.body);
        let again = post_raw(&h, &path, commit).await;
        assert_eq!(again.status, 200, "{mode:?}: {}", again.body);
        assert_eq!(again.body, first.body);
        // A different payload under the same key is still a mismatch.
        let other = commit.replace("-0.0", "1");
        let mismatch = post_raw(&h, &path, &other).await;
        assert_eq!(
            (mismatch.status, mismatch.code()),
            (409, "IDEMPOTENCY_MISMATCH")
        );
        let event = r#"{"idempotency_key":"e-lone","subject":{"tenant":"acme"},"action":{"kind":"llm.completion","name":"m"},"actual":{"unit":"USD_MICROCENTS","amount":7},"metadata":{"s":"\udc00x"}}"#;
        let ev = post_raw(&h, "/v1/events", event).await;
        assert_eq!(ev.status, 201, "{mode:?}: {}", ev.body);
        let kinds: Vec<_> = h.server.ledger().into_iter().map(|e| e.kind).collect();
        assert_eq!(kinds, ["reserve", "commit", "event"], "{mode:?}");
        // The request log keeps the exact bytes and the body key.
        let logged = h.server.requests();
        assert_eq!(logged[1].body.as_deref(), Some(commit));
        assert_eq!(logged[1].idempotency_key.as_deref(), Some("c-lone"));
        assert!(logged[2].replay);
        // Still not JSON: 400.
        let bad = post_raw(&h, &path, r#"{"idempotency_key":"x","actual":"#).await;
        assert_eq!((bad.status, bad.code()), (400, "INVALID_REQUEST"));
    }
}
