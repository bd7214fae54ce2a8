//! Evidence round trip: refs on responses, envelopes served publicly, signatures verify
//! against the JWKS key, content ids recompute.
#![allow(clippy::field_reassign_with_default)]

mod common;
use base64::Engine;
use common::*;
use cycles_local_server::{canonical_json, ServerConfig};
use ed25519_dalek::{Signature, Verifier, VerifyingKey};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

async fn verify(h: &H, ev_ref: &Value, artifact: &str) -> Value {
    let id = ev_ref["evidence_id"].as_str().unwrap();
    let url = ev_ref["cycles_evidence_url"].as_str().unwrap();
    assert_eq!(url, format!("{}/v1/evidence/{id}", h.url));
    // Public: no API key.
    let r = h.send(h.c.get(url)).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.headers["cache-control"], "public, immutable");
    let env = r.body;
    assert_eq!(env["schema_version"], "cycles-evidence/v0.1");
    assert_eq!(env["artifact_type"], artifact);
    assert_eq!(env["server_id"], format!("{}/v1", h.url));
    assert_eq!(env["evidence_id"], id);
    assert!(env["payload"][artifact].is_object());
    let mut blank = env.clone();
    blank["evidence_id"] = json!("");
    blank["signature"] = json!("");
    let bytes = canonical_json(&blank);
    assert_eq!(hex::encode(Sha256::digest(bytes.as_bytes())), id);
    let pk: [u8; 32] = hex::decode(env["signer_did"].as_str().unwrap())
        .unwrap()
        .try_into()
        .unwrap();
    let key = VerifyingKey::from_bytes(&pk).unwrap();
    let sig: [u8; 64] = hex::decode(env["signature"].as_str().unwrap())
        .unwrap()
        .try_into()
        .unwrap();
    key.verify(bytes.as_bytes(), &Signature::from_bytes(&sig))
        .expect("signature verifies");
    // The attested response has no transport-only fields.
    let resp = &env["payload"][artifact]["response"];
    assert!(resp.get("cycles_evidence").is_none() && resp.get("remaining_ttl_ms").is_none());
    env
}

#[tokio::test]
async fn evidence_round_trip() {
    let h = H::new().await;
    let jwks = h
        .send(h.c.get(format!("{}/v1/.well-known/cycles-jwks.json", h.url)))
        .await;
    assert_eq!(jwks.status, 200);
    assert!(jwks.headers["cache-control"]
        .to_str()
        .unwrap()
        .starts_with("public"));
    let k = &jwks.body["keys"][0];
    assert_eq!(
        (k["kty"].as_str(), k["crv"].as_str()),
        (Some("OKP"), Some("Ed25519"))
    );
    assert!(k["kid"].is_string() && k["cycles_nbf_ms"].is_i64());
    let x = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(k["x"].as_str().unwrap())
        .unwrap();

    let d = h.post("/v1/decide", &reserve_body("d", 1, json!({}))).await;
    let env = verify(&h, &d.body["cycles_evidence"], "decide").await;
    assert_eq!(
        hex::decode(env["signer_did"].as_str().unwrap()).unwrap(),
        x,
        "JWKS x = signer_did"
    );
    assert!(env["issued_at_ms"].as_i64().unwrap() >= k["cycles_nbf_ms"].as_i64().unwrap());

    let r = h.reserve("k", 10, json!({})).await;
    verify(&h, &r["cycles_evidence"], "reserve").await;
    let rid = r["reservation_id"].as_str().unwrap();
    let c = h.commit(rid, "c", 5).await;
    verify(&h, &c.body["cycles_evidence"], "commit").await;
    let rid2 = h.reserve_id("k2", 10, json!({})).await;
    let l = h.release(&rid2, "l").await;
    verify(&h, &l.body["cycles_evidence"], "release").await;
    let dry = h
        .post(
            "/v1/reservations",
            &reserve_body("dry", 1, json!({"dry_run": true})),
        )
        .await;
    verify(&h, &dry.body["cycles_evidence"], "reserve").await;

    // Replay keeps the same evidence id.
    let again = h
        .post("/v1/reservations", &reserve_body("k", 10, json!({})))
        .await;
    assert_eq!(again.body["cycles_evidence"], r["cycles_evidence"]);

    // Detail lists reserve + commit.
    let det = h.get(&format!("/v1/reservations/{rid}")).await;
    assert_eq!(det.body["evidence"]["reserve"], r["cycles_evidence"]);
    assert_eq!(det.body["evidence"]["commit"], c.body["cycles_evidence"]);

    // Live 409 denial carries error evidence.
    let deny = h
        .post(
            "/v1/reservations",
            &reserve_body("big", 20_000_000_000, json!({})),
        )
        .await;
    assert_eq!(deny.code(), "BUDGET_EXCEEDED");
    let env = verify(&h, &deny.body["cycles_evidence"], "error").await;
    assert_eq!(
        env["payload"]["error"]["response"]["error"],
        "BUDGET_EXCEEDED"
    );

    // Bad and unknown ids.
    assert_eq!(
        h.send(h.c.get(format!("{}/v1/evidence/XYZ", h.url)))
            .await
            .status,
        400
    );
    let unknown = h
        .send(h.c.get(format!("{}/v1/evidence/{}", h.url, "0".repeat(64))))
        .await;
    assert_eq!((unknown.status, unknown.code()), (404, "NOT_FOUND"));
}

#[tokio::test]
async fn evidence_disabled() {
    let mut cfg = ServerConfig::default();
    cfg.evidence = false;
    let h = H::with(cfg).await;
    let r = h.reserve("k", 1, json!({})).await;
    assert!(r.get("cycles_evidence").is_none());
    let rid = r["reservation_id"].as_str().unwrap();
    assert!(h
        .commit(rid, "c", 1)
        .await
        .body
        .get("cycles_evidence")
        .is_none());
    assert!(h
        .get(&format!("/v1/reservations/{rid}"))
        .await
        .body
        .get("evidence")
        .is_none());
    assert!(h
        .post("/v1/decide", &reserve_body("d", 1, json!({})))
        .await
        .body
        .get("cycles_evidence")
        .is_none());
    let j = h
        .send(h.c.get(format!("{}/v1/.well-known/cycles-jwks.json", h.url)))
        .await;
    assert_eq!((j.status, j.code()), (404, "NOT_FOUND"));
}
