//! Which HTTP client a request goes through: hyper-util's directly, or reqwest where it does
//! what the direct one does not (a proxy from the environment applies to the server, plain or
//! through a CONNECT tunnel, or the base URL carries credentials). Each side is a loopback responder (`common::one_shot`) that
//! captures the request it got and answers one `getBalances`.
//!
//! One test in this file: it sets the process's proxy variables, which every other test in
//! the same binary would see.

mod common;

use common::*;
use cycles_core::*;

fn balances() -> String {
    http_response("200 OK", &[], r#"{"balances":[]}"#)
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

/// `base` without its scheme: the `host:port` a request's `Host` header names.
fn authority(base: &str) -> &str {
    base.strip_prefix("http://").unwrap()
}

#[tokio::test]
async fn requests_go_direct_unless_a_proxy_or_credentials_need_reqwest() {
    clear_proxy_env();

    // No proxy variables: the direct client, origin-form request line.
    let (server, seen) = one_shot(balances()).await;
    let c = CyclesClient::new(Config::new(server.clone(), "k")).unwrap();
    assert!(
        format!("{c:?}").contains("transport: \"hyper-util\""),
        "{c:?}"
    );
    c.get_balances(&query()).await.unwrap();
    let got = seen.await.unwrap();
    assert_eq!(got.request_line(), "GET /v1/balances?tenant=t HTTP/1.1");
    assert_eq!(got.header("x-cycles-api-key").as_deref(), Some("k"));
    assert_eq!(got.header("accept").as_deref(), Some("application/json"));
    assert!(
        got.header("user-agent")
            .is_some_and(|ua| ua.starts_with("cycles-core/")),
        "{}",
        got.head
    );
    assert_eq!(got.header("host").as_deref(), Some(authority(&server)));

    // HTTP_PROXY applies: reqwest, absolute-form request line to the proxy; the server's host
    // is never resolved (it does not exist).
    let (proxy, seen) = one_shot(balances()).await;
    std::env::set_var("HTTP_PROXY", &proxy);
    let c = CyclesClient::new(Config::new("http://cycles.invalid:9/", "k")).unwrap();
    assert!(format!("{c:?}").contains("reqwest"), "{c:?}");
    c.get_balances(&query()).await.unwrap();
    assert_eq!(
        seen.await.unwrap().request_line(),
        "GET http://cycles.invalid:9/v1/balances?tenant=t HTTP/1.1"
    );

    // NO_PROXY covers the server: direct again, the proxy sees nothing.
    let (proxy, mut proxy_seen) = one_shot(balances()).await;
    std::env::set_var("HTTP_PROXY", &proxy);
    std::env::set_var("NO_PROXY", "127.0.0.1");
    let (server, seen) = one_shot(balances()).await;
    let c = CyclesClient::new(Config::new(server, "k")).unwrap();
    assert!(
        format!("{c:?}").contains("transport: \"hyper-util\""),
        "{c:?}"
    );
    c.get_balances(&query()).await.unwrap();
    assert_eq!(
        seen.await.unwrap().request_line(),
        "GET /v1/balances?tenant=t HTTP/1.1"
    );
    assert!(proxy_seen.try_recv().is_err(), "the proxy got a request");

    // HTTPS_PROXY applies to an https:// server: reqwest opens a CONNECT tunnel to the
    // server's authority through the proxy (TLS then runs inside it, end to end; the proxy
    // never sees the API key). This proxy refuses the tunnel: a connect-phase error, with
    // nothing sent to the server.
    clear_proxy_env();
    let (proxy, seen) = one_shot(http_response("403 Forbidden", &[], "")).await;
    std::env::set_var("HTTPS_PROXY", &proxy);
    let c = CyclesClient::new(Config::new("https://cycles.invalid:9/", "k")).unwrap();
    assert!(format!("{c:?}").contains("reqwest"), "{c:?}");
    let err = c.get_balances(&query()).await.unwrap_err();
    assert_eq!(err.kind(), &ErrorKind::Connect, "{err}");
    let got = seen.await.unwrap();
    assert_eq!(got.request_line(), "CONNECT cycles.invalid:9 HTTP/1.1");
    assert_eq!(got.header("x-cycles-api-key"), None, "{}", got.head);

    // Credentials in the base URL: reqwest, which sends them as Basic auth.
    let (server, seen) = one_shot(balances()).await;
    let with_credentials = format!("http://user:pw@{}", authority(&server));
    let c = CyclesClient::new(Config::new(with_credentials, "k")).unwrap();
    assert!(format!("{c:?}").contains("reqwest"), "{c:?}");
    c.get_balances(&query()).await.unwrap();
    assert_eq!(
        seen.await.unwrap().header("authorization").as_deref(),
        Some("Basic dXNlcjpwdw==")
    );
    clear_proxy_env();
}
