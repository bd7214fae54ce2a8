//! The lease driver over real HTTP against the local server: each regime and fault, with the
//! extend arrival times the server recorded checked against the planner's schedule.
//! Leases are short (a few seconds of real time) because real timers are what is under test.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use cycles_core::events::{Disposition, Event, EventSink, HeartbeatEnd, HeartbeatPath};
use cycles_core::lease::{FailurePolicy, Heartbeat, HeartbeatConfig};
use cycles_core::timing::{Millis, StopReason};
use cycles_core::*;
use cycles_local_server::{Fault, FaultRule, LocalServer, Operation, Regime, ServerConfig};

fn recorder() -> (EventSink, Arc<Mutex<Vec<Event>>>) {
    let events = Arc::new(Mutex::new(Vec::new()));
    let sink_events = events.clone();
    (
        EventSink::with_callback(move |e| sink_events.lock().unwrap().push(e.clone())),
        events,
    )
}

async fn server_with(regime: Regime) -> LocalServer {
    LocalServer::start(ServerConfig {
        regime,
        ..common::server_config()
    })
    .await
    .expect("server")
}

fn client_with_timeout(server: &LocalServer, timeout_ms: u64) -> Arc<CyclesClient> {
    Arc::new(
        CyclesClient::new(
            Config::new(server.url(), KEY).with_request_timeout(Duration::from_millis(timeout_ms)),
        )
        .expect("client"),
    )
}

async fn create(
    client: &CyclesClient,
    ttl_ms: i64,
) -> (String, Response<ReservationCreateResponse>) {
    let mut req = reserve_req(1000);
    req.ttl_ms = Some(ttl_ms);
    let res = client.create_reservation(&req).await.expect("reserve");
    (res.body.reservation_id.clone().expect("live"), res)
}

fn extend_requests(server: &LocalServer, id: &str) -> Vec<cycles_local_server::RequestRecord> {
    server
        .requests()
        .into_iter()
        .filter(|r| {
            r.operation == Some(Operation::ExtendReservation)
                && r.reservation_id.as_deref() == Some(id)
        })
        .collect()
}

fn fault(operation: Operation, fault: Fault) -> FaultRule {
    FaultRule {
        operation,
        reservation_id: None,
        skip: 0,
        times: 1,
        every: 1,
        fault,
    }
}

/// One heartbeating lease against its own local server. Bind `server` (as `_server` when unused)
/// in every test: a dropped server shuts down mid-lease.
struct Lease {
    server: LocalServer,
    client: Arc<CyclesClient>,
    id: String,
    hb: Heartbeat,
    seen: Arc<Mutex<Vec<Event>>>,
}

/// Starts `config`'s heartbeat on the reservation, recording every event it emits.
fn start_recorded(
    client: &Arc<CyclesClient>,
    id: &str,
    created: &Response<ReservationCreateResponse>,
    config: HeartbeatConfig,
) -> (Heartbeat, Arc<Mutex<Vec<Event>>>) {
    let (events, seen) = recorder();
    let config = HeartbeatConfig { events, ..config };
    (Heartbeat::start(client.clone(), id, created, config), seen)
}

/// Starts a server with `regime` (and `injected` on the first extend), a client with a
/// `timeout_ms` request timeout, a reservation with `ttl_ms`, and its heartbeat under
/// `policy`, recording every event.
async fn start(
    regime: Regime,
    timeout_ms: u64,
    ttl_ms: i64,
    injected: Option<Fault>,
    policy: FailurePolicy,
) -> Lease {
    let server = server_with(regime).await;
    let client = client_with_timeout(&server, timeout_ms);
    if let Some(f) = injected {
        server.add_fault(fault(Operation::ExtendReservation, f));
    }
    let (id, created) = create(&client, ttl_ms).await;
    let config = HeartbeatConfig {
        policy,
        ..HeartbeatConfig::new(ttl_ms)
    };
    let (hb, seen) = start_recorded(&client, &id, &created, config);
    Lease {
        server,
        client,
        id,
        hb,
        seen,
    }
}

/// Polls `done` every 50 ms until it holds, failing after 8 s (the leases here are a few
/// seconds of real time).
async fn eventually(what: &str, done: impl Fn() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(8);
    while !done() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting: {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn guarded_work_outlives_its_ttl_and_beats_follow_the_schedule() {
    // ttl 3500: reserve = 2 x 1000 + 1000 = 3000, so the first beat comes ~500 ms after create.
    let Lease {
        server,
        client,
        id,
        hb,
        seen,
        ..
    } = start(Regime::default(), 500, 3500, None, FailurePolicy::Warn).await;
    tokio::time::sleep(Duration::from_millis(4500)).await; // the guarded work, longer than the TTL
    let report = hb.finish().await;
    assert_eq!(report.end, HeartbeatEnd::Finished);
    assert_eq!(report.path, HeartbeatPath::Primary);
    assert!(report.extensions >= 2, "{report:?}");
    // The lease is still alive: commit succeeds.
    client
        .commit_reservation(&id, &CommitRequest::new(key("c"), usd(900)))
        .await
        .expect("commit after the TTL");

    // Server-side arrivals against the planner's schedule: each gap is at least the delay the
    // planner announced (measured from receipt, which follows the previous arrival) and not
    // much more (scheduling jitter and one rtt).
    let arrivals: Vec<u64> = extend_requests(&server, &id)
        .iter()
        .map(|r| r.received_mono_us)
        .collect();
    let delays: Vec<Millis> = seen
        .lock()
        .unwrap()
        .iter()
        .filter_map(|e| match e {
            Event::HeartbeatExtended {
                next_delay,
                path: HeartbeatPath::Primary,
                ..
            } => Some(*next_delay),
            _ => None,
        })
        .collect();
    assert_eq!(arrivals.len() as u32, report.extensions);
    assert!(arrivals.len() >= 2);
    for (pair, delay) in arrivals.windows(2).zip(&delays) {
        let gap_ms = (pair[1] - pair[0]) / 1000;
        let want = delay.finite().unwrap();
        assert!(
            gap_ms + 1 >= want && gap_ms <= want + 250,
            "gap {gap_ms} ms vs scheduled {want} ms"
        );
    }
    // Each beat used a fresh key.
    let keys: std::collections::HashSet<_> = extend_requests(&server, &id)
        .into_iter()
        .filter_map(|r| r.idempotency_key)
        .collect();
    assert_eq!(keys.len(), arrivals.len());
}

#[tokio::test]
async fn transient_failure_is_observable_and_retried_with_the_same_key() {
    let Lease {
        server,
        id,
        hb,
        seen,
        ..
    } = start(
        Regime::default(),
        500,
        6000,
        Some(Fault::ServerError { status: 503 }),
        FailurePolicy::Warn,
    )
    .await;
    eventually("a successful retry", || {
        extend_requests(&server, &id)
            .iter()
            .any(|r| r.status == Some(200))
    })
    .await;
    let report = hb.finish().await;
    assert_eq!(report.end, HeartbeatEnd::Finished);
    let requests = extend_requests(&server, &id);
    assert_eq!(requests[0].status, Some(503));
    assert_eq!(requests[1].status, Some(200));
    assert_eq!(
        requests[0].idempotency_key, requests[1].idempotency_key,
        "retry reuses the key"
    );
    let events = seen.lock().unwrap();
    let failure = events
        .iter()
        .find_map(|e| match e {
            Event::HeartbeatFailed {
                reservation_id,
                error_kind,
                disposition,
                ..
            } => Some((reservation_id.clone(), *error_kind, disposition.clone())),
            _ => None,
        })
        .expect("failure event");
    assert_eq!(failure.0, id);
    assert_eq!(failure.1, "SERVER_ERROR");
    assert!(matches!(failure.2, Disposition::RetryAfter { .. }));
}

#[tokio::test]
async fn lost_response_is_retried_with_the_same_key_and_applied_once() {
    let Lease { server, id, hb, .. } = start(
        Regime::default(),
        500,
        6000,
        Some(Fault::DropResponseAfterApply),
        FailurePolicy::Warn,
    )
    .await;
    eventually("a same-key replay", || {
        extend_requests(&server, &id).iter().any(|r| r.replay)
    })
    .await;
    let report = hb.finish().await;
    let requests = extend_requests(&server, &id);
    assert_eq!(requests[0].status, None, "first response dropped");
    assert_eq!(requests[0].idempotency_key, requests[1].idempotency_key);
    let applied = server
        .ledger()
        .into_iter()
        .filter(|e| {
            e.kind == "extend" && e.idempotency_key == requests[0].idempotency_key.clone().unwrap()
        })
        .count();
    assert_eq!(applied, 1, "the lost extension was applied exactly once");
    assert!(report.failures >= 1);
}

#[tokio::test]
async fn rate_limit_honours_retry_after_inside_the_window() {
    // timeout 2000: budget 2000, margin 1000, reserve 5000; ttl 8000 -> first beat at ~3 s,
    // leaving a ~2 s window after a fast failure, which a 1 s Retry-After fits.
    let Lease { server, id, hb, .. } = start(
        Regime::default(),
        2000,
        8000,
        Some(Fault::RateLimited {
            retry_after: Some("1".into()),
        }),
        FailurePolicy::Warn,
    )
    .await;
    eventually("a retry after the 429", || {
        extend_requests(&server, &id).len() >= 2
    })
    .await;
    hb.finish().await;
    let requests = extend_requests(&server, &id);
    assert_eq!(requests[0].status, Some(429));
    let gap_ms = (requests[1].received_mono_us - requests[0].received_mono_us) / 1000;
    assert!(
        gap_ms >= 1000,
        "retried after {gap_ms} ms, before Retry-After"
    );
    assert_eq!(requests[0].idempotency_key, requests[1].idempotency_key);
}

#[tokio::test]
async fn rate_limit_beyond_the_window_stops_and_cancel_policy_signals_the_work() {
    let Lease {
        server,
        id,
        hb,
        seen,
        ..
    } = start(
        Regime::default(),
        500,
        3500,
        Some(Fault::RateLimited {
            retry_after: Some("30".into()),
        }),
        FailurePolicy::Cancel,
    )
    .await;
    let token = hb.cancellation();
    tokio::time::timeout(Duration::from_secs(5), token.cancelled())
        .await
        .expect("work is cancelled");
    let report = hb.finish().await;
    assert!(
        matches!(
            report.end,
            HeartbeatEnd::Stopped(StopReason::RateLimitBeyondWindow { .. })
        ),
        "{report:?}"
    );
    assert!(seen.lock().unwrap().iter().any(|e| matches!(e,
        Event::HeartbeatFailed { disposition: Disposition::Stopped(_), reservation_id, .. } if *reservation_id == id)));
    assert_eq!(
        extend_requests(&server, &id).len(),
        1,
        "no retry that violates throttling"
    );
}

#[tokio::test]
async fn stop_codes_stop_and_fail_on_finalize_reports_the_lapse() {
    let Lease { server, id, hb, .. } = start(
        Regime {
            max_extensions: Some(1),
            ..Regime::default()
        },
        500,
        3500,
        None,
        FailurePolicy::FailOnFinalize,
    )
    .await;
    eventually("the extension after the first", || {
        extend_requests(&server, &id).len() >= 2
    })
    .await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    let report = hb.finish().await;
    assert_eq!(
        report.end,
        HeartbeatEnd::Stopped(StopReason::Permanent("MAX_EXTENSIONS_EXCEEDED".into()))
    );
    let lapse = report
        .check()
        .expect_err("fail_on_finalize surfaces the stop");
    assert_eq!(lapse.reservation_id, id);
    assert_eq!(
        extend_requests(&server, &id).len(),
        2,
        "a stop code is not retried"
    );
}

#[tokio::test]
async fn fallback_path_for_servers_without_remaining_ttl() {
    let Lease {
        server: _server,
        client,
        id,
        hb,
        seen,
        ..
    } = start(
        Regime {
            emit_remaining_ttl: false,
            ..Regime::default()
        },
        500,
        3000,
        None,
        FailurePolicy::Warn,
    )
    .await;
    tokio::time::sleep(Duration::from_millis(3600)).await;
    let report = hb.finish().await;
    assert_eq!(report.path, HeartbeatPath::Fallback);
    assert!(
        report.extensions >= 2,
        "primed beat plus at least one cadence beat: {report:?}"
    );
    client
        .commit_reservation(&id, &CommitRequest::new(key("c"), usd(10)))
        .await
        .expect("alive after the TTL");
    assert!(seen.lock().unwrap().iter().all(|e| !matches!(
        e,
        Event::HeartbeatExtended {
            path: HeartbeatPath::Primary,
            ..
        }
    )));
}

#[tokio::test]
async fn lease_too_short_for_its_reserve_stops_after_one_immediate_extension() {
    // A maximum-lead clamp of 2 s can never hold a 3 s retry reserve: one immediate extension,
    // then the two-consecutive-zero-delay guard stops instead of burning extensions.
    let Lease { server, id, hb, .. } = start(
        Regime {
            extend: cycles_local_server::ExtendClamp::MaxLead { max_lead_ms: 2000 },
            ..Regime::default()
        },
        500,
        2000,
        None,
        FailurePolicy::Warn,
    )
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let report = hb.finish().await;
    assert_eq!(
        report.end,
        HeartbeatEnd::Stopped(StopReason::LeaseShorterThanRetryBudget)
    );
    assert_eq!(extend_requests(&server, &id).len(), 1);
}

/// Runs a lease for `work_ms` and checks it is still alive (commit succeeds) afterwards.
async fn lease_survives(
    regime: Regime,
    ttl_ms: i64,
    work_ms: u64,
) -> cycles_core::lease::LeaseReport {
    let Lease {
        server: _server,
        client,
        id,
        hb,
        ..
    } = start(regime, 500, ttl_ms, None, FailurePolicy::Warn).await;
    tokio::time::sleep(Duration::from_millis(work_ms)).await;
    let report = hb.finish().await;
    client
        .commit_reservation(&id, &CommitRequest::new(key("c"), usd(1)))
        .await
        .unwrap_or_else(|e| panic!("lease lapsed: {e}; {report:?}"));
    report
}

#[tokio::test]
async fn grant_capped_server_keeps_the_lease() {
    // Each extension grants at most 2 s of a requested 5 s: the primary path follows the
    // server's remaining_ttl_ms and beats about every 2 s.
    let regime = Regime {
        extend: cycles_local_server::ExtendClamp::GrantCap { max_grant_ms: 2000 },
        ..Regime::default()
    };
    let report = lease_survives(regime, 5000, 7000).await;
    assert!(report.extensions >= 2, "{report:?}");
    assert_eq!(report.end, HeartbeatEnd::Finished);
}

#[tokio::test]
async fn capped_initial_ttl_is_rescued_by_the_immediate_extension() {
    // Requested 60 s, granted 2 s: lead 2 s < reserve 3 s, so the first beat is immediate, and
    // the additive extension establishes a long lead.
    let regime = Regime {
        initial_ttl_cap_ms: Some(2000),
        ..Regime::default()
    };
    let report = lease_survives(regime, 60_000, 2600).await;
    assert_eq!(report.extensions, 1, "{report:?}");
}

#[tokio::test]
async fn every_transient_fault_is_retried_with_the_same_key() {
    use cycles_local_server::Malformed;
    let cases = [
        ("TRANSPORT_RESET", Fault::ConnectionReset),
        ("TRANSPORT_TIMEOUT", Fault::Delay { ms: 900 }),
        ("TRANSPORT_TIMEOUT", Fault::DelayAfterApply { ms: 900 }),
        (
            "AMBIGUOUS_SUCCESS",
            Fault::MalformedSuccess {
                shape: Malformed::MissingRequiredField,
            },
        ),
        (
            "AMBIGUOUS_SUCCESS",
            Fault::MalformedSuccess {
                shape: Malformed::WrongStatusCode,
            },
        ),
        ("SERVER_ERROR", Fault::ServerError { status: 502 }),
    ];
    let runs = cases.into_iter().map(|(kind, injected)| async move {
        // timeout 500 ms: budget 1000, margin 1000; ttl 6000 leaves room for the retry.
        let Lease {
            server,
            client,
            id,
            hb,
            seen,
            ..
        } = start(
            Regime::default(),
            500,
            6000,
            Some(injected.clone()),
            FailurePolicy::Warn,
        )
        .await;
        eventually(&format!("{injected:?}: a successful retry"), || {
            seen.lock()
                .unwrap()
                .iter()
                .any(|e| matches!(e, Event::HeartbeatExtended { .. }))
        })
        .await;
        let report = hb.finish().await;
        let failed_kind = seen.lock().unwrap().iter().find_map(|e| match e {
            Event::HeartbeatFailed {
                error_kind,
                disposition: Disposition::RetryAfter { .. },
                ..
            } => Some(*error_kind),
            _ => None,
        });
        assert_eq!(failed_kind, Some(kind), "{injected:?}");
        let keys: Vec<_> = extend_requests(&server, &id)
            .into_iter()
            .map(|r| r.idempotency_key)
            .collect();
        assert!(
            keys.len() >= 2 && keys[0] == keys[1],
            "{injected:?}: retry reuses the key: {keys:?}"
        );
        let applied = server
            .ledger()
            .into_iter()
            .filter(|e| e.kind == "extend")
            .count();
        assert_eq!(
            applied as u32, report.extensions,
            "{injected:?}: each extension applied once"
        );
        client
            .commit_reservation(&id, &CommitRequest::new(key("c"), usd(1)))
            .await
            .expect("alive");
    });
    futures_join_all(runs).await;
}

/// Minimal join_all, to avoid a dependency for one test.
async fn futures_join_all<F: std::future::Future<Output = ()> + Send + 'static>(
    futs: impl IntoIterator<Item = F>,
) {
    let handles: Vec<_> = futs.into_iter().map(tokio::spawn).collect();
    for h in handles {
        h.await.expect("case panicked");
    }
}

/// A reservation with `ttl_ms` and NO grace period, so a lapse is a hard expiry.
async fn create_without_grace(
    client: &CyclesClient,
    ttl_ms: i64,
) -> (String, Response<ReservationCreateResponse>) {
    let mut req = reserve_req(1000);
    req.ttl_ms = Some(ttl_ms);
    req.grace_period_ms = Some(0);
    let res = client.create_reservation(&req).await.expect("reserve");
    (res.body.reservation_id.clone().expect("live"), res)
}

#[tokio::test]
async fn default_timeout_keeps_a_six_second_lease_alive_over_fourteen_seconds() {
    // The case: the 10 s default timeout alone gives delay 0 for a 6 s lease (one
    // immediate extension, then a stop, and the lease expires at ~12 s). The derived timeout
    // (1000 ms, later ~2 s as the additive server grows the lead) beats every few seconds.
    let server = server_with(Regime::default()).await;
    let client = Arc::new(CyclesClient::new(Config::new(server.url(), KEY)).expect("client"));
    assert_eq!(
        client.config().request_timeout,
        Duration::from_secs(10),
        "the default timeout"
    );
    let (id, created) = create_without_grace(&client, 6000).await;
    let (hb, seen) = start_recorded(&client, &id, &created, HeartbeatConfig::new(6000));
    tokio::time::sleep(Duration::from_millis(14_000)).await; // the guarded work
    let report = hb.finish().await;
    assert_eq!(report.end, HeartbeatEnd::Finished, "{report:?}");
    assert!(report.extensions >= 2, "{report:?}");
    assert_eq!(report.failures, 0, "{report:?}");

    // Server side: every extend succeeded, and each arrived before the expiry then in force
    // (the create's, then the previous extension's): the lease never lapsed into grace.
    let requests = extend_requests(&server, &id);
    assert_eq!(requests.len() as u32, report.extensions);
    let mut expiry = created.body.expires_at_ms.expect("expires_at_ms");
    let granted: Vec<i64> = seen
        .lock()
        .unwrap()
        .iter()
        .filter_map(|e| match e {
            Event::HeartbeatExtended { expires_at_ms, .. } => Some(*expires_at_ms),
            _ => None,
        })
        .collect();
    assert_eq!(granted.len(), requests.len());
    for (request, new_expiry) in requests.iter().zip(&granted) {
        assert_eq!(request.status, Some(200), "{request:?}");
        assert!(
            request.received_at_ms <= expiry,
            "extend arrived at {} after the expiry {expiry}",
            request.received_at_ms
        );
        expiry = *new_expiry;
    }
    let detail = client.get_reservation(&id).await.expect("get").body;
    assert_eq!(detail.status, ReservationStatus::Active, "{detail:?}");
    assert!(server.now_ms() < detail.expires_at_ms);
    assert!(seen
        .lock()
        .unwrap()
        .iter()
        .all(|e| !matches!(e, Event::HeartbeatLeaseTooShort { .. })));
    client
        .commit_reservation(&id, &CommitRequest::new(key("c"), usd(900)))
        .await
        .expect("commit after 14 s of work on a 6 s lease");
}

#[tokio::test]
async fn the_derived_timeout_is_enforced_on_the_extend_attempt() {
    // The first extension is applied but answered only after 2.5 s. The configured 10 s timeout
    // would wait for it; the derived 1000 ms budget cuts the attempt off (at 900 ms), and the
    // same-key retry fits the reserve, replaying the one application.
    let server = server_with(Regime::default()).await;
    server.add_fault(fault(
        Operation::ExtendReservation,
        Fault::DelayAfterApply { ms: 2500 },
    ));
    let client = client_with_timeout(&server, 10_000);
    let (id, created) = create_without_grace(&client, 6000).await;
    let (hb, seen) = start_recorded(&client, &id, &created, HeartbeatConfig::new(6000));
    eventually("a successful retry after the cut-off", || {
        seen.lock()
            .unwrap()
            .iter()
            .any(|e| matches!(e, Event::HeartbeatExtended { .. }))
    })
    .await;
    let report = hb.finish().await;
    let requests = extend_requests(&server, &id);
    assert!(requests.len() >= 2, "{requests:?}");
    assert_eq!(requests[0].idempotency_key, requests[1].idempotency_key);
    let gap_ms = (requests[1].received_mono_us - requests[0].received_mono_us) / 1000;
    assert!(
        (900..2000).contains(&gap_ms),
        "the retry came {gap_ms} ms after the first attempt: not cut off at the derived timeout"
    );
    let failure = seen.lock().unwrap().iter().find_map(|e| match e {
        Event::HeartbeatFailed {
            error_kind,
            disposition,
            ..
        } => Some((*error_kind, disposition.clone())),
        _ => None,
    });
    assert!(
        matches!(
            failure,
            Some(("TRANSPORT_TIMEOUT", Disposition::RetryAfter { .. }))
        ),
        "{failure:?}"
    );
    let applied = server
        .ledger()
        .into_iter()
        .filter(|e| e.kind == "extend")
        .count();
    assert_eq!(
        applied as u32, report.extensions,
        "applied once per extension"
    );
    client
        .commit_reservation(&id, &CommitRequest::new(key("c"), usd(1)))
        .await
        .expect("alive");
}

#[tokio::test]
async fn a_lease_too_short_to_keep_alive_is_reported_when_the_heartbeat_starts() {
    // A 2 s lease: even the 1000 ms floor needs 3001 ms of lead. The warning comes at start,
    // before any extension, naming the smallest ttl that would work.
    let server = server_with(Regime {
        extend: cycles_local_server::ExtendClamp::MaxLead { max_lead_ms: 2000 },
        ..Regime::default()
    })
    .await;
    let client = client_with_timeout(&server, 10_000);
    let (id, created) = create(&client, 2000).await;
    let (hb, seen) = start_recorded(&client, &id, &created, HeartbeatConfig::new(2000));
    eventually("the heartbeat stops", || {
        seen.lock()
            .unwrap()
            .iter()
            .any(|e| matches!(e, Event::HeartbeatEnded { .. }))
    })
    .await;
    let report = hb.finish().await;
    assert_eq!(
        report.end,
        HeartbeatEnd::Stopped(StopReason::LeaseShorterThanRetryBudget)
    );
    let events = seen.lock().unwrap();
    let Some(Event::HeartbeatLeaseTooShort {
        reservation_id,
        lead_floor,
        min_ttl,
        timeout,
        working_timeout,
        path,
    }) = events.first()
    else {
        panic!("the first event is the warning: {events:?}");
    };
    assert_eq!(reservation_id, &id);
    assert_eq!(*path, HeartbeatPath::Primary);
    assert_eq!(*timeout, Millis::ms(1000));
    assert_eq!(*working_timeout, None);
    let rtt = created.timing.rtt();
    let rtt_ms = u64::try_from(rtt.as_micros().div_ceil(1000)).unwrap();
    assert_eq!(*min_ttl, Millis::ms(3001 + rtt_ms));
    assert!(*lead_floor <= Millis::ms(2000));
    let json = events[0].to_json();
    assert_eq!(json["kind"], "heartbeat_lease_too_short");
    assert_eq!(json["level"], "warning");
    assert!(json["message"]
        .as_str()
        .unwrap()
        .contains(&format!("ttl_ms >= {}", 3001 + rtt_ms)));
}

#[tokio::test]
async fn without_derivation_the_warning_names_a_timeout_that_would_work() {
    let server = server_with(Regime::default()).await;
    let client = client_with_timeout(&server, 10_000);
    let (id, created) = create(&client, 6000).await;
    let config = HeartbeatConfig {
        derive_timeout: false,
        ..HeartbeatConfig::new(6000)
    };
    let (hb, seen) = start_recorded(&client, &id, &created, config);
    eventually("the warning", || !seen.lock().unwrap().is_empty()).await;
    hb.finish().await;
    let events = seen.lock().unwrap();
    assert!(
        matches!(
            events.first(),
            Some(Event::HeartbeatLeaseTooShort {
                timeout,
                working_timeout: Some(working),
                ..
            }) if *timeout == Millis::ms(10_000) && *working == Millis::ms(1000)
        ),
        "{events:?}"
    );
    let _ = id;
}

/// The server on a runtime of its own, so the test runtime's task count is the client's alone.
fn server_apart() -> (tokio::runtime::Runtime, LocalServer) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("server runtime");
    let server = rt
        .block_on(LocalServer::start(common::server_config()))
        .expect("server");
    (rt, server)
}

#[test]
fn a_lease_is_no_task_until_its_first_beat_and_a_call_that_ends_first_never_spawns_one() {
    let (_server_rt, server) = server_apart();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let client = client_with_timeout(&server, 10_000);
        let (id, created) = create(&client, 60_000).await;
        let metrics = tokio::runtime::Handle::current().metrics();
        let before = metrics.num_alive_tasks();
        let (hb, seen) = start_recorded(&client, &id, &created, HeartbeatConfig::new(60_000));
        assert_eq!(
            metrics.num_alive_tasks(),
            before,
            "a lease whose first beat is ~20 s away waits in the wheel, not as a task"
        );
        let report = hb.finish().await;
        assert_eq!(metrics.num_alive_tasks(), before);
        assert_eq!(report.end, HeartbeatEnd::Finished);
        assert_eq!((report.extensions, report.failures), (0, 0));
        assert_eq!(report.path, HeartbeatPath::Primary);
        let ended: Vec<_> = seen
            .lock()
            .unwrap()
            .iter()
            .filter(|e| matches!(e, Event::HeartbeatEnded { .. }))
            .cloned()
            .collect();
        assert!(
            matches!(
                ended.as_slice(),
                [Event::HeartbeatEnded { reservation_id, end: HeartbeatEnd::Finished, extensions: 0 }]
                    if *reservation_id == id
            ),
            "{ended:?}"
        );
        assert!(extend_requests(&server, &id).is_empty());

        // Dropped instead of finished: it leaves the wheel and says it ended, as a task did.
        let (id2, created2) = create(&client, 60_000).await;
        let (hb2, seen2) = start_recorded(&client, &id2, &created2, HeartbeatConfig::new(60_000));
        drop(hb2);
        assert_eq!(metrics.num_alive_tasks(), before);
        assert!(seen2
            .lock()
            .unwrap()
            .iter()
            .any(|e| matches!(e, Event::HeartbeatEnded { end: HeartbeatEnd::Finished, .. })));
    });
}

#[tokio::test]
async fn a_lease_parked_after_a_later_one_still_beats_on_time() {
    // A 60 s lease parks first (its first beat ~20 s away); a 3.5 s lease parked after it must
    // wake the wheel for its own first beat, due ~500 ms after its create (ttl 3500, timeout
    // 500: reserve 3000).
    let server = server_with(Regime::default()).await;
    let client = client_with_timeout(&server, 500);
    let (long_id, long_created) = create(&client, 60_000).await;
    let (long_hb, _) = start_recorded(
        &client,
        &long_id,
        &long_created,
        HeartbeatConfig::new(60_000),
    );
    let (id, created) = create(&client, 3500).await;
    let (hb, seen) = start_recorded(&client, &id, &created, HeartbeatConfig::new(3500));
    // Until the beat's answer is in (the server records its arrival sooner; finishing in
    // between cancels the beat in flight, which a loaded machine made happen once).
    eventually("the short lease's first beat", || {
        seen.lock()
            .unwrap()
            .iter()
            .any(|e| matches!(e, Event::HeartbeatExtended { .. }))
    })
    .await;
    // The short lease's create is the last create the server saw.
    let create_arrival = server
        .requests()
        .into_iter()
        .filter(|r| r.operation == Some(Operation::CreateReservation))
        .map(|r| r.received_mono_us)
        .next_back()
        .expect("the create was recorded");
    let first_beat = extend_requests(&server, &id)[0].received_mono_us;
    let report = hb.finish().await;
    assert!(report.extensions >= 1, "{report:?}");
    // Scheduled 500 ms after the create's exchange, measured here between two server
    // arrival stamps: the create's own transit can make that a little less (seen: 499 ms on
    // an idle machine). What matters is that it is not the long lease's ~20 s, nor at once.
    let gap_ms = (first_beat - create_arrival) / 1000;
    assert!(
        (400..=900).contains(&gap_ms),
        "first beat {gap_ms} ms after the create arrived (scheduled 500 ms after its exchange)"
    );
    let long = long_hb.finish().await;
    assert_eq!((long.extensions, long.end), (0, HeartbeatEnd::Finished));
    assert!(extend_requests(&server, &long_id).is_empty());
}
