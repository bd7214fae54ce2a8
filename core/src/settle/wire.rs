//! Byte-faithful settlement requests: POSTs a journaled body exactly as stored.
//!
//! [`crate::CyclesClient`] serializes typed requests, which would re-order or re-type a body
//! another SDK wrote (the reference server then answers a replay of an applied commit with
//! `409 IDEMPOTENCY_MISMATCH`). This is the same single-attempt transport (rustls, no
//! redirects, the client's timeouts, API key as a sensitive header, body key copied into
//! `X-Idempotency-Key`) with the same classification (`Error::from_http`, the strict success
//! predicates, ambiguous 2xx), over raw JSON.

use reqwest::header::{HeaderMap, HeaderName, HeaderValue, ACCEPT, CONTENT_TYPE};
use serde::de::DeserializeOwned;
use serde_json::value::RawValue;
use serde_json::Value;

use crate::config::Config;
use crate::error::{Correlation, Error};
use crate::model::validate::{self, SchemaViolation};
use crate::model::{CommitResponse, EventCreateResponse};
use crate::transport::url::{check_path_id, BaseUrl};
use crate::transport::{
    API_KEY_HEADER, IDEMPOTENCY_KEY_HEADER, REQUEST_ID_HEADER, TRACE_ID_HEADER,
};

type Predicate = fn(u16, &Value) -> Result<(), SchemaViolation>;

/// A raw-body settlement transport for one server and credential.
pub(crate) struct Wire {
    http: reqwest::Client,
    base: BaseUrl,
    api_key: HeaderValue,
}

impl Wire {
    pub(crate) fn new(config: &Config) -> Result<Wire, Error> {
        config.validate()?;
        let base = BaseUrl::parse(&config.base_url)?;
        let mut api_key = HeaderValue::from_str(config.api_key.expose()).map_err(|_| {
            Error::config("the API key contains characters not allowed in an HTTP header")
        })?;
        api_key.set_sensitive(true);
        let http = reqwest::Client::builder()
            .timeout(config.request_timeout)
            .connect_timeout(config.connect_timeout)
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("cycles-core/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| Error::config(format!("cannot build the HTTP client: {e}")))?;
        Ok(Wire {
            http,
            base,
            api_key,
        })
    }

    /// `POST /v1/reservations/{id}/commit` with `body` verbatim; 200 `CommitResponse` only.
    pub(crate) async fn commit(&self, id: &str, body: &RawValue) -> Result<CommitResponse, Error> {
        check_path_id("reservation_id", id)?;
        let url = self.base.join(&["reservations", id, "commit"], &[]);
        self.post(url, body, validate::commit_reservation).await
    }

    /// `POST /v1/events` with `body` verbatim; 201 `EventCreateResponse` only.
    pub(crate) async fn event(&self, body: &RawValue) -> Result<EventCreateResponse, Error> {
        let url = self.base.join(&["events"], &[]);
        self.post(url, body, validate::create_event).await
    }

    async fn post<T: DeserializeOwned>(
        &self,
        url: url::Url,
        body: &RawValue,
        predicate: Predicate,
    ) -> Result<T, Error> {
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        headers.insert(ACCEPT, HeaderValue::from_static("application/json"));
        headers.insert(
            HeaderName::from_static(API_KEY_HEADER),
            self.api_key.clone(),
        );
        let key = serde_json::from_str::<Value>(body.get())
            .ok()
            .and_then(|v| v.get("idempotency_key")?.as_str().map(str::to_string));
        if let Some(v) = key
            .as_deref()
            .filter(|k| !k.is_empty())
            .and_then(|k| HeaderValue::from_str(k).ok())
        {
            headers.insert(HeaderName::from_static(IDEMPOTENCY_KEY_HEADER), v);
        }
        let resp = self
            .http
            .post(url)
            .headers(headers)
            .body(body.get().as_bytes().to_vec())
            .send()
            .await
            .map_err(Error::from_reqwest)?;
        let status = resp.status().as_u16();
        let h = resp.headers();
        let header = |name: &str| {
            h.get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        };
        let corr = Correlation {
            request_id: header(REQUEST_ID_HEADER),
            trace_id: header(TRACE_ID_HEADER),
        };
        let retry_after = header("retry-after");
        let bytes = resp.bytes().await.map_err(Error::from_reqwest)?;
        if !(200..300).contains(&status) {
            return Err(Error::from_http(status, &bytes, corr, retry_after));
        }
        let value: Value = serde_json::from_slice(&bytes).map_err(|e| {
            Error::ambiguous(status, format!("body is not JSON ({e})"), corr.clone())
        })?;
        predicate(status, &value).map_err(|v| Error::ambiguous(status, v, corr.clone()))?;
        serde_json::from_value(value)
            .map_err(|e| Error::ambiguous(status, format!("cannot decode ({e})"), corr))
    }
}
