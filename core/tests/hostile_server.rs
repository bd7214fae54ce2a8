//! Servers that send more than a Cycles body (issue 32, "Hostile servers"): an endless or
//! oversized body ends the attempt at `Config::max_response_bytes` with a typed error, never
//! by filling memory until the request timeout. An unbounded reader would time out on the
//! endless bodies below (the stub writes until the client hangs up), so an error that is not
//! `Timeout` shows reading stopped at the bound.

mod common;

use std::time::Duration;

use common::*;
use cycles_core::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// What the stub sends after the status line.
#[derive(Clone, Copy)]
enum Body {
    /// `Transfer-Encoding: chunked`, 64 KiB chunks until the client hangs up.
    Endless,
    /// `Content-Length: n`, then nothing: the client must not wait for the body.
    DeclaredThenStall(u64),
    /// Exactly this body.
    Exact(&'static str),
    /// Read the request, answer nothing, keep the connection open.
    Silent,
    /// Chunked headers, then nothing.
    HeadersThenStall,
    /// A chunked body one byte every 50 ms, never ending.
    Drip,
    /// Part of a declared body, then a TCP reset (RST).
    ResetMidway,
    /// `Content-Length: 100`, ten bytes, then the connection closed.
    Short,
    /// A redirect to another host.
    Redirect,
}

/// A loopback server answering every connection with `status` and `body`.
async fn stub(status: &'static str, body: Body) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((mut sock, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                // The request: headers, then its declared body (small), read and dropped.
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                    match sock.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
                match body {
                    Body::Silent => {
                        tokio::time::sleep(Duration::from_secs(30)).await;
                        return;
                    }
                    Body::Redirect => {
                        let r = "HTTP/1.1 307 Temporary Redirect\r\nlocation: http://203.0.113.1:1/v1/reservations\r\ncontent-length: 0\r\n\r\n";
                        let _ = sock.write_all(r.as_bytes()).await;
                        return;
                    }
                    Body::ResetMidway | Body::Short => {
                        let r = format!(
                            "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{{\"status\":\""
                        );
                        let _ = sock.write_all(r.as_bytes()).await;
                        if matches!(body, Body::ResetMidway) {
                            // Linger 0: close() sends RST instead of FIN (and so never blocks,
                            // the concern of the deprecation).
                            #[allow(deprecated)]
                            let _ = sock.set_linger(Some(Duration::ZERO));
                        }
                        return;
                    }
                    _ => {}
                }
                let head = match body {
                    Body::Endless => format!(
                        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n"
                    ),
                    Body::DeclaredThenStall(n) => format!(
                        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {n}\r\n\r\n"
                    ),
                    Body::Exact(b) => format!(
                        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{b}",
                        b.len()
                    ),
                    _ => format!(
                        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n"
                    ),
                };
                if sock.write_all(head.as_bytes()).await.is_err() {
                    return;
                }
                match body {
                    Body::Endless => {
                        let piece = format!("10000\r\n{}\r\n", " ".repeat(0x10000));
                        while sock.write_all(piece.as_bytes()).await.is_ok() {}
                    }
                    Body::DeclaredThenStall(_) | Body::HeadersThenStall => {
                        tokio::time::sleep(Duration::from_secs(30)).await;
                    }
                    Body::Drip => loop {
                        if sock.write_all(b"1\r\n \r\n").await.is_err() {
                            return;
                        }
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    },
                    _ => {}
                }
            });
        }
    });
    format!("http://{addr}")
}

fn bounded(base: &str, max_response_bytes: usize) -> CyclesClient {
    CyclesClient::new(
        Config::new(base, "test-key")
            .with_request_timeout(Duration::from_secs(20))
            .with_max_response_bytes(max_response_bytes),
    )
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endless_success_body_is_ambiguous_for_a_write_and_invalid_for_a_read() {
    let base = stub("200 OK", Body::Endless).await;
    let c = bounded(&base, 64 * 1024);
    let e = c.create_reservation(&reserve_req(1)).await.unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::AmbiguousSuccess, "{e:?}");
    assert!(
        e.to_string()
            .contains("exceeds max_response_bytes (65536 bytes)"),
        "{e}"
    );
    assert!(e.retryable(), "a write's outcome is unknown: retried");
    let e = c.get_reservation("r-1").await.unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::InvalidResponse, "{e:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_bound_stops_an_endless_body() {
    let base = stub("200 OK", Body::Endless).await;
    let c = CyclesClient::new(
        Config::new(&base, "test-key").with_request_timeout(Duration::from_secs(20)),
    )
    .unwrap();
    let e = c.create_reservation(&reserve_req(1)).await.unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::AmbiguousSuccess, "{e:?}");
    assert!(e.to_string().contains("(1048576 bytes)"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_declared_length_past_the_bound_is_refused_before_the_body() {
    // The stub never sends the 10 MB it declares: waiting for it would be a Timeout.
    let base = stub("200 OK", Body::DeclaredThenStall(10 << 20)).await;
    let e = bounded(&base, 1 << 20)
        .create_reservation(&reserve_req(1))
        .await
        .unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::AmbiguousSuccess, "{e:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endless_error_body_keeps_its_status_class() {
    let base = stub("503 Service Unavailable", Body::Endless).await;
    let e = bounded(&base, 4096)
        .create_reservation(&reserve_req(1))
        .await
        .unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::ServerError, "{e:?}");
    assert_eq!(e.http_status(), Some(503));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_of_exactly_the_bound_is_read() {
    const BODY: &str = r#"{"status":"ACTIVE","expires_at_ms":5,"remaining_ttl_ms":4}"#;
    let base = stub("200 OK", Body::Exact(BODY)).await;
    let r = bounded(&base, BODY.len())
        .extend_reservation("r-1", &ReservationExtendRequest::new("k", 1000))
        .await
        .unwrap();
    assert_eq!(r.body.remaining_ttl_ms, Some(4));
    let e = bounded(&base, BODY.len() - 1)
        .extend_reservation("r-1", &ReservationExtendRequest::new("k", 1000))
        .await
        .unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::AmbiguousSuccess, "{e:?}");
}

#[test]
fn the_bound_is_configured_and_checked() {
    let lookup = |pairs: &'static [(&'static str, &'static str)]| {
        move |k: &str| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    };
    const BASE: &[(&str, &str)] = &[
        ("CYCLES_BASE_URL", "http://127.0.0.1:1"),
        ("CYCLES_API_KEY", "k"),
    ];
    let c = Config::from_lookup(lookup(BASE)).unwrap();
    assert_eq!(c.max_response_bytes, config::DEFAULT_MAX_RESPONSE_BYTES);
    const SET: &[(&str, &str)] = &[
        ("CYCLES_BASE_URL", "http://127.0.0.1:1"),
        ("CYCLES_API_KEY", "k"),
        ("CYCLES_MAX_RESPONSE_BYTES", "4096"),
    ];
    assert_eq!(
        Config::from_lookup(lookup(SET)).unwrap().max_response_bytes,
        4096
    );
    const BAD: &[(&str, &str)] = &[
        ("CYCLES_BASE_URL", "http://127.0.0.1:1"),
        ("CYCLES_API_KEY", "k"),
        ("CYCLES_MAX_RESPONSE_BYTES", "0"),
    ];
    let e = Config::from_lookup(lookup(BAD)).unwrap_err();
    assert_eq!(
        e.message(),
        "CYCLES_MAX_RESPONSE_BYTES must be a positive integer, got \"0\""
    );
    let e = Config::new("http://127.0.0.1:1", "k")
        .with_max_response_bytes(0)
        .validate()
        .unwrap_err();
    assert_eq!(e.message(), "max_response_bytes must be at least 1");
}

/// Every other way a server can fail to answer ends the attempt within its timeout, with the
/// error of what happened, and nothing is followed or retried (one attempt per call).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn servers_that_do_not_answer_end_within_the_timeout_typed() {
    let timeout = Duration::from_millis(400);
    let cases = [
        ("silent", "200 OK", Body::Silent, ErrorKind::Timeout),
        (
            "headers then stall",
            "200 OK",
            Body::HeadersThenStall,
            ErrorKind::Timeout,
        ),
        (
            "one byte every 50 ms",
            "200 OK",
            Body::Drip,
            ErrorKind::Timeout,
        ),
        (
            "reset mid-body",
            "200 OK",
            Body::ResetMidway,
            ErrorKind::ConnectionReset,
        ),
        (
            "shorter than its length",
            "200 OK",
            Body::Short,
            ErrorKind::ConnectionReset,
        ),
        (
            "redirect",
            "307",
            Body::Redirect,
            ErrorKind::UnexpectedStatus,
        ),
        (
            "200 with truncated JSON",
            "200 OK",
            Body::Exact(r#"{"decision":"ALLOW","reservation_id":"r"#),
            ErrorKind::AmbiguousSuccess,
        ),
    ];
    for (what, status, body, kind) in cases {
        let base = stub(status, body).await;
        let c = CyclesClient::new(Config::new(&base, "test-key").with_request_timeout(timeout))
            .unwrap();
        let started = std::time::Instant::now();
        let e = c.create_reservation(&reserve_req(1)).await.unwrap_err();
        assert_eq!(e.kind(), &kind, "{what}: {e:?}");
        // Bounded by the attempt's own timeout (with slack for a loaded machine), never
        // by the server.
        assert!(
            started.elapsed() < timeout * 10,
            "{what}: {:?}",
            started.elapsed()
        );
    }
}
