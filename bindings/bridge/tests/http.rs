//! The bridge over real HTTP against the local server: JSON operations through the table,
//! a guarded action begun and finished from JSON, its events through the pump, and close.

#![allow(clippy::result_large_err)] // ErrorFields: see the crate root

use std::time::Duration;

mod common;

use common::{block, journaled_client};
use cycles_bridge::{ClientHandle, ErrorFields, Lifecycle};
use cycles_core::runtime;
use cycles_local_server::{LocalServer, ServerConfig};
use serde_json::{json, Value};

struct Setup {
    _server: LocalServer,
    client: ClientHandle,
    _journal: tempfile::TempDir,
}

fn setup() -> Setup {
    let rt = runtime::handle().unwrap();
    let server = rt
        .block_on(LocalServer::start(ServerConfig::default()))
        .unwrap();
    let journal = tempfile::tempdir().unwrap();
    let client = journaled_client(&server, journal.path());
    Setup {
        _server: server,
        client,
        _journal: journal,
    }
}

fn call(c: &ClientHandle, op: &str, args: Value) -> Result<(u16, Value), ErrorFields> {
    let call = c.prepare(op, &args.to_string())?;
    let r = block(call.run())?;
    assert!(r.rtt_us > 0 || op == "list_reservations_all");
    Ok((r.status, serde_json::from_str(&r.body).unwrap()))
}

fn subject_action_estimate(key: &str, amount: i64) -> Value {
    json!({
        "idempotency_key": key,
        "subject": {"tenant": "acme"},
        "action": {"kind": "llm.completion", "name": "bridge-test"},
        "estimate": {"unit": "USD_MICROCENTS", "amount": amount},
    })
}

#[test]
fn operations_round_trip_as_json() {
    let s = setup();
    let (status, created) = call(
        &s.client,
        "create_reservation",
        subject_action_estimate("bridge-op-1", 500),
    )
    .unwrap();
    assert_eq!(status, 200);
    let id = created["reservation_id"].as_str().unwrap().to_string();
    let (_, got) = call(&s.client, "get_reservation", json!({"reservation_id": id})).unwrap();
    assert_eq!(got["reservation_id"], json!(id));
    let (status, committed) = call(
        &s.client,
        "commit_reservation",
        json!({"reservation_id": id, "request": {
            "idempotency_key": "bridge-op-1-commit",
            "actual": {"unit": "USD_MICROCENTS", "amount": 300}}}),
    )
    .unwrap();
    assert_eq!(status, 200);
    assert_eq!(committed["charged"]["amount"], json!(300));
    let (_, rows) = call(
        &s.client,
        "list_reservations_all",
        json!({"tenant": "acme", "max_pages": 2}),
    )
    .unwrap();
    assert!(rows
        .as_array()
        .unwrap()
        .iter()
        .any(|r| r["reservation_id"] == json!(id)));

    // A server error keeps its facts; a missing argument is the caller's.
    let e = call(
        &s.client,
        "get_reservation",
        json!({"reservation_id": "nope"}),
    )
    .unwrap_err();
    assert_eq!((e.name.as_str(), e.http_status), ("NOT_FOUND", Some(404)));
    assert!(e.request_id.is_some());
    let e = call(&s.client, "get_reservation", json!({})).unwrap_err();
    assert_eq!(e.message, "missing argument reservation_id");
    let e = call(
        &s.client,
        "commit_reservation",
        json!({"reservation_id": id, "request": {}}),
    )
    .unwrap_err();
    assert_eq!(e.name, "INVALID_ARGUMENT");
    assert!(
        e.message.starts_with("invalid commit request: "),
        "{}",
        e.message
    );
}

#[test]
fn guarded_action_from_json_with_events_and_close() {
    let s = setup();
    let lc = Lifecycle::new(s.client.live().unwrap(), s.client.config(), None, None).unwrap();
    let mut spec = subject_action_estimate("bridge-guard-1", 1000);
    spec["ttl_ms"] = json!(60_000);
    let active = block(lc.begin(&spec.to_string()).unwrap()).unwrap();
    assert!(!active.reservation_id().is_empty());
    active
        .usage()
        .set_actual(250)
        .expect("reported before the end");
    let finished: Value = serde_json::from_str(&block(active.finish(true).unwrap())).unwrap();
    assert_eq!(finished["outcome"], json!("settled"));
    assert_eq!(finished["reservation_id"], json!(active.reservation_id()));
    assert_eq!(finished["actual"], json!(250));
    assert_eq!(finished["settlement"]["status"], json!("committed"));
    assert!(active.is_finished());
    let again = active.finish(true).err().unwrap();
    assert_eq!(again.message, "this guarded action has already finished");

    // The settlement's event arrives through the pump as core's event JSON.
    let mut events = Vec::new();
    while let Some(batch) = lc.next_events(Duration::from_millis(200)) {
        if batch.is_empty() {
            break;
        }
        events.extend(batch);
    }
    let kinds: Vec<Value> = events
        .iter()
        .map(|e| serde_json::from_str::<Value>(e).unwrap()["kind"].clone())
        .collect();
    assert!(kinds.contains(&json!("settlement_settled")), "{kinds:?}");

    let report: Value = serde_json::from_str(&block(lc.close(Duration::ZERO))).unwrap();
    assert_eq!(report["remaining"], json!([]));
    assert!(lc.is_closed());
    assert_eq!(
        lc.begin(&spec.to_string()).err(),
        Some(ErrorFields::closed())
    );
    // Closed and drained: the pump ends instead of waiting.
    assert_eq!(lc.next_events(Duration::from_secs(60)), None);
}

/// The one contract every host gets from the bridge (issue 28): a spec with only an action
/// and a bare estimate takes the client's tenant, unit and a fresh key; the handle carries
/// the decision and caps; a release gives the estimate back; one refused while usage is
/// known leaves the action running; a success without an actual releases and says so.
#[test]
fn guarded_contract_defaults_caps_release_and_missing_actual() {
    let rt = runtime::handle().unwrap();
    let caps = cycles_local_server::CapsSeed {
        max_tokens: Some(64),
        ..Default::default()
    };
    let server = rt
        .block_on(LocalServer::start(ServerConfig {
            budgets: vec![cycles_local_server::BudgetSeed {
                unit: "TOKENS".into(),
                allocated: 1_000,
                caps: Some(caps),
                ..Default::default()
            }],
            ..ServerConfig::default()
        }))
        .unwrap();
    let journal = tempfile::tempdir().unwrap();
    let options = cycles_bridge::args::Args::parse(
        &json!({"base_url": server.url(), "api_key": "cycles-local-key", "tenant": "acme",
                "default_unit": "TOKENS", "journal_dir": journal.path()})
        .to_string(),
        "options",
    )
    .unwrap();
    let (client, _) =
        cycles_bridge::client_of_options(&options, cycles_bridge::Connection::InOptions).unwrap();
    let lc = Lifecycle::new(client.live().unwrap(), client.config(), None, None).unwrap();
    let spec =
        json!({"action": {"kind": "llm.completion", "name": "m"}, "estimate": 100}).to_string();

    let active = block(lc.begin(&spec).unwrap()).unwrap();
    assert_eq!(active.decision(), "ALLOW_WITH_CAPS");
    assert_eq!(active.caps_json(), Some(r#"{"max_tokens":64}"#));
    let info: Value = serde_json::from_str(&active.info_json()).unwrap();
    assert_eq!(
        info,
        json!({"reservation_id": active.reservation_id(), "decision": "ALLOW_WITH_CAPS",
               "caps": {"max_tokens": 64}})
    );
    // Caps rewrite a provider request, and say so in the event stream.
    let plan: Value = serde_json::from_str(
        &active
            .plan_caps("messages", r#"{"max_tokens": 500, "messages": []}"#)
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        plan,
        json!({"bound_from": 500, "bound_to": 64, "set": {"max_tokens": 64}, "unset": [],
               "removed_tools": [], "send": true, "changed": true})
    );
    let unchanged: Value = serde_json::from_str(
        &active
            .plan_caps("messages", r#"{"max_tokens": 9}"#)
            .unwrap(),
    )
    .unwrap();
    assert_eq!(unchanged["changed"], false);
    let bad = active.plan_caps("completions", "{}").unwrap_err();
    assert_eq!(bad.name, "INVALID_ARGUMENT");
    let mut caps_events = Vec::new();
    while let Some(batch) = lc.next_events(Duration::from_millis(50)) {
        if batch.is_empty() {
            break;
        }
        caps_events.extend(
            batch
                .iter()
                .map(|t| serde_json::from_str::<Value>(t).unwrap())
                .filter(|e| e["kind"] == "caps_applied"),
        );
    }
    assert_eq!(
        caps_events.len(),
        1,
        "one rewrite, one event: {caps_events:?}"
    );
    assert_eq!(
        (
            &caps_events[0]["bound_to"],
            &caps_events[0]["reservation_id"]
        ),
        (&json!(64), &json!(active.reservation_id()))
    );
    active.usage().add(7).unwrap();
    let refused = active.release(None).err().expect("usage is known");
    assert_eq!(refused.name, "INVALID_ARGUMENT");
    assert!(
        refused.message.contains("a release would drop it"),
        "{}",
        refused.message
    );
    let done: Value = serde_json::from_str(&block(active.finish(true).unwrap())).unwrap();
    assert_eq!(
        (done["outcome"].as_str(), done["actual"].as_i64()),
        (Some("settled"), Some(7))
    );

    let active = block(lc.begin(&spec).unwrap()).unwrap();
    let done: Value =
        serde_json::from_str(&block(active.release(Some("not needed".into())).unwrap())).unwrap();
    assert_eq!(
        (done["outcome"].as_str(), done["released"].as_bool()),
        (Some("released"), Some(true))
    );
    assert_eq!(
        active.release(None).err().map(|e| e.message),
        Some("this guarded action has already finished".to_string())
    );

    // A call refused: released with core's reason, and the call_not_sent error to raise.
    let active = block(lc.begin(&spec).unwrap()).unwrap();
    let id = active.reservation_id().to_string();
    let none = active
        .refuse_call(None)
        .err()
        .expect("no plan said not to send");
    assert_eq!(none.name, "INVALID_ARGUMENT");
    let plan: Value = serde_json::from_str(
        &active
            .plan_caps("messages", r#"{"max_tokens": 0}"#)
            .unwrap(),
    )
    .unwrap();
    assert_eq!(plan["send"], false);
    let done: Value = serde_json::from_str(&block(active.refuse_call(None).unwrap())).unwrap();
    assert_eq!(
        (&done["outcome"], &done["released"], &done["reservation_id"]),
        (&json!("released"), &json!(true), &json!(id))
    );
    let e = &done["error"];
    assert_eq!(
        (&e["code"], &e["name"], &e["variant"]),
        (
            &json!(104),
            &json!("BUDGET_EXCEEDED"),
            &json!("call_not_sent")
        )
    );
    assert_eq!(
        e["message"],
        format!(
            "the request's output bound is 0, which messages does not accept: the call was not \
             sent, nothing was charged to reservation {id}, and the reservation was released"
        )
    );
    // A host library's own reason (a model that cannot carry the bound).
    let active = block(lc.begin(&spec).unwrap()).unwrap();
    let done: Value = serde_json::from_str(&block(
        active.refuse_call(Some("no bound field".into())).unwrap(),
    ))
    .unwrap();
    assert!(done["error"]["message"]
        .as_str()
        .unwrap()
        .starts_with("no bound field: the call was not sent, nothing was charged"));

    let active = block(lc.begin(&spec).unwrap()).unwrap();
    let done: Value = serde_json::from_str(&block(active.finish(true).unwrap())).unwrap();
    assert_eq!(
        (done["outcome"].as_str(), done["released"].as_bool()),
        (Some("missing_actual"), Some(true))
    );
    let ledger: Vec<(String, Option<i64>, Option<String>)> = server
        .ledger()
        .into_iter()
        .map(|e| (e.kind, e.amount, e.unit))
        .collect();
    let tokens = Some("TOKENS".to_string());
    assert_eq!(
        ledger,
        [
            ("reserve".to_string(), Some(100), tokens.clone()),
            ("commit".to_string(), Some(7), tokens.clone()),
            ("reserve".to_string(), Some(100), tokens.clone()),
            ("release".to_string(), Some(100), tokens.clone()),
            ("reserve".to_string(), Some(100), tokens.clone()),
            ("release".to_string(), Some(100), tokens.clone()),
            ("reserve".to_string(), Some(100), tokens.clone()),
            ("release".to_string(), Some(100), tokens.clone()),
            ("reserve".to_string(), Some(100), tokens.clone()),
            ("release".to_string(), Some(100), tokens.clone()),
        ]
    );
    block(lc.close(Duration::ZERO));
}

/// One options parser for the JSON hosts: unknown members and wrong types are named, never
/// shown as serde positions; options that repeat a given parameter are unknown.
#[test]
fn client_options_json_is_checked_member_by_member() {
    use cycles_bridge::{client_of_options, Connection};
    let parse = |t: &str| cycles_bridge::args::Args::parse(t, "options").unwrap();
    let given = Connection::Given {
        base_url: "http://127.0.0.1:1",
        api_key: "k",
        tenant: None,
    };
    for (text, connection, says) in [
        (
            r#"{"journal_dri": "/tmp"}"#,
            given,
            "unknown option \"journal_dri\" (known: default_unit, ",
        ),
        (
            r#"{"base_url": "http://x"}"#,
            given,
            "unknown option \"base_url\"",
        ),
        (
            r#"{"request_timeout_ms": "5"}"#,
            given,
            "request_timeout_ms must be an integer from 0 to 4294967295, not \"5\"",
        ),
        (
            r#"{"settle_max_attempts": -1}"#,
            given,
            "settle_max_attempts must be an integer from 0 to 4294967295, not -1",
        ),
        (
            r#"{"api_key": "k"}"#,
            Connection::InOptions,
            "base_url is required",
        ),
        (
            r#"{"api_key": "k", "base_url": "http://x"}"#,
            Connection::Env,
            "unknown option \"api_key\"",
        ),
    ] {
        let e = client_of_options(&parse(text), connection)
            .err()
            .expect(text);
        assert_eq!(e.name, "INVALID_ARGUMENT", "{text}");
        assert!(e.message.starts_with(says), "{text}: {}", e.message);
        assert!(!e.message.contains(" at line "), "{text}: {}", e.message);
    }
    let e = client_of_options(&parse(r#"{"default_unit": "TOKEN"}"#), given)
        .err()
        .unwrap();
    assert_eq!(e.name, "CONFIG");
    let (c, _) = client_of_options(&parse(r#"{"default_unit": "CREDITS"}"#), given).unwrap();
    assert_eq!(c.config().unit(), cycles_core::model::Unit::Credits);
}

/// A raw request without a subject is for the client's tenant, as a guarded one is; no
/// tenant is the guard's error, word for word; metadata stays byte for byte.
#[test]
fn raw_requests_without_a_subject_are_for_the_tenant() {
    let rt = cycles_core::runtime::handle().unwrap();
    let server = rt
        .block_on(LocalServer::start(ServerConfig::default()))
        .unwrap();
    let with_tenant = ClientHandle::new(
        cycles_core::Config::new(server.url(), "cycles-local-key").with_tenant("acme"),
    )
    .unwrap();
    let args = r#"{"idempotency_key":"raw-sub","action":{"kind":"llm","name":"m"},
        "estimate":{"unit":"USD_MICROCENTS","amount":5},"metadata":{"n":12345678901234567890}}"#;
    let reply = block(
        with_tenant
            .prepare("create_reservation", args)
            .unwrap()
            .run(),
    )
    .unwrap();
    assert_eq!(reply.status, 200, "{}", reply.body);
    let sent = server.requests();
    let body = sent.last().and_then(|r| r.body.clone()).unwrap();
    assert!(body.contains(r#""subject":{"tenant":"acme"}"#), "{body}");
    assert!(
        body.contains(r#""metadata":{"n":12345678901234567890}"#),
        "{body}"
    );
    let no_tenant =
        ClientHandle::new(cycles_core::Config::new(server.url(), "cycles-local-key")).unwrap();
    for op in ["create_reservation", "decide", "create_event"] {
        let e = no_tenant.prepare(op, "{}").err().expect(op);
        assert_eq!(e.name, "INVALID_ARGUMENT");
        assert_eq!(
            e.message, "subject is required (or configure a tenant on the client)",
            "{op}"
        );
    }
}

/// An integration's provider call (`ProviderCall` + `Active::finish_call`): core's estimate of
/// the request, each body's usage reported to the action as it grows, and core's settlement
/// rule at the end, on every path it has.
#[test]
fn a_provider_call_is_metered_and_settled_by_cores_rule() {
    use cycles_bridge::provider_call::ProviderCall;
    use std::sync::Arc;

    let s = setup();
    let lc = Lifecycle::new(s.client.live().unwrap(), s.client.config(), None, None).unwrap();
    // One unit a token, in the local server's budget unit.
    let table = r#"{"unit":"USD_MICROCENTS","default":{"input_per_mtok":1000000,"output_per_mtok":1000000}}"#;
    let pricing = Arc::new(cycles_bridge::pricing_json::parse_pricing(table).unwrap());
    let request =
        r#"{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"abcdefgh"}]}"#;
    let begin = |key: &str, call: &ProviderCall| {
        let e = call.estimate();
        let spec = json!({
            "idempotency_key": key,
            "subject": {"tenant": "acme"},
            "action": {"kind": "llm.completion", "name": "m"},
            "estimate": {"unit": e.unit.as_str(), "amount": e.amount},
        });
        block(lc.begin(&spec.to_string()).unwrap()).unwrap()
    };
    let end = |a: &cycles_bridge::Active, call: &ProviderCall, ok: bool| -> Value {
        serde_json::from_str(&block(a.finish_call(call, ok).unwrap())).unwrap()
    };
    let new_call = || {
        ProviderCall::for_request(
            pricing.clone(),
            "chat_completions",
            "m",
            request,
            None,
            None,
        )
        .unwrap()
    };

    // Usage reported: committed, and the grown actual reached the action at once.
    let call = new_call();
    assert_eq!(
        call.estimate().amount,
        16,
        "6 prompt tokens + the bound of 10"
    );
    let a = begin("bridge-call-1", &call);
    let body = r#"{"usage":{"prompt_tokens":3,"completion_tokens":4}}"#;
    assert!(!call.observe(body, a.usage()).unwrap());
    assert_eq!(a.usage().actual(), Some(7));
    let done = end(&a, &call, true);
    assert_eq!(
        (done["outcome"].clone(), done["actual"].clone()),
        (json!("settled"), json!(7))
    );

    // Raised after usage: still committed (the host rethrows its exception).
    let call = new_call();
    let a = begin("bridge-call-2", &call);
    call.observe(body, a.usage()).unwrap();
    let done = end(&a, &call, false);
    assert_eq!(done["outcome"], json!("work_failed"), "{done}");
    assert_eq!(done["settlement"]["status"], json!("committed"), "{done}");
    assert_eq!(done["settlement"]["charged"]["amount"], json!(7), "{done}");

    // Returned with no usage: the estimate is committed.
    let call = new_call();
    let a = begin("bridge-call-3", &call);
    let done = end(&a, &call, true);
    assert_eq!(done["actual"], json!(16), "{done}");

    // A body said the call failed, none reported usage: released, although it returned.
    let call = new_call();
    let a = begin("bridge-call-4", &call);
    assert!(call
        .observe(r#"{"error":{"message":"x"}}"#, a.usage())
        .unwrap());
    let done = end(&a, &call, true);
    assert_eq!(done["outcome"], json!("released"), "{done}");

    // Raised with no usage: released.
    let call = new_call();
    let a = begin("bridge-call-5", &call);
    let done = end(&a, &call, false);
    assert_eq!(done["released"], json!(true), "{done}");

    // A body that is not JSON is refused and changes nothing; a bad API name too.
    assert!(call.observe("not json", a.usage()).is_err());
    assert!(ProviderCall::for_request(pricing.clone(), "nope", "m", request, None, None).is_err());
    block(lc.close(Duration::ZERO));
}
