//! Every runtime operation over real HTTP against the local server.

mod common;

use common::*;
use cycles_core::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reserve_commit_with_timing_and_ids() {
    let s = server().await;
    let c = client(&s);
    let req = reserve_req(1_000);
    let r = c.create_reservation(&req).await.unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.body.decision, Decision::Allow);
    assert!(r.body.remaining_ttl_ms.unwrap() > 0);
    assert!(r.body.expires_at_ms.unwrap() > 0);
    assert!(!r.body.affected_scopes.is_empty());
    assert!(r.timing.received >= r.timing.sent);
    assert!(r.request_id.is_some(), "X-Request-Id captured");
    let trace = r.trace_id.clone().expect("X-Cycles-Trace-Id captured");
    assert_eq!(trace.len(), 32);
    let id = r.body.reservation_id.unwrap();

    let mut commit = CommitRequest::new(key("commit"), usd(800));
    commit.metrics = Some(StandardMetrics {
        tokens_input: Some(10),
        ..Default::default()
    });
    let before = std::time::Instant::now();
    let cr = c.commit_reservation(&id, &commit).await.unwrap();
    assert_eq!(cr.body.status, ReservationStatus::Committed);
    assert_eq!(cr.body.charged, usd(800));
    assert!(cr.timing.sent >= before && cr.timing.received >= cr.timing.sent);

    // Same-key replay returns the original outcome; the ledger has one commit.
    let again = c.commit_reservation(&id, &commit).await.unwrap();
    assert_eq!(again.body.charged, usd(800));
    let commits = s.ledger().iter().filter(|e| e.kind == "commit").count();
    assert_eq!(commits, 1);

    let d = c.get_reservation(&id).await.unwrap();
    assert_eq!(d.body.status, ReservationStatus::Committed);
    assert_eq!(d.body.reservation_id, id);
    assert_eq!(d.body.committed, Some(usd(800)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idempotency_key_header_is_sent() {
    let s = server().await;
    let c = client(&s);
    let req = reserve_req(10);
    let id = c
        .create_reservation(&req)
        .await
        .unwrap()
        .body
        .reservation_id
        .unwrap();
    let ext = ReservationExtendRequest::new(key("ext"), 1_000);
    c.extend_reservation(&id, &ext).await.unwrap();
    let recs = s.requests();
    let create = recs
        .iter()
        .find(|r| r.method == "POST" && r.path.ends_with("/v1/reservations"))
        .unwrap();
    assert_eq!(
        create.idempotency_key.as_deref(),
        Some(req.idempotency_key.as_str())
    );
    let extend = recs.iter().find(|r| r.path.ends_with("/extend")).unwrap();
    assert_eq!(
        extend.idempotency_key.as_deref(),
        Some(ext.idempotency_key.as_str())
    );
    assert_eq!(extend.reservation_id.as_deref(), Some(id.as_str()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_extend_decide_event_balances() {
    let s = server().await;
    let c = client(&s);

    let id = reserve(&c, 500).await;
    let e = c
        .extend_reservation(&id, &ReservationExtendRequest::new(key("ext"), 5_000))
        .await
        .unwrap();
    assert_eq!(e.body.status, ReservationStatus::Active);
    assert!(e.body.remaining_ttl_ms.unwrap() > 60_000);
    let mut rel = ReleaseRequest::new(key("rel"));
    rel.reason = Some("not needed".into());
    let r = c.release_reservation(&id, &rel).await.unwrap();
    assert_eq!(r.body.status, ReservationStatus::Released);
    assert_eq!(r.body.released, usd(500));

    let d = c
        .decide(&DecisionRequest::new(
            key("dec"),
            subject(),
            action(),
            usd(5),
        ))
        .await
        .unwrap();
    assert_eq!(d.body.decision, Decision::Allow);

    let mut ev = EventCreateRequest::new(key("ev"), subject(), action(), usd(7));
    ev.client_time_ms = Some(1);
    let er = c.create_event(&ev).await.unwrap();
    assert_eq!(er.status, 201);
    assert_eq!(er.body.status, EventStatus::Applied);
    assert!(!er.body.event_id.is_empty());

    let b = c.get_balances(&BalanceQuery::tenant("acme")).await.unwrap();
    let bal = b
        .body
        .balances
        .iter()
        .find(|b| b.scope == "tenant:acme")
        .expect("tenant balance");
    assert_eq!(bal.remaining.unit, Unit::UsdMicrocents);
    assert_eq!(bal.spent.as_ref().map(|a| a.amount), Some(7));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dry_run_reserve_has_no_reservation() {
    let s = server().await;
    let c = client(&s);
    let mut req = reserve_req(5);
    req.dry_run = Some(true);
    let r = c.create_reservation(&req).await.unwrap();
    assert_eq!(r.body.reservation_id, None);
    assert_eq!(r.body.remaining_ttl_ms, None);
    assert!(s.ledger().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_with_filters_and_pagination() {
    let s = server().await;
    let c = client(&s);
    let mut ids = Vec::new();
    for _ in 0..5 {
        ids.push(reserve(&c, 10).await);
    }
    let q = ListReservationsQuery {
        status: Some(ReservationStatus::Active),
        sort_by: Some(SortBy::CreatedAtMs),
        sort_dir: Some(SortDir::Asc),
        include: vec!["metadata".into()],
        limit: Some(2),
        ..Default::default()
    };
    let page = c.list_reservations(&q).await.unwrap();
    assert_eq!(page.body.reservations.len(), 2);
    assert!(page.body.next_cursor.is_some());
    let all = c.list_reservations_all(&q, 100).await.unwrap();
    let mut got: Vec<String> = all.iter().map(|r| r.reservation_id.clone()).collect();
    got.sort();
    ids.sort();
    assert_eq!(got, ids);

    // Recovery by idempotency key.
    let req = reserve_req(3);
    let id = c
        .create_reservation(&req)
        .await
        .unwrap()
        .body
        .reservation_id
        .unwrap();
    let q = ListReservationsQuery {
        idempotency_key: Some(req.idempotency_key.clone()),
        ..Default::default()
    };
    let found = c.list_reservations(&q).await.unwrap().body.reservations;
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].reservation_id, id);

    // Window filters are sent and accepted (blank ones are omitted by the client).
    let q = ListReservationsQuery {
        from: Some("2000-01-01T00:00:00Z".into()),
        to: Some(String::new()),
        expires_from: Some("2000-01-01T00:00:00Z".into()),
        finalized_to: Some("2999-01-01T00:00:00Z".into()),
        ..Default::default()
    };
    let r = c.list_reservations(&q).await.unwrap();
    assert!(r.body.reservations.is_empty(), "nothing finalized yet");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn evidence_and_jwks() {
    let s = server().await;
    let c = client(&s);
    let r = c.create_reservation(&reserve_req(5)).await.unwrap();
    let ev = r.body.cycles_evidence.expect("evidence ref");
    let env = c.get_evidence(&ev.evidence_id).await.unwrap();
    assert_eq!(env.body.evidence_id, ev.evidence_id);
    assert_eq!(env.body.artifact_type, "reserve");
    let jwks = c.get_evidence_jwks().await.unwrap();
    assert!(!jwks.body.keys.is_empty());
    assert_eq!(jwks.body.keys[0].crv, "Ed25519");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trailing_slash_base_urls() {
    let s = server().await;
    for base in [s.url(), format!("{}/", s.url()), format!("{}//", s.url())] {
        let c = client_for(&base);
        let id = reserve(&c, 1).await;
        c.get_reservation(&id).await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn percent_encoded_id_is_one_segment() {
    let s = server().await;
    let c = client(&s);
    let e = c.get_reservation("rsv/a b").await.unwrap_err();
    if server_mode() == cycles_local_server::ServerMode::Reference {
        // The reference server's Tomcat rejects an encoded slash before the application:
        // an HTML 400, typed by its status.
        assert_eq!(e.kind(), &ErrorKind::InvalidRequest, "{e}");
        assert_eq!(e.server_code(), None);
    } else {
        assert_eq!(e.kind(), &ErrorKind::NotFound, "{e}");
        assert_eq!(e.server_code(), Some("NOT_FOUND"));
        let rec = s.requests().pop().unwrap();
        assert_eq!(rec.reservation_id.as_deref(), Some("rsv/a b"), "{rec:?}");
    }
    let e = c
        .commit_reservation("x?y#z%", &CommitRequest::new(key("c"), usd(1)))
        .await
        .unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::NotFound, "{e}");
    let rec = s.requests().pop().unwrap();
    assert_eq!(rec.reservation_id.as_deref(), Some("x?y#z%"), "{rec:?}");
    // Dot segments never leave the client.
    let e = c.get_reservation("..").await.unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::InvalidArgument);
}

/// `max_concurrent_requests` bounds what one client has in flight: with 2 slots and every
/// request held 300 ms by the server, the third request cannot arrive before the first one
/// was answered. Lower bounds only, so a slow machine cannot make it flaky.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_flight_requests_are_bounded_per_client() {
    use cycles_local_server::{Fault, FaultRule, Operation};
    let server = server().await;
    server.add_fault(FaultRule {
        operation: Operation::GetBalances,
        reservation_id: None,
        skip: 0,
        times: 0,
        every: 1,
        fault: Fault::Delay { ms: 300 },
    });
    let client = std::sync::Arc::new(
        CyclesClient::new(
            Config::new(server.url(), KEY)
                .with_request_timeout(std::time::Duration::from_secs(5))
                .with_max_concurrent_requests(2),
        )
        .unwrap(),
    );
    let q = BalanceQuery {
        tenant: Some("acme".into()),
        ..BalanceQuery::default()
    };
    let calls = (0..6).map(|_| {
        let (c, q) = (client.clone(), q.clone());
        tokio::spawn(async move { c.get_balances(&q).await })
    });
    for call in calls.collect::<Vec<_>>() {
        call.await
            .unwrap()
            .expect("every request succeeds, some after waiting for a slot");
    }
    let mut arrivals: Vec<u64> = server
        .requests()
        .iter()
        .filter(|r| r.operation == Some(Operation::GetBalances))
        .map(|r| r.received_mono_us)
        .collect();
    arrivals.sort_unstable();
    assert_eq!(arrivals.len(), 6);
    for w in arrivals.windows(3) {
        assert!(
            w[2] - w[0] >= 290_000,
            "three requests in flight at once: arrivals {arrivals:?}"
        );
    }
}

#[test]
fn max_concurrent_requests_must_be_positive() {
    let err =
        CyclesClient::new(Config::new("http://127.0.0.1:1", KEY).with_max_concurrent_requests(0))
            .unwrap_err();
    assert_eq!(*err.kind(), ErrorKind::Config);
    assert!(err.to_string().contains("max_concurrent_requests"), "{err}");
}

/// Keys an HTTP header cannot carry byte for byte (edge whitespace is stripped in transit,
/// non-ASCII goes out as raw bytes): every POST sends them in the body only, so the server
/// never sees a header that differs from the body (issue 28). Keys a header carries
/// faithfully still get the header.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_a_header_cannot_carry_go_in_the_body_only() {
    let s = server().await;
    let c = client(&s);
    for base in [" padded ", "trail ", "kéy", "漢字-😀", "inner space ok"] {
        let k = |op: &str| format!("{base}{op}");
        let mut req = reserve_req(10);
        req.idempotency_key = k("");
        let id = c
            .create_reservation(&req)
            .await
            .unwrap_or_else(|e| panic!("create with {base:?}: {e}"))
            .body
            .reservation_id
            .unwrap();
        c.extend_reservation(&id, &ReservationExtendRequest::new(k(":ext"), 1_000))
            .await
            .unwrap_or_else(|e| panic!("extend with {base:?}: {e}"));
        c.commit_reservation(&id, &CommitRequest::new(k(":commit"), usd(5)))
            .await
            .unwrap_or_else(|e| panic!("commit with {base:?}: {e}"));
        let mut other = reserve_req(10);
        other.idempotency_key = k(":2");
        let id2 = reserve_id(&c, &other).await;
        c.release_reservation(&id2, &ReleaseRequest::new(k(":release")))
            .await
            .unwrap_or_else(|e| panic!("release with {base:?}: {e}"));
        c.decide(&DecisionRequest::new(
            k(":decide"),
            subject(),
            action(),
            usd(1),
        ))
        .await
        .unwrap_or_else(|e| panic!("decide with {base:?}: {e}"));
        c.create_event(&EventCreateRequest::new(
            k(":event"),
            subject(),
            action(),
            usd(1),
        ))
        .await
        .unwrap_or_else(|e| panic!("event with {base:?}: {e}"));
        // Before the fix the server answered 400 ("header does not match body") to every
        // one of these calls; the ledger keeps each key exactly as sent in the body.
        let keys: Vec<String> = s
            .ledger()
            .iter()
            .map(|e| e.idempotency_key.clone())
            .collect();
        for op in ["", ":ext", ":commit", ":2", ":release", ":event"] {
            assert!(
                keys.contains(&k(op)),
                "{:?} not in the ledger: {keys:?}",
                k(op)
            );
        }
    }
    for (key, ok) in [
        ("", false),
        (" ", false),
        ("a", true),
        ("a b", true),
        ("\ta", false),
        ("a\u{7f}", false),
        ("~!", true),
    ] {
        assert_eq!(transport::header_round_trips(key), ok, "{key:?}");
    }
}

async fn reserve_id(c: &CyclesClient, req: &ReservationCreateRequest) -> String {
    c.create_reservation(req)
        .await
        .unwrap()
        .body
        .reservation_id
        .unwrap()
}
