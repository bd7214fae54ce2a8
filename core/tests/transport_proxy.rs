//! Which HTTP client a request goes through: hyper-util's directly, or reqwest where it does
//! what the direct one does not (a proxy from the environment applies to the server, or the
//! base URL carries credentials). Each side is a loopback listener that records the request
//! head it got and answers one `getBalances`.
//!
//! One test in this file: it sets the process's proxy variables, which every other test in
//! the same binary would see.

use std::sync::{Arc, Mutex};

use cycles_core::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

const BODY: &str = r#"{"balances":[]}"#;

/// A listener answering every request with an empty balance list; the heads it got.
async fn listener() -> (String, Arc<Mutex<Vec<String>>>) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let heads = Arc::new(Mutex::new(Vec::new()));
    let seen = heads.clone();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            let seen = seen.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                    match s.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
                seen.lock()
                    .unwrap()
                    .push(String::from_utf8_lossy(&buf).into_owned());
                let answer = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{BODY}",
                    BODY.len()
                );
                let _ = s.write_all(answer.as_bytes()).await;
                let _ = s.shutdown().await;
            });
        }
    });
    (format!("127.0.0.1:{}", addr.port()), heads)
}

fn query() -> BalanceQuery {
    BalanceQuery {
        tenant: Some("t".into()),
        ..Default::default()
    }
}

fn clear_proxy_env() {
    for v in [
        "HTTP_PROXY",
        "http_proxy",
        "HTTPS_PROXY",
        "https_proxy",
        "ALL_PROXY",
        "all_proxy",
        "NO_PROXY",
        "no_proxy",
        "REQUEST_METHOD",
    ] {
        std::env::remove_var(v);
    }
}

#[tokio::test]
async fn requests_go_direct_unless_a_proxy_or_credentials_need_reqwest() {
    clear_proxy_env();
    let (proxy, proxy_heads) = listener().await;
    let (server, server_heads) = listener().await;

    // No proxy variables: the direct client, origin-form request line.
    let c = CyclesClient::new(Config::new(format!("http://{server}"), "k")).unwrap();
    assert!(
        format!("{c:?}").contains("transport: \"hyper-util\""),
        "{c:?}"
    );
    c.get_balances(&query()).await.unwrap();
    let head = server_heads.lock().unwrap().last().cloned().unwrap();
    assert!(
        head.starts_with("GET /v1/balances?tenant=t HTTP/1.1\r\n"),
        "{head}"
    );
    let lower = head.to_ascii_lowercase();
    assert!(lower.contains("\r\nx-cycles-api-key: k\r\n"), "{head}");
    assert!(lower.contains("\r\naccept: application/json\r\n"), "{head}");
    assert!(lower.contains("\r\nuser-agent: cycles-core/"), "{head}");
    assert!(lower.contains(&format!("\r\nhost: {server}\r\n")), "{head}");

    // HTTP_PROXY applies: reqwest, absolute-form request line to the proxy; the server's host
    // is never resolved (it does not exist).
    std::env::set_var("HTTP_PROXY", format!("http://{proxy}"));
    let c = CyclesClient::new(Config::new("http://cycles.invalid:9/", "k")).unwrap();
    assert!(format!("{c:?}").contains("reqwest"), "{c:?}");
    c.get_balances(&query()).await.unwrap();
    let head = proxy_heads.lock().unwrap().last().cloned().unwrap();
    assert!(
        head.starts_with("GET http://cycles.invalid:9/v1/balances?tenant=t HTTP/1.1\r\n"),
        "{head}"
    );

    // NO_PROXY covers the server: direct again, the proxy sees nothing more.
    std::env::set_var("NO_PROXY", "127.0.0.1");
    let before = proxy_heads.lock().unwrap().len();
    let c = CyclesClient::new(Config::new(format!("http://{server}"), "k")).unwrap();
    assert!(
        format!("{c:?}").contains("transport: \"hyper-util\""),
        "{c:?}"
    );
    c.get_balances(&query()).await.unwrap();
    assert_eq!(proxy_heads.lock().unwrap().len(), before);

    // Credentials in the base URL: reqwest, which sends them as Basic auth.
    let c = CyclesClient::new(Config::new(format!("http://user:pw@{server}"), "k")).unwrap();
    assert!(format!("{c:?}").contains("reqwest"), "{c:?}");
    c.get_balances(&query()).await.unwrap();
    let head = server_heads.lock().unwrap().last().cloned().unwrap();
    assert!(
        head.to_ascii_lowercase()
            .contains("\r\nauthorization: basic dxnlcjpwdw==\r\n"),
        "{head}"
    );
    clear_proxy_env();
}
