//! HTTP transport: one HTTP client per [`CyclesClient`] (hyper-util's, or reqwest's where a
//! proxy applies: `sender`), one method per operation, each a single attempt. Retries are
//! deliberately NOT done here: the retry policy (same idempotency key, 429 floors, expiry
//! fallback) belongs to later layers, which need to see every attempt and its timing.

pub mod decode;
pub mod response;
pub mod retry_after;
pub(crate) mod sender;
pub mod url;

use std::sync::Arc;
use std::time::{Duration, Instant};

use hyper::header::{HeaderMap, HeaderName, HeaderValue, ACCEPT, CONTENT_TYPE};
use hyper::Method;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::value::RawValue;
use tokio::sync::{Semaphore, SemaphorePermit};

use crate::config::Config;
use crate::error::Error;
use crate::model::*;
use crate::redact::Redactor;
use decode::Operation;
pub use response::{AttemptTiming, Response};
use sender::Sender;
use url::{check_path_id, BaseUrl};

/// Header carrying the API key.
pub const API_KEY_HEADER: &str = "x-cycles-api-key";
/// Header carrying the idempotency key (same value as the body's `idempotency_key`).
pub const IDEMPOTENCY_KEY_HEADER: &str = "x-idempotency-key";

/// Whether `key` reaches the server unchanged as an HTTP header value: visible ASCII with
/// inner spaces only. HTTP strips a value's leading and trailing whitespace, and a non-ASCII
/// key would go out as raw bytes the server decodes differently.
pub fn header_round_trips(key: &str) -> bool {
    let bytes = key.as_bytes();
    match (bytes.first(), bytes.last()) {
        (Some(first), Some(last)) => {
            *first != b' ' && *last != b' ' && bytes.iter().all(|b| (0x20..=0x7e).contains(b))
        }
        _ => false,
    }
}
/// Response header with the request id.
pub const REQUEST_ID_HEADER: &str = "x-request-id";
/// Response header with the trace id.
pub const TRACE_ID_HEADER: &str = "x-cycles-trace-id";
/// The most pages [`CyclesClient::list_reservations_all`] fetches when a host does not say
/// (the bridge's `max_pages` default, and the generated Python signature's).
pub const DEFAULT_MAX_PAGES: usize = 100;

/// The Cycles runtime client. Cheap to share by reference; clone the `Arc` around it if
/// needed. Each method performs exactly one HTTP attempt.
pub struct CyclesClient {
    /// The shared connection pool, driven by whichever runtime the call runs on. Never used
    /// by a call driven on a blocking host's thread (see [`CyclesClient::http`]).
    http: Sender,
    /// Alive as long as this client: a thread's own pool for it is dropped once it is gone.
    alive: Arc<()>,
    base: BaseUrl,
    api_key: HeaderValue,
    /// Strips the API key from every error this client returns (a server may echo it).
    redactor: Redactor,
    config: Config,
    /// `config.max_concurrent_requests` slots; one is held from before a request is sent
    /// until its body is read.
    slots: Arc<Semaphore>,
}

/// The headers of a POST: JSON, and the idempotency key where a header can carry it.
fn post_headers(idempotency_key: &str) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    // The header is optional in the spec, and the server rejects a header that differs
    // from the body's key: a key the header cannot carry byte for byte is sent in the
    // body only.
    if header_round_trips(idempotency_key) {
        if let Ok(v) = HeaderValue::from_str(idempotency_key) {
            headers.insert(HeaderName::from_static(IDEMPOTENCY_KEY_HEADER), v);
        }
    }
    headers
}

impl std::fmt::Debug for CyclesClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CyclesClient")
            .field("base_url", &self.base.as_url().as_str())
            .field(
                "transport",
                &if self.http.is_reqwest() {
                    "reqwest (proxy or credentials in the URL)"
                } else {
                    "hyper-util"
                },
            )
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// Raw outcome of one attempt, before classification.
struct Raw {
    /// The status, correlation headers and (bounded) body.
    got: sender::Received,
    timing: AttemptTiming,
}

impl CyclesClient {
    /// Validates `config` and builds the HTTP client (rustls, no redirects, finite
    /// request and connect timeouts).
    pub fn new(config: Config) -> Result<CyclesClient, Error> {
        config.validate()?;
        let base = BaseUrl::parse(&config.base_url)?;
        let mut api_key = HeaderValue::from_str(config.api_key.expose()).map_err(|_| {
            Error::config("the API key contains characters not allowed in an HTTP header")
        })?;
        // Keeps the value out of reqwest/hyper debug output.
        api_key.set_sensitive(true);
        let http = Sender::new(&config, &base)?;
        Ok(CyclesClient {
            http,
            alive: Arc::new(()),
            base,
            api_key,
            redactor: Redactor::new(config.api_key.expose()),
            slots: Arc::new(Semaphore::new(config.max_concurrent_requests)),
            config,
        })
    }

    /// The configuration this client was built with.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The HTTP client for a request made here. A call driven on a blocking host's thread
    /// ([`crate::runtime::caller`]) gets that thread's own client: hyper spawns a connection's
    /// task on the runtime that opened it, and a connection opened there and put in the
    /// shared pool would stall every other caller while its thread is not waiting.
    fn http(&self) -> Result<Sender, Error> {
        if !crate::runtime::caller::is_driving() {
            return Ok(self.http.clone());
        }
        THREAD_HTTP.with(|cell| {
            let mut clients = cell.borrow_mut();
            let me = Arc::downgrade(&self.alive);
            if let Some((_, c)) = clients.iter().find(|(w, _)| w.ptr_eq(&me)) {
                return Ok(c.clone());
            }
            // Clients dropped since: their idle connections go with them.
            clients.retain(|(w, _)| w.strong_count() > 0);
            let c = Sender::new(&self.config, &self.base)?;
            clients.push((me, c.clone()));
            Ok(c)
        })
    }

    /// `POST /v1/reservations` (`createReservation`).
    pub async fn create_reservation(
        &self,
        req: &ReservationCreateRequest,
    ) -> Result<Response<ReservationCreateResponse>, Error> {
        let url = self.base.join(&["reservations"], &[]);
        self.post(url, req, &req.idempotency_key, Operation::CreateReservation)
            .await
    }

    /// [`Self::create_reservation`] with the protocol's one immediate retry (same key) when
    /// `retry` accepts the first attempt's error. The retry is sent in the first attempt's
    /// request slot, at once and with a whole request timeout of its own: requeued behind a
    /// burst of waiting requests it could spend its timeout in the queue, and a create whose
    /// response was lost after the server applied it would then be left held until its TTL.
    pub async fn create_reservation_retrying(
        &self,
        req: &ReservationCreateRequest,
        retry: impl Fn(&Error) -> bool,
    ) -> Result<Response<ReservationCreateResponse>, Error> {
        let url = self.base.join(&["reservations"], &[]);
        let bytes = to_body(req)?;
        let headers = post_headers(&req.idempotency_key);
        let timeout = self.config.request_timeout;
        let op = Operation::CreateReservation;
        let sent = Instant::now();
        let _slot = self
            .slot(timeout)
            .await
            .map_err(|e| e.redacted(&self.redactor))?;
        let once = |sent: Instant| {
            self.attempt_in_slot(
                Method::POST,
                url.clone(),
                headers.clone(),
                Some(bytes.clone()),
                true,
                sent,
                timeout,
            )
        };
        let classify = |r: Result<Raw, Error>| {
            r.and_then(|raw| finish(raw, op))
                .map_err(|e| e.redacted(&self.redactor))
        };
        match classify(once(sent).await) {
            Err(e) if retry(&e) => classify(once(Instant::now()).await),
            other => other,
        }
    }

    /// `POST /v1/reservations/{id}/commit` (`commitReservation`).
    pub async fn commit_reservation(
        &self,
        id: &str,
        req: &CommitRequest,
    ) -> Result<Response<CommitResponse>, Error> {
        check_path_id("reservation_id", id)?;
        let url = self.base.join(&["reservations", id, "commit"], &[]);
        self.post(url, req, &req.idempotency_key, Operation::CommitReservation)
            .await
    }

    /// `POST /v1/reservations/{id}/release` (`releaseReservation`).
    pub async fn release_reservation(
        &self,
        id: &str,
        req: &ReleaseRequest,
    ) -> Result<Response<ReleaseResponse>, Error> {
        check_path_id("reservation_id", id)?;
        let url = self.base.join(&["reservations", id, "release"], &[]);
        self.post(
            url,
            req,
            &req.idempotency_key,
            Operation::ReleaseReservation,
        )
        .await
    }

    /// `POST /v1/reservations/{id}/extend` (`extendReservation`).
    pub async fn extend_reservation(
        &self,
        id: &str,
        req: &ReservationExtendRequest,
    ) -> Result<Response<ReservationExtendResponse>, Error> {
        self.extend_reservation_within(id, req, self.config.request_timeout)
            .await
    }

    /// `extendReservation` cut off after `timeout` (at most the configured request timeout;
    /// the slot wait counts against it). The heartbeat passes the timeout it derived from the
    /// lease, so the timeout its schedule counts is the one actually enforced.
    pub async fn extend_reservation_within(
        &self,
        id: &str,
        req: &ReservationExtendRequest,
        timeout: Duration,
    ) -> Result<Response<ReservationExtendResponse>, Error> {
        check_path_id("reservation_id", id)?;
        if timeout.is_zero() {
            return Err(Error::invalid_argument(
                "the extend timeout must be positive",
            ));
        }
        let url = self.base.join(&["reservations", id, "extend"], &[]);
        let bytes = to_body(req)?;
        self.post_bytes_within(
            url,
            bytes,
            &req.idempotency_key,
            Operation::ExtendReservation,
            timeout.min(self.config.request_timeout),
        )
        .await
    }

    /// `POST /v1/decide` (`decide`).
    pub async fn decide(&self, req: &DecisionRequest) -> Result<Response<DecisionResponse>, Error> {
        let url = self.base.join(&["decide"], &[]);
        self.post(url, req, &req.idempotency_key, Operation::Decide)
            .await
    }

    /// `POST /v1/events` (`createEvent`; success is HTTP 201).
    pub async fn create_event(
        &self,
        req: &EventCreateRequest,
    ) -> Result<Response<EventCreateResponse>, Error> {
        let url = self.base.join(&["events"], &[]);
        self.post(url, req, &req.idempotency_key, Operation::CreateEvent)
            .await
    }

    /// `commitReservation` with a body sent byte for byte, as stored in the journal.
    ///
    /// Replays must not re-serialize: the reference server compares idempotent payloads in an
    /// order-sensitive way, so a re-ordered or re-typed replay of an applied commit would get
    /// `409 IDEMPOTENCY_MISMATCH` instead of the original success. The idempotency key header
    /// is taken from the body's `idempotency_key`.
    pub async fn commit_reservation_raw(
        &self,
        id: &str,
        body: &RawValue,
    ) -> Result<Response<CommitResponse>, Error> {
        check_path_id("reservation_id", id)?;
        let url = self.base.join(&["reservations", id, "commit"], &[]);
        let key = body_idempotency_key(body);
        self.post_bytes(
            url,
            body.get().as_bytes().to_vec(),
            &key,
            Operation::CommitReservation,
        )
        .await
    }

    /// `createEvent` with a body sent byte for byte (see [`Self::commit_reservation_raw`]).
    pub async fn create_event_raw(
        &self,
        body: &RawValue,
    ) -> Result<Response<EventCreateResponse>, Error> {
        let url = self.base.join(&["events"], &[]);
        let key = body_idempotency_key(body);
        self.post_bytes(
            url,
            body.get().as_bytes().to_vec(),
            &key,
            Operation::CreateEvent,
        )
        .await
    }

    /// `GET /v1/balances` (`getBalances`).
    pub async fn get_balances(&self, q: &BalanceQuery) -> Result<Response<BalanceResponse>, Error> {
        let url = self.base.join(&["balances"], &q.to_pairs());
        self.get(url, true, Operation::GetBalances).await
    }

    /// `GET /v1/reservations` (`listReservations`), one page.
    pub async fn list_reservations(
        &self,
        q: &ListReservationsQuery,
    ) -> Result<Response<ReservationListResponse>, Error> {
        let url = self.base.join(&["reservations"], &q.to_pairs());
        self.get(url, true, Operation::ListReservations).await
    }

    /// Follows `next_cursor` from `q` and returns every row, stopping after `max_pages`
    /// pages (a guard against a server that never ends the listing; the last page fetched
    /// is still included). See [`ListReservationsQuery::next_page`] for the stop rules.
    pub async fn list_reservations_all(
        &self,
        q: &ListReservationsQuery,
        max_pages: usize,
    ) -> Result<Vec<ReservationSummary>, Error> {
        let mut rows = Vec::new();
        let mut query = q.clone();
        for _ in 0..max_pages.max(1) {
            let page = self.list_reservations(&query).await?.body;
            let next = query.next_page(&page);
            rows.extend(page.reservations);
            match next {
                Some(n) => query = n,
                None => break,
            }
        }
        Ok(rows)
    }

    /// `GET /v1/reservations/{id}` (`getReservation`).
    pub async fn get_reservation(&self, id: &str) -> Result<Response<ReservationDetail>, Error> {
        check_path_id("reservation_id", id)?;
        let url = self.base.join(&["reservations", id], &[]);
        self.get(url, true, Operation::GetReservation).await
    }

    /// `GET /v1/evidence/{evidence_id}` (`getEvidence`; public, sent without the API key).
    pub async fn get_evidence(
        &self,
        evidence_id: &str,
    ) -> Result<Response<EvidenceEnvelope>, Error> {
        check_path_id("evidence_id", evidence_id)?;
        let url = self.base.join(&["evidence", evidence_id], &[]);
        self.get(url, false, Operation::GetEvidence).await
    }

    /// `GET /v1/.well-known/cycles-jwks.json` (`getEvidenceJwks`; public).
    pub async fn get_evidence_jwks(&self) -> Result<Response<EvidenceJwks>, Error> {
        let url = self.base.join(&[".well-known", "cycles-jwks.json"], &[]);
        self.get(url, false, Operation::GetEvidenceJwks).await
    }

    async fn post<B: Serialize, T: DeserializeOwned>(
        &self,
        url: ::url::Url,
        body: &B,
        idempotency_key: &str,
        op: Operation,
    ) -> Result<Response<T>, Error> {
        self.post_bytes(url, to_body(body)?, idempotency_key, op)
            .await
    }

    /// POSTs `bytes` exactly as given (one attempt), with the idempotency key header.
    async fn post_bytes<T: DeserializeOwned>(
        &self,
        url: ::url::Url,
        bytes: Vec<u8>,
        idempotency_key: &str,
        op: Operation,
    ) -> Result<Response<T>, Error> {
        let timeout = self.config.request_timeout;
        self.post_bytes_within(url, bytes, idempotency_key, op, timeout)
            .await
    }

    /// [`Self::post_bytes`] with the attempt cut off after `timeout`.
    async fn post_bytes_within<T: DeserializeOwned>(
        &self,
        url: ::url::Url,
        bytes: Vec<u8>,
        idempotency_key: &str,
        op: Operation,
        timeout: Duration,
    ) -> Result<Response<T>, Error> {
        let headers = post_headers(idempotency_key);
        self.exchange(Method::POST, url, headers, Some(bytes), true, op, timeout)
            .await
    }

    async fn get<T: DeserializeOwned>(
        &self,
        url: ::url::Url,
        auth: bool,
        op: Operation,
    ) -> Result<Response<T>, Error> {
        let timeout = self.config.request_timeout;
        self.exchange(Method::GET, url, HeaderMap::new(), None, auth, op, timeout)
            .await
    }

    /// One attempt, classified. Every error leaves through here and is redacted: whatever the
    /// server sent (message, details, codes, ids) may echo the API key.
    #[allow(clippy::too_many_arguments)]
    async fn exchange<T: DeserializeOwned>(
        &self,
        method: Method,
        url: ::url::Url,
        headers: HeaderMap,
        body: Option<Vec<u8>>,
        auth: bool,
        op: Operation,
        timeout: Duration,
    ) -> Result<Response<T>, Error> {
        self.attempt(method, url, headers, body, auth, timeout)
            .await
            .and_then(|raw| finish(raw, op))
            .map_err(|e| e.redacted(&self.redactor))
    }

    /// One HTTP attempt, timed from just before sending to the end of the body, and cut off
    /// after `timeout` (slot wait included).
    async fn attempt(
        &self,
        method: Method,
        url: ::url::Url,
        headers: HeaderMap,
        body: Option<Vec<u8>>,
        auth: bool,
        timeout: Duration,
    ) -> Result<Raw, Error> {
        // The attempt starts before waiting for a slot, and the slot wait and the request
        // together stay within `timeout`: the heartbeat's retry budget assumes no attempt
        // ever takes longer than that.
        let sent = Instant::now();
        let _slot = self.slot(timeout).await?;
        self.attempt_in_slot(method, url, headers, body, auth, sent, timeout)
            .await
    }

    /// Waits (at most `timeout`) for one of the `max_concurrent_requests` request slots.
    async fn slot(&self, timeout: Duration) -> Result<SemaphorePermit<'_>, Error> {
        match tokio::time::timeout(timeout, self.slots.acquire()).await {
            Ok(Ok(slot)) => Ok(slot),
            // The semaphore is never closed; treat it like a full wait anyway.
            Ok(Err(_)) | Err(_) => Err(Error::not_sent(format!(
                "no free request slot within the request timeout ({} in flight at most); \
                 the request was not sent",
                self.config.max_concurrent_requests
            ))),
        }
    }

    /// One HTTP attempt in a slot the caller holds, started at `sent` and cut off `timeout`
    /// after it.
    #[allow(clippy::too_many_arguments)]
    async fn attempt_in_slot(
        &self,
        method: Method,
        url: ::url::Url,
        mut headers: HeaderMap,
        body: Option<Vec<u8>>,
        auth: bool,
        sent: Instant,
        timeout: Duration,
    ) -> Result<Raw, Error> {
        if auth {
            headers.insert(
                HeaderName::from_static(API_KEY_HEADER),
                self.api_key.clone(),
            );
        }
        headers.insert(ACCEPT, HeaderValue::from_static("application/json"));
        let http = self.http()?;
        let left = timeout.saturating_sub(sent.elapsed());
        if left.is_zero() {
            return Err(Error::not_sent(
                "the request timeout elapsed while waiting for a request slot; not sent",
            ));
        }
        let got = http
            .send(
                method,
                url,
                headers,
                body,
                left,
                self.config.max_response_bytes,
            )
            .await?;
        let received = Instant::now();
        Ok(Raw {
            got,
            timing: AttemptTiming { sent, received },
        })
    }
}

thread_local! {
    /// This thread's own HTTP clients (one per live [`CyclesClient`] it drove a call for):
    /// their connections are spawned on, and driven by, this thread's runtime.
    static THREAD_HTTP: std::cell::RefCell<Vec<(std::sync::Weak<()>, Sender)>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// Serializes a request body.
fn to_body<B: Serialize>(body: &B) -> Result<Vec<u8>, Error> {
    serde_json::to_vec(body)
        .map_err(|e| Error::invalid_argument(format!("cannot serialize the request: {e}")))
}

/// The `idempotency_key` of a raw JSON body, or "" (no header is sent then). Read by scanning,
/// so a body with lone surrogates elsewhere still gets its header; a key that itself holds
/// one cannot be a header equal to the body key, so it travels in the body only.
fn body_idempotency_key(body: &RawValue) -> String {
    crate::rawjson::member(body.get(), "idempotency_key")
        .and_then(crate::rawjson::string)
        .filter(|k| k.well_formed)
        .map(|k| k.text)
        .unwrap_or_default()
}

/// Classifies a raw attempt through [`decode::classify`] (the pure path shared with
/// [`decode::decode_response`]) and attaches the transport facts.
fn finish<T: DeserializeOwned>(raw: Raw, op: Operation) -> Result<Response<T>, Error> {
    let Raw { got, timing } = raw;
    if let Some(limit) = got.oversized {
        return Err(decode::oversized(
            op,
            got.status,
            limit,
            got.corr,
            got.retry_after,
        ));
    }
    let body = decode::classify(op, got.status, &got.body, got.corr.clone(), got.retry_after)?;
    Ok(Response {
        body,
        status: got.status,
        request_id: got.corr.request_id,
        trace_id: got.corr.trace_id,
        timing,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Correlation;
    use crate::ErrorKind;

    fn raw(status: u16, body: &str) -> Raw {
        let now = Instant::now();
        Raw {
            got: sender::Received {
                status,
                body: body.as_bytes().to_vec(),
                corr: Correlation {
                    request_id: Some("rq".into()),
                    trace_id: Some("tr".into()),
                },
                retry_after: None,
                oversized: None,
            },
            timing: AttemptTiming {
                sent: now,
                received: now + Duration::from_millis(3),
            },
        }
    }

    #[test]
    fn finish_success_and_ambiguity() {
        let ok: Response<ReservationExtendResponse> = finish(
            raw(
                200,
                r#"{"status":"ACTIVE","expires_at_ms":5,"remaining_ttl_ms":4,"new":1}"#,
            ),
            Operation::ExtendReservation,
        )
        .unwrap();
        assert_eq!(ok.body.remaining_ttl_ms, Some(4));
        assert_eq!(ok.request_id.as_deref(), Some("rq"));
        assert_eq!(ok.timing.rtt(), Duration::from_millis(3));

        for (status, body) in [
            (202, r#"{"status":"ACTIVE","expires_at_ms":5}"#),
            (200, "not json"),
            (200, r#"{"status":"ACTIVE"}"#),
            (200, r#"{"status":"ACTIVE","expires_at_ms":"5"}"#),
            (204, ""),
        ] {
            let e = finish::<ReservationExtendResponse>(
                raw(status, body),
                Operation::ExtendReservation,
            )
            .unwrap_err();
            assert_eq!(e.kind(), &ErrorKind::AmbiguousSuccess, "{status} {body}");
            assert_eq!(e.request_id(), Some("rq"));
        }
        let e = finish::<ReservationExtendResponse>(
            raw(
                410,
                r#"{"error":"RESERVATION_EXPIRED","message":"m","request_id":"x"}"#,
            ),
            Operation::ExtendReservation,
        )
        .unwrap_err();
        assert_eq!(e.kind(), &ErrorKind::ReservationExpired);
    }

    #[test]
    fn client_new_validates_and_hides_key() {
        let key = "super-secret-key-123";
        let c = CyclesClient::new(Config::new("http://127.0.0.1:1/", key)).unwrap();
        assert!(!format!("{c:?}").contains(key));
        let e = CyclesClient::new(Config::new("http://h", "bad\nkey")).unwrap_err();
        assert_eq!(e.kind(), &ErrorKind::Config);
        assert!(!e.to_string().contains("bad\nkey"));
        let e =
            CyclesClient::new(Config::new("http://h", "k").with_request_timeout(Duration::ZERO))
                .unwrap_err();
        assert_eq!(e.kind(), &ErrorKind::Config);
    }
}
