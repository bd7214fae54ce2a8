//! The accept loop and the request handler.

use axum::body::Body;
use bytes::Bytes;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::config::{Endpoint, FakeConfig, Fault, FaultRule, FaultTable};
use crate::record::RequestRecord;
use crate::tokens;
use crate::wire::{self, Call};

/// The header that overrides the reply text of one request.
pub const REPLY_HEADER: &str = "x-fake-reply";

pub(crate) struct Shared {
    pub config: FakeConfig,
    pub state: Mutex<State>,
}

#[derive(Default)]
pub(crate) struct State {
    pub requests: Vec<RequestRecord>,
    pub calls: u64,
    pub faults: FaultTable,
}

impl Shared {
    pub fn new(config: FakeConfig) -> Shared {
        let mut faults = FaultTable::default();
        for rule in &config.faults {
            faults.add(rule.clone());
        }
        Shared {
            config,
            state: Mutex::new(State {
                faults,
                ..State::default()
            }),
        }
    }

    /// Lock ignoring poisoning: one panicking handler must not wedge a test's provider.
    pub fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Back to the state just after start: no requests, call numbering from 0, the
    /// configured fault rules only, their counts at zero.
    pub fn reset(&self) {
        let mut s = self.state();
        *s = State::default();
        for rule in &self.config.faults {
            s.faults.add(rule.clone());
        }
    }

    fn record(&self, mut r: RequestRecord) {
        let mut s = self.state();
        r.seq = s.requests.len() as u64;
        s.requests.push(r);
    }
}

/// Accept connections until shutdown is signalled; open connections are dropped then.
pub(crate) async fn serve(
    listener: TcpListener,
    sh: Arc<Shared>,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        tokio::select! {
            r = listener.accept() => {
                if let Ok((stream, _)) = r {
                    let _ = stream.set_nodelay(true);
                    let sh = sh.clone();
                    let mut stop = shutdown.clone();
                    tokio::spawn(async move {
                        let svc = service_fn(move |req| {
                            let sh = sh.clone();
                            async move { Ok::<_, Infallible>(handle(sh, req).await) }
                        });
                        let conn = hyper::server::conn::http1::Builder::new()
                            .serve_connection(TokioIo::new(stream), svc);
                        tokio::select! {
                            _ = conn => {}
                            _ = stop.changed() => {}
                        }
                    });
                }
            }
            _ = shutdown.changed() => break,
        }
    }
}

fn json_response(status: u16, body: &Value, extra: &[(&str, String)]) -> Response<Body> {
    let mut b = Response::builder()
        .status(status)
        .header("content-type", "application/json");
    for (k, v) in extra {
        b = b.header(*k, v.as_str());
    }
    b.body(Body::from(body.to_string()))
        .unwrap_or_else(|_| Response::new(Body::empty()))
}

/// The `/_fake/` admin routes.
fn admin(sh: &Shared, method: &str, path: &str, body: &[u8]) -> Response<Body> {
    match (method, path) {
        ("GET", "/_fake/requests") => {
            let list = serde_json::to_value(&sh.state().requests).unwrap_or(Value::Null);
            json_response(200, &list, &[])
        }
        ("DELETE", "/_fake/requests") | ("POST", "/_fake/reset") => {
            sh.reset();
            json_response(200, &json!({"reset": true}), &[])
        }
        ("POST", "/_fake/faults") => match serde_json::from_slice::<FaultRule>(body) {
            Ok(rule) => {
                sh.state().faults.add(rule);
                json_response(200, &json!({"added": true}), &[])
            }
            Err(e) => json_response(
                400,
                &json!({"error": format!("invalid fault rule: {e}")}),
                &[],
            ),
        },
        ("DELETE", "/_fake/faults") => {
            sh.state().faults.clear();
            json_response(200, &json!({"cleared": true}), &[])
        }
        _ => json_response(
            404,
            &json!({"error": format!("no admin route {method} {path}")}),
            &[],
        ),
    }
}

fn now_s() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// A body of SSE events (or one JSON document) that, when `cut` is set, stops after that
/// many events and then fails, which makes hyper close the connection without the
/// terminating chunk.
fn chunked_body(chunks: Vec<String>, cut: Option<u32>, pause: Option<Duration>) -> Body {
    let limit = cut.map(|n| n as usize);
    let stream = futures_util::stream::unfold(
        (chunks.into_iter(), 0usize, false),
        move |(mut it, sent, failed)| async move {
            if failed {
                return None;
            }
            if limit.is_some_and(|l| sent >= l) {
                // Let what was sent reach the socket before the connection is torn down.
                tokio::time::sleep(Duration::from_millis(10)).await;
                let err =
                    std::io::Error::new(std::io::ErrorKind::ConnectionAborted, "cut_stream fault");
                return Some((Err(err), (it, sent, true)));
            }
            let chunk = it.next()?;
            if let Some(pause) = pause {
                tokio::time::sleep(pause).await;
            }
            Some((Ok(Bytes::from(chunk)), (it, sent + 1, false)))
        },
    );
    Body::from_stream(stream)
}

async fn handle(sh: Arc<Shared>, req: Request<Incoming>) -> Response<Body> {
    let method = req.method().as_str().to_string();
    let path = req.uri().path().to_string();
    let mut headers: BTreeMap<String, String> = BTreeMap::new();
    for (k, v) in req.headers() {
        let v = String::from_utf8_lossy(v.as_bytes()).into_owned();
        headers
            .entry(k.as_str().to_string())
            .and_modify(|e| {
                e.push_str(", ");
                e.push_str(&v);
            })
            .or_insert(v);
    }
    let bytes = axum::body::to_bytes(Body::new(req.into_body()), 64 << 20)
        .await
        .unwrap_or_default();
    if path.starts_with("/_fake/") {
        return admin(&sh, &method, &path, &bytes);
    }
    let endpoint = Endpoint::of_path(&path);
    let (body, body_text) = match serde_json::from_slice::<Value>(&bytes) {
        Ok(v) => (v, None),
        Err(_) if bytes.is_empty() => (Value::Null, None),
        Err(_) => (
            Value::Null,
            Some(String::from_utf8_lossy(&bytes).into_owned()),
        ),
    };
    let model = body
        .get("model")
        .and_then(Value::as_str)
        .map(str::to_string);
    let anthropic = endpoint.is_some_and(Endpoint::is_anthropic);
    let request_id = format!("req_fake{:06}", sh.state().requests.len() + 1);
    let mut id_headers = vec![("x-request-id", request_id.clone())];
    if anthropic {
        id_headers.push(("request-id", request_id));
    }
    let mut record = RequestRecord {
        seq: 0,
        call: None,
        method: method.clone(),
        path: path.clone(),
        endpoint,
        headers,
        stream: body.get("stream").and_then(Value::as_bool).unwrap_or(false),
        output_bound: endpoint.and_then(|e| wire::output_bound(e, &body).ok().flatten()),
        body,
        body_text,
        model: model.clone(),
        status: 0,
        fault: None,
        prompt_tokens: None,
        completion_tokens: None,
    };
    let endpoint = match endpoint {
        Some(e) if method == "POST" => e,
        _ => {
            record.status = 404;
            sh.record(record);
            let msg = format!("Invalid URL ({method} {path})");
            return json_response(404, &wire::error_body(false, 404, &msg, None), &id_headers);
        }
    };
    let (call, fault) = {
        let mut s = sh.state();
        let call = s.calls;
        s.calls += 1;
        (call, s.faults.fire(endpoint, model.as_deref(), call))
    };
    record.call = Some(call);
    record.fault = fault.as_ref().map(|f| f.kind().to_string());
    let mut cut = None;
    let mut pause = None;
    let mut stream_error = None;
    match &fault {
        Some(Fault::SlowFirstByte { ms }) => tokio::time::sleep(Duration::from_millis(*ms)).await,
        Some(Fault::ServerError { status }) => {
            record.status = *status;
            sh.record(record);
            let msg = "The fake provider had a scripted server error.";
            return json_response(
                *status,
                &wire::error_body(anthropic, *status, msg, None),
                &id_headers,
            );
        }
        Some(Fault::RateLimited { retry_after }) => {
            record.status = 429;
            sh.record(record);
            let mut h = id_headers;
            if let Some(r) = retry_after {
                h.push(("retry-after", r.clone()));
            }
            let msg = "Rate limit reached (a scripted fault of the fake provider).";
            return json_response(429, &wire::error_body(anthropic, 429, msg, None), &h);
        }
        Some(Fault::CutStream { after_chunks }) => cut = Some(*after_chunks),
        Some(Fault::SlowChunks { ms }) => pause = Some(Duration::from_millis(*ms)),
        Some(Fault::StreamError { after_chunks }) => stream_error = Some(*after_chunks),
        None => {}
    }
    let checked = wire::check(endpoint, &record.body)
        .and_then(|ok| wire::output_bound(endpoint, &record.body).map(|b| (ok, b)));
    let ((model, stream, include_usage), bound) = match checked {
        Ok(v) => v,
        Err(refusal) => {
            record.status = refusal.status;
            sh.record(record);
            let body = wire::error_body(anthropic, refusal.status, &refusal.message, refusal.param);
            return json_response(refusal.status, &body, &id_headers);
        }
    };
    let reply = record
        .headers
        .get(REPLY_HEADER)
        .cloned()
        .or_else(|| sh.config.replies.get(&model).cloned())
        .unwrap_or_else(|| sh.config.reply.clone());
    let (pieces, capped) = tokens::reply_pieces(&reply, bound);
    let call = Call {
        endpoint,
        n: call + 1,
        model,
        stream,
        include_usage,
        prompt_tokens: tokens::prompt_tokens(&record.body),
        bound,
        pieces,
        capped,
        created: now_s(),
    };
    if let (Some(_), false) = (stream_error, call.stream) {
        // A whole response has no stream to break: the provider's 500 instead.
        record.status = 500;
        sh.record(record);
        let msg = "The fake provider had a scripted server error.";
        return json_response(
            500,
            &wire::error_body(anthropic, 500, msg, None),
            &id_headers,
        );
    }
    record.status = 200;
    record.prompt_tokens = Some(call.prompt_tokens);
    record.completion_tokens = Some(call.pieces.len() as u64);
    sh.record(record);
    let (content_type, chunks, cut) = if call.stream {
        let mut events = call.events();
        if let Some(n) = stream_error {
            events.truncate(n as usize);
            events.push(wire::stream_error_event(endpoint, events.len()));
        }
        ("text/event-stream; charset=utf-8", events, cut)
    } else {
        // A cut non-streaming response sends its headers and none of its body.
        (
            "application/json",
            vec![call.response().to_string()],
            cut.map(|_| 0),
        )
    };
    let mut b = Response::builder()
        .status(200)
        .header("content-type", content_type);
    if call.stream {
        b = b.header("cache-control", "no-cache");
    }
    for (k, v) in &id_headers {
        b = b.header(*k, v.as_str());
    }
    let body = if cut.is_none() && pause.is_none() && !call.stream {
        Body::from(chunks.concat())
    } else {
        chunked_body(chunks, cut, pause)
    };
    b.body(body)
        .unwrap_or_else(|_| Response::new(Body::empty()))
}
