//! A server that echoes the API key back (the local server's `echo_api_key` fault) never gets
//! it into an error, an event, a `tracing` log line, a settlement outcome or the journal: over
//! real HTTP, for plain calls (401, 409 with the key in the code, 5xx), a heartbeat failure and
//! settlement failures (kept, rejected).

mod common;

use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use common::*;
use cycles_core::events::{Event, EventSink};
use cycles_core::lease::{FailurePolicy, Heartbeat, HeartbeatConfig};
use cycles_core::redact::REDACTED;
use cycles_core::*;
use cycles_local_server::{Fault, FaultRule, LocalServer, Operation, ServerConfig, TenantSeed};

/// The configured key: long and distinctive, so any occurrence in output is a leak.
const SECRET: &str = "cyc_live_S3cr3t/Key+Never~Echo_0123456789";

/// Everything `tracing` printed in this test binary (one global subscriber: events are also
/// emitted from runtime workers and the blocking pool, so a thread-local one would miss some).
fn log() -> &'static Mutex<Vec<u8>> {
    static LOG: OnceLock<&'static Mutex<Vec<u8>>> = OnceLock::new();
    LOG.get_or_init(|| {
        let buf: &'static Mutex<Vec<u8>> = Box::leak(Box::new(Mutex::new(Vec::new())));
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::TRACE)
            .with_ansi(false)
            .with_writer(move || LogWriter(buf))
            .finish();
        tracing::subscriber::set_global_default(subscriber).expect("one subscriber");
        buf
    })
}

struct LogWriter(&'static Mutex<Vec<u8>>);

impl Write for LogWriter {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn log_text() -> String {
    String::from_utf8_lossy(&log().lock().unwrap()).to_string()
}

async fn server_with_secret() -> LocalServer {
    log();
    LocalServer::start(ServerConfig {
        tenants: vec![TenantSeed {
            id: "acme".into(),
            api_keys: vec![SECRET.into()],
            closed: false,
        }],
        ..ServerConfig::default()
    })
    .await
    .expect("server")
}

fn config(server: &LocalServer) -> Config {
    Config::new(server.url(), SECRET).with_request_timeout(Duration::from_millis(500))
}

fn echo(op: Operation, times: u32, status: u16, code: &str) -> FaultRule {
    FaultRule {
        operation: op,
        reservation_id: None,
        skip: 0,
        times,
        every: 1,
        fault: Fault::EchoApiKey {
            status,
            code: code.into(),
        },
    }
}

fn recorder() -> (EventSink, Arc<Mutex<Vec<Event>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    let sink = EventSink::with_callback(move |e| s.lock().unwrap().push(e.clone()));
    (sink, seen)
}

/// Every way an event is shown: Debug, Display and the stable JSON.
fn shown(events: &[Event]) -> String {
    events
        .iter()
        .map(|e| format!("{e:?}\n{e}\n{}\n", e.to_json()))
        .collect()
}

fn assert_no_secret(what: &str, text: &str) {
    assert!(!text.contains(SECRET), "{what} leaks the key: {text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_calls_never_surface_an_echoed_key() {
    let s = server_with_secret().await;
    let c = CyclesClient::new(config(&s)).unwrap();
    let id = reserve_with(&c).await;
    s.add_fault(echo(Operation::GetBalances, 1, 401, "UNAUTHORIZED"));
    s.add_fault(echo(Operation::CommitReservation, 1, 409, "NO_{api_key}"));
    s.add_fault(echo(Operation::ExtendReservation, 1, 503, "INTERNAL_ERROR"));

    let balances = c.get_balances(&BalanceQuery::tenant("acme")).await;
    let commit = c
        .commit_reservation(&id, &CommitRequest::new(key("c"), usd(1)))
        .await;
    let extend = c
        .extend_reservation(&id, &ReservationExtendRequest::new(key("x"), 1000))
        .await;
    let errors = [
        (balances.unwrap_err(), ErrorKind::Unauthorized, 401),
        (
            commit.unwrap_err(),
            ErrorKind::Unknown(format!("NO_{REDACTED}")),
            409,
        ),
        (extend.unwrap_err(), ErrorKind::ServerError, 503),
    ];
    for (e, kind, status) in &errors {
        assert_eq!(e.kind(), kind, "{e:?}");
        assert_eq!(e.http_status(), Some(*status));
        let d = e.details().expect("details kept");
        let text = format!(
            "{e} {e:?} {} {:?} {} {:?}",
            e.message(),
            e.server_code(),
            serde_json::Value::Object(d.clone()),
            e.kind()
        );
        assert_no_secret("an error", &text);
        // Redacted, not dropped: the rest of what the server said survives.
        assert_eq!(
            e.message(),
            format!("API key '{REDACTED}' is not accepted here")
        );
        assert_eq!(d["received_api_key"], REDACTED);
        assert_eq!(
            d["attempts"][0],
            format!("header X-Cycles-API-Key={REDACTED}")
        );
        assert!(d.contains_key(REDACTED), "the key as an object key: {d:?}");
    }
    assert_eq!(
        errors[1].0.server_code(),
        Some(format!("NO_{REDACTED}").as_str())
    );
    assert_no_secret("the log", &log_text());
}

async fn reserve_with(c: &CyclesClient) -> String {
    c.create_reservation(&reserve_req(1000))
        .await
        .expect("reserve")
        .body
        .reservation_id
        .expect("live")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_heartbeat_failure_event_and_its_log_line_never_contain_an_echoed_key() {
    let s = server_with_secret().await;
    let c = Arc::new(CyclesClient::new(config(&s)).unwrap());
    s.add_fault(echo(Operation::ExtendReservation, 1, 503, "INTERNAL_ERROR"));
    // ttl 3500 with a 500 ms timeout: the first beat comes ~500 ms after create.
    let mut req = reserve_req(1000);
    req.ttl_ms = Some(3500);
    let created = c.create_reservation(&req).await.expect("reserve");
    let id = created.body.reservation_id.clone().expect("live");
    let (events, seen) = recorder();
    let config = HeartbeatConfig {
        events,
        policy: FailurePolicy::Warn,
        ..HeartbeatConfig::new(3500)
    };
    let hb = Heartbeat::start(c.clone(), &id, &created, config);
    let failed = |seen: &[Event]| {
        seen.iter().any(
            |e| matches!(e, Event::HeartbeatFailed { reservation_id, .. } if *reservation_id == id),
        )
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while !failed(&seen.lock().unwrap()) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no heartbeat failure"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    hb.finish().await;

    let events = seen.lock().unwrap().clone();
    let failure = events
        .iter()
        .find(|e| matches!(e, Event::HeartbeatFailed { .. }))
        .unwrap();
    assert!(failure.to_string().contains(REDACTED), "{failure}");
    assert_no_secret("heartbeat events", &shown(&events));
    let log = log_text();
    let line = format!("heartbeat failure on {id}");
    assert!(log.contains(&line), "the failure was logged: {log}");
    assert_no_secret("the log", &log);
}

fn settle_config(seen_sink: EventSink) -> SettleConfig {
    SettleConfig {
        max_attempts: 2,
        backoff_base: Duration::from_millis(10),
        backoff_cap: Duration::from_millis(20),
        events: seen_sink,
        ..SettleConfig::default()
    }
}

fn journal_text(dir: &Path) -> String {
    let mut out = String::new();
    for part in std::fs::read_dir(dir).unwrap().flatten() {
        for f in std::fs::read_dir(part.path()).unwrap().flatten() {
            out.push_str(&std::fs::read_to_string(f.path()).unwrap_or_default());
        }
    }
    out
}

fn settlement(id: &str) -> Settlement {
    Settlement {
        reservation_id: id.to_string(),
        commit: CommitRequest::new(key("commit"), usd(400)),
        fallback: Some(EventFallback {
            subject: subject(),
            action: action(),
            overage_policy: None,
        }),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settlement_failures_never_journal_emit_or_return_an_echoed_key() {
    let s = server_with_secret().await;
    let dir = tempfile::tempdir().unwrap();
    let c = CyclesClient::new(config(&s)).unwrap();
    let (sink, seen) = recorder();
    let settler = Settler::new(
        &config(&s).with_journal_dir(dir.path()),
        settle_config(sink),
    )
    .unwrap();

    // Auth failure: the record is kept for replay, the outcome is pending.
    let kept = reserve_with(&c).await;
    s.add_fault(echo(Operation::CommitReservation, 0, 401, "UNAUTHORIZED"));
    let out = settler.settle(settlement(&kept)).await;
    assert!(
        matches!(
            out,
            SettleOutcome::Pending {
                journaled: true,
                ..
            }
        ),
        "{out:?}"
    );
    assert_no_secret("a pending outcome", &format!("{out:?}"));
    let journal = journal_text(dir.path());
    assert!(journal.contains(&kept), "the record is kept: {journal}");
    assert_no_secret("the journal", &journal);

    // An unknown code carrying the key: kept too, its kind redacted.
    s.clear_faults();
    let unknown = reserve_with(&c).await;
    s.add_fault(echo(Operation::CommitReservation, 0, 409, "NO_{api_key}"));
    let out = settler.settle(settlement(&unknown)).await;
    match &out {
        SettleOutcome::Pending { last_error, .. } => assert_eq!(
            last_error.as_ref(),
            Some(&ErrorKind::Unknown(format!("NO_{REDACTED}")))
        ),
        other => panic!("expected pending, got {other:?}"),
    }

    // A terminal rejection: the record is removed and the rejection returned, redacted.
    s.clear_faults();
    let rejected = reserve_with(&c).await;
    s.add_fault(echo(
        Operation::CommitReservation,
        0,
        409,
        "RESERVATION_FINALIZED",
    ));
    let out = settler.settle(settlement(&rejected)).await;
    let SettleOutcome::Rejected(r) = &out else {
        panic!("expected a rejection, got {out:?}");
    };
    assert_eq!(r.kind, ErrorKind::ReservationFinalized);
    assert_eq!(
        r.message,
        format!("API key '{REDACTED}' is not accepted here")
    );
    assert_no_secret("a rejection", &format!("{out:?}"));

    let events = seen.lock().unwrap().clone();
    let failures = events
        .iter()
        .filter(|e| matches!(e, Event::SettlementAttemptFailed { .. }))
        .count();
    assert!(
        failures >= 3,
        "every failed attempt is an event: {events:?}"
    );
    assert_no_secret("settlement events", &shown(&events));
    assert_no_secret("the journal", &journal_text(dir.path()));
    assert_no_secret("the log", &log_text());
}
