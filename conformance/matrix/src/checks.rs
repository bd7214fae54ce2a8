//! What every face must answer: the shared vectors and the reference-server corpus (each with
//! its expected value), and the differential (each face against the Rust face, byte for byte
//! in canonical JSON).

use std::collections::BTreeMap;

use cycles_core::ErrorKind;
use serde_json::{json, Map, Value};

use crate::face::canonical;
use crate::gen::{Gen, TIMING_FUNCTIONS};

/// A request with the `ok` value it must produce (compared as a subset: every member the
/// expectation names must be equal; lists must have the same length).
pub struct Expected {
    /// Which vector or exchange.
    pub label: String,
    /// The request.
    pub request: Value,
    /// The expected `ok` value.
    pub ok: Value,
    /// The Cycles error name the face must answer instead (`ok` is then unused).
    pub error: Option<String>,
    /// Compare `ok` exactly rather than as a subset.
    pub exact: bool,
}

impl Expected {
    /// An expectation compared as a subset.
    pub fn new(label: String, request: Value, ok: Value) -> Expected {
        Expected {
            label,
            request,
            ok,
            error: None,
            exact: false,
        }
    }

    /// Whether a face's response meets it.
    fn met_by(&self, response: &Value) -> bool {
        match (&self.error, response.get("ok")) {
            (Some(name), _) => response.get("error").and_then(Value::as_str) == Some(name),
            (None, Some(v)) => subset(v, &self.ok) && (!self.exact || subset(&self.ok, v)),
            (None, None) => false,
        }
    }
}

/// Whether `actual` carries everything `expected` does.
pub fn subset(actual: &Value, expected: &Value) -> bool {
    match (actual, expected) {
        (Value::Object(a), Value::Object(e)) => e
            .iter()
            .all(|(k, ev)| subset(a.get(k).unwrap_or(&Value::Null), ev)),
        (Value::Array(a), Value::Array(e)) => {
            a.len() == e.len() && a.iter().zip(e).all(|(x, y)| subset(x, y))
        }
        _ => actual == expected,
    }
}

fn timing(f: &str, args: Value) -> Value {
    json!({"op": "timing", "fn": f, "args": args})
}

fn without(v: &Value, key: &str) -> Value {
    let mut v = v.clone();
    if let Some(o) = v.as_object_mut() {
        o.remove(key);
    }
    v
}

/// The heartbeat vectors (`conformance/vectors/heartbeat.json`) as requests.
pub fn heartbeat_vectors(h: &Value) -> Vec<Expected> {
    let mut out = Vec::new();
    let list = |k: &str| h[k].as_array().cloned().unwrap_or_default();
    let mut push =
        |label: String, request: Value, ok: Value| out.push(Expected::new(label, request, ok));
    for c in list("schedule") {
        push(
            format!("schedule/{}", c["name"]),
            timing("schedule", c["input"].clone()),
            c["expect"].clone(),
        );
    }
    for (i, c) in list("retry_after").iter().enumerate() {
        push(
            format!("retry_after/{i}"),
            timing("parse_retry_after", json!({"raw": c["raw"]})),
            json!({"kind": c["kind"], "ms": c["ms"]}),
        );
    }
    for c in list("retry") {
        let (i, e) = (&c["input"], &c["expect"]);
        let n = &c["name"];
        push(
            format!("retry/{n}/current_lead_estimate"),
            timing(
                "current_lead_estimate",
                json!({"last_lead_floor_ms": i["last_lead_floor_ms"], "elapsed_ms": i["elapsed_ms"]}),
            ),
            e["current_lead_estimate_ms"].clone(),
        );
        push(
            format!("retry/{n}/retry_window"),
            timing(
                "retry_window",
                json!({"current_lead_estimate_ms": e["current_lead_estimate_ms"],
                "attempt_budget_ms": i["attempt_budget_ms"], "safety_margin_ms": i["safety_margin_ms"]}),
            ),
            e["retry_window_ms"].clone(),
        );
        // A null delay is "no retry" (the window is not positive): nothing to compute.
        if e["transient_retry_delay_ms"].is_null() {
            continue;
        }
        push(
            format!("retry/{n}/transient_retry_delay"),
            timing(
                "transient_retry_delay",
                json!({"current_lead_estimate_ms": e["current_lead_estimate_ms"],
                "retry_window_ms": e["retry_window_ms"]}),
            ),
            e["transient_retry_delay_ms"].clone(),
        );
    }
    for c in list("extend_timeout") {
        push(
            format!("extend_timeout/{}", c["name"]),
            timing("extend_timeout", c["input"].clone()),
            c["expect"].clone(),
        );
    }
    for c in list("planner") {
        let steps: Vec<Value> = c["expect"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .map(|d| json!({"decision": d}))
            .collect();
        push(
            format!("planner/{}", c["name"]),
            json!({"op": "primary", "request_timeout_ms": c["request_timeout_ms"], "derive": false, "steps": c["steps"]}),
            Value::Array(steps),
        );
    }
    for c in list("planner_derived") {
        let steps: Vec<Value> = c["expect"].as_array().cloned().unwrap_or_default()
            .into_iter()
            .map(|d| json!({"decision": without(&d, "attempt_timeout_ms"), "attempt_timeout_ms": d["attempt_timeout_ms"]}))
            .collect();
        push(
            format!("planner_derived/{}", c["name"]),
            json!({"op": "primary", "request_timeout_ms": c["configured_timeout_ms"], "derive": true, "steps": c["steps"]}),
            Value::Array(steps),
        );
    }
    for c in list("fallback") {
        let e = &c["expect"];
        let steps: Vec<Value> = e["decisions"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .zip(e["regimes"].as_array().cloned().unwrap_or_default())
            .map(|(d, r)| json!({"decision": d, "regime": r}))
            .collect();
        push(
            format!("fallback/{}", c["name"]),
            json!({"op": "fallback", "requested_ttl_ms": c["requested_ttl_ms"], "create": c["create"],
                   "prime": c["prime"], "steps": c["steps"]}),
            json!({"first": e["first_beat"], "steps": steps}),
        );
    }
    out
}

/// The journal vectors (`conformance/vectors/journal.json`) as requests.
pub fn journal_vectors(j: &Value) -> Vec<Expected> {
    let mut out = Vec::new();
    let list = |k: &str| j[k].as_array().cloned().unwrap_or_default();
    for (i, c) in list("partition").iter().enumerate() {
        out.push(Expected::new(
            format!("partition/{i}"),
            json!({"op": "fingerprint", "base_url": c["base_url"], "api_key": c["api_key"], "tenant": c["tenant"]}),
            c["fp16"].clone(),
        ));
    }
    for c in list("file_names") {
        out.push(Expected::new(
            format!("file_names/{}", c["reservation_id"]),
            json!({"op": "journal_names", "reservation_id": c["reservation_id"]}),
            json!({"standard": c["standard"], "legacy": c["legacy"]}),
        ));
    }
    for c in list("records") {
        let mut e = c["expect"].clone();
        if let Some(o) = e.as_object_mut() {
            // Parsed bodies are the per-language tests' business; the matrix compares the
            // exact wire texts.
            o.remove("commit_body");
            o.remove("event_fallback_body");
        }
        out.push(Expected::new(
            format!("records/{}", c["name"]),
            json!({"op": "parse_record", "text": c["text"]}),
            e,
        ));
    }
    out
}

/// The pricing vectors (`conformance/vectors/pricing.json`) as `pricing` requests: results
/// compared exactly, errors by their Cycles error name.
pub fn pricing_vectors(p: &Value) -> Vec<Expected> {
    let mut out = Vec::new();
    for (function, cases) in p["functions"].as_object().into_iter().flatten() {
        for c in cases.as_array().into_iter().flatten() {
            out.push(Expected {
                label: format!("{function}/{}", c["name"]),
                request: json!({"op": "pricing", "fn": function, "args": c["input"]}),
                ok: c["expect"].clone(),
                error: c["error"]["kind"].as_str().map(str::to_string),
                exact: true,
            });
        }
    }
    out
}

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

/// The reference-server corpus as `decode` requests; the expectation follows the corpus
/// README: a 2xx is the body as the server meant it (nulls are absent), an error has the kind
/// its status and code say, the headers' ids, and the retry facts.
pub fn corpus(lines: &[Value]) -> Vec<Expected> {
    lines
        .iter()
        .map(|x| {
            let r = &x["response"];
            let status = r["status"].as_u64().unwrap_or(0);
            let text = r["body"].as_str().unwrap_or("");
            let header = |n: &str| {
                r["headers"].as_object().and_then(|h| {
                    h.iter()
                        .find(|(k, _)| k.eq_ignore_ascii_case(n))
                        .map(|(_, v)| v.clone())
                })
            };
            let body: Option<Value> = serde_json::from_str(text).ok();
            let ok = if (200..300).contains(&status) {
                json!({"result": without_nulls(body.as_ref().unwrap_or(&Value::Null))})
            } else {
                let code = body
                    .as_ref()
                    .and_then(|b| b.get("error"))
                    .and_then(Value::as_str);
                let kind = match (status, code) {
                    (429, _) => "RATE_LIMITED",
                    (500..=599, _) => "SERVER_ERROR",
                    (_, Some(c)) => ErrorKind::from_server_code(c).name(),
                    _ => "INVALID_REQUEST",
                };
                let retry_after_ms = header("Retry-After")
                    .and_then(|v| v.as_str().and_then(|s| s.parse::<i64>().ok()))
                    .map(|s| s * 1000);
                json!({"error": {"kind": kind, "status": status, "error_code": code,
                    "request_id": header("X-Request-Id"),
                    "retryable": status == 429 || status >= 500, "retry_after_ms": retry_after_ms}})
            };
            Expected::new(
                format!("corpus/{}", x["name"].as_str().unwrap_or("?")),
                json!({"op": "decode", "exchange": x}),
                ok,
            )
        })
        .collect()
}

/// How many of `responses` match their expectations; prints the first few that do not.
pub fn score(face: &str, cases: &[Expected], responses: &[Value]) -> u64 {
    let mut passed = 0;
    let mut shown = 0;
    for (c, r) in cases.iter().zip(responses) {
        match c.met_by(r) {
            true => passed += 1,
            false => {
                if shown < 5 {
                    eprintln!(
                        "  {face}: {} expected {}\n    got {}",
                        c.label,
                        c.error
                            .as_ref()
                            .map_or_else(|| canonical(&c.ok), |e| format!("error {e}")),
                        canonical(r)
                    );
                }
                shown += 1;
            }
        }
    }
    if shown > 5 {
        eprintln!("  {face}: ... and {} more", shown - 5);
    }
    passed
}

/// The differential's inputs: `count` calls of every timing function, `count` sequences of
/// each planner, and journal names, identities and records.
pub struct Differential {
    /// (row label, requests).
    pub groups: Vec<(String, Vec<Value>)>,
}

impl Differential {
    /// Generates every input from `seed`.
    pub fn generate(seed: u64, count: usize) -> Differential {
        let mut g = Gen::new(seed);
        let mut groups = Vec::new();
        for f in TIMING_FUNCTIONS {
            let reqs = (0..count).map(|_| timing(f, g.timing_args(f))).collect();
            groups.push((format!("timing: {f}"), reqs));
        }
        groups.push((
            "planner: primary".into(),
            (0..count).map(|_| g.primary()).collect(),
        ));
        groups.push((
            "planner: fallback".into(),
            (0..count).map(|_| g.fallback()).collect(),
        ));
        let names = (0..count / 5)
            .map(|_| json!({"op": "journal_names", "reservation_id": g.reservation_id()}))
            .collect();
        groups.push(("journal: file names".into(), names));
        groups.push((
            "journal: fingerprints".into(),
            (0..(count / 200).max(20)).map(|_| g.identity()).collect(),
        ));
        let records = (0..count / 5)
            .map(|_| json!({"op": "parse_record", "text": g.record_text()}))
            .collect();
        groups.push(("journal: records".into(), records));
        Differential { groups }
    }
}

/// One group's disagreement of a face with the reference, reported by its smallest input.
pub struct Mismatch {
    /// How many inputs differed.
    pub count: u64,
    /// The smallest differing request (canonical), the reference's and the face's answers.
    pub smallest: (String, String, String),
}

/// Compares a face's answers with the reference's, input by input.
pub fn compare(requests: &[Value], reference: &[Value], face: &[Value]) -> (u64, Option<Mismatch>) {
    let mut agreed = 0;
    let mut worst: Option<Mismatch> = None;
    for ((req, want), got) in requests.iter().zip(reference).zip(face) {
        let (w, g) = (canonical(want), canonical(got));
        if w == g && want.get("ok").is_some() {
            agreed += 1;
            continue;
        }
        let r = canonical(req);
        let m = worst.get_or_insert(Mismatch {
            count: 0,
            smallest: (r.clone(), w.clone(), g.clone()),
        });
        m.count += 1;
        if r.len() < m.smallest.0.len() {
            m.smallest = (r, w, g);
        }
    }
    (agreed, worst)
}

/// Counts of answers per kind (`ok`, `error:NAME`, `fail`), for a one-line summary.
pub fn answer_kinds(responses: &[Value]) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for r in responses {
        let k = if r.get("ok").is_some() {
            "ok".to_string()
        } else if let Some(e) = r.get("error") {
            format!("error:{}", e.as_str().unwrap_or("?"))
        } else {
            "fail".to_string()
        };
        *m.entry(k).or_default() += 1;
    }
    m
}
