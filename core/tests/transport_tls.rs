//! `https://` through the direct client (hyper-util over rustls): what it offers in its TLS
//! ClientHello, and what it does with a certificate no public root vouches for. The listener
//! is tokio-rustls on loopback with a self-signed certificate for `localhost`
//! (`fixtures/untrusted-localhost.*.pem`, made for these tests with `openssl req -x509`):
//! no machine trusts it, so the handshake is refused by the client, which is the point.

use std::sync::{Arc, Mutex};

use cycles_core::*;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use tokio_rustls::LazyConfigAcceptor;

const CERT: &[u8] = include_bytes!("fixtures/untrusted-localhost.cert.pem");
const KEY: &[u8] = include_bytes!("fixtures/untrusted-localhost.key.pem");

/// What one ClientHello said, and how the handshake that followed ended on the server's side.
#[derive(Debug, Default)]
struct Hello {
    server_name: Option<String>,
    alpn: Vec<String>,
    handshake: Option<Result<(), String>>,
}

/// A TLS listener on 127.0.0.1 presenting the untrusted certificate, answering any request
/// that gets through with an empty balance list. Returns its `https://localhost:PORT` base URL
/// and the hellos it has seen.
async fn untrusted_tls_server() -> (String, Arc<Mutex<Vec<Hello>>>) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cert = CertificateDer::from_pem_slice(CERT).unwrap();
    let key = PrivateKeyDer::from_pem_slice(KEY).unwrap();
    let mut config = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(vec![cert], key)
        .unwrap();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let config = Arc::new(config);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let hellos = Arc::new(Mutex::new(Vec::new()));
    let seen = hellos.clone();
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let (config, seen) = (config.clone(), seen.clone());
            tokio::spawn(async move {
                // Reading the ClientHello first: anything but a TLS record fails here.
                let start = match LazyConfigAcceptor::new(Default::default(), tcp).await {
                    Ok(start) => start,
                    Err(e) => {
                        seen.lock().unwrap().push(Hello {
                            handshake: Some(Err(format!("not a TLS ClientHello: {e}"))),
                            ..Default::default()
                        });
                        return;
                    }
                };
                let hello = start.client_hello();
                let index = {
                    let mut seen = seen.lock().unwrap();
                    seen.push(Hello {
                        server_name: hello.server_name().map(str::to_owned),
                        alpn: hello
                            .alpn()
                            .map(|protocols| {
                                protocols
                                    .map(|p| String::from_utf8_lossy(p).into_owned())
                                    .collect()
                            })
                            .unwrap_or_default(),
                        handshake: None,
                    });
                    seen.len() - 1
                };
                let outcome = match start.into_stream(config).await {
                    Ok(mut tls) => {
                        let body = r#"{"balances":[]}"#;
                        let _ = tls
                            .write_all(
                                format!(
                                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\
                                     content-length: {}\r\n\r\n{body}",
                                    body.len()
                                )
                                .as_bytes(),
                            )
                            .await;
                        Ok(())
                    }
                    Err(e) => Err(e.to_string()),
                };
                seen.lock().unwrap()[index].handshake = Some(outcome);
            });
        }
    });
    (format!("https://localhost:{port}"), hellos)
}

/// The whole chain of an error's messages, outermost first.
fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(" <- ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

#[tokio::test]
async fn an_untrusted_certificate_is_refused_as_a_connect_error_after_offering_h2_and_http11() {
    let (base, hellos) = untrusted_tls_server().await;
    let client = CyclesClient::new(Config::new(base.clone(), "cycles_test_key_0001")).unwrap();
    assert!(
        format!("{client:?}").contains("transport: \"hyper-util\""),
        "{client:?}"
    );
    let query = BalanceQuery {
        tenant: Some("t".into()),
        ..Default::default()
    };
    let err = client.get_balances(&query).await.unwrap_err();

    // A connect-phase failure: nothing was sent, so the operation is safe to retry once the
    // certificate problem is fixed, and the message says what the problem is.
    assert_eq!(err.kind(), &ErrorKind::Connect, "{}", chain(&err));
    assert!(
        chain(&err).contains("certificate"),
        "the error should name the certificate: {}",
        chain(&err)
    );
    assert_eq!(err.http_status(), None);

    let hellos = hellos.lock().unwrap();
    assert!(!hellos.is_empty(), "no connection reached the TLS listener");
    for hello in hellos.iter() {
        // The server name is sent (SNI), and both HTTP versions are offered, h2 first: the
        // direct client's ALPN, as reqwest's with its http2 feature.
        assert_eq!(hello.server_name.as_deref(), Some("localhost"), "{hello:?}");
        assert_eq!(hello.alpn, ["h2", "http/1.1"], "{hello:?}");
        // The client ended the handshake; no request (plain or encrypted) was ever answered.
        match &hello.handshake {
            Some(Err(_)) | None => {}
            Some(Ok(())) => {
                panic!("a handshake with the untrusted certificate completed: {hello:?}")
            }
        }
    }
}
