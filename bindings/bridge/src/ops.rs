//! The operation table of the runtime plane: a host names an operation and passes its
//! arguments as JSON; the bridge decodes them with core's own serde model, runs core, and
//! returns the response body as JSON plus the transport facts ([`Reply`]). All behaviour is
//! core's; this only routes arguments.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cycles_core::error::json_reason;
use cycles_core::guard::GuardSpec;
use cycles_core::transport::decode::{decode_response, http_error, Operation};
use cycles_core::transport::DEFAULT_MAX_PAGES;
use cycles_core::{
    BalanceQuery, CommitRequest, Config, CyclesClient, DecisionRequest, Error, EventCreateRequest,
    ListReservationsQuery, ReleaseRequest, ReservationCreateRequest, ReservationExtendRequest,
    Response,
};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use crate::args::Args;
use crate::error::ErrorFields;
use crate::task::Work;

/// One schema-valid success: status, the server's ids, the attempt's round trip and the body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reply {
    /// HTTP status.
    pub status: u16,
    /// The server's `X-Request-Id`.
    pub request_id: Option<String>,
    /// The server's trace id.
    pub trace_id: Option<String>,
    /// Round trip of the attempt in microseconds (0 when not one request).
    pub rtt_us: u64,
    /// The response body as JSON text.
    pub body: String,
}

impl Reply {
    /// The reply envelope the C, Node and JVM bindings hand out: `{"status", "request_id",
    /// "trace_id", "rtt_us", "body"}`, the body spliced in as the exact text core produced
    /// (not parsed again).
    pub fn to_json(&self) -> String {
        format!(
            r#"{{"status":{},"request_id":{},"trace_id":{},"rtt_us":{},"body":{}}}"#,
            self.status,
            serde_json::json!(self.request_id),
            serde_json::json!(self.trace_id),
            self.rtt_us,
            self.body
        )
    }

    /// `(status, request_id, trace_id, rtt_us, body)`: the tuple the Python layer takes.
    pub fn into_tuple(self) -> (u16, Option<String>, Option<String>, u64, String) {
        (
            self.status,
            self.request_id,
            self.trace_id,
            self.rtt_us,
            self.body,
        )
    }
}

/// What a host can call: core's operations (core's [`Operation`] is the only operation table;
/// a host calls one by its [`Operation::method_name`]), plus `list_reservations_all`, the
/// bridge's own walk over every page (the query fields plus `max_pages`, default
/// [`DEFAULT_MAX_PAGES`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// One operation of the spec. Arguments: `create_reservation`, `decide` and
    /// `create_event` take their whole request; `commit_reservation`, `release_reservation`
    /// and `extend_reservation` take `{"reservation_id", "request"}`; `get_reservation`
    /// `{"reservation_id"}`; `get_evidence` `{"evidence_id"}`; `get_balances` and
    /// `list_reservations` the query fields; `get_evidence_jwks` none.
    Runtime(Operation),
    /// `list_reservations_all`: every page of a `list_reservations` query.
    ListReservationsAll,
}

impl Op {
    /// The boundary name.
    pub fn name(self) -> &'static str {
        match self {
            Op::Runtime(o) => o.method_name(),
            Op::ListReservationsAll => "list_reservations_all",
        }
    }

    /// Every operation: core's, in the spec's order, then the bridge's own.
    pub fn all() -> impl Iterator<Item = Op> {
        Operation::ALL
            .into_iter()
            .map(Op::Runtime)
            .chain([Op::ListReservationsAll])
    }

    /// The operation of a boundary name; INVALID_ARGUMENT for any other name.
    pub fn parse(name: &str) -> Result<Op, Error> {
        Op::all()
            .find(|op| op.name() == name)
            .ok_or_else(|| Error::invalid_argument(format!("unknown operation {name:?}")))
    }
}

fn decode<T: DeserializeOwned>(v: &Value, what: &str) -> Result<T, Error> {
    serde_json::from_value(v.clone())
        .map_err(|e| Error::invalid_argument(format!("invalid {what}: {}", json_reason(&e))))
}

fn string(args: &Args, name: &str) -> Result<String, Error> {
    match args.raw(name) {
        None => Err(Error::invalid_argument(format!("missing argument {name}"))),
        Some(raw) => serde_json::from_str(raw.get())
            .map_err(|_| Error::invalid_argument(format!("{name} must be a string"))),
    }
}

fn opt_string(args: &Value, name: &str) -> Result<Option<String>, Error> {
    match args.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(Error::invalid_argument(format!("{name} must be a string"))),
    }
}

fn opt_u32(args: &Value, name: &str) -> Result<Option<u32>, Error> {
    match args.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .map(Some)
            .ok_or_else(|| Error::invalid_argument(format!("{name} must be a small integer"))),
    }
}

/// The `get_balances` query of a JSON object (absent and null fields are unset).
pub fn balance_query(a: &Value) -> Result<BalanceQuery, Error> {
    Ok(BalanceQuery {
        tenant: opt_string(a, "tenant")?,
        workspace: opt_string(a, "workspace")?,
        app: opt_string(a, "app")?,
        workflow: opt_string(a, "workflow")?,
        agent: opt_string(a, "agent")?,
        toolset: opt_string(a, "toolset")?,
        include_children: match a.get("include_children") {
            None | Some(Value::Null) => None,
            Some(Value::Bool(b)) => Some(*b),
            Some(_) => return Err(Error::invalid_argument("include_children must be a bool")),
        },
        limit: opt_u32(a, "limit")?,
        cursor: opt_string(a, "cursor")?,
    })
}

/// The `list_reservations` query of a JSON object (absent and null fields are unset).
pub fn list_query(a: &Value) -> Result<ListReservationsQuery, Error> {
    let include = match a.get("include") {
        None | Some(Value::Null) => Vec::new(),
        Some(v) => decode::<Vec<String>>(v, "include")?,
    };
    Ok(ListReservationsQuery {
        idempotency_key: opt_string(a, "idempotency_key")?,
        status: opt_string(a, "status")?.map(Into::into),
        tenant: opt_string(a, "tenant")?,
        workspace: opt_string(a, "workspace")?,
        app: opt_string(a, "app")?,
        workflow: opt_string(a, "workflow")?,
        agent: opt_string(a, "agent")?,
        toolset: opt_string(a, "toolset")?,
        from: opt_string(a, "from")?,
        to: opt_string(a, "to")?,
        expires_from: opt_string(a, "expires_from")?,
        expires_to: opt_string(a, "expires_to")?,
        finalized_from: opt_string(a, "finalized_from")?,
        finalized_to: opt_string(a, "finalized_to")?,
        sort_by: opt_string(a, "sort_by")?.map(Into::into),
        sort_dir: opt_string(a, "sort_dir")?.map(Into::into),
        include,
        limit: opt_u32(a, "limit")?,
        cursor: opt_string(a, "cursor")?,
    })
}

fn reply<T: Serialize>(r: Response<T>) -> Result<Reply, Error> {
    let body = serde_json::to_string(&r.body)
        .map_err(|e| Error::invalid_argument(format!("cannot encode the response: {e}")))?;
    let rtt_us = u64::try_from(r.timing.rtt().as_micros()).unwrap_or(u64::MAX);
    Ok(Reply {
        status: r.status,
        request_id: r.request_id,
        trace_id: r.trace_id,
        rtt_us,
        body,
    })
}

/// Runs one operation on core with its JSON arguments. Requests are decoded from the
/// arguments' exact text ([`Args`]), so their metadata reaches the wire as given.
pub async fn dispatch(client: &CyclesClient, op: Op, a: &Args) -> Result<Reply, Error> {
    let c = client;
    let op = match op {
        Op::Runtime(o) => o,
        Op::ListReservationsAll => {
            let v = a.value()?;
            let max_pages = opt_u32(&v, "max_pages")?.map_or(DEFAULT_MAX_PAGES, |n| n as usize);
            let rows = c.list_reservations_all(&list_query(&v)?, max_pages).await?;
            let body = serde_json::to_string(&rows)
                .map_err(|e| Error::invalid_argument(format!("cannot encode the rows: {e}")))?;
            return Ok(Reply {
                status: 200,
                request_id: None,
                trace_id: None,
                rtt_us: 0,
                body,
            });
        }
    };
    match op {
        Operation::CreateReservation => {
            let req: ReservationCreateRequest = a.whole("reservation request")?;
            reply(c.create_reservation(&req).await?)
        }
        Operation::CommitReservation => {
            let id = string(a, "reservation_id")?;
            let req: CommitRequest = a.required("request", "commit request")?;
            reply(c.commit_reservation(&id, &req).await?)
        }
        Operation::ReleaseReservation => {
            let id = string(a, "reservation_id")?;
            let req: ReleaseRequest = a.required("request", "release request")?;
            reply(c.release_reservation(&id, &req).await?)
        }
        Operation::ExtendReservation => {
            let id = string(a, "reservation_id")?;
            let req: ReservationExtendRequest = a.required("request", "extend request")?;
            reply(c.extend_reservation(&id, &req).await?)
        }
        Operation::Decide => {
            let req: DecisionRequest = a.whole("decision request")?;
            reply(c.decide(&req).await?)
        }
        Operation::CreateEvent => {
            let req: EventCreateRequest = a.whole("event request")?;
            reply(c.create_event(&req).await?)
        }
        Operation::GetBalances => reply(c.get_balances(&balance_query(&a.value()?)?).await?),
        Operation::ListReservations => reply(c.list_reservations(&list_query(&a.value()?)?).await?),
        Operation::GetReservation => reply(c.get_reservation(&string(a, "reservation_id")?).await?),
        Operation::GetEvidence => reply(c.get_evidence(&string(a, "evidence_id")?).await?),
        Operation::GetEvidenceJwks => reply(c.get_evidence_jwks().await?),
    }
}

/// Captured response headers given as a JSON object of header names to string values (`None`:
/// none), in order, for [`decode_captured`]; `name` is the argument's name in the host's
/// API, for the error.
pub fn headers_from_json(
    json: Option<&str>,
    name: &str,
) -> Result<Vec<(String, String)>, ErrorFields> {
    let Some(text) = json else {
        return Ok(Vec::new());
    };
    let bad = || ErrorFields::invalid(format!("{name} must be a JSON object of string values"));
    let v: Value = serde_json::from_str(text).map_err(|_| bad())?;
    let obj = v.as_object().ok_or_else(bad)?;
    obj.iter()
        .map(|(k, v)| Ok((k.clone(), v.as_str().ok_or_else(bad)?.to_string())))
        .collect()
}

/// Decodes one captured response through core's own response path, without a network: the
/// schema-valid success (`rtt_us` 0) or the error the client would raise. `operation` is the
/// spec's operationId; `None` (a response that matched no operation) is only valid for a
/// non-2xx status. Bindings run the reference-server corpus through this.
pub fn decode_captured(
    operation: Option<&str>,
    status: u16,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Result<Reply, ErrorFields> {
    let op = match operation {
        Some(id) => Some(Operation::from_operation_id(id).ok_or_else(|| {
            ErrorFields::invalid(format!(
                "unknown operation {id:?} (expected a spec operationId)"
            ))
        })?),
        None => None,
    };
    let decoded = match op {
        Some(op) => decode_response(op, status, headers, body),
        None if !(200..300).contains(&status) => Err(http_error(status, headers, body)),
        None => Err(Error::invalid_argument(
            "a 2xx response needs its operation to be decoded",
        )),
    }?;
    let body = serde_json::to_string(&decoded.body)
        .map_err(|e| ErrorFields::from(Error::internal(format!("cannot encode: {e}"))))?;
    Ok(Reply {
        status: decoded.status,
        request_id: decoded.request_id,
        trace_id: decoded.trace_id,
        rtt_us: 0,
        body,
    })
}

/// Client settings a host passes at construction; unset fields keep core's defaults.
#[derive(Clone, Debug, Default)]
pub struct ClientOptions {
    /// Base URL of the Cycles server.
    pub base_url: String,
    /// API key (sent as `X-Cycles-API-Key`; redacted everywhere by core).
    pub api_key: String,
    /// Default tenant.
    pub tenant: Option<String>,
    /// Unit of estimates given as bare numbers (core validates it).
    pub default_unit: Option<String>,
    /// Per-attempt request timeout.
    pub request_timeout_ms: Option<u64>,
    /// Connect timeout.
    pub connect_timeout_ms: Option<u64>,
    /// Journal directory.
    pub journal_dir: Option<PathBuf>,
    /// Whether settlements are journaled.
    pub journal_enabled: Option<bool>,
    /// A Redis journal instead of the directory (`redis://...`).
    pub journal_url: Option<String>,
    /// Bound on concurrent requests.
    pub max_concurrent_requests: Option<usize>,
    /// Bound on one response body, in bytes.
    pub max_response_bytes: Option<usize>,
}

impl ClientOptions {
    /// Core's `Config` of these options.
    pub fn into_config(self) -> Config {
        let config = Config::new(self.base_url.clone(), self.api_key.clone());
        self.apply_to(config)
    }

    /// `config` with every option that is set applied over it (`base_url` and `api_key`
    /// are not: they made `config`).
    pub fn apply_to(self, mut config: Config) -> Config {
        if let Some(n) = self.max_concurrent_requests {
            config = config.with_max_concurrent_requests(n);
        }
        if let Some(n) = self.max_response_bytes {
            config = config.with_max_response_bytes(n);
        }
        config = with_journal(config, self.journal_dir, self.journal_enabled);
        if let Some(u) = self.journal_url {
            config = config.with_journal_url(u);
        }
        if let Some(t) = self.tenant {
            config = config.with_tenant(t);
        }
        if let Some(u) = self.default_unit {
            config = config.with_default_unit(u);
        }
        if let Some(ms) = self.request_timeout_ms {
            config = config.with_request_timeout(Duration::from_millis(ms));
        }
        if let Some(ms) = self.connect_timeout_ms {
            config = config.with_connect_timeout(Duration::from_millis(ms));
        }
        config
    }
}

/// Where a client built from a host's options JSON finds its server and key.
#[derive(Clone, Copy, Debug)]
pub enum Connection<'a> {
    /// In the options themselves: `base_url` and `api_key` required, `tenant` optional (JVM).
    InOptions,
    /// Given apart from the options, which then must not repeat them (C's parameters).
    Given {
        /// Server root.
        base_url: &'a str,
        /// API key.
        api_key: &'a str,
        /// Default tenant.
        tenant: Option<&'a str>,
    },
    /// The `CYCLES_*` environment (core's `Config::from_env`); the options override it.
    Env,
}

/// A client of C's options JSON (snake_case, milliseconds): the
/// bridge's one options check ([`crate::options`]: the table, the texts), so a typo such as
/// `journal_dri` or a value of the wrong type is INVALID_ARGUMENT naming it; values core
/// refuses (an unknown unit) are CONFIG. Returns the client and its settle overrides.
pub fn client_of_options(
    options: &Args,
    connection: Connection<'_>,
) -> Result<(ClientHandle, crate::SettleOverrides), ErrorFields> {
    let host = crate::options::host_client(options.text(), crate::options::C, connection)?;
    Ok((host.client, host.settle))
}

/// `config` with explicit journal settings applied over it.
pub fn with_journal(mut config: Config, dir: Option<PathBuf>, enabled: Option<bool>) -> Config {
    if let Some(d) = dir {
        config = config.with_journal_dir(d);
    }
    if let Some(e) = enabled {
        config = config.with_journal_enabled(e);
    }
    config
}

/// One host client: core's `CyclesClient` until `close`, and the config it was built from.
/// Calls in flight keep their own reference and complete; later calls fail with
/// [`ErrorFields::closed`].
pub struct ClientHandle {
    client: Mutex<Option<Arc<CyclesClient>>>,
    config: Config,
}

impl ClientHandle {
    /// A client of `config` (core validates it).
    pub fn new(config: Config) -> Result<ClientHandle, ErrorFields> {
        let client = CyclesClient::new(config.clone())?;
        Ok(ClientHandle {
            client: Mutex::new(Some(Arc::new(client))),
            config,
        })
    }

    /// A client of the `CYCLES_*` environment, explicit journal settings overriding it.
    pub fn from_env(
        journal_dir: Option<PathBuf>,
        journal_enabled: Option<bool>,
    ) -> Result<ClientHandle, ErrorFields> {
        let config = with_journal(Config::from_env()?, journal_dir, journal_enabled);
        ClientHandle::new(config)
    }

    /// The config the client was built from.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Request timeout in whole milliseconds.
    pub fn request_timeout_ms(&self) -> u64 {
        u64::try_from(self.config.request_timeout.as_millis()).unwrap_or(0)
    }

    /// Connect timeout in whole milliseconds.
    pub fn connect_timeout_ms(&self) -> u64 {
        u64::try_from(self.config.connect_timeout.as_millis()).unwrap_or(0)
    }

    /// The live core client, or the closed error.
    pub fn live(&self) -> Result<Arc<CyclesClient>, ErrorFields> {
        let guard = self.client.lock().unwrap_or_else(|p| p.into_inner());
        guard.clone().ok_or_else(ErrorFields::closed)
    }

    /// Whether `close` was called.
    pub fn is_closed(&self) -> bool {
        self.client
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_none()
    }

    /// Drops this handle's reference to the core client. Idempotent.
    pub fn close(&self) {
        self.client.lock().unwrap_or_else(|p| p.into_inner()).take();
    }

    /// Checks everything that can fail before any work is spawned (closed client, unknown
    /// operation, malformed JSON) and returns the call, ready to run on the runtime.
    pub fn prepare(&self, op: &str, args: &str) -> Result<Call, ErrorFields> {
        let client = self.live()?;
        let op = Op::parse(op)?;
        let mut args = Args::parse(args, "arguments")?;
        // A request without a subject is for the client's tenant, in every language (the
        // guarded lifecycle's rule: core's `GuardSpec::default_subject`, the same error text
        // when there is no tenant). An explicit `null` is left for the decoder to refuse.
        let has_subject = matches!(
            op,
            Op::Runtime(Operation::CreateReservation | Operation::Decide | Operation::CreateEvent)
        );
        if has_subject && !args.has("subject") {
            let subject = GuardSpec::default_subject(self.config.tenant.as_deref())?;
            let subject = serde_json::to_string(&subject)
                .map_err(|e| ErrorFields::invalid(format!("cannot encode the subject: {e}")))?;
            args = args.with_leading_member("subject", &subject)?;
        }
        Ok(Call { client, op, args })
    }
}

/// One prepared operation.
pub struct Call {
    client: Arc<CyclesClient>,
    op: Op,
    args: Args,
}

impl Call {
    /// Runs it on core (`task::start` from a blocking host, `task::joined` or `task::spawn_then` from an async one).
    pub fn run(self) -> Work<Result<Reply, ErrorFields>> {
        Box::pin(async move { Ok(dispatch(&self.client, self.op, &self.args).await?) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reply_envelope_splices_the_exact_body_and_headers_parse_in_order() {
        let r = Reply {
            status: 200,
            request_id: Some("req-1".into()),
            trace_id: None,
            rtt_us: 7,
            body: r#"{"n":1.50}"#.into(),
        };
        assert_eq!(
            r.to_json(),
            r#"{"status":200,"request_id":"req-1","trace_id":null,"rtt_us":7,"body":{"n":1.50}}"#
        );
        let h = headers_from_json(Some(r#"{"B":"2","A":"1"}"#), "h").unwrap();
        assert_eq!(h, [("B".into(), "2".into()), ("A".into(), "1".into())]);
        assert!(headers_from_json(None, "h").unwrap().is_empty());
        let e = headers_from_json(Some(r#"{"A":1}"#), "headersJson").unwrap_err();
        assert!(e.message.contains("headersJson must be"), "{}", e.message);
    }

    #[test]
    fn op_names_round_trip() {
        assert_eq!(Op::all().count(), Operation::ALL.len() + 1);
        for op in Op::all() {
            assert_eq!(Op::parse(op.name()).unwrap(), op);
        }
        let e = Op::parse("createReservation").unwrap_err();
        assert_eq!(e.kind().name(), "INVALID_ARGUMENT");
        assert_eq!(e.message(), "unknown operation \"createReservation\"");
    }

    #[test]
    fn balance_query_fields_and_errors() {
        let q = balance_query(
            &json!({"tenant": "t", "include_children": true, "limit": 5, "app": null}),
        )
        .unwrap();
        assert_eq!(q.tenant.as_deref(), Some("t"));
        assert_eq!(q.include_children, Some(true));
        assert_eq!(q.limit, Some(5));
        assert_eq!(q.app, None);
        let e = balance_query(&json!({"include_children": "yes"})).unwrap_err();
        assert_eq!(e.message(), "include_children must be a bool");
        let e = balance_query(&json!({"limit": 1u64 << 40})).unwrap_err();
        assert_eq!(e.message(), "limit must be a small integer");
        let e = balance_query(&json!({"tenant": 3})).unwrap_err();
        assert_eq!(e.message(), "tenant must be a string");
    }

    #[test]
    fn list_query_fields_and_errors() {
        let q = list_query(&json!({"status": "ACTIVE", "include": ["a"], "cursor": "c"})).unwrap();
        assert_eq!(q.include, vec!["a".to_string()]);
        assert_eq!(q.cursor.as_deref(), Some("c"));
        assert!(q.status.is_some());
        let e = list_query(&json!({"include": "a"})).unwrap_err();
        assert!(
            e.message().starts_with("invalid include: "),
            "{}",
            e.message()
        );
    }

    #[test]
    fn options_become_config() {
        let c = ClientOptions {
            base_url: "http://127.0.0.1:1".into(),
            api_key: "k".into(),
            tenant: Some("t".into()),
            request_timeout_ms: Some(1500),
            connect_timeout_ms: Some(250),
            journal_enabled: Some(false),
            ..ClientOptions::default()
        }
        .into_config();
        assert_eq!(c.tenant.as_deref(), Some("t"));
        assert_eq!(c.request_timeout, Duration::from_millis(1500));
        assert_eq!(c.connect_timeout, Duration::from_millis(250));
        assert!(!c.journal.enabled);
    }

    #[test]
    fn prepare_checks_before_spawning() {
        let h = ClientHandle::new(
            ClientOptions {
                base_url: "http://127.0.0.1:1".into(),
                api_key: "k".into(),
                journal_enabled: Some(false),
                ..ClientOptions::default()
            }
            .into_config(),
        )
        .unwrap();
        assert_eq!(
            h.request_timeout_ms(),
            u64::try_from(h.config().request_timeout.as_millis()).unwrap()
        );
        assert!(h
            .prepare("nope", "{}")
            .err()
            .unwrap()
            .message
            .contains("unknown operation"));
        let bad = h.prepare("decide", "{").err().unwrap();
        assert_eq!(bad.name, "INVALID_ARGUMENT");
        assert!(bad.message.starts_with("arguments: "));
        assert!(h.prepare("decide", r#"{"subject":{"tenant":"t"}}"#).is_ok());
        h.close();
        h.close();
        assert!(h.is_closed());
        assert_eq!(h.prepare("decide", "{}").err(), Some(ErrorFields::closed()));
    }

    #[test]
    fn captured_responses_decode_through_core() {
        let body = br#"{"error":"NOT_FOUND","message":"no such reservation","request_id":"r1"}"#;
        let e = decode_captured(
            Some("getReservation"),
            404,
            &[("content-type", "application/json"), ("x-request-id", "r1")],
            body,
        )
        .unwrap_err();
        assert_eq!(e.name, "NOT_FOUND");
        assert_eq!(e.http_status, Some(404));
        assert_eq!(e.error_code.as_deref(), Some("NOT_FOUND"));
        let unmatched = decode_captured(None, 500, &[], b"oops").unwrap_err();
        assert_eq!(unmatched.http_status, Some(500));
        let no_op = decode_captured(None, 200, &[], b"{}").unwrap_err();
        assert_eq!(
            no_op.message,
            "a 2xx response needs its operation to be decoded"
        );
        let unknown = decode_captured(Some("get_reservation"), 200, &[], b"{}").unwrap_err();
        assert!(unknown.message.contains("expected a spec operationId"));
    }
}
