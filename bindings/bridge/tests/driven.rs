//! Calls driven on their caller's thread (`task::start` from the third call on a thread), over
//! real HTTP against the local server on a runtime of its own: what such a call starts outlives
//! it on core's runtime (a guard's heartbeat beats while its thread does other things), and the
//! thread's connections never serve anyone else.

#![allow(clippy::result_large_err)] // ErrorFields: see the crate root

mod common;

use std::sync::{mpsc, Arc};
use std::time::Duration;

use common::journaled_client;
use cycles_bridge::task::{self, DRIVE_FROM_CALL};
use cycles_bridge::{ClientHandle, ErrorFields, Lifecycle};
use cycles_core::runtime;
use cycles_local_server::{LocalServer, Operation, ServerConfig};
use serde_json::{json, Value};

/// One test at a time: one of them counts this process's open descriptors.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

struct Setup {
    _serial: std::sync::MutexGuard<'static, ()>,
    server: LocalServer,
    client: Arc<ClientHandle>,
    _journal: tempfile::TempDir,
    _rt: tokio::runtime::Runtime,
}

fn setup() -> Setup {
    let serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt
        .block_on(LocalServer::start(ServerConfig::default()))
        .unwrap();
    let journal = tempfile::tempdir().unwrap();
    let client = Arc::new(journaled_client(&server, journal.path()));
    Setup {
        _serial: serial,
        server,
        client,
        _journal: journal,
        _rt: rt,
    }
}

/// A `get_reservation` of an unknown id: one round trip, a typed 404.
fn probe(c: &ClientHandle) -> cycles_bridge::task::Blocking<Result<u16, ErrorFields>> {
    let call = c
        .prepare("get_reservation", r#"{"reservation_id":"probe"}"#)
        .unwrap();
    let run = call.run();
    task::start(async move {
        match run.await {
            Ok(r) => Ok(r.status),
            Err(e) => e.http_status.ok_or(e),
        }
    })
    .unwrap()
}

/// Makes this thread's next blocking call a driven one.
fn warm_up(c: &ClientHandle) {
    for _ in 1..DRIVE_FROM_CALL {
        let p = probe(c);
        assert!(!p.driven_here());
        assert_eq!(p.finish().unwrap().unwrap(), 404);
    }
}

fn spec(key: &str) -> String {
    json!({
        "idempotency_key": key,
        "subject": {"tenant": "acme"},
        "action": {"kind": "llm.completion", "name": "driven-test"},
        "estimate": {"unit": "USD_MICROCENTS", "amount": 1000},
        "ttl_ms": 1000,
    })
    .to_string()
}

#[test]
fn a_driven_guard_beats_while_its_thread_is_busy_and_settles_through_the_journal() {
    let s = setup();
    let lc = Lifecycle::new(s.client.live().unwrap(), s.client.config(), None, None).unwrap();
    warm_up(&s.client);
    let begin = task::start(lc.begin(&spec("driven-guard-1")).unwrap()).unwrap();
    assert!(begin.driven_here());
    let active = begin.finish().unwrap().unwrap();
    let id = active.reservation_id().to_string();

    // The thread is away (not waiting on any call) past the whole 1 s TTL: only a heartbeat
    // on core's runtime keeps the reservation alive.
    std::thread::sleep(Duration::from_millis(1600));
    let extends = s
        .server
        .requests()
        .iter()
        .filter(|r| {
            r.operation == Some(Operation::ExtendReservation)
                && r.reservation_id.as_deref() == Some(id.as_str())
        })
        .count();
    assert!(extends >= 1, "no extend while the thread was away");

    active
        .usage()
        .set_actual(400)
        .expect("reported before the end");
    let finish = task::start(active.finish(true).unwrap()).unwrap();
    assert!(finish.driven_here());
    let finished: Value = serde_json::from_str(&finish.finish().unwrap()).unwrap();
    assert_eq!(
        finished["settlement"]["status"],
        json!("committed"),
        "{finished}"
    );
    assert_eq!(finished["actual"], json!(400));
    let closed = task::start(lc.close(Duration::ZERO))
        .unwrap()
        .finish()
        .unwrap();
    let report: Value = serde_json::from_str(&closed).unwrap();
    assert_eq!(report["remaining"], json!([]), "{report}");
}

#[test]
fn a_threads_connections_serve_no_one_else() {
    let s = setup();
    let client = s.client.clone();
    let (parked_tx, parked_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    // A thread that makes driven calls (its own connections), then stops waiting on anything.
    let parked = std::thread::spawn(move || {
        warm_up(&client);
        for _ in 0..3 {
            let p = probe(&client);
            assert!(p.driven_here());
            assert_eq!(p.finish().unwrap().unwrap(), 404);
        }
        parked_tx.send(()).unwrap();
        release_rx.recv().unwrap();
        // Its connections still work once it waits again.
        assert_eq!(probe(&client).finish().unwrap().unwrap(), 404);
    });
    parked_rx.recv().unwrap();

    // Calls on core's runtime (an async host's) and on another thread go on meanwhile; one
    // handed a connection the parked thread drives would stall into its request timeout
    // (TIMEOUT, not the server's 404).
    let rt = runtime::handle().unwrap();
    for _ in 0..5 {
        let call = s
            .client
            .prepare("get_reservation", r#"{"reservation_id":"probe"}"#)
            .unwrap();
        let e = rt.block_on(task::joined(call.run())).unwrap_err();
        assert_eq!(e.http_status, Some(404));
    }
    let other = s.client.clone();
    std::thread::spawn(move || {
        warm_up(&other);
        assert_eq!(probe(&other).finish().unwrap().unwrap(), 404);
    })
    .join()
    .unwrap();
    release_tx.send(()).unwrap();
    parked.join().unwrap();
}

/// Open file descriptors of this process.
fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

#[test]
fn a_thread_that_ends_takes_its_runtime_and_connections_with_it() {
    let s = setup();
    warm_up(&s.client);
    let before = open_fds();
    for _ in 0..20 {
        let client = s.client.clone();
        std::thread::spawn(move || {
            warm_up(&client);
            let p = probe(&client);
            assert!(p.driven_here());
            assert_eq!(p.finish().unwrap().unwrap(), 404);
        })
        .join()
        .unwrap();
    }
    // Each thread had a runtime (an epoll and an event descriptor) and a connection (both of
    // its ends are in this process); the server notices a closed connection on its own time.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let mut after = open_fds();
    while after > before + 4 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
        after = open_fds();
    }
    assert!(
        after <= before + 4,
        "{before} descriptors before, {after} after 20 threads"
    );
}
