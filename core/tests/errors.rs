//! Every error class over real HTTP: transport failures, 429, 5xx, ambiguous 2xx and the
//! server error codes.

mod common;

use std::time::Duration;

use common::*;
use cycles_core::*;
use cycles_local_server::LocalServer;
use cycles_local_server::{BudgetSeed, BudgetStatus, Fault, FaultRule, Malformed, Operation};

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_refused() {
    // Bind then drop to get a port nobody listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let c = client_for(&format!("http://127.0.0.1:{port}"));
    let e = c.create_reservation(&reserve_req(1)).await.unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::Connect, "{e:?}");
    assert!(e.retryable());
    assert_eq!(e.http_status(), None);
    assert!(!format!("{e} {e:?}").contains(KEY));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeout_via_delay() {
    let s = server().await;
    s.add_fault(rule(
        Operation::CreateReservation,
        Fault::Delay { ms: 1_500 },
    ));
    let c = CyclesClient::new(
        Config::new(s.url(), KEY).with_request_timeout(Duration::from_millis(300)),
    )
    .unwrap();
    let started = std::time::Instant::now();
    let e = c.create_reservation(&reserve_req(1)).await.unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::Timeout, "{e:?}");
    assert!(
        started.elapsed() < Duration::from_millis(1_400),
        "timeout enforced"
    );
    assert!(e.retryable());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reset_without_response() {
    let s = server().await;
    let c = client(&s);
    s.add_fault(rule(Operation::CreateReservation, Fault::ConnectionReset));
    let e = c.create_reservation(&reserve_req(1)).await.unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::ConnectionReset, "{e:?}");
    assert!(s.ledger().is_empty());

    let id = reserve(&c, 10).await;
    s.add_fault(rule(
        Operation::CommitReservation,
        Fault::DropResponseAfterApply,
    ));
    let commit = CommitRequest::new(key("c"), usd(5));
    let e = c.commit_reservation(&id, &commit).await.unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::ConnectionReset, "{e:?}");
    // The same-key retry gets the original outcome; applied once.
    let ok = c.commit_reservation(&id, &commit).await.unwrap();
    assert_eq!(ok.body.charged, usd(5));
    assert_eq!(s.ledger().iter().filter(|e| e.kind == "commit").count(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limited_with_valid_and_invalid_retry_after() {
    let s = server().await;
    let c = client(&s);
    let id = reserve(&c, 10).await;
    for (raw, want) in [
        (Some("7"), Some(7u64)),
        (Some("Wed, 21 Oct 2015 07:28:00 GMT"), None),
        (Some("-1"), None),
        (Some("1.5"), None),
    ] {
        s.add_fault(rule(
            Operation::ExtendReservation,
            Fault::RateLimited {
                retry_after: raw.map(str::to_string),
            },
        ));
        let e = c
            .extend_reservation(&id, &ReservationExtendRequest::new(key("e"), 1000))
            .await
            .unwrap_err();
        assert_eq!(e.kind(), &ErrorKind::RateLimited, "{e:?}");
        assert_eq!(e.http_status(), Some(429));
        assert_eq!(e.server_code(), Some("LIMIT_EXCEEDED"));
        let ra = e.retry_after().expect("Retry-After kept");
        assert_eq!(ra.raw, raw.unwrap());
        assert_eq!(ra.delta_seconds, want);
        assert_eq!(ra.delay_ms(), want.map(|s| s * 1000));
        assert!(e.retryable());
    }
    s.add_fault(rule(
        Operation::CommitReservation,
        Fault::RateLimited { retry_after: None },
    ));
    let e = c
        .commit_reservation(&id, &CommitRequest::new(key("c"), usd(1)))
        .await
        .unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::RateLimited);
    assert!(e.retry_after().is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_errors() {
    let s = server().await;
    let c = client(&s);
    for status in [500u16, 502, 503] {
        s.add_fault(rule(Operation::CreateEvent, Fault::ServerError { status }));
        let e = c
            .create_event(&EventCreateRequest::new(
                key("ev"),
                subject(),
                action(),
                usd(1),
            ))
            .await
            .unwrap_err();
        assert_eq!(e.kind(), &ErrorKind::ServerError, "{e:?}");
        assert_eq!(e.http_status(), Some(status));
        assert!(e.retryable());
        assert!(e.request_id().is_some());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_success_is_ambiguous() {
    let s = server().await;
    let c = client(&s);
    for shape in [
        Malformed::MissingRequiredField,
        Malformed::WrongStatusCode,
        Malformed::NotJson,
        Malformed::WrongFieldType,
    ] {
        let id = reserve(&c, 10).await;
        s.add_fault(rule(
            Operation::CommitReservation,
            Fault::MalformedSuccess { shape },
        ));
        let commit = CommitRequest::new(key("c"), usd(3));
        let e = c.commit_reservation(&id, &commit).await.unwrap_err();
        assert_eq!(e.kind(), &ErrorKind::AmbiguousSuccess, "{shape:?}: {e:?}");
        assert!(e.retryable());
        // It was applied: the same-key retry returns the stored success.
        let ok = c.commit_reservation(&id, &commit).await.unwrap();
        assert_eq!(ok.body.status, ReservationStatus::Committed);

        s.add_fault(rule(
            Operation::ExtendReservation,
            Fault::MalformedSuccess { shape },
        ));
        let id2 = reserve(&c, 10).await;
        let e = c
            .extend_reservation(&id2, &ReservationExtendRequest::new(key("x"), 1000))
            .await
            .unwrap_err();
        assert_eq!(e.kind(), &ErrorKind::AmbiguousSuccess, "{shape:?}: {e:?}");
    }
    // createEvent success is 201: a malformed 2xx there is ambiguous too.
    s.add_fault(rule(
        Operation::CreateEvent,
        Fault::MalformedSuccess {
            shape: Malformed::WrongStatusCode,
        },
    ));
    let e = c
        .create_event(&EventCreateRequest::new(
            key("ev"),
            subject(),
            action(),
            usd(1),
        ))
        .await
        .unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::AmbiguousSuccess, "{e:?}");
}

/// A schema-invalid 2xx on a read has no side effect to be ambiguous about: it is
/// INVALID_RESPONSE and NOT retryable, so a retry-on-retryable loop ends after one attempt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_success_on_a_read_is_invalid_response_not_retryable() {
    let s = server().await;
    let c = client(&s);
    let id = reserve(&c, 10).await;
    let evidence = c
        .create_reservation(&reserve_req(1))
        .await
        .unwrap()
        .body
        .cycles_evidence
        .expect("evidence ref")
        .evidence_id;
    for shape in [
        Malformed::MissingRequiredField,
        Malformed::WrongStatusCode,
        Malformed::NotJson,
        Malformed::WrongFieldType,
    ] {
        for op in [
            Operation::GetReservation,
            Operation::ListReservations,
            Operation::GetBalances,
            Operation::Decide,
            Operation::GetEvidence,
            Operation::GetEvidenceJwks,
        ] {
            s.add_fault(rule(op, Fault::MalformedSuccess { shape }));
            let e = match op {
                Operation::GetReservation => c.get_reservation(&id).await.err(),
                Operation::ListReservations => c
                    .list_reservations(&ListReservationsQuery::default())
                    .await
                    .err(),
                Operation::GetBalances => c.get_balances(&BalanceQuery::tenant("acme")).await.err(),
                Operation::Decide => c
                    .decide(&DecisionRequest::new(key("d"), subject(), action(), usd(1)))
                    .await
                    .err(),
                Operation::GetEvidence => c.get_evidence(&evidence).await.err(),
                _ => c.get_evidence_jwks().await.err(),
            }
            .unwrap_or_else(|| panic!("{op:?} {shape:?} must fail"));
            assert_eq!(
                e.kind(),
                &ErrorKind::InvalidResponse,
                "{op:?} {shape:?}: {e:?}"
            );
            assert_eq!((e.code(), e.kind().name()), (24, "INVALID_RESPONSE"));
            assert!(
                !e.retryable(),
                "{op:?}: a read's invalid 2xx is not retryable"
            );
            assert!(e.http_status().is_some_and(|st| (200..300).contains(&st)));
            assert!(e.request_id().is_some());
        }
    }
    // The five writes stay AMBIGUOUS_SUCCESS (see malformed_success_is_ambiguous); a read
    // after the faults are used up succeeds.
    c.get_reservation(&id).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unauthorized_and_forbidden() {
    let s = server().await;
    let bad = CyclesClient::new(Config::new(s.url(), "wrong-key")).unwrap();
    let e = bad.create_reservation(&reserve_req(1)).await.unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::Unauthorized, "{e:?}");
    assert_eq!(e.http_status(), Some(401));
    assert!(!e.retryable());

    let c = client(&s);
    let mut req = reserve_req(1);
    req.subject = Subject::tenant("someone-else");
    let e = c.create_reservation(&req).await.unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::Forbidden, "{e:?}");
    assert_eq!(e.http_status(), Some(403));
    assert!(e.request_id().is_some());
    assert!(e.trace_id().is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn not_found_finalized_mismatch_expired() {
    let s = server().await;
    let c = client(&s);
    let e = c.get_reservation("does-not-exist").await.unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::NotFound);
    assert_eq!(e.http_status(), Some(404));

    let id = reserve(&c, 100).await;
    let commit = CommitRequest::new(key("c"), usd(10));
    c.commit_reservation(&id, &commit).await.unwrap();
    // Different payload, same key.
    let e = c
        .commit_reservation(
            &id,
            &CommitRequest::new(commit.idempotency_key.clone(), usd(11)),
        )
        .await
        .unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::IdempotencyMismatch, "{e:?}");
    assert_eq!(e.http_status(), Some(409));
    // New key on a finalized reservation.
    let e = c
        .release_reservation(&id, &ReleaseRequest::new(key("r")))
        .await
        .unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::ReservationFinalized, "{e:?}");

    // Expired: past ttl + grace on the server clock.
    let id = reserve(&c, 100).await;
    s.advance_clock(60_000 + 5_000 + 1_000);
    let e = c
        .commit_reservation(&id, &CommitRequest::new(key("c"), usd(1)))
        .await
        .unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::ReservationExpired, "{e:?}");
    assert_eq!(e.http_status(), Some(410));
    assert!(!e.retryable());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unit_mismatch_and_budget_errors() {
    let s = server().await;
    let c = client(&s);
    let mut req = reserve_req(1);
    req.estimate = Amount::new(Unit::Tokens, 1);
    let e = c.create_reservation(&req).await.unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::UnitMismatch, "{e:?}");
    assert_eq!(e.http_status(), Some(400));

    let e = c
        .create_reservation(&reserve_req(i64::MAX / 2))
        .await
        .unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::BudgetExceeded, "{e:?}");
    assert_eq!(e.http_status(), Some(409));

    let mut req = reserve_req(1);
    req.subject.dimensions = None;
    req.subject.tenant = None;
    req.subject = req.subject.with_dimension("only", "dims");
    let e = c.create_reservation(&req).await.unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::InvalidRequest, "{e:?}");

    // Tenant closed.
    s.set_tenant_closed("acme", true);
    let e = c.create_reservation(&reserve_req(1)).await.unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::TenantClosed, "{e:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frozen_budget_and_max_extensions() {
    let mut cfg = server_config();
    cfg.budgets.push(BudgetSeed {
        scope: "tenant:acme/workspace:frozen".into(),
        unit: "USD_MICROCENTS".into(),
        allocated: 1_000,
        overdraft_limit: 0,
        status: BudgetStatus::Frozen,
        caps: None,
    });
    cfg.regime.max_extensions = Some(1);
    let s = LocalServer::start(cfg).await.unwrap();
    let c = client(&s);
    let mut req = reserve_req(1);
    req.subject = subject().with_workspace("frozen");
    let e = c.create_reservation(&req).await.unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::BudgetFrozen, "{e:?}");

    let id = reserve(&c, 1).await;
    c.extend_reservation(&id, &ReservationExtendRequest::new(key("e"), 1000))
        .await
        .unwrap();
    let e = c
        .extend_reservation(&id, &ReservationExtendRequest::new(key("e"), 1000))
        .await
        .unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::MaxExtensionsExceeded, "{e:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn injected_error_codes_including_unknown() {
    let s = server().await;
    let c = client(&s);
    for (status, code, kind) in [
        (409, "DEBT_OUTSTANDING", ErrorKind::DebtOutstanding),
        (
            409,
            "OVERDRAFT_LIMIT_EXCEEDED",
            ErrorKind::OverdraftLimitExceeded,
        ),
        (409, "BUDGET_CLOSED", ErrorKind::BudgetClosed),
        (
            409,
            "ACTION_QUOTA_EXCEEDED",
            ErrorKind::Unknown("ACTION_QUOTA_EXCEEDED".into()),
        ),
        (400, "INVALID_REQUEST", ErrorKind::InvalidRequest),
    ] {
        s.add_fault(rule(
            Operation::Decide,
            Fault::Error {
                status,
                code: code.into(),
            },
        ));
        let e = c
            .decide(&DecisionRequest::new(key("d"), subject(), action(), usd(1)))
            .await
            .unwrap_err();
        assert_eq!(e.kind(), &kind, "{code}: {e:?}");
        assert_eq!(e.server_code(), Some(code));
        assert_eq!(e.http_status(), Some(status));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn key_never_in_error_text() {
    let s = server().await;
    let secret = "sk-live-should-never-leak-0001";
    let c = CyclesClient::new(Config::new(s.url(), secret)).unwrap();
    let e = c.create_reservation(&reserve_req(1)).await.unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::Unauthorized);
    let text = format!("{e} {e:?} {c:?}");
    assert!(!text.contains(secret), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_side_validation_errors() {
    let s = server().await;
    let c = client(&s);
    // Balances need at least one subject filter.
    let e = c.get_balances(&BalanceQuery::default()).await.unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::InvalidRequest, "{e:?}");
    // A reversed window is rejected.
    let q = ListReservationsQuery {
        from: Some("2026-02-01T00:00:00Z".into()),
        to: Some("2026-01-01T00:00:00Z".into()),
        ..Default::default()
    };
    let e = c.list_reservations(&q).await.unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::InvalidRequest, "{e:?}");
    // Unknown evidence.
    let e = c.get_evidence(&"0".repeat(64)).await.unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::NotFound, "{e:?}");
}
