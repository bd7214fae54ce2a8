//! Runs the shared journal vectors (`conformance/vectors/journal.json`): identity partitions,
//! standard and legacy file names, and record fixtures in every variant the official SDKs
//! write, with their expected parse results. Other languages run the same file.

use cycles_core::journal::{identity, names, ParseError, Record};
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
        assert_eq!(
            &raw_value(&r.event_fallback_body),
            &e["event_fallback_body"],
            "{name}"
        );
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
