//! The guarded lifecycle over real HTTP against the local server: reserve, heartbeat while the
//! work runs, settle or release. CR-CORE-003 and CR-BOUNDARY-001 of the recovery profile are
//! bound to tests here (see conformance/adapters/rust-map.json).

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use cycles_core::events::{Disposition, Event, EventSink};
use cycles_core::guard::{Guard, GuardError, GuardSpec, Usage};
use cycles_core::lease::FailurePolicy;
use cycles_core::settle::{SettleConfig, SettleOutcome, Settler};
use cycles_core::*;
use cycles_local_server::{
    Fault, FaultRule, LocalServer, Operation, Regime, RequestRecord, ServerConfig,
};

struct Setup {
    server: LocalServer,
    guard: Guard,
    events: Arc<Mutex<Vec<Event>>>,
    _store: common::store::TestJournal,
    _journal: tempfile::TempDir,
}

/// A server with `regime`, a client with a 500 ms timeout (heartbeat reserve 3 s), a journal
/// in a temp dir, and every event recorded.
async fn setup(regime: Regime) -> Setup {
    setup_with(ServerConfig {
        regime,
        ..common::server_config()
    })
    .await
}

/// [`setup`] with a whole server configuration.
async fn setup_with(server_config: ServerConfig) -> Setup {
    let server = LocalServer::start(server_config).await.unwrap();
    let journal = tempfile::tempdir().unwrap();
    // The store under test (CYCLES_TEST_JOURNAL_STORE): the directory, or a Redis.
    let store = common::store::TestJournal::new(journal.path().join("journal"));
    let config = store
        .configure(Config::new(server.url(), KEY).with_request_timeout(Duration::from_millis(500)));
    let events = Arc::new(Mutex::new(Vec::new()));
    let sink_events = events.clone();
    let sink = EventSink::with_callback(move |e| sink_events.lock().unwrap().push(e.clone()));
    let settler = Settler::new(
        &config,
        SettleConfig {
            events: sink.clone(),
            ..SettleConfig::default()
        },
    )
    .unwrap();
    let client = Arc::new(CyclesClient::new(config).unwrap());
    Setup {
        server,
        guard: Guard::new(client, settler, sink),
        events,
        _store: store,
        _journal: journal,
    }
}

fn spec(ttl_ms: i64) -> GuardSpec {
    GuardSpec {
        ttl_ms,
        ..GuardSpec::new(key("guard"), subject(), action(), usd(1000))
    }
}

fn settlement_requests(server: &LocalServer) -> Vec<RequestRecord> {
    server
        .requests()
        .into_iter()
        .filter(|r| {
            matches!(
                r.operation,
                Some(
                    Operation::CommitReservation
                        | Operation::CreateEvent
                        | Operation::ReleaseReservation
                )
            )
        })
        .collect()
}

fn ops(server: &LocalServer) -> Vec<(Operation, Option<String>)> {
    server
        .requests()
        .into_iter()
        .filter_map(|r| r.operation.map(|o| (o, r.idempotency_key)))
        .collect()
}

#[tokio::test]
async fn guarded_work_commits_its_actual_and_returns_its_value() {
    let s = setup(Regime::default()).await;
    let done = s
        .guard
        .run(spec(60_000), |usage: Usage| async move {
            usage.set_actual(400).expect("reported before the end");
            Ok::<_, std::io::Error>("model output")
        })
        .await
        .expect("guarded success");
    assert_eq!(done.value, "model output");
    assert_eq!(done.actual, usd(400));
    assert!(matches!(done.settlement, SettleOutcome::Committed(ref c) if c.charged == usd(400)));
    let kinds: Vec<String> = s.server.ledger().into_iter().map(|e| e.kind).collect();
    assert_eq!(kinds, ["reserve", "commit"]);
    assert!(
        s.guard.settler().pending().await.is_empty(),
        "a settled record leaves the journal"
    );
}

/// CR-CORE-003: a heartbeat transport failure is observable (reservation id and disposition),
/// the work continues under the warn policy, and the final settlement is made.
#[tokio::test]
async fn heartbeat_transport_failure_is_observable_and_non_fatal() {
    let s = setup(Regime::default()).await;
    s.server.add_fault(FaultRule {
        operation: Operation::ExtendReservation,
        reservation_id: None,
        skip: 0,
        times: 1,
        every: 1,
        fault: Fault::ConnectionReset,
    });
    // ttl 3500 ms: the first beat comes ~0.5 s after create and fails; the same-key retry
    // follows inside the retry window; the work outlives the original TTL.
    let done = s
        .guard
        .run(spec(3500), |usage: Usage| async move {
            tokio::time::sleep(Duration::from_millis(4000)).await;
            usage.set_actual(700).expect("reported before the end");
            Ok::<_, std::io::Error>(42)
        })
        .await
        .expect("the work continued and settled");
    assert_eq!(done.value, 42, "guarded_action_continues_under_warn_policy");
    assert!(
        matches!(done.settlement, SettleOutcome::Committed(_)),
        "final_settlement_is_attempted"
    );
    let lease = done.lease.expect("heartbeat ran");
    assert!(lease.failures >= 1 && lease.extensions >= 1, "{lease:?}");

    // heartbeat_failure_reports_reservation_and_disposition
    let events = s.events.lock().unwrap();
    let failure = events
        .iter()
        .find_map(|e| match e {
            Event::HeartbeatFailed {
                reservation_id,
                error_kind,
                disposition,
                ..
            } => Some((reservation_id, *error_kind, disposition)),
            _ => None,
        })
        .expect("the failure is an event");
    assert_eq!(failure.0, &done.reservation_id);
    assert_eq!(failure.1, "TRANSPORT_RESET");
    assert!(matches!(failure.2, Disposition::RetryAfter { .. }));

    // Choreography: extend, extend with the same key, ..., commit.
    let ops = ops(&s.server);
    let extends: Vec<&Option<String>> = ops
        .iter()
        .filter(|(o, _)| *o == Operation::ExtendReservation)
        .map(|(_, k)| k)
        .collect();
    assert!(
        extends.len() >= 2 && extends[0] == extends[1],
        "extend then extend_same_key: {ops:?}"
    );
    assert_eq!(
        ops.last().map(|(o, _)| *o),
        Some(Operation::CommitReservation)
    );
    assert_eq!(
        s.server
            .ledger()
            .iter()
            .filter(|e| e.kind == "commit")
            .count(),
        1
    );
}

/// CR-BOUNDARY-001: without a known actual no commit or event is sent, and the missing actual
/// (or the work's failure) is surfaced.
#[tokio::test]
async fn missing_actual_is_surfaced_without_settlement() {
    let s = setup(Regime::default()).await;
    // The work "succeeds" but never reports what it cost.
    let err = s
        .guard
        .run(spec(60_000), |_usage: Usage| async move {
            Ok::<_, std::io::Error>(())
        })
        .await
        .expect_err("a missing actual is an error");
    assert!(
        matches!(
            err,
            GuardError::MissingActual {
                release_error: None,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err
        .to_string()
        .contains("without reporting its actual amount; nothing was committed, and the reservation was released"));
    // No commit or event without an actual; the estimate is given back in the same call
    // (issue 28) instead of staying held until the lease expires.
    let requests = settlement_requests(&s.server);
    assert_eq!(requests.len(), 1, "{requests:?}");
    assert_eq!(requests[0].operation, Some(Operation::ReleaseReservation));
    assert!(requests[0]
        .idempotency_key
        .as_deref()
        .is_some_and(|k| k.ends_with(":release")));
    assert_eq!(
        s.server
            .ledger()
            .iter()
            .map(|e| e.kind.as_str())
            .collect::<Vec<_>>(),
        ["reserve", "release"]
    );

    // The work fails before any usage is known: its error comes back unchanged, no commit or
    // event is sent, and the reservation is released.
    let err = s
        .guard
        .run(spec(60_000), |_usage: Usage| async move {
            Err::<(), _>(std::io::Error::other("provider down"))
        })
        .await
        .expect_err("the work failed");
    let GuardError::Work {
        error,
        settlement,
        release_error,
        ..
    } = err
    else {
        panic!("work error expected")
    };
    assert_eq!(error.to_string(), "provider down");
    assert!(settlement.is_none() && release_error.is_none());
    let requests = settlement_requests(&s.server);
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[1].operation, Some(Operation::ReleaseReservation));
    assert!(s
        .server
        .ledger()
        .iter()
        .all(|e| e.kind != "commit" && e.kind != "event"));
    assert!(
        s.guard.settler().pending().await.is_empty(),
        "nothing journaled without an actual"
    );
}

#[tokio::test]
async fn a_broken_stream_settles_the_usage_already_known() {
    let s = setup(Regime::default()).await;
    let err = s
        .guard
        .run(spec(60_000), |usage: Usage| async move {
            for chunk in [120, 80, 50] {
                usage.add(chunk).expect("reported before the end");
            }
            Err::<(), _>(std::io::Error::other("stream reset by peer"))
        })
        .await
        .expect_err("the stream broke");
    let GuardError::Work {
        error, settlement, ..
    } = err
    else {
        panic!("work error expected")
    };
    assert_eq!(error.to_string(), "stream reset by peer");
    assert!(matches!(settlement, Some(SettleOutcome::Committed(ref c)) if c.charged == usd(250)));
    assert!(settlement_requests(&s.server)
        .iter()
        .all(|r| r.operation != Some(Operation::ReleaseReservation)));
}

#[tokio::test]
async fn a_denied_reservation_runs_no_work() {
    let s = setup(Regime::default()).await;
    let ran = Arc::new(Mutex::new(false));
    let flag = ran.clone();
    let err = s
        .guard
        .run(
            GuardSpec::new(key("big"), subject(), action(), usd(i64::MAX / 2)),
            |_u: Usage| async move {
                *flag.lock().unwrap() = true;
                Ok::<_, std::io::Error>(())
            },
        )
        .await
        .expect_err("denied");
    let GuardError::Reserve(e) = err else {
        panic!("reserve error expected")
    };
    assert_eq!(e.kind(), &ErrorKind::BudgetExceeded);
    assert!(!*ran.lock().unwrap());
}

#[tokio::test]
async fn a_create_timeout_gets_one_same_key_retry() {
    let s = setup(Regime::default()).await;
    s.server.add_fault(FaultRule {
        operation: Operation::CreateReservation,
        reservation_id: None,
        skip: 0,
        times: 1,
        every: 1,
        fault: Fault::DelayAfterApply { ms: 900 },
    });
    let done = s
        .guard
        .run(spec(60_000), |usage: Usage| async move {
            usage.set_actual(10).expect("reported before the end");
            Ok::<_, std::io::Error>(())
        })
        .await
        .expect("the same-key retry recovered the reservation");
    let creates: Vec<_> = s
        .server
        .requests()
        .into_iter()
        .filter(|r| r.operation == Some(Operation::CreateReservation))
        .collect();
    assert_eq!(creates.len(), 2);
    assert_eq!(creates[0].idempotency_key, creates[1].idempotency_key);
    assert!(creates[1].replay, "the retry replayed the applied create");
    assert_eq!(
        s.server
            .ledger()
            .iter()
            .filter(|e| e.kind == "reserve")
            .count(),
        1
    );
    assert!(matches!(done.settlement, SettleOutcome::Committed(_)));
}

#[tokio::test]
async fn fail_on_finalize_reports_the_lapse_after_settling() {
    let s = setup(Regime {
        max_extensions: Some(0),
        ..Regime::default()
    })
    .await;
    let err = s
        .guard
        .run(
            GuardSpec {
                policy: FailurePolicy::FailOnFinalize,
                ..spec(3500)
            },
            |usage: Usage| async move {
                tokio::time::sleep(Duration::from_millis(800)).await; // the first beat is refused
                usage.set_actual(5).expect("reported before the end");
                Ok::<_, std::io::Error>(())
            },
        )
        .await
        .expect_err("the lapse is reported");
    let GuardError::HeartbeatLapsed { lapse, settlement } = err else {
        panic!("lapse expected")
    };
    assert!(format!("{:?}", lapse.reason).contains("MAX_EXTENSIONS_EXCEEDED"));
    assert!(
        matches!(settlement, SettleOutcome::Committed(_)),
        "the known actual is still settled"
    );
}

#[tokio::test]
async fn cancel_policy_signals_the_work() {
    let s = setup(Regime::default()).await;
    s.server.add_fault(FaultRule {
        operation: Operation::ExtendReservation,
        reservation_id: None,
        skip: 0,
        times: 0,
        every: 1,
        fault: Fault::RateLimited {
            retry_after: Some("60".into()),
        },
    });
    let done = s
        .guard
        .run(
            GuardSpec {
                policy: FailurePolicy::Cancel,
                ..spec(3500)
            },
            |usage: Usage| async move {
                let token = usage.cancellation();
                let cancelled = tokio::select! {
                    _ = token.cancelled() => true,
                    _ = tokio::time::sleep(Duration::from_secs(10)) => false,
                };
                usage.set_actual(3).expect("reported before the end");
                Ok::<_, std::io::Error>(cancelled)
            },
        )
        .await
        .expect("settled");
    assert!(done.value, "the work saw the cancellation");
    assert!(matches!(done.settlement, SettleOutcome::Committed(_)));
}

/// The two-phase form bindings use for context managers: begin, let host code run, finish.
#[tokio::test]
async fn begin_and_finish_is_the_same_lifecycle_in_two_phases() {
    use cycles_core::guard::Finished;
    let s = setup(Regime::default()).await;
    let active = s.guard.begin(spec(60_000)).await.expect("reserved");
    active.usage().add(30).expect("reported before the end");
    active.usage().add(12).expect("reported before the end");
    let id = active.reservation_id().to_string();
    match active.finish(true).await {
        Finished::Settled {
            reservation_id,
            actual,
            settlement,
            ..
        } => {
            assert_eq!(reservation_id, id);
            assert_eq!(actual, usd(42));
            assert!(matches!(settlement, SettleOutcome::Committed(_)));
        }
        other => panic!("expected a settlement, got {other:?}"),
    }
    let active = s.guard.begin(spec(60_000)).await.expect("reserved");
    assert!(matches!(
        active.finish(false).await,
        Finished::WorkFailed {
            settlement: None,
            release_error: None,
            ..
        }
    ));
    let kinds: Vec<String> = s.server.ledger().into_iter().map(|e| e.kind).collect();
    assert_eq!(kinds, ["reserve", "commit", "reserve", "release"]);
}

/// A report after the action ended would not be settled: it is refused, not dropped unseen,
/// and what was settled stays what was known at the end.
#[tokio::test]
async fn usage_reported_after_the_end_is_refused() {
    use cycles_core::guard::Finished;
    let s = setup(Regime::default()).await;
    let active = s.guard.begin(spec(60_000)).await.expect("reserved");
    let usage = active.usage().clone();
    usage.set_actual(40).expect("reported before the end");
    assert!(matches!(
        active.finish(true).await,
        Finished::Settled { ref actual, .. } if *actual == usd(40)
    ));
    for refused in [
        usage.set_actual(99),
        usage.add(1),
        usage.set_metrics_json(r#"{"tokens_input": 3}"#),
        usage.set_metadata_json(r#"{"late": true}"#),
    ] {
        let e = refused.expect_err("a late report is refused");
        assert_eq!(e.kind(), &ErrorKind::InvalidArgument);
        assert!(e.message().contains("would not be settled"), "{e}");
    }
    assert_eq!(usage.actual(), Some(40));
    let commits: Vec<_> = s
        .server
        .ledger()
        .into_iter()
        .filter(|e| e.kind == "commit")
        .collect();
    assert_eq!(commits.len(), 1);
}

/// Finishes a guard whose reservation expired on the server (clock moved past ttl + grace, no
/// heartbeat), so its commit answers 410 and the settlement falls back to an event.
async fn finish_after_expiry(s: &Setup, spec: GuardSpec, actual: i64) -> SettleOutcome {
    use cycles_core::guard::Finished;
    let active = s.guard.begin(spec).await.expect("reserved");
    s.server.advance_clock(5_000);
    active
        .usage()
        .set_actual(actual)
        .expect("reported before the end");
    match active.finish(true).await {
        Finished::Settled { settlement, .. } => settlement,
        other => panic!("expected a settlement, got {other:?}"),
    }
}

fn expiring(spec: GuardSpec) -> GuardSpec {
    GuardSpec {
        ttl_ms: 1_000,
        grace_period_ms: Some(0),
        heartbeat: false,
        ..spec
    }
}

/// After the event fallback the amount applied is reported like a commit's: the server sent
/// no `charged` (nothing was capped), so it is the event's whole actual.
#[tokio::test]
async fn an_event_fallback_reports_the_actual_it_applied() {
    let s = setup(Regime::default()).await;
    let out = finish_after_expiry(&s, expiring(spec(1_000)), 321).await;
    let SettleOutcome::RecoveredViaEvent(ref rec) = out else {
        panic!("expected a recovery via event, got {out:?}");
    };
    assert_eq!(rec.response.charged, None, "the server capped nothing");
    assert_eq!(out.charged(), Some(&usd(321)));
    let applied: Vec<_> = s
        .server
        .ledger()
        .into_iter()
        .filter(|e| e.kind != "reserve")
        .map(|e| (e.kind, e.amount))
        .collect();
    assert_eq!(applied, [("event".to_string(), Some(321))]);
}

/// When the server caps the event (`ALLOW_IF_AVAILABLE` over a small budget) its `charged` is
/// the amount applied, not the actual that was sent.
#[tokio::test]
async fn a_capped_event_fallback_reports_the_servers_charged() {
    let s = setup_with(ServerConfig {
        budgets: vec![cycles_local_server::BudgetSeed {
            allocated: 1_000,
            ..Default::default()
        }],
        ..ServerConfig::default()
    })
    .await;
    let capped = GuardSpec {
        overage_policy: Some(OveragePolicy::AllowIfAvailable),
        ..expiring(GuardSpec::new(key("guard"), subject(), action(), usd(500)))
    };
    let out = finish_after_expiry(&s, capped, 5_000).await;
    let SettleOutcome::RecoveredViaEvent(ref rec) = out else {
        panic!("expected a recovery via event, got {out:?}");
    };
    let event = s
        .server
        .ledger()
        .into_iter()
        .find(|e| e.kind == "event")
        .expect("the event applied");
    let applied = event.amount.expect("an applied amount");
    assert!(applied < 5_000, "the server capped the actual: {applied}");
    assert_eq!(rec.response.charged, Some(usd(applied)));
    assert_eq!(out.charged(), Some(&usd(applied)));
}

/// Waits (bounded) until the ledger holds an entry of `kind` for a non-reserve mutation.
async fn await_ledger(server: &LocalServer, kind: &str) -> Vec<(String, Option<i64>)> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let applied: Vec<_> = server
            .ledger()
            .into_iter()
            .filter(|e| e.kind != "reserve")
            .map(|e| (e.kind, e.amount))
            .collect();
        if applied.iter().any(|(k, _)| k == kind) || tokio::time::Instant::now() > deadline {
            return applied;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A guard dropped without `finish` (its host abandoned it) is finished as failed work in the
/// background: the known usage is settled once, and the heartbeat stops.
#[tokio::test]
async fn a_dropped_guard_settles_its_known_usage() {
    let s = setup(Regime::default()).await;
    let extends = |s: &Setup| {
        s.server
            .requests()
            .iter()
            .filter(|r| r.operation == Some(Operation::ExtendReservation))
            .count()
    };
    let active = s.guard.begin(spec(2_000)).await.expect("reserved");
    // The live heartbeat extends the 2 s lease well within 1.5 s ...
    let started = tokio::time::Instant::now();
    while extends(&s) == 0 {
        assert!(
            started.elapsed() < Duration::from_millis(1_500),
            "no heartbeat"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    active.usage().add(70).expect("reported before the end");
    drop(active);
    let applied = await_ledger(&s.server, "commit").await;
    let settled: Vec<_> = applied.iter().filter(|(k, _)| k != "extend").collect();
    assert_eq!(settled, [&("commit".to_string(), Some(70))], "settled once");
    // ... and extends nothing once the dropped guard was finished.
    let before = extends(&s);
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert_eq!(extends(&s), before, "the heartbeat stopped");
}

/// A guard dropped before any usage is known releases its reservation.
#[tokio::test]
async fn a_dropped_guard_without_usage_releases() {
    let s = setup(Regime::default()).await;
    let active = s.guard.begin(spec(60_000)).await.expect("reserved");
    drop(active);
    assert_eq!(
        await_ledger(&s.server, "release").await,
        [("release".to_string(), Some(1000))]
    );
}

/// A negative actual cannot be carried: nothing is committed, and the estimate is released
/// in the same call instead of staying held (issue 28).
#[tokio::test]
async fn a_negative_actual_releases_the_reservation() {
    let s = setup(Regime::default()).await;
    let err = s
        .guard
        .run(spec(60_000), |usage: Usage| async move {
            usage.set_actual(-5).unwrap();
            Ok::<_, std::io::Error>(())
        })
        .await
        .expect_err("a negative actual is an error");
    let GuardError::InvalidActual {
        actual,
        release_error,
        ..
    } = &err
    else {
        panic!("invalid actual expected: {err:?}")
    };
    assert_eq!((*actual, release_error.is_none()), (-5, true));
    assert!(
        err.to_string()
            .ends_with("and the reservation was released"),
        "{err}"
    );
    let kinds: Vec<String> = s.server.ledger().iter().map(|e| e.kind.clone()).collect();
    assert_eq!(kinds, ["reserve", "release"]);
}

/// A release that fails is said so: the error names it and that the estimate stays held.
#[tokio::test]
async fn a_failed_release_after_a_missing_actual_is_reported() {
    let s = setup(Regime::default()).await;
    s.server.add_fault(FaultRule {
        operation: Operation::ReleaseReservation,
        reservation_id: None,
        skip: 0,
        times: 0,
        every: 1,
        fault: Fault::ServerError { status: 503 },
    });
    let err = s
        .guard
        .run(spec(60_000), |_usage: Usage| async move {
            Ok::<_, std::io::Error>(())
        })
        .await
        .expect_err("missing actual");
    let GuardError::MissingActual { release_error, .. } = &err else {
        panic!("missing actual expected: {err:?}")
    };
    assert_eq!(
        release_error.as_ref().map(|e| e.kind().clone()),
        Some(ErrorKind::ServerError)
    );
    assert!(
        err.to_string()
            .contains("releasing the reservation failed (SERVER_ERROR"),
        "{err}"
    );
    assert!(
        err.to_string().ends_with("until the lease expires"),
        "{err}"
    );
}

/// Under `ALLOW_WITH_CAPS` the active guard carries the decision and the caps the work should
/// honour; an explicit release gives the estimate back, and a release after usage was
/// reported settles that usage instead of dropping it.
#[tokio::test]
async fn caps_decision_and_explicit_release() {
    let caps = cycles_local_server::CapsSeed {
        max_tokens: Some(256),
        tool_denylist: Some(vec!["shell".into()]),
        ..Default::default()
    };
    let s = setup_with(ServerConfig {
        budgets: vec![cycles_local_server::BudgetSeed {
            caps: Some(caps),
            ..Default::default()
        }],
        ..common::server_config()
    })
    .await;
    let active = s.guard.begin(spec(60_000)).await.unwrap();
    assert_eq!(active.decision(), &Decision::AllowWithCaps);
    let got = active.caps().expect("caps under ALLOW_WITH_CAPS");
    assert_eq!(got.max_tokens, Some(256));
    assert_eq!(
        got.tool_denylist.as_deref(),
        Some(&["shell".to_string()][..])
    );
    assert_eq!(got.tool_allowlist, None);
    let id = active.reservation_id().to_string();
    let done = active.release(Some("the caps are too tight".into())).await;
    let guard::Finished::Released {
        reservation_id,
        release_error: None,
        ..
    } = done
    else {
        panic!("released expected: {done:?}")
    };
    assert_eq!(reservation_id, id);
    let release = s
        .server
        .requests()
        .into_iter()
        .find(|r| r.operation == Some(Operation::ReleaseReservation))
        .expect("a release was sent");
    assert!(release
        .body
        .as_deref()
        .is_some_and(|b| b.contains("the caps are too tight")));

    // Usage reported before the release is settled, never dropped.
    let active = s.guard.begin(spec(60_000)).await.unwrap();
    assert!(active.check_release().is_ok());
    active.usage().add(40).unwrap();
    let refused = active.check_release().unwrap_err();
    assert_eq!(refused.kind(), &ErrorKind::InvalidArgument);
    assert!(refused.message().contains("a release would drop it"));
    // Released anyway (a report that raced the check): the usage is settled instead.
    let done = active.release(None).await;
    assert!(
        matches!(done, guard::Finished::Settled { ref actual, .. } if actual.amount == 40),
        "{done:?}"
    );
    let kinds: Vec<String> = s.server.ledger().iter().map(|e| e.kind.clone()).collect();
    assert_eq!(kinds, ["reserve", "release", "reserve", "commit"]);

    // A plain budget answers ALLOW without caps.
    let plain = setup(Regime::default()).await;
    let active = plain.guard.begin(spec(60_000)).await.unwrap();
    assert_eq!((active.decision(), active.caps()), (&Decision::Allow, None));
    active.release(None).await;
}

/// A create whose response was lost after the server applied it is retried at once in the
/// same request slot (found by the load run, issue 32: requeued behind a burst, the retry
/// spent its timeout waiting and the applied reservation was left held until its TTL).
/// One slot; H holds it, A (the guard) and then B queue for it; A's first create is applied
/// and reset; B's request would hold the slot until its own timeout, and A's retry is slow:
/// only a retry sent at once, with a whole timeout, gets its replay in time.
#[tokio::test]
async fn create_retry_after_a_lost_response_is_sent_at_once_in_its_slot() {
    let server = LocalServer::start(common::server_config()).await.unwrap();
    let rule = |operation, skip, fault| FaultRule {
        operation,
        reservation_id: None,
        skip,
        times: 1,
        every: 1,
        fault,
    };
    server.add_fault(rule(Operation::GetBalances, 0, Fault::Delay { ms: 900 }));
    server.add_fault(rule(Operation::GetBalances, 1, Fault::Delay { ms: 3000 }));
    server.add_fault(rule(
        Operation::CreateReservation,
        0,
        Fault::DropResponseAfterApply,
    ));
    server.add_fault(rule(
        Operation::CreateReservation,
        1,
        Fault::Delay { ms: 1050 },
    ));
    let journal = tempfile::tempdir().unwrap();
    let config = Config::new(server.url(), KEY)
        .with_request_timeout(Duration::from_millis(1500))
        .with_max_concurrent_requests(1)
        .with_journal_dir(journal.path());
    let client = Arc::new(CyclesClient::new(config.clone()).unwrap());
    let guard = Guard::new(
        client.clone(),
        Settler::new(&config, SettleConfig::default()).unwrap(),
        EventSink::tracing_only(),
    );
    let balances = |c: Arc<CyclesClient>| async move {
        let _ = c.get_balances(&BalanceQuery::tenant("acme")).await;
    };
    let h = tokio::spawn(balances(client.clone()));
    tokio::time::sleep(Duration::from_millis(100)).await;
    let a_spec = GuardSpec {
        heartbeat: false,
        ..GuardSpec::new(key("burst"), subject(), action(), usd(10))
    };
    let a_key = a_spec.idempotency_key.clone();
    let a = async {
        guard
            .run(a_spec, |usage: Usage| async move { usage.set_actual(7) })
            .await
    };
    let b = async {
        tokio::time::sleep(Duration::from_millis(100)).await;
        balances(client.clone()).await;
    };
    let (done, ()) = tokio::join!(a, b);
    h.await.unwrap();
    let done = done.expect("the retry's replay made the reservation");
    assert!(matches!(done.settlement, SettleOutcome::Committed(_)));
    let mine: Vec<(String, Option<i64>)> = server
        .ledger()
        .into_iter()
        .filter(|e| e.idempotency_key.starts_with(&a_key))
        .map(|e| (e.kind, e.amount))
        .collect();
    assert_eq!(
        mine,
        [("reserve".into(), Some(10)), ("commit".into(), Some(7))]
    );
    let creates: Vec<(Option<u16>, bool)> = server
        .requests()
        .into_iter()
        .filter(|r| r.operation == Some(Operation::CreateReservation))
        .map(|r| (r.status, r.replay))
        .collect();
    assert_eq!(creates, [(None, false), (Some(200), true)], "{creates:?}");
}
