//! Runs the shared journal vectors (`conformance/vectors/journal.json`): identity partitions,
//! standard and legacy file names, and record fixtures in every variant the official SDKs
//! write, with their expected parse results, and the `drain` records drained against the
//! local server (applied once, byte for byte). Other languages run the same file.

use std::time::Duration;

use cycles_core::journal::{identity, names, ParseError, Record};
use cycles_core::settle::{SettleConfig, Settler};
use cycles_core::{Action, Amount, Config, CyclesClient, ReservationCreateRequest, Subject, Unit};
use cycles_local_server::{LocalServer, ServerConfig};
use serde_json::Value;

fn vectors() -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../conformance/vectors/journal.json"
    );
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn partition_vectors() {
    let v = vectors();
    let cases = v["partition"].as_array().unwrap();
    assert!(cases.len() >= 5);
    for c in cases {
        let got = identity::partition(
            c["base_url"].as_str().unwrap(),
            c["api_key"].as_str().unwrap(),
            c["tenant"].as_str(),
        );
        assert_eq!(got, c["fp16"].as_str().unwrap(), "{c}");
    }
}

#[test]
fn file_name_vectors() {
    let v = vectors();
    for c in v["file_names"].as_array().unwrap() {
        let id = c["reservation_id"].as_str().unwrap();
        assert_eq!(
            names::record_file_name(id),
            c["standard"].as_str().unwrap(),
            "{id}"
        );
        assert_eq!(
            names::legacy_file_name(id),
            c["legacy"].as_str().unwrap(),
            "{id}"
        );
    }
    // The whole name of `rsv/a`, pinned.
    assert_eq!(
        names::record_file_name("rsv/a"),
        "v2-e3edb9ca022de3c9c90c5667d47fa66448cee1f254e488a761313faee34141d7.json"
    );
    assert_ne!(
        names::record_file_name("rsv/a"),
        names::record_file_name("rsv_a")
    );
    assert_eq!(
        names::legacy_file_name("rsv/a"),
        names::legacy_file_name("rsv_a")
    );
}

fn raw_value(r: &Option<Box<serde_json::value::RawValue>>) -> Value {
    r.as_ref()
        .map_or(Value::Null, |b| serde_json::from_str(b.get()).unwrap())
}

#[test]
fn record_vectors() {
    let v = vectors();
    let cases = v["records"].as_array().unwrap();
    assert!(cases.len() >= 15);
    for c in cases {
        let name = c["name"].as_str().unwrap();
        let text = c["text"].as_str().unwrap();
        let e = &c["expect"];
        let parsed = Record::parse(text.as_bytes());
        if e["ok"] == false {
            let err = parsed.expect_err(name);
            let kind = match err {
                ParseError::Corrupt(_) => "corrupt",
                ParseError::Unsupported(_) => "unsupported",
            };
            assert_eq!(kind, e["error"].as_str().unwrap(), "{name}: {err}");
            continue;
        }
        let r = parsed.unwrap_or_else(|err| panic!("{name}: {err}"));
        assert_eq!(
            r.reservation_id,
            e["reservation_id"].as_str().unwrap(),
            "{name}"
        );
        assert_eq!(r.base_url.as_deref(), e["base_url"].as_str(), "{name}");
        assert_eq!(r.mode.as_str(), e["mode"].as_str().unwrap(), "{name}");
        assert_eq!(
            r.idempotency_key().as_deref(),
            e["idempotency_key"].as_str(),
            "{name}"
        );
        assert_eq!(r.recorded_at_ms, e["recorded_at_ms"].as_u64(), "{name}");
        assert_eq!(r.not_before_ms, e["not_before_ms"].as_u64(), "{name}");
        if let Some(b) = e.get("commit_body") {
            assert_eq!(&raw_value(&r.commit_body), b, "{name}");
        }
        // `drain` records hold what a `Value` cannot (lone surrogates): compared as bytes only.
        if let Some(b) = e.get("event_fallback_body") {
            assert_eq!(&raw_value(&r.event_fallback_body), b, "{name}");
        }
        let wire =
            |b: &Option<Box<serde_json::value::RawValue>>| b.as_ref().map(|b| b.get().to_string());
        assert_eq!(
            wire(&r.commit_body).as_deref(),
            e["commit_body_wire"].as_str(),
            "{name}"
        );
        assert_eq!(
            wire(&r.event_fallback_body).as_deref(),
            e["event_fallback_body_wire"].as_str(),
            "{name}"
        );
        let extra: Vec<&str> = r.extra.iter().map(|(k, _)| k.as_str()).collect();
        let want: Vec<&str> = e["extra_keys"]
            .as_array()
            .unwrap()
            .iter()
            .map(|k| k.as_str().unwrap())
            .collect();
        assert_eq!(extra, want, "{name}");
        // What we write is compact, parses back identically, and keeps the extras.
        let out = r.to_json();
        let again = Record::parse(&out).unwrap();
        assert_eq!(again.to_json(), out, "{name}");
        assert_eq!(wire(&again.commit_body), wire(&r.commit_body), "{name}");
        let s = String::from_utf8(out).unwrap();
        assert!(
            !s.contains(", \"") && !s.contains("\": "),
            "{name}: not compact: {s}"
        );
    }
}

const KEY: &str = "cycles-local-key";

/// Every `drain` record, written byte for byte as the official SDK wrote it (with a live
/// reservation id and the server URL substituted), is listed as valid, drained once, and
/// sent as exactly its journaled body: the server decides, nothing is quarantined.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drain_records_are_applied_once_byte_for_byte() {
    let v = vectors();
    let cases: Vec<&Value> = v["records"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["drain"] == true)
        .collect();
    assert!(cases.len() >= 4, "drain fixtures missing");
    let server = LocalServer::start(ServerConfig::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = Config::new(server.url(), KEY).with_journal_dir(dir.path());
    let client = CyclesClient::new(config.clone()).unwrap();
    let part = dir
        .path()
        .join(identity::partition(&server.url(), KEY, None));
    std::fs::create_dir_all(&part).unwrap();
    let mut expected = Vec::new();
    for c in &cases {
        let e = &c["expect"];
        let fixture_id = serde_json::to_string(e["reservation_id"].as_str().unwrap()).unwrap();
        let created = client
            .create_reservation(&ReservationCreateRequest::new(
                format!("reserve-{}", c["name"].as_str().unwrap()),
                Subject::tenant("acme"),
                Action::new("llm.completion", "test-model"),
                Amount::new(Unit::UsdMicrocents, 1_000),
            ))
            .await
            .unwrap();
        let id = created.body.reservation_id.clone().unwrap();
        let live = |t: &str| {
            t.replace(&fixture_id, &serde_json::to_string(&id).unwrap())
                .replace(
                    "\"http://localhost\"",
                    &serde_json::to_string(&server.url()).unwrap(),
                )
        };
        let text = live(c["text"].as_str().unwrap());
        std::fs::write(part.join(names::record_file_name(&id)), &text).unwrap();
        let wire_field = if e["mode"] == "event" {
            "event_fallback_body_wire"
        } else {
            "commit_body_wire"
        };
        expected.push((
            c["name"].as_str().unwrap().to_string(),
            e["idempotency_key"].as_str().unwrap().to_string(),
            e["mode"].as_str().unwrap().to_string(),
            live(e[wire_field].as_str().unwrap()),
        ));
    }
    let settler = Settler::new(&config, SettleConfig::default()).unwrap();
    let scan = settler.journal().unwrap().scan().unwrap();
    assert_eq!(scan.records.len(), cases.len(), "all listed as valid");
    assert!(scan.invalid.is_empty(), "{:?}", scan.invalid);
    let report = settler.drain(Duration::from_secs(10)).await;
    assert!(report.quarantined.is_empty(), "{:?}", report.quarantined);
    assert!(report.remaining.is_empty(), "{:?}", report.remaining);
    assert_eq!(report.settled(), cases.len(), "{:?}", report.outcomes);
    let ledger = server.ledger();
    let requests = server.requests();
    for (name, key, mode, wire) in &expected {
        let applied: Vec<_> = ledger
            .iter()
            .filter(|l| &l.idempotency_key == key)
            .collect();
        assert_eq!(applied.len(), 1, "{name}: {applied:?}");
        assert_eq!(&applied[0].kind, mode, "{name}");
        let sent: Vec<_> = requests
            .iter()
            .filter(|r| r.idempotency_key.as_deref() == Some(key.as_str()))
            .collect();
        assert_eq!(sent.len(), 1, "{name}");
        assert_eq!(sent[0].body.as_deref(), Some(wire.as_str()), "{name}");
        assert_eq!(
            sent[0].status,
            Some(if mode == "event" { 201 } else { 200 })
        );
    }
    assert!(settler
        .journal()
        .unwrap()
        .scan()
        .unwrap()
        .records
        .is_empty());
}
