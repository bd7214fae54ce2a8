//! Every fault kind, rule matching (skip / times / reservation_id), the ledger and request log,
//! and the HTTP inspection endpoints.
#![allow(clippy::field_reassign_with_default)]

mod common;
use common::*;
use cycles_local_server::{Fault, FaultRule, Malformed, Operation};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

fn rule(op: Operation, fault: Fault) -> FaultRule {
    FaultRule {
        operation: op,
        reservation_id: None,
        skip: 0,
        times: 1,
        every: 1,
        fault,
    }
}

/// A POST whose connection is expected to be reset: returns the client error.
async fn expect_reset(h: &H, path: &str, body: &Value) -> reqwest::Error {
    let r =
        h.c.post(format!("{}{}", h.url, path))
            .header("X-Cycles-API-Key", KEY)
            .json(body)
            .send()
            .await;
    match r {
        Ok(resp) => panic!("expected a connection error, got {}", resp.status()),
        Err(e) => e,
    }
}

#[tokio::test]
async fn drop_response_after_apply_commit_is_applied_once() {
    let h = H::new().await;
    let rid = h.reserve_id("k", 100, json!({})).await;
    h.server.add_fault(FaultRule {
        reservation_id: Some(rid.clone()),
        ..rule(Operation::CommitReservation, Fault::DropResponseAfterApply)
    });
    let body = json!({"idempotency_key": "c", "actual": usd(60)});
    let err = expect_reset(&h, &format!("/v1/reservations/{rid}/commit"), &body).await;
    assert!(
        err.is_request() || err.is_connect() || err.is_body(),
        "{err:?}"
    );
    let commits = |h: &H| {
        h.server
            .ledger()
            .into_iter()
            .filter(|e| e.kind == "commit")
            .collect::<Vec<_>>()
    };
    let applied = commits(&h);
    assert_eq!(applied.len(), 1);
    assert_eq!(
        (applied[0].amount, applied[0].idempotency_key.as_str()),
        (Some(60), "c")
    );
    assert_eq!(applied[0].reservation_id.as_deref(), Some(rid.as_str()));
    // Same-key retry: replayed success, still exactly one commit.
    let r = h.commit(&rid, "c", 60).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["charged"], usd(60));
    assert_eq!(commits(&h).len(), 1);
    let recs: Vec<_> = h
        .server
        .requests()
        .into_iter()
        .filter(|r| r.operation == Some(Operation::CommitReservation))
        .collect();
    assert_eq!(recs.len(), 2);
    assert_eq!(
        (recs[0].status, recs[0].fault.as_deref(), recs[0].replay),
        (None, Some("drop_response_after_apply"), false)
    );
    assert_eq!(recs[0].idempotency_key.as_deref(), Some("c"));
    assert_eq!((recs[1].status, recs[1].replay), (Some(200), true));
    assert!(recs[1].received_mono_us >= recs[0].received_mono_us);
}

#[tokio::test]
async fn connection_reset_does_not_apply() {
    let h = H::new().await;
    h.server
        .add_fault(rule(Operation::CreateReservation, Fault::ConnectionReset));
    let err = expect_reset(&h, "/v1/reservations", &reserve_body("k", 1, json!({}))).await;
    assert!(!err.is_timeout(), "{err:?}");
    assert!(h.server.ledger().is_empty());
    // times = 1: the retry goes through and is fresh (not a replay).
    let r = h
        .post("/v1/reservations", &reserve_body("k", 1, json!({})))
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(h.server.ledger().len(), 1);
    assert_eq!(h.server.requests()[0].status, None);
    assert_eq!(
        h.server.requests()[0].fault.as_deref(),
        Some("connection_reset")
    );
}

#[tokio::test]
async fn server_error_rate_limit_and_custom_error_do_not_apply() {
    let h = H::new().await;
    let rid = h.reserve_id("k", 100, json!({})).await;
    h.server.add_fault(rule(
        Operation::CommitReservation,
        Fault::ServerError { status: 503 },
    ));
    let r = h.commit(&rid, "c", 1).await;
    assert_eq!((r.status, r.code()), (503, "INTERNAL_ERROR"));
    assert!(r.headers.contains_key("x-request-id") && r.headers.contains_key("x-cycles-trace-id"));
    h.server.add_fault(rule(
        Operation::CommitReservation,
        Fault::RateLimited {
            retry_after: Some("2".into()),
        },
    ));
    let r = h.commit(&rid, "c", 1).await;
    assert_eq!((r.status, r.code()), (429, "LIMIT_EXCEEDED"));
    assert_eq!(r.headers["retry-after"], "2");
    assert!(r.headers.contains_key("x-ratelimit-reset"));
    h.server.add_fault(rule(
        Operation::ExtendReservation,
        Fault::RateLimited {
            retry_after: Some("Wed, 21 Oct 2015 07:28:00 GMT".into()),
        },
    ));
    let r = h.extend(&rid, "x", 1000).await;
    assert_eq!(r.headers["retry-after"], "Wed, 21 Oct 2015 07:28:00 GMT");
    h.server.add_fault(rule(
        Operation::CommitReservation,
        Fault::Error {
            status: 409,
            code: "BUDGET_EXCEEDED".into(),
        },
    ));
    let r = h.commit(&rid, "c", 1).await;
    assert_eq!((r.status, r.code()), (409, "BUDGET_EXCEEDED"));
    assert_eq!(h.server.ledger().len(), 1, "only the reserve applied");
    // Faults exhausted: the commit now applies.
    assert_eq!(h.commit(&rid, "c", 1).await.status, 200);
    assert_eq!(h.server.ledger().len(), 2);
}

#[tokio::test]
async fn echo_api_key_sends_the_received_key_back_and_does_not_apply() {
    let h = H::new().await;
    let rid = h.reserve_id("k", 100, json!({})).await;
    let f = json!({"operation": "commitReservation", "times": 1,
        "fault": {"kind": "echo_api_key", "status": 409, "code": "NO_{api_key}"}});
    h.server.add_fault(serde_json::from_value(f).unwrap());
    let r = h.commit(&rid, "c", 1).await;
    assert_eq!(r.status, 409);
    assert_eq!(r.code(), format!("NO_{KEY}"));
    assert!(r.body["message"].as_str().unwrap().contains(KEY));
    assert_eq!(r.body["details"]["received_api_key"], KEY);
    assert!(r.body["details"][KEY].is_string());
    assert_eq!(h.server.ledger().len(), 1, "only the reserve applied");
    assert_eq!(
        h.server.requests()[1].fault.as_deref(),
        Some("echo_api_key")
    );
    // Default code UNAUTHORIZED; any key is echoed, also one the server does not know.
    h.server.add_fault(rule(
        Operation::GetBalances,
        Fault::EchoApiKey {
            status: 401,
            code: "UNAUTHORIZED".into(),
        },
    ));
    let r = h
        .get_as(Some("not-a-known-key"), "/v1/balances?tenant=acme")
        .await;
    assert_eq!((r.status, r.code()), (401, "UNAUTHORIZED"));
    assert_eq!(r.body["details"]["received_api_key"], "not-a-known-key");
}

#[tokio::test]
async fn delays() {
    let h = H::new().await;
    h.server
        .add_fault(rule(Operation::Decide, Fault::Delay { ms: 150 }));
    let t = Instant::now();
    assert_eq!(
        h.post("/v1/decide", &reserve_body("d", 1, json!({})))
            .await
            .status,
        200
    );
    assert!(t.elapsed() >= Duration::from_millis(150));
    let rid = h.reserve_id("k", 1, json!({})).await;
    h.server.add_fault(rule(
        Operation::ReleaseReservation,
        Fault::DelayAfterApply { ms: 150 },
    ));
    let c = h.c.clone();
    let url = format!("{}/v1/reservations/{rid}/release", h.url);
    let t = Instant::now();
    let pending = tokio::spawn(async move {
        c.post(url)
            .header("X-Cycles-API-Key", KEY)
            .json(&json!({"idempotency_key": "r"}))
            .send()
            .await
            .unwrap()
            .status()
            .as_u16()
    });
    // Applied before the response arrives.
    let mut applied = false;
    for _ in 0..100 {
        if h.server.ledger().iter().any(|e| e.kind == "release") {
            applied = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(applied && !pending.is_finished());
    assert_eq!(pending.await.unwrap(), 200);
    assert!(t.elapsed() >= Duration::from_millis(150));
}

/// A held request waits for the next one of its operation, not for its whole `ms`; alone, it
/// waits `ms` and is then handled normally.
#[tokio::test]
async fn hold_waits_for_the_next_request_of_its_operation() {
    // Shared with the spawned (held) request.
    let h = std::sync::Arc::new(H::new().await);
    let rid = h.reserve_id("k", 100, json!({})).await;
    h.server.add_fault(rule(
        Operation::CommitReservation,
        Fault::Hold { ms: 30_000 },
    ));
    let t = Instant::now();
    let held = {
        let (h, rid) = (h.clone(), rid.clone());
        tokio::spawn(async move { h.commit(&rid, "same", 70).await.status })
    };
    // The held one has arrived (request log) and is not answered; another operation does not
    // release it.
    for _ in 0..200 {
        if h.server
            .requests()
            .iter()
            .any(|r| r.fault.as_deref() == Some("hold"))
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(
        h.post("/v1/decide", &reserve_body("d", 1, json!({})))
            .await
            .status,
        200
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        !held.is_finished(),
        "released by a request of another operation"
    );
    assert_eq!(h.commit(&rid, "same", 70).await.status, 200);
    assert_eq!(held.await.unwrap(), 200);
    assert!(
        t.elapsed() < Duration::from_secs(10),
        "held for its whole ms"
    );
    let reqs: Vec<_> = h
        .server
        .requests()
        .into_iter()
        .filter(|r| r.operation == Some(Operation::CommitReservation))
        .collect();
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs.iter().filter(|r| r.replay).count(), 1, "applied once");
    // Alone, it is held `ms`, then handled.
    let rid = h.reserve_id("k2", 100, json!({})).await;
    h.server
        .add_fault(rule(Operation::ReleaseReservation, Fault::Hold { ms: 150 }));
    let t = Instant::now();
    assert_eq!(h.release(&rid, "r").await.status, 200);
    assert!(t.elapsed() >= Duration::from_millis(150));
}

#[tokio::test]
async fn malformed_successes_apply() {
    let h = H::new().await;
    let cases = [
        (Malformed::MissingRequiredField, 200u16),
        (Malformed::WrongStatusCode, 202),
        (Malformed::NotJson, 200),
        (Malformed::WrongFieldType, 200),
    ];
    for (i, (shape, status)) in cases.into_iter().enumerate() {
        let rid = h.reserve_id(&format!("k{i}"), 10, json!({})).await;
        h.server.add_fault(rule(
            Operation::CommitReservation,
            Fault::MalformedSuccess { shape },
        ));
        let r = h.commit(&rid, "c", 5).await;
        assert_eq!(r.status, status, "{shape:?}");
        match shape {
            Malformed::MissingRequiredField => {
                assert!(r.body.get("charged").is_none() && r.body["status"] == "COMMITTED")
            }
            Malformed::WrongStatusCode => assert_eq!(r.body["charged"], usd(5)),
            Malformed::NotJson => assert_eq!(r.body, Value::Null),
            Malformed::WrongFieldType => assert!(r.body["charged"].is_string()),
        }
        // Applied: a same-key retry is a clean replay.
        let again = h.commit(&rid, "c", 5).await;
        assert_eq!(again.status, 200);
        assert_eq!(again.body["charged"], usd(5));
    }
    assert_eq!(
        h.server
            .ledger()
            .iter()
            .filter(|e| e.kind == "commit")
            .count(),
        4
    );
    // Events: 201 becomes 202 for WrongStatusCode.
    h.server.add_fault(rule(
        Operation::CreateEvent,
        Fault::MalformedSuccess {
            shape: Malformed::WrongStatusCode,
        },
    ));
    assert_eq!(
        h.post("/v1/events", &event_body("e", 1, json!({})))
            .await
            .status,
        202
    );
}

#[tokio::test]
async fn skip_times_and_reservation_filter() {
    let h = H::new().await;
    let a = h.reserve_id("a", 1, json!({})).await;
    let b = h.reserve_id("b", 1, json!({})).await;
    h.server.add_fault(FaultRule {
        operation: Operation::ExtendReservation,
        reservation_id: Some(b.clone()),
        skip: 1,
        times: 2,
        every: 1,
        fault: Fault::ServerError { status: 500 },
    });
    let statuses = |v: Vec<u16>| v;
    let mut got = Vec::new();
    got.push(h.extend(&a, "a1", 10).await.status); // other reservation: no match
    for i in 0..4 {
        got.push(h.extend(&b, &format!("b{i}"), 10).await.status);
    }
    assert_eq!(got, statuses(vec![200, 200, 500, 500, 200]));
    // times = 0: every later one.
    h.server.add_fault(FaultRule {
        operation: Operation::GetBalances,
        reservation_id: None,
        skip: 1,
        times: 0,
        every: 1,
        fault: Fault::ServerError { status: 502 },
    });
    let s: Vec<u16> = futures_statuses(&h, 4).await;
    assert_eq!(s, [200, 502, 502, 502]);
    h.server.clear_faults();
    assert_eq!(h.get("/v1/balances?tenant=acme").await.status, 200);
}

async fn futures_statuses(h: &H, n: usize) -> Vec<u16> {
    let mut out = Vec::new();
    for _ in 0..n {
        out.push(h.get("/v1/balances?tenant=acme").await.status);
    }
    out
}

#[tokio::test]
async fn http_inspection_endpoints() {
    let h = H::new().await;
    let ctl = |p: &str| format!("{}/__cycles/{p}", h.url);
    // Fault via HTTP, serde form.
    let f = json!({"operation": "createReservation", "times": 1, "fault": {"kind": "server_error", "status": 500}});
    assert_eq!(
        h.c.post(ctl("faults"))
            .json(&f)
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    assert_eq!(
        h.post("/v1/reservations", &reserve_body("k", 1, json!({})))
            .await
            .status,
        500
    );
    let f = json!({"operation": "CreateReservation", "fault": {"kind": "ConnectionReset"}});
    assert_eq!(
        h.c.post(ctl("faults"))
            .json(&f)
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    assert_eq!(
        h.c.delete(ctl("faults")).send().await.unwrap().status(),
        200
    );
    assert_eq!(
        h.c.post(ctl("faults"))
            .json(&json!({"fault": 1}))
            .send()
            .await
            .unwrap()
            .status(),
        400
    );
    let r = h
        .reserve("k", 1, json!({"ttl_ms": 1000, "grace_period_ms": 0}))
        .await;
    // Ledger and requests.
    let ledger: Value =
        h.c.get(ctl("ledger"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
    assert_eq!(ledger[0]["kind"], "reserve");
    assert_eq!(ledger[0]["reservation_id"], r["reservation_id"]);
    let reqs: Value =
        h.c.get(ctl("requests"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
    assert_eq!(reqs[0]["operation"], "createReservation");
    assert_eq!(reqs[0]["status"], 500);
    assert_eq!(reqs[0]["fault"], "server_error");
    // Clock.
    let before = h.server.now_ms();
    let now: Value =
        h.c.post(ctl("clock/advance"))
            .json(&json!({"ms": 5000}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
    assert!(now["now_ms"].as_i64().unwrap() >= before + 5000);
    let rid = r["reservation_id"].as_str().unwrap();
    assert_eq!(h.commit(rid, "c", 1).await.code(), "RESERVATION_EXPIRED");
    // Tenant closure.
    assert_eq!(
        h.c.post(ctl("tenants/acme/closed"))
            .json(&json!({"closed": true}))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    assert_eq!(
        h.post("/v1/events", &event_body("e", 1, json!({})))
            .await
            .code(),
        "TENANT_CLOSED"
    );
    // Inspection traffic is not in the request log.
    assert!(h
        .server
        .requests()
        .iter()
        .all(|r| !r.path.starts_with("/__cycles")));
}

/// The reset faults send a real TCP RST (not a FIN): a raw read sees ECONNRESET.
#[tokio::test]
async fn reset_is_a_tcp_rst() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let h = H::new().await;
    for fault in [Fault::ConnectionReset, Fault::DropResponseAfterApply] {
        h.server.add_fault(rule(Operation::CreateEvent, fault));
        let body =
            event_body(&format!("raw-{}", h.server.requests().len()), 1, json!({})).to_string();
        let mut s = tokio::net::TcpStream::connect(h.server.addr())
            .await
            .unwrap();
        let req = format!(
            "POST /v1/events HTTP/1.1\r\nHost: x\r\nX-Cycles-API-Key: {KEY}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        s.write_all(req.as_bytes()).await.unwrap();
        let mut buf = [0u8; 256];
        let err = s
            .read(&mut buf)
            .await
            .expect_err("read must fail with a reset, not EOF or data");
        assert_eq!(err.kind(), std::io::ErrorKind::ConnectionReset);
    }
    // ConnectionReset applied nothing, DropResponseAfterApply applied the event once.
    assert_eq!(
        h.server
            .ledger()
            .iter()
            .filter(|e| e.kind == "event")
            .count(),
        1
    );
}

/// Independent workers replaying the same commit concurrently settle exactly once.
#[tokio::test]
async fn concurrent_same_key_commits_settle_once() {
    let h = H::new().await;
    let rid = h.reserve_id("k", 100, json!({})).await;
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let c = reqwest::Client::new();
        let url = format!("{}/v1/reservations/{rid}/commit", h.url);
        tasks.push(tokio::spawn(async move {
            let r = c
                .post(url)
                .header("X-Cycles-API-Key", KEY)
                .json(&json!({"idempotency_key": "same", "actual": usd(70)}))
                .send()
                .await
                .unwrap();
            (r.status().as_u16(), r.json::<Value>().await.unwrap())
        }));
    }
    let mut bodies = Vec::new();
    for t in tasks {
        let (status, body) = t.await.unwrap();
        assert_eq!(status, 200);
        bodies.push(body);
    }
    assert!(bodies.windows(2).all(|w| w[0] == w[1]));
    assert_eq!(
        h.server
            .ledger()
            .iter()
            .filter(|e| e.kind == "commit")
            .count(),
        1
    );
    assert_eq!(h.server.requests().iter().filter(|r| r.replay).count(), 7);
}

#[tokio::test]
async fn shutdown_stops_serving() {
    let h = H::new().await;
    let addr = h.server.addr();
    assert_eq!(h.get("/v1/balances?tenant=acme").await.status, 200);
    h.server.shutdown().await;
    // The listener is gone: new connections are refused.
    assert!(tokio::net::TcpStream::connect(addr).await.is_err());
}

#[tokio::test]
async fn reservation_id_fault_assigns_an_unusual_id_that_paths_reach_escaped() {
    let h = H::new().await;
    let id = "rsv/\u{fc} #?%2F";
    h.server.add_fault(rule(
        Operation::CreateReservation,
        Fault::ReservationId { id: id.into() },
    ));
    let r = h
        .post("/v1/reservations", &reserve_body("odd", 1, json!({})))
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["reservation_id"], id);
    // The id travels as one escaped path segment.
    let path = format!(
        "/v1/reservations/{}/commit",
        percent_encoding::utf8_percent_encode(id, percent_encoding::NON_ALPHANUMERIC)
    );
    let c = h
        .post(
            &path,
            &json!({"idempotency_key": "odd-c", "actual": {"unit": "USD_MICROCENTS", "amount": 1}}),
        )
        .await;
    assert_eq!(c.status, 200, "{}", c.body);
    let kinds: Vec<_> = h
        .server
        .ledger()
        .into_iter()
        .map(|e| (e.kind, e.reservation_id))
        .collect();
    assert_eq!(
        kinds,
        [
            ("reserve".to_string(), Some(id.to_string())),
            ("commit".to_string(), Some(id.to_string()))
        ]
    );
    // times = 1: the next reservation gets a generated id again.
    let r = h
        .post("/v1/reservations", &reserve_body("plain", 1, json!({})))
        .await;
    assert!(r.body["reservation_id"]
        .as_str()
        .unwrap()
        .starts_with("rsv_"));
}

#[test]
fn fault_rules_refuse_unknown_keys_at_every_level() {
    let ok = r#"{"operation":"commitReservation","times":1,"fault":{"kind":"server_error","status":503}}"#;
    serde_json::from_str::<FaultRule>(ok).expect("a valid rule");
    for (text, key) in [
        (
            r#"{"operation":"commitReservation","time":1,"fault":{"kind":"connection_reset"}}"#,
            "time",
        ),
        (
            r#"{"operation":"commitReservation","fault":{"kind":"server_error","status":503,"staus":1}}"#,
            "staus",
        ),
        (
            r#"{"operation":"commitReservation","fault":{"kind":"connection_reset","ms":5}}"#,
            "ms",
        ),
    ] {
        let e = serde_json::from_str::<FaultRule>(text)
            .unwrap_err()
            .to_string();
        assert!(e.contains(&format!("unknown field `{key}`")), "{text}: {e}");
    }
}

#[tokio::test]
async fn every_faults_each_nth_match_after_skip_up_to_times() {
    let h = H::new().await;
    // Positions 3, 6, 9 of the matches after the first 2 (requests 5, 8, 11), then no more.
    h.server.add_fault(FaultRule {
        operation: Operation::GetBalances,
        reservation_id: None,
        skip: 2,
        times: 3,
        every: 3,
        fault: Fault::ServerError { status: 503 },
    });
    let got = futures_statuses(&h, 15).await;
    let faulted: Vec<usize> = (1..=15).filter(|i| got[i - 1] == 503).collect();
    assert_eq!(faulted, [5, 8, 11], "{got:?}");
    assert!(got.iter().all(|s| *s == 200 || *s == 503), "{got:?}");
    // Two interleaved strides (the load mix's shape): each fires on its own positions only.
    h.server.clear_faults();
    for (skip, status) in [(0, 500), (1, 502)] {
        h.server.add_fault(FaultRule {
            operation: Operation::GetBalances,
            reservation_id: None,
            skip,
            times: 0,
            every: 4,
            fault: Fault::ServerError { status },
        });
    }
    let got = futures_statuses(&h, 9).await;
    assert_eq!(got, [200, 200, 200, 500, 502, 200, 200, 500, 502]);
}

#[test]
fn every_is_strict() {
    let parse = |t: &str| serde_json::from_str::<FaultRule>(t).map_err(|e| e.to_string());
    let base = |every: &str| {
        format!(
            r#"{{"operation":"commitReservation","every":{every},"fault":{{"kind":"connection_reset"}}}}"#
        )
    };
    assert_eq!(parse(&base("100")).expect("every 100").every, 100);
    let absent = r#"{"operation":"commitReservation","fault":{"kind":"connection_reset"}}"#;
    assert_eq!(parse(absent).expect("no every").every, 1);
    let zero = parse(&base("0")).unwrap_err();
    assert!(zero.contains("`every` must be at least 1"), "{zero}");
    for bad in ["-1", "1.5", "\"100\"", "4294967296", "null"] {
        assert!(parse(&base(bad)).is_err(), "every = {bad} was accepted");
    }
}
