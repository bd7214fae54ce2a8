//! Shared helpers of the integration tests: a local server, clients, and a tiny loopback
//! HTTP responder for responses the server cannot produce.
#![allow(dead_code)]

use std::time::Duration;

pub mod store;

use cycles_core::*;
use cycles_local_server::{LocalServer, ServerConfig, ServerMode};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::oneshot;

pub const KEY: &str = "cycles-local-key";
pub const ADMIN_KEY: &str = "cycles-local-admin";

/// The local server's wire dialect for this test run: `CYCLES_TEST_SERVER_MODE=reference`
/// runs the client and lifecycle suites against the reference-server dialect (explicit
/// nulls, null last-page cursors, ...; scripts/test-all.sh does both), anything else or
/// unset is the spec-faithful default. An unknown value fails loudly rather than silently
/// testing the default.
pub fn server_mode() -> ServerMode {
    match std::env::var("CYCLES_TEST_SERVER_MODE").as_deref() {
        Err(_) | Ok("") | Ok("spec") => ServerMode::Spec,
        Ok("reference") => ServerMode::Reference,
        Ok(other) => panic!("CYCLES_TEST_SERVER_MODE={other:?}: expected spec or reference"),
    }
}

/// The default server configuration in this run's [`server_mode`].
pub fn server_config() -> ServerConfig {
    ServerConfig {
        mode: server_mode(),
        ..ServerConfig::default()
    }
}

pub async fn server() -> LocalServer {
    LocalServer::start(server_config())
        .await
        .expect("start local server")
}

pub fn client_for(base_url: &str) -> CyclesClient {
    CyclesClient::new(
        Config::new(base_url, KEY)
            .with_request_timeout(Duration::from_secs(5))
            .with_connect_timeout(Duration::from_secs(2)),
    )
    .expect("client")
}

pub fn client(server: &LocalServer) -> CyclesClient {
    client_for(&server.url())
}

pub fn key(prefix: &str) -> String {
    format!("{prefix}-{}", uuid::Uuid::new_v4())
}

pub fn subject() -> Subject {
    Subject::tenant("acme")
}

pub fn action() -> Action {
    Action::new("llm.completion", "test-model")
}

pub fn usd(n: i64) -> Amount {
    Amount::new(Unit::UsdMicrocents, n)
}

pub fn reserve_req(amount: i64) -> ReservationCreateRequest {
    let mut r = ReservationCreateRequest::new(key("rsv"), subject(), action(), usd(amount));
    r.ttl_ms = Some(60_000);
    r
}

/// A settlement of `amount` for `id` with an event fallback (the test subject and action).
pub fn settlement(id: &str, key: &str, amount: i64) -> Settlement {
    Settlement {
        reservation_id: id.to_string(),
        commit: CommitRequest::new(key, usd(amount)),
        fallback: Some(EventFallback {
            subject: subject(),
            action: action(),
            overage_policy: None,
        }),
    }
}

/// Creates a live reservation and returns its id.
pub async fn reserve(c: &CyclesClient, amount: i64) -> String {
    let r = c
        .create_reservation(&reserve_req(amount))
        .await
        .expect("reserve");
    r.body.reservation_id.expect("reservation_id")
}

/// What the loopback responder saw.
pub struct Captured {
    /// Request line and headers, lowercase header names, as text.
    pub head: String,
    /// Request body.
    pub body: Vec<u8>,
}

impl Captured {
    pub fn request_line(&self) -> &str {
        self.head.lines().next().unwrap_or("")
    }

    pub fn header(&self, name: &str) -> Option<String> {
        self.head.lines().skip(1).find_map(|l| {
            let (n, v) = l.split_once(':')?;
            n.trim()
                .eq_ignore_ascii_case(name)
                .then(|| v.trim().to_string())
        })
    }
}

/// Serves ONE connection on 127.0.0.1: reads one request (headers + Content-Length body),
/// writes `response` verbatim and closes. Returns the base URL and the captured request.
pub async fn one_shot(response: String) -> (String, oneshot::Receiver<Captured>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = oneshot::channel();
    tokio::spawn(async move {
        let (mut sock, _) = listener.accept().await.unwrap();
        let mut buf = Vec::new();
        let mut tmp = [0u8; 4096];
        let head_end = loop {
            let n = sock.read(&mut tmp).await.unwrap();
            if n == 0 {
                return;
            }
            buf.extend_from_slice(&tmp[..n]);
            if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break p + 4;
            }
        };
        let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
        let len = head
            .lines()
            .find_map(|l| {
                let (n, v) = l.split_once(':')?;
                n.trim()
                    .eq_ignore_ascii_case("content-length")
                    .then(|| v.trim().parse::<usize>().ok())?
            })
            .unwrap_or(0);
        while buf.len() < head_end + len {
            let n = sock.read(&mut tmp).await.unwrap();
            if n == 0 {
                break;
            }
            buf.extend_from_slice(&tmp[..n]);
        }
        let body = buf[head_end..].to_vec();
        sock.write_all(response.as_bytes()).await.unwrap();
        sock.shutdown().await.ok();
        let _ = tx.send(Captured { head, body });
    });
    (format!("http://{addr}"), rx)
}

/// A complete HTTP/1.1 response with a JSON (or any) body and extra header lines.
pub fn http_response(status: &str, extra_headers: &[&str], body: &str) -> String {
    let mut s = format!(
        "HTTP/1.1 {status}\r\ncontent-length: {}\r\nconnection: close\r\n",
        body.len()
    );
    for h in extra_headers {
        s.push_str(h);
        s.push_str("\r\n");
    }
    s.push_str("\r\n");
    s.push_str(body);
    s
}

/// The spec handed to a child-process helper: the value of `var`, or a panic saying the
/// helper is not a test of its own. Helpers are `#[test] #[ignore = "..."]` functions that
/// their parent test re-executes this binary to run ([`child_args`]): ignored so a plain
/// `cargo test` skips them, and failing when run without their parent (`--ignored`,
/// `--include-ignored`), so a helper can never count as a passing test.
pub fn child_spec(var: &str, helper: &str, parent: &str) -> String {
    std::env::var(var).unwrap_or_else(|_| {
        panic!(
            "`{helper}` is a child process of the test `{parent}`, not a test itself: it runs \
             only when that test starts it with {var} set"
        )
    })
}

/// libtest arguments that run exactly the ignored child helper `helper` of this test binary.
pub fn child_args(helper: &str) -> [&str; 5] {
    [
        helper,
        "--exact",
        "--ignored",
        "--nocapture",
        "--test-threads=1",
    ]
}

/// `rel` inside the pinned Cycles spec and fixtures, `shared/` beside the clone as on every
/// developer machine and in CI (docs/authorities.md). Panics naming the file, what it is and
/// where it was expected when it is missing (e.g. in a clone of this repository alone).
pub fn shared_file(rel: &str, what: &str) -> std::path::PathBuf {
    let beside = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("core/ sits one level below the repository root");
    let path = beside.join("shared").join(rel);
    assert!(
        path.exists(),
        "missing ../shared/{rel} ({what}; part of the pinned Cycles spec and fixtures expected \
         beside the clone, see docs/authorities.md) at {}",
        path.display()
    );
    path
}

/// Identifiers that differ only in ways a lossy name scheme would erase.
pub fn tricky_ids() -> Vec<String> {
    let mut ids: Vec<String> = [
        "rsv/a",
        "rsv_a",
        "rsv a",
        "rsv:a",
        "rsv.a",
        "RSV_A",
        "rsv_a ",
        " rsv_a",
        "caf\u{e9}",   // NFC
        "cafe\u{301}", // NFD: same text to a human, different bytes
        "\u{1F600}",
        "..",
        "rsv\\a",
        "rsv%2Fa",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    ids.push("x".repeat(128));
    ids.push(format!("{}y", "x".repeat(127)));
    ids
}
