//! Sends one request and reads its response within a bound: directly on hyper-util's pooled
//! client, or through reqwest where a proxy from the environment applies to the server or the
//! base URL carries credentials.
//!
//! Why two: reqwest turns every request's URI back into a `Url` twice and runs a redirect
//! hook even with redirects off; without them a guarded call costs about 50 µs less client
//! CPU in place (docs/benchmarks.md, "The transport on hyper-util directly"). The direct
//! client is built as reqwest builds its own (rustls with ring and the webpki roots, HTTP/1.1
//! and HTTP/2 by ALPN, TCP_NODELAY and keep-alive, a connect timeout, a pool timer), so the
//! two differ only in what the direct one leaves to reqwest: proxies (the same hyper-util
//! matcher reqwest uses decides, once per client, since every request goes to the one base
//! URL) and `user:password@` in the URL (reqwest sends it as Basic auth).

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::header::{HeaderMap, HeaderValue, USER_AGENT};
use hyper::{Method, Uri};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::proxy::matcher::Matcher;
use hyper_util::rt::{TokioExecutor, TokioTimer};

use super::decode;
use super::url::BaseUrl;
use crate::config::Config;
use crate::error::{Correlation, Error};

const USER_AGENT_VALUE: &str = concat!("cycles-core/", env!("CARGO_PKG_VERSION"));

type Direct = Client<HttpsConnector<HttpConnector>, Full<Bytes>>;

/// One HTTP client: cheap to clone (both variants share their pool).
#[derive(Clone)]
pub(crate) enum Sender {
    /// hyper-util's client, no per-request layers (behind an `Arc`: a clone per request
    /// is then one count, as reqwest's is).
    Direct(std::sync::Arc<Direct>),
    /// reqwest, for what the direct client leaves to it (see the module docs).
    Reqwest(reqwest::Client),
}

/// What came back from one request.
pub(crate) struct Received {
    pub status: u16,
    pub corr: Correlation,
    pub retry_after: Option<String>,
    /// The body, or its first part when `oversized`.
    pub body: Vec<u8>,
    /// The bound the body went past (`Config::max_response_bytes`).
    pub oversized: Option<usize>,
}

impl Sender {
    /// The client for requests to `base` (rustls, no redirects, finite timeouts).
    pub(crate) fn new(config: &Config, base: &BaseUrl) -> Result<Sender, Error> {
        if leaves_to_reqwest(base) {
            reqwest_client(config).map(Sender::Reqwest)
        } else {
            direct_client(config).map(|c| Sender::Direct(std::sync::Arc::new(c)))
        }
    }

    /// Whether requests go through reqwest (a proxy applies, or the URL has credentials).
    pub(crate) fn is_reqwest(&self) -> bool {
        matches!(self, Sender::Reqwest(_))
    }

    /// Sends one request and reads its response body up to `limit` bytes, all within
    /// `timeout` (connecting, sending, the headers and the whole body).
    pub(crate) async fn send(
        &self,
        method: Method,
        url: ::url::Url,
        headers: HeaderMap,
        body: Option<Vec<u8>>,
        timeout: Duration,
        limit: usize,
    ) -> Result<Received, Error> {
        match self {
            Sender::Direct(client) => {
                // Named in an error only: no text is built for a request that succeeds.
                let what = |method: &Method| format!("{method} {url}");
                let exchange = direct_exchange(client, method.clone(), &url, headers, body, limit);
                match tokio::time::timeout(timeout, exchange).await {
                    Ok(result) => result.map_err(|e| e.context(&what(&method))),
                    Err(_) => Err(Error::timed_out(format!(
                        "no complete response within {timeout:?} ({})",
                        what(&method)
                    ))),
                }
            }
            Sender::Reqwest(client) => {
                reqwest_exchange(client, method, url, headers, body, timeout, limit).await
            }
        }
    }
}

/// Whether `base` needs what only reqwest does here: a proxy from the environment
/// (`HTTP_PROXY`, `HTTPS_PROXY`, `ALL_PROXY`, `NO_PROXY`, read by the same hyper-util
/// matcher reqwest reads them with) or credentials in the URL.
fn leaves_to_reqwest(base: &BaseUrl) -> bool {
    let url = base.as_url();
    if !url.username().is_empty() || url.password().is_some() {
        return true;
    }
    match url.as_str().parse::<Uri>() {
        Ok(uri) => Matcher::from_system().intercept(&uri).is_some(),
        // Not a URI hyper takes: reqwest decides what to do with it.
        Err(_) => true,
    }
}

/// Why a failure happened, in the transport kinds (see [`Error::from_transport`]).
#[derive(Clone, Copy)]
pub(crate) enum Phase {
    /// Before the request could be written: it was never sent.
    Connect,
    /// Sending it or reading the response.
    Exchange,
}

async fn direct_exchange(
    client: &Direct,
    method: Method,
    url: &::url::Url,
    mut headers: HeaderMap,
    body: Option<Vec<u8>>,
    limit: usize,
) -> Result<Received, Error> {
    let uri: Uri = url
        .as_str()
        .parse()
        .map_err(|e| Error::invalid_argument(format!("the request URL is not a URI: {e}")))?;
    headers.insert(USER_AGENT, HeaderValue::from_static(USER_AGENT_VALUE));
    let mut request = hyper::Request::new(Full::new(Bytes::from(body.unwrap_or_default())));
    *request.method_mut() = method;
    *request.uri_mut() = uri;
    *request.headers_mut() = headers;
    let response = client.request(request).await.map_err(|e| {
        let phase = if e.is_connect() {
            Phase::Connect
        } else {
            Phase::Exchange
        };
        Error::from_transport(e, phase)
    })?;
    let status = response.status().as_u16();
    let h = response.headers();
    let (corr, retry_after) = decode::header_facts(|name| h.get(name)?.to_str().ok());
    let mut body = response.into_body();
    let mut bounded = Bounded::new(limit, hyper::body::Body::size_hint(&body).exact());
    while bounded.wants_more() {
        let Some(frame) = body.frame().await else {
            break;
        };
        let frame = frame.map_err(|e| Error::from_transport(e, Phase::Exchange))?;
        if let Ok(chunk) = frame.into_data() {
            bounded.take(&chunk);
        }
    }
    Ok(bounded.received(status, corr, retry_after))
}

/// A response body read up to a bound (`Config::max_response_bytes`): a declared length
/// above it is refused before anything is read, and a chunk that would pass it is dropped,
/// nothing after it read.
struct Bounded {
    body: Vec<u8>,
    limit: usize,
    over: bool,
}

impl Bounded {
    fn new(limit: usize, declared: Option<u64>) -> Bounded {
        Bounded {
            body: Vec::new(),
            limit,
            over: declared.is_some_and(|n| n > limit as u64),
        }
    }

    /// Whether to read another chunk.
    fn wants_more(&self) -> bool {
        !self.over
    }

    fn take(&mut self, chunk: &[u8]) {
        if self.body.len() + chunk.len() > self.limit {
            self.over = true;
        } else {
            self.body.extend_from_slice(chunk);
        }
    }

    fn received(self, status: u16, corr: Correlation, retry_after: Option<String>) -> Received {
        Received {
            status,
            corr,
            retry_after,
            oversized: self.over.then_some(self.limit),
            body: self.body,
        }
    }
}

/// hyper-util's client as reqwest 0.12 builds its own for the same settings.
fn direct_client(config: &Config) -> Result<Direct, Error> {
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_connect_timeout(Some(config.connect_timeout));
    http.set_nodelay(true);
    http.set_keepalive(Some(Duration::from_secs(15)));
    http.set_keepalive_interval(Some(Duration::from_secs(15)));
    http.set_keepalive_retries(Some(3));
    #[cfg(any(target_os = "android", target_os = "fuchsia", target_os = "linux"))]
    http.set_tcp_user_timeout(Some(Duration::from_secs(30)));
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let roots = rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    let tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::config(format!("cannot build the TLS configuration: {e}")))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http()
        .enable_http1()
        .enable_http2()
        .wrap_connector(http);
    Ok(Client::builder(TokioExecutor::new())
        .timer(TokioTimer::new())
        .pool_timer(TokioTimer::new())
        .pool_idle_timeout(Duration::from_secs(90))
        // Never keep more idle connections than can ever be busy at once.
        .pool_max_idle_per_host(config.max_concurrent_requests)
        .build(https))
}

/// reqwest's client (rustls, no redirects, finite timeouts, the environment's proxies).
fn reqwest_client(config: &Config) -> Result<reqwest::Client, Error> {
    reqwest::Client::builder()
        .timeout(config.request_timeout)
        .connect_timeout(config.connect_timeout)
        // Redirects would re-send X-Cycles-API-Key to wherever the Location points
        // (reqwest strips only standard auth headers); a 3xx is surfaced instead. The
        // direct client never follows one either.
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(USER_AGENT_VALUE)
        .pool_max_idle_per_host(config.max_concurrent_requests)
        .build()
        .map_err(|e| Error::config(format!("cannot build the HTTP client: {e}")))
}

async fn reqwest_exchange(
    client: &reqwest::Client,
    method: Method,
    url: ::url::Url,
    headers: HeaderMap,
    body: Option<Vec<u8>>,
    timeout: Duration,
    limit: usize,
) -> Result<Received, Error> {
    let mut rb = client.request(method, url).headers(headers);
    if let Some(b) = body {
        rb = rb.body(b);
    }
    let mut request = rb.build().map_err(Error::from_reqwest)?;
    *request.timeout_mut() = Some(timeout);
    let mut resp = client.execute(request).await.map_err(Error::from_reqwest)?;
    let status = resp.status().as_u16();
    let h = resp.headers();
    let (corr, retry_after) = decode::header_facts(|name| h.get(name)?.to_str().ok());
    let mut bounded = Bounded::new(limit, resp.content_length());
    while bounded.wants_more() {
        let Some(chunk) = resp.chunk().await.map_err(Error::from_reqwest)? else {
            break;
        };
        bounded.take(&chunk);
    }
    Ok(bounded.received(status, corr, retry_after))
}
