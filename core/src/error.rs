//! The one error type of the crate, with a stable kind taxonomy shared by every binding.
//!
//! # Error kinds
//!
//! [`ErrorKind::code`] and [`ErrorKind::name`] are stable: bindings map them to their
//! exception hierarchy, and they never change meaning. New kinds get new codes.
//!
//! | code | name | kind | meaning | retryable |
//! |-----:|------|------|---------|:---------:|
//! | 1 | `CONFIG` | [`ErrorKind::Config`] | invalid or missing configuration | no |
//! | 2 | `INVALID_ARGUMENT` | [`ErrorKind::InvalidArgument`] | a caller-supplied argument is unusable (e.g. reservation id `..`) | no |
//! | 3 | `RUNTIME` | [`ErrorKind::Runtime`] | the process runtime is unusable (e.g. used after `fork()`) | no |
//! | 4 | `INTERNAL` | [`ErrorKind::Internal`] | a bug in the SDK, e.g. a panic caught at a language boundary | no |
//! | 5 | `MISSING_ACTUAL` | [`ErrorKind::MissingActual`] | guarded work ended without reporting its actual; nothing settled | no |
//! | 6 | `HEARTBEAT_LAPSED` | [`ErrorKind::HeartbeatLapsed`] | fail_on_finalize: the heartbeat stopped before the work ended (actual settled) | no |
//! | 10 | `TRANSPORT_CONNECT` | [`ErrorKind::Connect`] | connection could not be established (refused, DNS, connect timeout): the request was not sent | yes |
//! | 11 | `TRANSPORT_TIMEOUT` | [`ErrorKind::Timeout`] | the per-attempt request timeout elapsed: outcome unknown | yes |
//! | 12 | `TRANSPORT_RESET` | [`ErrorKind::ConnectionReset`] | connection reset or closed without a complete response: outcome unknown | yes |
//! | 13 | `TRANSPORT_OTHER` | [`ErrorKind::Transport`] | any other transport failure | yes |
//! | 20 | `RATE_LIMITED` | [`ErrorKind::RateLimited`] | HTTP 429 (any code); see [`Error::retry_after`] | yes |
//! | 21 | `SERVER_ERROR` | [`ErrorKind::ServerError`] | HTTP 5xx (any code) | yes |
//! | 22 | `AMBIGUOUS_SUCCESS` | [`ErrorKind::AmbiguousSuccess`] | a WRITE's 2xx that is not its schema-valid success: it may have applied | yes (same key) |
//! | 23 | `UNEXPECTED_STATUS` | [`ErrorKind::UnexpectedStatus`] | a non-2xx status with no usable error code that cannot be classified by status | no |
//! | 24 | `INVALID_RESPONSE` | [`ErrorKind::InvalidResponse`] | a READ's 2xx that is not its schema-valid success (nothing to be ambiguous about) | no |
//! | 100 | `INVALID_REQUEST` | [`ErrorKind::InvalidRequest`] | server code (or a bare 400) | no |
//! | 101 | `UNAUTHORIZED` | [`ErrorKind::Unauthorized`] | server code (or a bare 401) | no |
//! | 102 | `FORBIDDEN` | [`ErrorKind::Forbidden`] | server code (or a bare 403) | no |
//! | 103 | `NOT_FOUND` | [`ErrorKind::NotFound`] | server code (or a bare 404) | no |
//! | 104 | `BUDGET_EXCEEDED` | [`ErrorKind::BudgetExceeded`] | server code | no |
//! | 105 | `BUDGET_FROZEN` | [`ErrorKind::BudgetFrozen`] | server code | no |
//! | 106 | `BUDGET_CLOSED` | [`ErrorKind::BudgetClosed`] | server code | no |
//! | 107 | `RESERVATION_EXPIRED` | [`ErrorKind::ReservationExpired`] | server code (or a bare 410) | no |
//! | 108 | `RESERVATION_FINALIZED` | [`ErrorKind::ReservationFinalized`] | server code | no |
//! | 109 | `IDEMPOTENCY_MISMATCH` | [`ErrorKind::IdempotencyMismatch`] | server code | no |
//! | 110 | `UNIT_MISMATCH` | [`ErrorKind::UnitMismatch`] | server code | no |
//! | 111 | `OVERDRAFT_LIMIT_EXCEEDED` | [`ErrorKind::OverdraftLimitExceeded`] | server code | no |
//! | 112 | `DEBT_OUTSTANDING` | [`ErrorKind::DebtOutstanding`] | server code | no |
//! | 113 | `MAX_EXTENSIONS_EXCEEDED` | [`ErrorKind::MaxExtensionsExceeded`] | server code | no |
//! | 114 | `LIMIT_EXCEEDED` | [`ErrorKind::LimitExceeded`] | server code with a status other than 429 | yes |
//! | 115 | `TENANT_CLOSED` | [`ErrorKind::TenantClosed`] | server code | no |
//! | 116 | `INTERNAL_ERROR` | [`ErrorKind::InternalError`] | server code with a status other than 5xx | yes |
//! | 199 | `UNKNOWN_ERROR_CODE` | [`ErrorKind::Unknown`] | a server code this client does not know (kept verbatim) | no |
//!
//! Classification of a non-2xx response: 429 is always `RATE_LIMITED` and 5xx always
//! `SERVER_ERROR` (the retry policy depends on the status class, whatever the body says);
//! otherwise the body's `error` code decides; with no readable code (non-JSON body, no
//! `error` field) the status decides (400, 401, 403, 404, 410), else `UNEXPECTED_STATUS`.
//! The server's code string is always available from [`Error::server_code`].
//!
//! "Retryable" means: repeating the same request (a write with the same idempotency key) may
//! succeed. A schema-invalid 2xx is classified by whether the operation has a side effect
//! ([`crate::transport::decode::Operation::has_side_effect`]): for a write
//! (create/commit/release/extend reservation, createEvent) the server may have applied it, so
//! it is `AMBIGUOUS_SUCCESS` and the same-key retry is how the outcome is learnt; for a read
//! (getReservation, listReservations, getBalances, getEvidence, getEvidenceJwks, and decide,
//! which persists nothing) there is nothing to resolve and the same server will most likely
//! send the same body again, so it is `INVALID_RESPONSE` and NOT retryable: an application that
//! retries retryable errors never loops on a read.
//!
//! # Secrets
//!
//! The API key never appears in any error. The SDK's own texts never include it (it is only
//! ever sent as a header, and neither messages nor the transport sources include request
//! headers), and a server that echoes it back (e.g. "key sk-... is revoked" in a 401) is
//! redacted: the transport passes every error it returns through `Error::redacted`, which
//! replaces the configured key (and its JSON-escaped and percent-encoded forms) with
//! [`crate::redact::REDACTED`] in the message, `details` (keys and values), the server code
//! (also inside [`ErrorKind::Unknown`]), the request and trace ids, the evidence reference and
//! the raw `Retry-After`. Events, log lines, settlement outcomes and every binding's
//! exceptions are built from these fields, so they inherit it.

use std::fmt;

use crate::model::{ErrorResponse, EvidenceRef, Metadata};
use crate::redact::Redactor;
use crate::transport::retry_after::RetryAfter;

/// Stable classification of an [`Error`]; see the module table for codes and names.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// Invalid or missing configuration.
    Config,
    /// A caller-supplied argument is unusable.
    InvalidArgument,
    /// The process runtime is unusable (e.g. after `fork()`).
    Runtime,
    /// A bug in the SDK itself (e.g. a panic caught at a language boundary).
    Internal,
    /// Guarded work ended normally without reporting its actual amount; nothing was settled
    /// (the guarded lifecycle's boundary outcome, see `guard::GuardError::MissingActual`).
    MissingActual,
    /// Under the fail_on_finalize policy the heartbeat stopped before the work ended; the
    /// actual was still settled (see `guard::GuardError::HeartbeatLapsed`).
    HeartbeatLapsed,
    /// Could not connect; the request was not sent.
    Connect,
    /// The per-attempt timeout elapsed; the outcome is unknown.
    Timeout,
    /// Connection reset or closed without a complete response; the outcome is unknown.
    ConnectionReset,
    /// Any other transport failure.
    Transport,
    /// HTTP 429.
    RateLimited,
    /// HTTP 5xx.
    ServerError,
    /// A 2xx response to a write that is not the operation's schema-valid success.
    AmbiguousSuccess,
    /// A non-2xx status that could not be classified.
    UnexpectedStatus,
    /// A 2xx response to a read (no side effect) that is not its schema-valid success.
    InvalidResponse,
    /// `INVALID_REQUEST`.
    InvalidRequest,
    /// `UNAUTHORIZED`.
    Unauthorized,
    /// `FORBIDDEN`.
    Forbidden,
    /// `NOT_FOUND`.
    NotFound,
    /// `BUDGET_EXCEEDED`.
    BudgetExceeded,
    /// `BUDGET_FROZEN`.
    BudgetFrozen,
    /// `BUDGET_CLOSED`.
    BudgetClosed,
    /// `RESERVATION_EXPIRED`.
    ReservationExpired,
    /// `RESERVATION_FINALIZED`.
    ReservationFinalized,
    /// `IDEMPOTENCY_MISMATCH`.
    IdempotencyMismatch,
    /// `UNIT_MISMATCH`.
    UnitMismatch,
    /// `OVERDRAFT_LIMIT_EXCEEDED`.
    OverdraftLimitExceeded,
    /// `DEBT_OUTSTANDING`.
    DebtOutstanding,
    /// `MAX_EXTENSIONS_EXCEEDED`.
    MaxExtensionsExceeded,
    /// `LIMIT_EXCEEDED` with a status other than 429.
    LimitExceeded,
    /// `TENANT_CLOSED`.
    TenantClosed,
    /// `INTERNAL_ERROR` with a status other than 5xx.
    InternalError,
    /// A server error code unknown to this client, verbatim.
    Unknown(String),
}

/// The server codes of the spec's `ErrorCode` enum, in spec order, with their kinds.
const SERVER_CODES: &[(&str, ErrorKind)] = &[
    ("INVALID_REQUEST", ErrorKind::InvalidRequest),
    ("UNAUTHORIZED", ErrorKind::Unauthorized),
    ("FORBIDDEN", ErrorKind::Forbidden),
    ("NOT_FOUND", ErrorKind::NotFound),
    ("BUDGET_EXCEEDED", ErrorKind::BudgetExceeded),
    ("BUDGET_FROZEN", ErrorKind::BudgetFrozen),
    ("BUDGET_CLOSED", ErrorKind::BudgetClosed),
    ("RESERVATION_EXPIRED", ErrorKind::ReservationExpired),
    ("RESERVATION_FINALIZED", ErrorKind::ReservationFinalized),
    ("IDEMPOTENCY_MISMATCH", ErrorKind::IdempotencyMismatch),
    ("UNIT_MISMATCH", ErrorKind::UnitMismatch),
    (
        "OVERDRAFT_LIMIT_EXCEEDED",
        ErrorKind::OverdraftLimitExceeded,
    ),
    ("DEBT_OUTSTANDING", ErrorKind::DebtOutstanding),
    ("MAX_EXTENSIONS_EXCEEDED", ErrorKind::MaxExtensionsExceeded),
    ("LIMIT_EXCEEDED", ErrorKind::LimitExceeded),
    ("TENANT_CLOSED", ErrorKind::TenantClosed),
    ("INTERNAL_ERROR", ErrorKind::InternalError),
];

impl ErrorKind {
    /// Every kind with a fixed code, in code order (`Unknown` stands for any unknown server
    /// code). Bindings build their exception tables from this, so no language keeps a copy.
    pub fn all() -> Vec<ErrorKind> {
        use ErrorKind::*;
        let mut kinds = vec![
            Config,
            InvalidArgument,
            Runtime,
            Internal,
            MissingActual,
            HeartbeatLapsed,
            Connect,
            Timeout,
            ConnectionReset,
            Transport,
            RateLimited,
            ServerError,
            AmbiguousSuccess,
            UnexpectedStatus,
            InvalidResponse,
        ];
        kinds.extend(SERVER_CODES.iter().map(|(_, k)| k.clone()));
        kinds.push(Unknown(String::new()));
        kinds
    }

    /// The kind of a server `ErrorCode` string; unknown strings give [`ErrorKind::Unknown`].
    pub fn from_server_code(code: &str) -> ErrorKind {
        SERVER_CODES
            .iter()
            .find(|(c, _)| *c == code)
            .map(|(_, k)| k.clone())
            .unwrap_or_else(|| ErrorKind::Unknown(code.to_string()))
    }

    /// Stable numeric code (see the module table).
    pub fn code(&self) -> u32 {
        use ErrorKind::*;
        match self {
            Config => 1,
            InvalidArgument => 2,
            Runtime => 3,
            Internal => 4,
            MissingActual => 5,
            HeartbeatLapsed => 6,
            Connect => 10,
            Timeout => 11,
            ConnectionReset => 12,
            Transport => 13,
            RateLimited => 20,
            ServerError => 21,
            AmbiguousSuccess => 22,
            UnexpectedStatus => 23,
            InvalidResponse => 24,
            InvalidRequest => 100,
            Unauthorized => 101,
            Forbidden => 102,
            NotFound => 103,
            BudgetExceeded => 104,
            BudgetFrozen => 105,
            BudgetClosed => 106,
            ReservationExpired => 107,
            ReservationFinalized => 108,
            IdempotencyMismatch => 109,
            UnitMismatch => 110,
            OverdraftLimitExceeded => 111,
            DebtOutstanding => 112,
            MaxExtensionsExceeded => 113,
            LimitExceeded => 114,
            TenantClosed => 115,
            InternalError => 116,
            Unknown(_) => 199,
        }
    }

    /// Stable name (see the module table). Server kinds use the spec's code string.
    pub fn name(&self) -> &'static str {
        use ErrorKind::*;
        match self {
            Config => "CONFIG",
            InvalidArgument => "INVALID_ARGUMENT",
            Runtime => "RUNTIME",
            Internal => "INTERNAL",
            MissingActual => "MISSING_ACTUAL",
            HeartbeatLapsed => "HEARTBEAT_LAPSED",
            Connect => "TRANSPORT_CONNECT",
            Timeout => "TRANSPORT_TIMEOUT",
            ConnectionReset => "TRANSPORT_RESET",
            Transport => "TRANSPORT_OTHER",
            RateLimited => "RATE_LIMITED",
            ServerError => "SERVER_ERROR",
            AmbiguousSuccess => "AMBIGUOUS_SUCCESS",
            UnexpectedStatus => "UNEXPECTED_STATUS",
            InvalidResponse => "INVALID_RESPONSE",
            Unknown(_) => "UNKNOWN_ERROR_CODE",
            other => SERVER_CODES
                .iter()
                .find(|(_, k)| k == other)
                .map(|(c, _)| *c)
                .unwrap_or("UNKNOWN_ERROR_CODE"),
        }
    }

    /// Whether retrying the same request (with the same idempotency key) may succeed.
    /// Transient transport failures, throttling, 5xx and ambiguous 2xx of writes are
    /// retryable; a server's understood rejection and an invalid 2xx of a read are not.
    pub fn retryable(&self) -> bool {
        use ErrorKind::*;
        matches!(
            self,
            Connect
                | Timeout
                | ConnectionReset
                | Transport
                | RateLimited
                | ServerError
                | AmbiguousSuccess
                | LimitExceeded
                | InternalError
        )
    }

    /// True for the transport kinds (no HTTP response was received).
    pub fn is_transport(&self) -> bool {
        use ErrorKind::*;
        matches!(self, Connect | Timeout | ConnectionReset | Transport)
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ErrorKind::Unknown(code) => write!(f, "UNKNOWN_ERROR_CODE({code})"),
            k => f.write_str(k.name()),
        }
    }
}

/// The error of every fallible `cycles_core` function. Boxed so `Result<T, Error>` stays
/// one pointer wide on the happy path.
pub struct Error {
    inner: Box<Inner>,
}

#[derive(Debug)]
struct Inner {
    kind: ErrorKind,
    message: String,
    http_status: Option<u16>,
    server_code: Option<String>,
    request_id: Option<String>,
    trace_id: Option<String>,
    details: Option<Metadata>,
    retry_after: Option<RetryAfter>,
    cycles_evidence: Option<EvidenceRef>,
    source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
}

/// Correlation ids captured from response headers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Correlation {
    pub request_id: Option<String>,
    pub trace_id: Option<String>,
}

/// A JSON error's reason without serde's position ("at line 1 column 14"): the text was
/// encoded by a host binding, never written by the user, so a position in it only misleads.
pub fn json_reason(e: &serde_json::Error) -> String {
    let text = e.to_string();
    let position = format!(" at line {} column {}", e.line(), e.column());
    match text.strip_suffix(&position) {
        Some(reason) => reason.to_string(),
        None => text,
    }
}

impl Error {
    fn new(kind: ErrorKind, message: impl Into<String>) -> Error {
        Error {
            inner: Box::new(Inner {
                kind,
                message: message.into(),
                http_status: None,
                server_code: None,
                request_id: None,
                trace_id: None,
                details: None,
                retry_after: None,
                cycles_evidence: None,
                source: None,
            }),
        }
    }

    /// A configuration error. The message must never contain the API key.
    pub fn config(message: impl Into<String>) -> Error {
        Error::new(ErrorKind::Config, message)
    }

    /// An invalid-argument error.
    pub fn invalid_argument(message: impl Into<String>) -> Error {
        Error::new(ErrorKind::InvalidArgument, message)
    }

    /// A runtime error (e.g. use after `fork()`).
    pub fn runtime(message: impl Into<String>) -> Error {
        Error::new(ErrorKind::Runtime, message)
    }

    /// An internal error: a bug in the SDK (bindings report caught panics with it).
    pub fn internal(message: impl Into<String>) -> Error {
        Error::new(ErrorKind::Internal, message)
    }

    /// A request that was provably never sent (e.g. no free request slot in time): a
    /// connect-class error, safe to retry.
    pub(crate) fn not_sent(message: impl Into<String>) -> Error {
        let message = format!("{}: {}", ErrorKind::Connect.name(), message.into());
        Error::new(ErrorKind::Connect, message)
    }

    /// The request got no complete response within its timeout.
    pub(crate) fn timed_out(message: impl Into<String>) -> Error {
        let message = format!("{}: {}", ErrorKind::Timeout.name(), message.into());
        Error::new(ErrorKind::Timeout, message)
    }

    /// Classifies a failure of the direct transport (hyper-util's client or a response body)
    /// into the transport kinds, as [`Error::from_reqwest`] does reqwest's.
    pub(crate) fn from_transport<E>(e: E, phase: crate::transport::sender::Phase) -> Error
    where
        E: std::error::Error + Send + Sync + 'static,
    {
        use crate::transport::sender::Phase;
        let kind = match phase {
            // Proves the request was never sent, even when the connect timed out.
            Phase::Connect => ErrorKind::Connect,
            Phase::Exchange if has_io_kind(&e, &[std::io::ErrorKind::TimedOut]) => {
                ErrorKind::Timeout
            }
            Phase::Exchange if is_reset(&e) => ErrorKind::ConnectionReset,
            Phase::Exchange => ErrorKind::Transport,
        };
        let message = format!("{}: {}", kind.name(), describe_chain(&e));
        let mut err = Error::new(kind, message);
        err.inner.source = Some(Box::new(e));
        err
    }

    /// This error with `what` (the request: method and URL, never headers) appended.
    pub(crate) fn context(mut self, what: &str) -> Error {
        self.inner.message = format!("{} ({what})", self.inner.message);
        self
    }

    /// Classifies a reqwest failure into the transport kinds.
    pub(crate) fn from_reqwest(e: reqwest::Error) -> Error {
        // Connect first: a connect-phase failure (even a connect timeout) proves the request
        // was never sent, which is the most useful fact for a retry layer.
        let kind = if e.is_connect() {
            ErrorKind::Connect
        } else if e.is_timeout() {
            ErrorKind::Timeout
        } else if is_reset(&e) {
            ErrorKind::ConnectionReset
        } else {
            ErrorKind::Transport
        };
        // reqwest's Display includes the URL (never headers, so never the key).
        let message = format!("{}: {}", kind.name(), describe_chain(&e));
        let mut err = Error::new(kind, message);
        err.inner.source = Some(Box::new(e));
        err
    }

    /// Builds the error of a non-2xx HTTP response.
    pub(crate) fn from_http(
        status: u16,
        body: &[u8],
        corr: Correlation,
        retry_after: Option<String>,
    ) -> Error {
        let parsed = ErrorResponse::parse(body);
        let code = parsed.as_ref().and_then(|p| p.error.clone());
        let kind = match status {
            429 => ErrorKind::RateLimited,
            500..=599 => ErrorKind::ServerError,
            _ => match &code {
                Some(c) => ErrorKind::from_server_code(c),
                None => match status {
                    400 => ErrorKind::InvalidRequest,
                    401 => ErrorKind::Unauthorized,
                    403 => ErrorKind::Forbidden,
                    404 => ErrorKind::NotFound,
                    410 => ErrorKind::ReservationExpired,
                    _ => ErrorKind::UnexpectedStatus,
                },
            },
        };
        let message = match parsed.as_ref().and_then(|p| p.message.clone()) {
            Some(m) => m,
            None if parsed.is_some() => format!("HTTP {status}"),
            None => format!("HTTP {status} with a non-JSON error body"),
        };
        let mut err = Error::new(kind, message);
        err.inner.http_status = Some(status);
        err.inner.server_code = code;
        let p = parsed.unwrap_or_default();
        // Headers win: they are per HTTP request; the body ids are a fallback.
        err.inner.request_id = corr.request_id.or(p.request_id);
        err.inner.trace_id = corr.trace_id.or(p.trace_id);
        err.inner.details = p.details;
        err.inner.cycles_evidence = p.cycles_evidence;
        err.inner.retry_after = retry_after.map(RetryAfter::from_raw);
        err
    }

    /// A 2xx response to a write that failed the operation's success predicate or could not
    /// be decoded.
    pub(crate) fn ambiguous(status: u16, why: impl fmt::Display, corr: Correlation) -> Error {
        Error::bad_success(ErrorKind::AmbiguousSuccess, status, why, corr)
    }

    /// The same for a read: `INVALID_RESPONSE`, not retryable.
    pub(crate) fn invalid_response(
        status: u16,
        why: impl fmt::Display,
        corr: Correlation,
    ) -> Error {
        Error::bad_success(ErrorKind::InvalidResponse, status, why, corr)
    }

    fn bad_success(
        kind: ErrorKind,
        status: u16,
        why: impl fmt::Display,
        corr: Correlation,
    ) -> Error {
        let mut err = Error::new(
            kind,
            format!("HTTP {status} is not a schema-valid success: {why}"),
        );
        err.inner.http_status = Some(status);
        err.inner.request_id = corr.request_id;
        err.inner.trace_id = corr.trace_id;
        err
    }

    /// This error with every server-supplied string stripped of `redactor`'s secret (see the
    /// module docs, "Secrets").
    pub(crate) fn redacted(mut self, redactor: &Redactor) -> Error {
        let i = &mut *self.inner;
        redactor.string(&mut i.message);
        if let ErrorKind::Unknown(code) = &mut i.kind {
            redactor.string(code);
        }
        let strings = [
            i.server_code.as_mut(),
            i.request_id.as_mut(),
            i.trace_id.as_mut(),
            i.retry_after.as_mut().map(|r| &mut r.raw),
        ];
        strings
            .into_iter()
            .flatten()
            .for_each(|s| redactor.string(s));
        if let Some(d) = &mut i.details {
            redactor.map(d);
        }
        if let Some(ev) = &mut i.cycles_evidence {
            redactor.string(&mut ev.evidence_id);
            redactor.string(&mut ev.cycles_evidence_url);
        }
        self
    }

    /// The stable kind.
    pub fn kind(&self) -> &ErrorKind {
        &self.inner.kind
    }

    /// The stable numeric code of the kind.
    pub fn code(&self) -> u32 {
        self.inner.kind.code()
    }

    /// Human-readable message (server message when there was one). Never contains the API
    /// key (see the module docs, "Secrets").
    pub fn message(&self) -> &str {
        &self.inner.message
    }

    /// Whether a same-key retry may succeed (see [`ErrorKind::retryable`]).
    pub fn retryable(&self) -> bool {
        self.inner.kind.retryable()
    }

    /// HTTP status, when a response was received.
    pub fn http_status(&self) -> Option<u16> {
        self.inner.http_status
    }

    /// The server's `error` code string verbatim, when the body carried one.
    pub fn server_code(&self) -> Option<&str> {
        self.inner.server_code.as_deref()
    }

    /// `X-Request-Id` (or the body's `request_id`).
    pub fn request_id(&self) -> Option<&str> {
        self.inner.request_id.as_deref()
    }

    /// `X-Cycles-Trace-Id` (or the body's `trace_id`).
    pub fn trace_id(&self) -> Option<&str> {
        self.inner.trace_id.as_deref()
    }

    /// The error body's `details` object.
    pub fn details(&self) -> Option<&Metadata> {
        self.inner.details.as_ref()
    }

    /// The `Retry-After` header, when one came with the response (any status).
    pub fn retry_after(&self) -> Option<&RetryAfter> {
        self.inner.retry_after.as_ref()
    }

    /// Evidence reference of a denial, when the server emitted one.
    pub fn cycles_evidence(&self) -> Option<&EvidenceRef> {
        self.inner.cycles_evidence.as_ref()
    }
}

/// Whether an I/O error of one of `kinds` is in `e`'s source chain.
fn has_io_kind(e: &(dyn std::error::Error + 'static), kinds: &[std::io::ErrorKind]) -> bool {
    let mut src: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(s) = src {
        if let Some(io) = s.downcast_ref::<std::io::Error>() {
            if kinds.contains(&io.kind()) {
                return true;
            }
        }
        src = s.source();
    }
    false
}

fn is_reset(e: &(dyn std::error::Error + 'static)) -> bool {
    use std::io::ErrorKind as K;
    let resets = [
        K::ConnectionReset,
        K::ConnectionAborted,
        K::BrokenPipe,
        K::UnexpectedEof,
    ];
    if has_io_kind(e, &resets) {
        return true;
    }
    let mut src: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(s) = src {
        if let Some(h) = s.downcast_ref::<hyper::Error>() {
            // "connection closed before message completed": the server went away without
            // a complete response.
            if h.is_incomplete_message() || h.is_canceled() {
                return true;
            }
        }
        src = s.source();
    }
    false
}

fn describe_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut src = e.source();
    while let Some(s) = src {
        let t = s.to_string();
        if !out.contains(&t) {
            out.push_str(": ");
            out.push_str(&t);
        }
        src = s.source();
    }
    out
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let i = &self.inner;
        f.debug_struct("Error")
            .field("kind", &i.kind)
            .field("code", &i.kind.code())
            .field("message", &i.message)
            .field("http_status", &i.http_status)
            .field("server_code", &i.server_code)
            .field("request_id", &i.request_id)
            .field("trace_id", &i.trace_id)
            .field("details", &i.details)
            .field("retry_after", &i.retry_after)
            .finish_non_exhaustive()
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}] ", self.inner.kind)?;
        if let Some(s) = self.inner.http_status {
            write!(f, "HTTP {s}: ")?;
        }
        f.write_str(&self.inner.message)?;
        if let Some(r) = &self.inner.request_id {
            write!(f, " (request_id {r})")?;
        }
        Ok(())
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.inner
            .source
            .as_ref()
            .map(|s| s.as_ref() as &(dyn std::error::Error + 'static))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_reasons_carry_no_position() {
        for text in ["{\"a\": 1,", "[1]", "{\"x\": tru}", "\n\n  {\"a\" 1}"] {
            let e =
                serde_json::from_str::<std::collections::HashMap<String, i64>>(text).unwrap_err();
            let reason = json_reason(&e);
            assert!(!reason.contains(" at line "), "{text:?}: {reason}");
            assert!(!reason.is_empty());
        }
        let e = serde_json::from_str::<i64>("\"x\"").unwrap_err();
        assert_eq!(json_reason(&e), "invalid type: string \"x\", expected i64");
    }

    fn corr() -> Correlation {
        Correlation {
            request_id: Some("hdr-req".into()),
            trace_id: None,
        }
    }

    #[test]
    fn codes_and_names_are_unique_and_stable() {
        let all = ErrorKind::all();
        assert!(
            all.windows(2).all(|w| w[0].code() < w[1].code()),
            "all() is in code order"
        );
        let mut codes: Vec<u32> = all.iter().map(ErrorKind::code).collect();
        let mut names: Vec<&str> = all.iter().map(ErrorKind::name).collect();
        codes.sort_unstable();
        codes.dedup();
        names.sort_unstable();
        names.dedup();
        assert_eq!(codes.len(), all.len());
        assert_eq!(names.len(), all.len());
        for (i, (c, k)) in SERVER_CODES.iter().enumerate() {
            assert_eq!(k.name(), *c);
            assert_eq!(k.code(), 100 + i as u32);
            assert_eq!(&ErrorKind::from_server_code(c), k);
        }
        assert_eq!(ErrorKind::Timeout.code(), 11);
        assert_eq!(ErrorKind::AmbiguousSuccess.name(), "AMBIGUOUS_SUCCESS");
    }

    #[test]
    fn parses_error_body_with_unknown_fields() {
        let body = br#"{"error":"UNIT_MISMATCH","message":"unit differs","request_id":"body-req",
            "trace_id":"0123456789abcdef0123456789abcdef","details":{"expected":"TOKENS"},"future":[1]}"#;
        let e = Error::from_http(400, body, corr(), None);
        assert_eq!(e.kind(), &ErrorKind::UnitMismatch);
        assert_eq!(e.server_code(), Some("UNIT_MISMATCH"));
        assert_eq!(e.message(), "unit differs");
        assert_eq!(e.request_id(), Some("hdr-req"));
        assert_eq!(e.trace_id(), Some("0123456789abcdef0123456789abcdef"));
        assert_eq!(e.details().unwrap()["expected"], "TOKENS");
        assert!(!e.retryable());
        assert_eq!(e.http_status(), Some(400));
    }

    #[test]
    fn unknown_code_is_kept() {
        let e = Error::from_http(
            409,
            br#"{"error":"ACTION_QUOTA_EXCEEDED","message":"m","request_id":"r"}"#,
            Correlation::default(),
            None,
        );
        assert_eq!(
            e.kind(),
            &ErrorKind::Unknown("ACTION_QUOTA_EXCEEDED".into())
        );
        assert_eq!(e.code(), 199);
        assert_eq!(e.request_id(), Some("r"));
        assert!(e.to_string().contains("ACTION_QUOTA_EXCEEDED"));
    }

    #[test]
    fn non_json_body_typed_by_status() {
        for (status, kind) in [
            (400, ErrorKind::InvalidRequest),
            (401, ErrorKind::Unauthorized),
            (403, ErrorKind::Forbidden),
            (404, ErrorKind::NotFound),
            (410, ErrorKind::ReservationExpired),
            (409, ErrorKind::UnexpectedStatus),
            (418, ErrorKind::UnexpectedStatus),
            (302, ErrorKind::UnexpectedStatus),
            (429, ErrorKind::RateLimited),
            (500, ErrorKind::ServerError),
            (503, ErrorKind::ServerError),
        ] {
            let e = Error::from_http(status, b"<html>oops</html>", Correlation::default(), None);
            assert_eq!(e.kind(), &kind, "status {status}");
            assert_eq!(e.server_code(), None);
            assert!(e.message().contains("non-JSON"));
        }
        // JSON without an `error` field is classified by status too.
        let e = Error::from_http(404, br#"{"message":"gone"}"#, Correlation::default(), None);
        assert_eq!(e.kind(), &ErrorKind::NotFound);
        assert_eq!(e.message(), "gone");
    }

    #[test]
    fn status_class_beats_code_for_429_and_5xx() {
        let e = Error::from_http(
            429,
            br#"{"error":"LIMIT_EXCEEDED","message":"slow down","request_id":"r"}"#,
            Correlation::default(),
            Some("3".into()),
        );
        assert_eq!(e.kind(), &ErrorKind::RateLimited);
        assert_eq!(e.server_code(), Some("LIMIT_EXCEEDED"));
        assert_eq!(e.retry_after().unwrap().delta_seconds, Some(3));
        assert!(e.retryable());
        let e = Error::from_http(
            429,
            b"",
            Correlation::default(),
            Some("Wed, 21 Oct 2015 07:28:00 GMT".into()),
        );
        let ra = e.retry_after().unwrap();
        assert_eq!(ra.delta_seconds, None);
        assert_eq!(ra.raw, "Wed, 21 Oct 2015 07:28:00 GMT");
        let e = Error::from_http(
            503,
            br#"{"error":"INTERNAL_ERROR","message":"m","request_id":"r"}"#,
            Correlation::default(),
            None,
        );
        assert_eq!(e.kind(), &ErrorKind::ServerError);
        assert!(e.retryable());
    }

    #[test]
    fn ambiguous_is_retryable() {
        let e = Error::ambiguous(202, "expected HTTP 200, got 202", corr());
        assert_eq!(e.kind(), &ErrorKind::AmbiguousSuccess);
        assert!(e.retryable());
        assert_eq!(e.http_status(), Some(202));
        assert!(format!("{e:?}").contains("AmbiguousSuccess"));
    }

    #[test]
    fn invalid_response_is_not_retryable() {
        let e = Error::invalid_response(200, "missing required field `reservations`", corr());
        assert_eq!(e.kind(), &ErrorKind::InvalidResponse);
        assert_eq!((e.code(), e.kind().name()), (24, "INVALID_RESPONSE"));
        assert!(!e.retryable());
        assert_eq!(e.http_status(), Some(200));
        assert_eq!(e.request_id(), Some("hdr-req"));
        assert!(ErrorKind::all().contains(&ErrorKind::InvalidResponse));
    }
}
