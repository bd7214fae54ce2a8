//! Responses the local server cannot produce, served by a one-shot loopback responder:
//! unknown fields and units in successes, odd error bodies, and the exact request bytes.

mod common;

use common::*;
use cycles_core::*;

#[tokio::test]
async fn success_with_unknown_fields_and_unknown_unit() {
    let body = r#"{"decision":"ALLOW","reservation_id":"r-1","reserved":{"unit":"GPU_SECONDS","amount":5},
        "expires_at_ms":1000,"remaining_ttl_ms":900,"affected_scopes":["tenant:acme"],
        "deny_detail":{"future":true},"brand_new_field":[1,2,3]}"#;
    let (base, _rx) = one_shot(http_response(
        "200 OK",
        &[
            "content-type: application/json",
            "x-request-id: req-9",
            "x-cycles-trace-id: 0123456789abcdef0123456789abcdef",
        ],
        body,
    ))
    .await;
    let c = client_for(&base);
    let r = c.create_reservation(&reserve_req(5)).await.unwrap();
    let reserved = r.body.reserved.clone().unwrap();
    assert_eq!(reserved.unit, Unit::Other("GPU_SECONDS".into()));
    assert_eq!(r.request_id.as_deref(), Some("req-9"));
    assert_eq!(
        r.trace_id.as_deref(),
        Some("0123456789abcdef0123456789abcdef")
    );
    assert!(r.timing.received >= r.timing.sent);
    // The unknown unit is written back unchanged (e.g. into a commit).
    let commit = CommitRequest::new("k", reserved);
    let v = serde_json::to_value(&commit).unwrap();
    assert_eq!(v["actual"]["unit"], "GPU_SECONDS");
}

#[tokio::test]
async fn unknown_reservation_status_in_detail() {
    let body = r#"{"reservation_id":"r","status":"ARCHIVED","subject":{"tenant":"acme"},
        "action":{"kind":"k","name":"n"},"reserved":{"unit":"TOKENS","amount":1},
        "created_at_ms":1,"expires_at_ms":2,"scope_path":"tenant:acme","affected_scopes":["tenant:acme"],
        "extra":{}}"#;
    let (base, _rx) = one_shot(http_response("200 OK", &[], body)).await;
    let r = client_for(&base).get_reservation("r").await.unwrap();
    assert_eq!(r.body.status, ReservationStatus::Other("ARCHIVED".into()));
}

#[tokio::test]
async fn post_sends_key_headers_and_encoded_path() {
    let body = r#"{"status":"COMMITTED","charged":{"unit":"USD_MICROCENTS","amount":1}}"#;
    let (base, rx) = one_shot(http_response("200 OK", &[], body)).await;
    let c = client_for(&format!("{base}/prefix/"));
    let commit = CommitRequest::new("idem-123", usd(1));
    c.commit_reservation("rsv/a b", &commit).await.unwrap();
    let cap = rx.await.unwrap();
    assert_eq!(
        cap.request_line(),
        "POST /prefix/v1/reservations/rsv%2Fa%20b/commit HTTP/1.1"
    );
    assert_eq!(cap.header("x-cycles-api-key").as_deref(), Some(KEY));
    assert_eq!(cap.header("x-idempotency-key").as_deref(), Some("idem-123"));
    assert_eq!(
        cap.header("content-type").as_deref(),
        Some("application/json")
    );
    let sent: serde_json::Value = serde_json::from_slice(&cap.body).unwrap();
    assert_eq!(
        sent,
        serde_json::json!({"idempotency_key": "idem-123", "actual": {"unit": "USD_MICROCENTS", "amount": 1}})
    );
}

#[tokio::test]
async fn list_query_string_and_public_evidence_without_key() {
    let (base, rx) = one_shot(http_response("200 OK", &[], r#"{"reservations":[]}"#)).await;
    let q = ListReservationsQuery {
        tenant: Some("acme".into()),
        from: Some("2026-01-01T00:00:00Z".into()),
        include: vec!["metadata".into(), "evidence".into()],
        limit: Some(3),
        ..Default::default()
    };
    client_for(&base).list_reservations(&q).await.unwrap();
    let cap = rx.await.unwrap();
    assert_eq!(
        cap.request_line(),
        "GET /v1/reservations?tenant=acme&from=2026-01-01T00%3A00%3A00Z&include=metadata%2Cevidence&limit=3 HTTP/1.1"
    );

    let (base, rx) = one_shot(http_response("200 OK", &[], r#"{"keys":[]}"#)).await;
    client_for(&base).get_evidence_jwks().await.unwrap();
    let cap = rx.await.unwrap();
    assert_eq!(
        cap.request_line(),
        "GET /v1/.well-known/cycles-jwks.json HTTP/1.1"
    );
    assert_eq!(cap.header("x-cycles-api-key"), None);
}

#[tokio::test]
async fn error_body_with_extra_fields_and_non_json_bodies() {
    let body = r#"{"error":"RESERVATION_FINALIZED","message":"already committed","request_id":"body-id",
        "trace_id":"0123456789abcdef0123456789abcdef","details":{"x":1},"brand_new":{"y":2}}"#;
    let (base, _rx) = one_shot(http_response("409 Conflict", &[], body)).await;
    let e = client_for(&base)
        .release_reservation("r", &ReleaseRequest::new("k"))
        .await
        .unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::ReservationFinalized);
    assert_eq!(e.request_id(), Some("body-id"));
    assert_eq!(e.message(), "already committed");
    assert_eq!(e.details().unwrap()["x"], 1);

    let (base, _rx) = one_shot(http_response(
        "502 Bad Gateway",
        &["content-type: text/html"],
        "<html>bad gateway</html>",
    ))
    .await;
    let e = client_for(&base).get_reservation("r").await.unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::ServerError);
    assert_eq!(e.server_code(), None);

    let (base, _rx) = one_shot(http_response("401 Unauthorized", &[], "nope")).await;
    let e = client_for(&base).get_reservation("r").await.unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::Unauthorized);

    let (base, _rx) = one_shot(http_response(
        "429 Too Many Requests",
        &["retry-after: 99999999999999999999999"],
        "",
    ))
    .await;
    let e = client_for(&base).get_reservation("r").await.unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::RateLimited);
    // Too large to represent: invalid, so no delay is invented from it.
    assert_eq!(e.retry_after().unwrap().delay_ms(), None);
}

#[tokio::test]
async fn redirect_is_not_followed() {
    let (base, _rx) = one_shot(http_response(
        "307 Temporary Redirect",
        &["location: http://127.0.0.1:1/steal"],
        "",
    ))
    .await;
    let e = client_for(&base)
        .create_reservation(&reserve_req(1))
        .await
        .unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::UnexpectedStatus);
    assert_eq!(e.http_status(), Some(307));
}

#[tokio::test]
async fn closed_without_response_is_reset() {
    let (base, _rx) = one_shot(String::new()).await;
    let e = client_for(&base).get_reservation("r").await.unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::ConnectionReset, "{e:?}");
}

#[tokio::test]
async fn closed_mid_body_is_reset() {
    let (base, _rx) = one_shot(
        "HTTP/1.1 200 OK\r\ncontent-length: 100\r\nconnection: close\r\n\r\n{\"sta".to_string(),
    )
    .await;
    let e = client_for(&base).get_reservation("r").await.unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::ConnectionReset, "{e:?}");
}

#[tokio::test]
async fn malformed_success_variants_are_ambiguous() {
    for (status, body) in [
        ("201 Created", r#"{"status":"ACTIVE","expires_at_ms":5}"#),
        ("200 OK", r#"{"status":"ACTIVE","expires_at_ms":-5}"#),
        ("200 OK", r#"{"status":"EXPIRED","expires_at_ms":5}"#),
        (
            "200 OK",
            r#"{"status":"ACTIVE","expires_at_ms":5,"remaining_ttl_ms":"9"}"#,
        ),
        ("200 OK", "[]"),
        ("204 No Content", ""),
    ] {
        let (base, _rx) = one_shot(http_response(status, &["x-request-id: rid"], body)).await;
        let e = client_for(&base)
            .extend_reservation("r", &ReservationExtendRequest::new("k", 1000))
            .await
            .unwrap_err();
        assert_eq!(
            e.kind(),
            &ErrorKind::AmbiguousSuccess,
            "{status} {body}: {e:?}"
        );
        assert_eq!(e.request_id(), Some("rid"));
    }
}
