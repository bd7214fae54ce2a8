//! `NativeClient`: one `cycles_core::CyclesClient` per Python client. Requests arrive as JSON
//! (decoded by core's own serde model), responses leave as JSON plus transport facts. The
//! sync path blocks on the core runtime with the GIL released; the async path returns an
//! asyncio awaitable completed from the core runtime (pyo3-async-runtimes, borrowing it).

use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cycles_core::runtime::runtime;
use cycles_core::transport::decode::{
    decode_response as decode_response_core, http_error, Operation,
};
use cycles_core::{
    BalanceQuery, CommitRequest, Config, CyclesClient, DecisionRequest, Error, EventCreateRequest,
    ListReservationsQuery, ReleaseRequest, ReservationCreateRequest, ReservationExtendRequest,
    Response,
};
use pyo3::prelude::*;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use crate::errors::{core_err, guard, internal, panic_message, to_pyerr, Fields};

/// How often a blocking call wakes up to check for signals (Ctrl-C).
const SIGNAL_POLL: Duration = Duration::from_millis(50);

/// `(status, request_id, trace_id, rtt_us, body_json)` of one schema-valid success.
pub type Out = (u16, Option<String>, Option<String>, u64, String);

/// The operations of the runtime plane, by the Python method names.
#[derive(Clone, Copy, Debug)]
enum Op {
    CreateReservation,
    CommitReservation,
    ReleaseReservation,
    ExtendReservation,
    Decide,
    CreateEvent,
    GetBalances,
    ListReservations,
    ListReservationsAll,
    GetReservation,
    GetEvidence,
    GetEvidenceJwks,
}

impl Op {
    fn parse(name: &str) -> Result<Op, Error> {
        Ok(match name {
            "create_reservation" => Op::CreateReservation,
            "commit_reservation" => Op::CommitReservation,
            "release_reservation" => Op::ReleaseReservation,
            "extend_reservation" => Op::ExtendReservation,
            "decide" => Op::Decide,
            "create_event" => Op::CreateEvent,
            "get_balances" => Op::GetBalances,
            "list_reservations" => Op::ListReservations,
            "list_reservations_all" => Op::ListReservationsAll,
            "get_reservation" => Op::GetReservation,
            "get_evidence" => Op::GetEvidence,
            "get_evidence_jwks" => Op::GetEvidenceJwks,
            other => {
                return Err(Error::invalid_argument(format!(
                    "unknown operation {other:?}"
                )))
            }
        })
    }
}

fn decode<T: DeserializeOwned>(v: &Value, what: &str) -> Result<T, Error> {
    serde_json::from_value(v.clone())
        .map_err(|e| Error::invalid_argument(format!("invalid {what}: {e}")))
}

fn field<'a>(args: &'a Value, name: &str) -> Result<&'a Value, Error> {
    args.get(name)
        .ok_or_else(|| Error::invalid_argument(format!("missing argument {name}")))
}

fn string(args: &Value, name: &str) -> Result<String, Error> {
    field(args, name)?
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| Error::invalid_argument(format!("{name} must be a string")))
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

fn balance_query(a: &Value) -> Result<BalanceQuery, Error> {
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

fn list_query(a: &Value) -> Result<ListReservationsQuery, Error> {
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

fn out<T: Serialize>(r: Response<T>) -> Result<Out, Error> {
    let body = serde_json::to_string(&r.body)
        .map_err(|e| Error::invalid_argument(format!("cannot encode the response: {e}")))?;
    let rtt = u64::try_from(r.timing.rtt().as_micros()).unwrap_or(u64::MAX);
    Ok((r.status, r.request_id, r.trace_id, rtt, body))
}

/// Runs one operation on core. All behaviour is core's; this only routes arguments.
async fn dispatch(client: Arc<CyclesClient>, op: Op, a: Value) -> Result<Out, Error> {
    let c = client.as_ref();
    match op {
        Op::CreateReservation => {
            let req: ReservationCreateRequest = decode(&a, "reservation request")?;
            out(c.create_reservation(&req).await?)
        }
        Op::CommitReservation => {
            let id = string(&a, "reservation_id")?;
            let req: CommitRequest = decode(field(&a, "request")?, "commit request")?;
            out(c.commit_reservation(&id, &req).await?)
        }
        Op::ReleaseReservation => {
            let id = string(&a, "reservation_id")?;
            let req: ReleaseRequest = decode(field(&a, "request")?, "release request")?;
            out(c.release_reservation(&id, &req).await?)
        }
        Op::ExtendReservation => {
            let id = string(&a, "reservation_id")?;
            let req: ReservationExtendRequest = decode(field(&a, "request")?, "extend request")?;
            out(c.extend_reservation(&id, &req).await?)
        }
        Op::Decide => {
            let req: DecisionRequest = decode(&a, "decision request")?;
            out(c.decide(&req).await?)
        }
        Op::CreateEvent => {
            let req: EventCreateRequest = decode(&a, "event request")?;
            out(c.create_event(&req).await?)
        }
        Op::GetBalances => out(c.get_balances(&balance_query(&a)?).await?),
        Op::ListReservations => out(c.list_reservations(&list_query(&a)?).await?),
        Op::ListReservationsAll => {
            let max_pages = opt_u32(&a, "max_pages")?.unwrap_or(100) as usize;
            let rows = c.list_reservations_all(&list_query(&a)?, max_pages).await?;
            let body = serde_json::to_string(&rows)
                .map_err(|e| Error::invalid_argument(format!("cannot encode the rows: {e}")))?;
            Ok((200, None, None, 0, body))
        }
        Op::GetReservation => out(c.get_reservation(&string(&a, "reservation_id")?).await?),
        Op::GetEvidence => out(c.get_evidence(&string(&a, "evidence_id")?).await?),
        Op::GetEvidenceJwks => out(c.get_evidence_jwks().await?),
    }
}

/// Decodes one captured response through core's own response path
/// (`cycles_core::decode_response`), without a network: `(status, request_id, trace_id, 0,
/// body_json)` of the schema-valid success, or the exception the client would raise.
/// `operation` is the spec's operationId; `None` (a response that matched no operation)
/// is only valid for a non-2xx status.
#[pyfunction]
#[pyo3(signature = (operation, status, headers, body))]
pub fn decode_response(
    operation: Option<&str>,
    status: u16,
    headers: Vec<(String, String)>,
    body: &[u8],
) -> PyResult<Out> {
    guard(|| {
        let headers: Vec<(&str, &str)> = headers
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_str()))
            .collect();
        let op = match operation {
            Some(id) => Some(Operation::from_operation_id(id).ok_or_else(|| {
                core_err(&Error::invalid_argument(format!(
                    "unknown operation {id:?} (expected a spec operationId)"
                )))
            })?),
            None => None,
        };
        let decoded = match op {
            Some(op) => decode_response_core(op, status, &headers, body),
            None if !(200..300).contains(&status) => Err(http_error(status, &headers, body)),
            None => Err(Error::invalid_argument(
                "a 2xx response needs its operation to be decoded",
            )),
        }
        .map_err(|e| core_err(&e))?;
        let json = serde_json::to_string(&decoded.body)
            .map_err(|e| core_err(&Error::internal(format!("cannot encode: {e}"))))?;
        Ok((
            decoded.status,
            decoded.request_id,
            decoded.trace_id,
            0,
            json,
        ))
    })
}

fn ms(v: Option<u64>) -> Option<Duration> {
    v.map(Duration::from_millis)
}

/// The native half of `cycles.Client` and `cycles.AsyncClient`.
#[pyclass(module = "cycles._native", name = "NativeClient", frozen)]
pub struct NativeClient {
    client: Mutex<Option<Arc<CyclesClient>>>,
    config: Config,
    base_url: String,
    tenant: Option<String>,
    request_timeout_ms: u64,
    connect_timeout_ms: u64,
}

impl NativeClient {
    fn from_config(config: Config) -> PyResult<NativeClient> {
        let base_url = config.base_url.clone();
        let tenant = config.tenant.clone();
        let request_timeout_ms = u64::try_from(config.request_timeout.as_millis()).unwrap_or(0);
        let connect_timeout_ms = u64::try_from(config.connect_timeout.as_millis()).unwrap_or(0);
        let client = CyclesClient::new(config.clone()).map_err(|e| core_err(&e))?;
        Ok(NativeClient {
            client: Mutex::new(Some(Arc::new(client))),
            config,
            base_url,
            tenant,
            request_timeout_ms,
            connect_timeout_ms,
        })
    }

    fn live(&self) -> PyResult<Arc<CyclesClient>> {
        let guard = self.client.lock().unwrap_or_else(|p| p.into_inner());
        guard.clone().ok_or_else(|| {
            to_pyerr(Fields {
                code: 3,
                name: "RUNTIME".into(),
                message: "the client is closed".into(),
                variant: Some("closed"),
                ..Fields::default()
            })
        })
    }

    fn prepare(&self, op: &str, args: &str) -> PyResult<(Arc<CyclesClient>, Op, Value)> {
        let client = self.live()?;
        let op = Op::parse(op).map_err(|e| core_err(&e))?;
        let args: Value = serde_json::from_str(args)
            .map_err(|e| core_err(&Error::invalid_argument(format!("arguments: {e}"))))?;
        Ok((client, op, args))
    }
}

#[pymethods]
impl NativeClient {
    #[new]
    #[pyo3(signature = (base_url, api_key, tenant=None, request_timeout_ms=None, connect_timeout_ms=None, journal_dir=None, journal_enabled=None, max_concurrent_requests=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        base_url: String,
        api_key: String,
        tenant: Option<String>,
        request_timeout_ms: Option<u64>,
        connect_timeout_ms: Option<u64>,
        journal_dir: Option<std::path::PathBuf>,
        journal_enabled: Option<bool>,
        max_concurrent_requests: Option<usize>,
    ) -> PyResult<NativeClient> {
        guard(|| {
            let mut config = Config::new(base_url, api_key);
            if let Some(n) = max_concurrent_requests {
                config = config.with_max_concurrent_requests(n);
            }
            if let Some(d) = journal_dir {
                config = config.with_journal_dir(d);
            }
            if let Some(e) = journal_enabled {
                config = config.with_journal_enabled(e);
            }
            if let Some(t) = tenant {
                config = config.with_tenant(t);
            }
            if let Some(d) = ms(request_timeout_ms) {
                config = config.with_request_timeout(d);
            }
            if let Some(d) = ms(connect_timeout_ms) {
                config = config.with_connect_timeout(d);
            }
            NativeClient::from_config(config)
        })
    }

    /// A client from the `CYCLES_*` environment variables (core's `Config::from_env`,
    /// including `CYCLES_JOURNAL_DIR` / `CYCLES_JOURNAL_ENABLED`); explicit journal
    /// arguments override the environment.
    #[staticmethod]
    #[pyo3(signature = (journal_dir=None, journal_enabled=None))]
    fn from_env(
        journal_dir: Option<std::path::PathBuf>,
        journal_enabled: Option<bool>,
    ) -> PyResult<NativeClient> {
        guard(|| {
            let mut config = Config::from_env().map_err(|e| core_err(&e))?;
            if let Some(d) = journal_dir {
                config = config.with_journal_dir(d);
            }
            if let Some(e) = journal_enabled {
                config = config.with_journal_enabled(e);
            }
            NativeClient::from_config(config)
        })
    }

    /// Journal directory in use.
    #[getter]
    fn journal_dir(&self) -> std::path::PathBuf {
        self.config.journal.dir.clone()
    }

    /// Whether settlements are journaled.
    #[getter]
    fn journal_enabled(&self) -> bool {
        self.config.journal.enabled
    }

    /// The guarded lifecycle of this client (a Guard, a Settler and its background replay).
    #[pyo3(signature = (max_attempts=None, replay_interval_ms=None))]
    fn lifecycle(
        &self,
        max_attempts: Option<u32>,
        replay_interval_ms: Option<u64>,
    ) -> PyResult<crate::lifecycle::NativeLifecycle> {
        guard(|| {
            crate::lifecycle::NativeLifecycle::new(
                self.live()?,
                &self.config,
                max_attempts,
                replay_interval_ms,
            )
        })
    }

    #[getter]
    fn base_url(&self) -> String {
        self.base_url.clone()
    }

    #[getter]
    fn tenant(&self) -> Option<String> {
        self.tenant.clone()
    }

    #[getter]
    fn request_timeout_ms(&self) -> u64 {
        self.request_timeout_ms
    }

    #[getter]
    fn connect_timeout_ms(&self) -> u64 {
        self.connect_timeout_ms
    }

    #[getter]
    fn closed(&self) -> bool {
        self.client
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_none()
    }

    /// Drops this handle's reference to the core client. Calls already in flight keep their
    /// own reference and complete; new calls raise `ClientClosedError`. Idempotent.
    fn close(&self) {
        self.client.lock().unwrap_or_else(|p| p.into_inner()).take();
    }

    /// One operation, blocking the calling thread on the core runtime with the GIL released.
    /// Signals are checked every 50 ms, so Ctrl-C raises `KeyboardInterrupt` promptly (the
    /// attempt is aborted: its outcome is unknown, like a timeout's).
    fn call(&self, py: Python<'_>, op: &str, args: &str) -> PyResult<Out> {
        guard(|| {
            let (client, op, args) = self.prepare(op, args)?;
            let rt = runtime().map_err(|e| core_err(&e))?;
            let (tx, mut rx) = mpsc::channel();
            let task = rt.spawn(async move {
                let _ = tx.send(dispatch(client, op, args).await);
            });
            loop {
                // The receiver moves in and out (it is Send but not Sync).
                let (back, got) = py.detach(move || {
                    let got = rx.recv_timeout(SIGNAL_POLL);
                    (rx, got)
                });
                rx = back;
                match got {
                    Ok(Ok(out)) => return Ok(out),
                    Ok(Err(e)) => return Err(core_err(&e)),
                    Err(RecvTimeoutError::Timeout) => {
                        if let Err(interrupt) = py.check_signals() {
                            task.abort();
                            return Err(interrupt);
                        }
                    }
                    // The task ended without sending: it panicked.
                    Err(RecvTimeoutError::Disconnected) => {
                        return Err(match py.detach(|| rt.block_on(task)) {
                            Err(join) if join.is_panic() => {
                                internal(panic_message(join.into_panic().as_ref()))
                            }
                            _ => internal("the operation ended without a result"),
                        });
                    }
                }
            }
        })
    }

    /// One operation as an asyncio awaitable, completed from the core runtime.
    fn call_async<'py>(
        &self,
        py: Python<'py>,
        op: &str,
        args: &str,
    ) -> PyResult<Bound<'py, PyAny>> {
        guard(|| {
            let (client, op, args) = self.prepare(op, args)?;
            let rt = runtime().map_err(|e| core_err(&e))?;
            // Borrow core's runtime; Err only means it was already set (to the same one).
            let _ = pyo3_async_runtimes::tokio::init_with_runtime(rt);
            pyo3_async_runtimes::tokio::future_into_py(py, async move {
                match rt.spawn(dispatch(client, op, args)).await {
                    Ok(Ok(out)) => Ok(out),
                    Ok(Err(e)) => Err(core_err(&e)),
                    Err(join) if join.is_panic() => {
                        Err(internal(panic_message(join.into_panic().as_ref())))
                    }
                    Err(_) => Err(internal("the operation was cancelled")),
                }
            })
        })
    }

    fn __repr__(&self) -> String {
        format!(
            "NativeClient(base_url={:?}, tenant={:?}, closed={})",
            self.base_url,
            self.tenant,
            self.closed()
        )
    }
}
