//! The captured reference-server corpus (`../shared/fixtures/reference-server/exchanges.jsonl`,
//! 217 exchanges; see its README) through core's own response path
//! ([`cycles_core::decode_response`], what `CyclesClient` runs on every response):
//! every 2xx decodes to what the server meant (every value kept, every `null` on an optional
//! field absent), every error maps to the right kind with all its fields.
//!
//! The corpus lives outside this repository; `CYCLES_REFERENCE_CORPUS` overrides its path.
//! A missing corpus FAILS the test with the path it looked at (never a silent skip).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use cycles_core::transport::decode::{
    decode_body_from_bytes, decode_response, http_error, DecodedBody, Operation,
};
use cycles_core::{Error, ErrorKind};
use serde_json::{Map, Value};

const EXPECTED_EXCHANGES: usize = 217;

fn corpus_path() -> PathBuf {
    match std::env::var_os("CYCLES_REFERENCE_CORPUS") {
        Some(p) => PathBuf::from(p),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../shared/fixtures/reference-server/exchanges.jsonl"),
    }
}

#[derive(Debug)]
struct Exchange {
    name: String,
    operation: Option<Operation>,
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Exchange {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    fn header_refs(&self) -> Vec<(&str, &str)> {
        self.headers
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_str()))
            .collect()
    }
}

fn load() -> Vec<Exchange> {
    load_from(&corpus_path())
}

fn load_from(path: &Path) -> Vec<Exchange> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| {
        panic!(
            "the reference-server corpus is missing: cannot read {} ({e}). It lives in the \
             shared folder next to this repository (shared/fixtures/reference-server/\
             exchanges.jsonl); set CYCLES_REFERENCE_CORPUS to its path.",
            path.display()
        )
    });
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .enumerate()
        .map(|(i, line)| {
            let v: Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("line {} is not JSON: {e}", i + 1));
            let op = match &v["operation"] {
                Value::Null => None,
                Value::String(s) => Some(
                    Operation::from_operation_id(s)
                        .unwrap_or_else(|| panic!("line {}: unknown operation {s}", i + 1)),
                ),
                other => panic!("line {}: bad operation {other}", i + 1),
            };
            let r = &v["response"];
            Exchange {
                name: v["name"].as_str().expect("name").to_string(),
                operation: op,
                status: r["status"].as_u64().expect("status") as u16,
                headers: r["headers"]
                    .as_object()
                    .expect("headers")
                    .iter()
                    .map(|(k, v)| (k.clone(), v.as_str().expect("header value").to_string()))
                    .collect(),
                body: r["body"].as_str().expect("body").to_string(),
            }
        })
        .collect()
}

/// The body as the server meant it: every `null` member removed, recursively.
fn without_nulls(v: &Value) -> Value {
    match v {
        Value::Object(o) => Value::Object(
            o.iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.clone(), without_nulls(v)))
                .collect::<Map<_, _>>(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(without_nulls).collect()),
        other => other.clone(),
    }
}

fn count_nulls(v: &Value) -> usize {
    match v {
        Value::Null => 1,
        Value::Object(o) => o.values().map(count_nulls).sum(),
        Value::Array(a) => a.iter().map(count_nulls).sum(),
        _ => 0,
    }
}

/// Checks one 2xx exchange; returns how many explicit nulls it carried.
fn check_success(x: &Exchange) -> (DecodedBody, usize) {
    let op = x
        .operation
        .unwrap_or_else(|| panic!("{}: a 2xx must belong to an operation", x.name));
    let decoded = decode_response(op, x.status, &x.header_refs(), x.body.as_bytes())
        .unwrap_or_else(|e| panic!("{} ({op}) must decode: {e}", x.name));
    // Decoded from its parse, the body is the one serde_json decodes from the bytes.
    let from_bytes = decode_body_from_bytes(op, x.body.as_bytes())
        .unwrap_or_else(|e| panic!("{} ({op}) decodes from its bytes: {e}", x.name));
    assert_eq!(decoded.body, from_bytes, "{}", x.name);
    assert_eq!(decoded.status, x.status, "{}", x.name);
    assert_eq!(
        decoded.request_id.as_deref(),
        x.header("X-Request-Id"),
        "{}",
        x.name
    );
    assert_eq!(
        decoded.trace_id.as_deref(),
        x.header("X-Cycles-Trace-Id"),
        "{}",
        x.name
    );
    let raw: Value = serde_json::from_str(&x.body).expect("2xx bodies are JSON");
    // Every value the server sent survives, every null became "absent".
    assert_eq!(
        serde_json::to_value(&decoded.body).unwrap(),
        without_nulls(&raw),
        "{}: the typed body differs from what the server sent",
        x.name
    );
    (decoded.body, count_nulls(&raw))
}

/// The error kind the corpus README says an error response means.
fn expected_kind(x: &Exchange, body: Option<&Map<String, Value>>) -> &'static str {
    match (x.status, body.and_then(|b| b.get("error")?.as_str())) {
        (429, _) => "RATE_LIMITED",
        (500..=599, _) => "SERVER_ERROR",
        (_, Some(code)) => {
            // Every code the reference server sent is a spec code: the kind has its name.
            ErrorKind::from_server_code(code).name()
        }
        (400, None) => "INVALID_REQUEST",
        (s, None) => panic!("{}: no code and status {s}", x.name),
    }
}

fn check_error(x: &Exchange) -> Error {
    let e = match x.operation {
        Some(op) => {
            let e = decode_response(op, x.status, &x.header_refs(), x.body.as_bytes())
                .expect_err(&x.name);
            let plain = http_error(x.status, &x.header_refs(), x.body.as_bytes());
            assert_eq!(e.kind(), plain.kind(), "{}", x.name);
            e
        }
        None => http_error(x.status, &x.header_refs(), x.body.as_bytes()),
    };
    let parsed: Option<Value> = serde_json::from_str(&x.body).ok();
    let body = parsed.as_ref().and_then(Value::as_object);
    let field = |k: &str| body.and_then(|b| b.get(k)?.as_str());
    assert_eq!(e.kind().name(), expected_kind(x, body), "{}: {e:?}", x.name);
    assert_eq!(e.http_status(), Some(x.status), "{}", x.name);
    assert_eq!(e.server_code(), field("error"), "{}", x.name);
    match field("message") {
        Some(m) => assert_eq!(e.message(), m, "{}", x.name),
        None => assert!(e.message().contains("non-JSON"), "{}: {e}", x.name),
    }
    // Headers are authoritative; the README says the body ids equal them.
    assert_eq!(e.request_id(), x.header("X-Request-Id"), "{}", x.name);
    assert_eq!(e.trace_id(), x.header("X-Cycles-Trace-Id"), "{}", x.name);
    if body.is_some() {
        assert_eq!(e.request_id(), field("request_id"), "{}", x.name);
        assert_eq!(e.trace_id(), field("trace_id"), "{}", x.name);
    }
    assert_eq!(
        e.details().cloned().map(Value::Object),
        body.and_then(|b| b.get("details")).cloned(),
        "{}",
        x.name
    );
    assert_eq!(
        e.cycles_evidence()
            .map(|r| serde_json::to_value(r).unwrap()),
        body.and_then(|b| b.get("cycles_evidence")).cloned(),
        "{}",
        x.name
    );
    match x.header("Retry-After") {
        Some(raw) => {
            let ra = e.retry_after().expect("retry_after kept");
            assert_eq!(ra.raw, raw);
            assert_eq!(ra.delta_seconds, raw.parse().ok(), "{}", x.name);
        }
        None => assert!(e.retry_after().is_none(), "{}", x.name),
    }
    let retryable = x.status == 429 || x.status >= 500;
    assert_eq!(e.retryable(), retryable, "{}: {e:?}", x.name);
    e
}

#[test]
fn every_reference_exchange_decodes_through_core() {
    let corpus = load();
    assert_eq!(corpus.len(), EXPECTED_EXCHANGES, "exchanges in the corpus");

    let mut decoded: BTreeMap<String, DecodedBody> = BTreeMap::new();
    let mut errors: BTreeMap<String, Error> = BTreeMap::new();
    let mut nulls = 0;
    let mut bodies_with_nulls = 0;
    let mut ops_seen = std::collections::BTreeSet::new();
    for x in &corpus {
        if let Some(op) = x.operation {
            ops_seen.insert(op.operation_id());
        }
        if (200..300).contains(&x.status) {
            let (body, n) = check_success(x);
            nulls += n;
            bodies_with_nulls += usize::from(n > 0);
            decoded.insert(x.name.clone(), body);
        } else {
            errors.insert(x.name.clone(), check_error(x));
        }
    }
    // Every exchange visited exactly once, none skipped.
    assert_eq!(decoded.len() + errors.len(), EXPECTED_EXCHANGES);
    assert_eq!(decoded.len(), 109, "2xx exchanges");
    assert_eq!(ops_seen.len(), 11, "all operations covered: {ops_seen:?}");
    // The README: 34 bodies fail strict validation, all because of explicit nulls.
    assert_eq!(bodies_with_nulls, 34, "bodies with explicit nulls");
    assert!(nulls > 100, "{nulls} nulls");

    spot_checks(&decoded, &errors);
}

fn body<'a>(d: &'a BTreeMap<String, DecodedBody>, name: &str) -> &'a DecodedBody {
    d.get(name)
        .unwrap_or_else(|| panic!("exchange {name} missing"))
}

fn err<'a>(e: &'a BTreeMap<String, Error>, name: &str) -> &'a Error {
    e.get(name)
        .unwrap_or_else(|| panic!("exchange {name} missing"))
}

/// What the server meant, field by field, on the cases the README calls out.
fn spot_checks(d: &BTreeMap<String, DecodedBody>, e: &BTreeMap<String, Error>) {
    let DecodedBody::GetReservation(r) = body(d, "get.active_minimal") else {
        panic!("get.active_minimal")
    };
    assert_eq!(r.subject.tenant.as_deref(), Some("acme"));
    assert_eq!(
        (&r.subject.workspace, &r.subject.dimensions, &r.action.tags),
        (&None, &None, &None)
    );
    let DecodedBody::GetReservation(r) = body(d, "get.tenantless_subject") else {
        panic!("get.tenantless_subject")
    };
    assert_eq!(r.subject.tenant, None);
    assert_eq!(r.subject.workspace.as_deref(), Some("shared"));
    assert_eq!(r.scope_path, "workspace:shared");

    let DecodedBody::ListReservations(p) = body(d, "list.page_1") else {
        panic!("list.page_1")
    };
    assert_eq!(p.has_more, Some(true));
    assert!(p.next_cursor.is_some());
    let DecodedBody::ListReservations(p) = body(d, "list.page_3") else {
        panic!("list.page_3")
    };
    assert_eq!((p.next_cursor.as_deref(), p.has_more), (None, Some(false)));
    let row = &p.reservations[0];
    assert_eq!(row.subject.workspace.as_deref(), Some("paging"));
    assert_eq!(row.subject.agent.as_deref(), Some("a2"));
    assert_eq!((&row.subject.app, &row.action.tags), (&None, &None));
    assert_eq!(row.reserved.amount, 104);

    let DecodedBody::GetBalances(b) = body(d, "balances.workspace") else {
        panic!("balances.workspace")
    };
    assert_eq!(b.next_cursor, None);
    let over = &b.balances[0];
    assert_eq!(over.remaining.amount, -3010, "negative remaining kept");
    assert_eq!(over.debt.as_ref().map(|a| a.amount), Some(3010));
    assert_eq!(over.overdraft_limit.as_ref().map(|a| a.amount), Some(5000));
    let DecodedBody::GetBalances(b) = body(d, "balances.page_4") else {
        panic!("balances.page_4")
    };
    assert_eq!((b.next_cursor.as_deref(), b.has_more), (None, Some(false)));
    assert_eq!(b.balances[1].is_over_limit, Some(true));

    let DecodedBody::CreateReservation(c) = body(d, "create.replay_of_expired") else {
        panic!("create.replay_of_expired")
    };
    assert_eq!(c.remaining_ttl_ms, Some(0));
    let DecodedBody::CommitReservation(c) = body(d, "commit.success_under_estimate") else {
        panic!("commit.success_under_estimate")
    };
    assert!(c.released.is_some());
    let DecodedBody::GetEvidenceJwks(j) = body(d, "evidence_on.jwks") else {
        panic!("evidence_on.jwks")
    };
    assert!(!j.keys.is_empty());

    // Errors: 401 reason codes, 429 Retry-After, Tomcat HTML, routing, details.
    for (name, reason) in [
        ("auth.missing_key_create", "Missing API key"),
        ("auth.wrong_key_create", "KEY_NOT_FOUND"),
        ("tenant_suspended.create", "TENANT_SUSPENDED"),
        ("tenant_closed.decide", "TENANT_CLOSED"),
    ] {
        let x = err(e, name);
        assert_eq!(x.kind(), &ErrorKind::Unauthorized, "{name}");
        assert_eq!(x.message(), reason, "{name}");
    }
    let x = err(e, "evidence_on.rate_limited");
    assert_eq!(x.kind(), &ErrorKind::RateLimited);
    assert_eq!(x.retry_after().unwrap().delta_seconds, Some(14));
    let x = err(e, "get.encoded_slash");
    assert_eq!(x.kind(), &ErrorKind::InvalidRequest);
    assert_eq!((x.request_id(), x.server_code()), (None, None));
    for name in ["routing.unknown_path", "routing.wrong_method_get_decide"] {
        assert_eq!(err(e, name).kind(), &ErrorKind::ServerError, "{name}");
    }
    assert_eq!(
        err(e, "routing.unknown_path_no_key").kind(),
        &ErrorKind::Unauthorized
    );
    let x = err(e, "create.unit_mismatch");
    assert_eq!(x.kind(), &ErrorKind::UnitMismatch);
    assert!(x.details().unwrap().contains_key("requested_unit"));
    assert_eq!(err(e, "get.expired").kind(), &ErrorKind::ReservationExpired);
    let x = err(e, "evidence_on.create_denied");
    assert_eq!(x.kind(), &ErrorKind::BudgetExceeded);
    assert!(x.cycles_evidence().is_some());
}

#[test]
fn a_missing_corpus_fails_naming_the_path() {
    let missing = PathBuf::from("/nonexistent/shared/exchanges.jsonl");
    let panic = std::panic::catch_unwind(|| load_from(&missing)).expect_err("must fail");
    let msg = panic.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(msg.contains("/nonexistent/shared/exchanges.jsonl"), "{msg}");
    assert!(msg.contains("CYCLES_REFERENCE_CORPUS"), "{msg}");
}
