//! Every step of `conformance/vectors/operations.json` through the bridge's operation table
//! (by core's method name, arguments as every host sends them) against the local server: the
//! Rust side of the shared per-operation test, so a new operation's first test is its step in
//! that file (core, the local server and the bridge at once), and the hosts run the same steps
//! through their typed methods.

#![allow(clippy::result_large_err)] // ErrorFields: see the crate root

use std::collections::BTreeMap;

mod common;

use common::block;
use cycles_bridge::{ClientHandle, ClientOptions};
use cycles_core::runtime;
use cycles_core::transport::decode::Operation;
use cycles_local_server::{LocalServer, ServerConfig};
use serde_json::{json, Map, Value};

fn doc() -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../conformance/vectors/operations.json"
    );
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    assert_eq!(doc["format"], "cycles-operation-vectors");
    assert_eq!(doc["version"], 1);
    doc
}

fn resolve(v: &Value, saved: &BTreeMap<String, Value>) -> Value {
    match v {
        Value::String(s) if s.starts_with('$') => saved[&s[1..]].clone(),
        Value::Array(a) => a.iter().map(|x| resolve(x, saved)).collect(),
        Value::Object(o) => o
            .iter()
            .map(|(k, x)| (k.clone(), resolve(x, saved)))
            .collect::<Map<_, _>>()
            .into(),
        other => other.clone(),
    }
}

/// The bridge's arguments of one step: the path parameters by their names in core's path
/// template, and the request under `request` when there are any (else the request itself).
fn bridge_args(op: Operation, path: &[Value], args: Option<Value>) -> Value {
    let names = op.path_params();
    assert_eq!(names.len(), path.len(), "{op}: path parameters");
    if names.is_empty() {
        return args.unwrap_or_else(|| json!({}));
    }
    let mut m: Map<String, Value> = names
        .iter()
        .zip(path)
        .map(|(n, v)| (n.to_string(), v.clone()))
        .collect();
    if let Some(a) = args {
        m.insert("request".into(), a);
    }
    m.into()
}

#[test]
fn every_operation_has_a_step() {
    let doc = doc();
    let steps: Vec<&str> = doc["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["operation"].as_str().unwrap())
        .collect();
    for op in Operation::ALL {
        assert!(steps.contains(&op.operation_id()), "no step for {op}");
    }
    for s in steps {
        assert!(
            Operation::from_operation_id(s).is_some(),
            "{s}: no such operation"
        );
    }
}

#[test]
fn every_step_through_the_bridge() {
    let rt = runtime::handle().unwrap();
    let server = rt
        .block_on(LocalServer::start(ServerConfig::default()))
        .unwrap();
    let journal = tempfile::tempdir().unwrap();
    // The hosts' `server.client()`: the local key, its tenant (a request without a subject is
    // for it).
    let client = ClientHandle::new(
        ClientOptions {
            base_url: server.url(),
            api_key: "cycles-local-key".into(),
            tenant: Some("acme".into()),
            request_timeout_ms: Some(2000),
            journal_dir: Some(journal.path().to_path_buf()),
            ..ClientOptions::default()
        }
        .into_config(),
    )
    .unwrap();
    let mut saved = BTreeMap::new();
    for step in doc()["steps"].as_array().unwrap() {
        let id = step["operation"].as_str().unwrap();
        let op = Operation::from_operation_id(id).unwrap();
        let path = resolve(&step.get("path").cloned().unwrap_or(json!([])), &saved);
        let args = step.get("args").map(|a| resolve(a, &saved));
        let args = bridge_args(op, path.as_array().unwrap(), args);
        let call = client
            .prepare(op.method_name(), &args.to_string())
            .unwrap_or_else(|e| panic!("{id}: {}", e.message));
        let reply = block(call.run()).unwrap_or_else(|e| panic!("{id}: {}", e.message));
        assert_eq!(reply.status, step["expect"]["status"], "{id}");
        let body: Value = serde_json::from_str(&reply.body).unwrap();
        let members = resolve(
            &step["expect"].get("members").cloned().unwrap_or(json!({})),
            &saved,
        );
        for (k, v) in members.as_object().unwrap() {
            assert_eq!(&body[k], v, "{id}: {k}");
        }
        if let Some(save) = step.get("save").and_then(Value::as_object) {
            for (name, dotted) in save {
                let v = dotted
                    .as_str()
                    .unwrap()
                    .split('.')
                    .fold(&body, |o, p| &o[p]);
                saved.insert(name.clone(), v.clone());
            }
        }
    }
}
