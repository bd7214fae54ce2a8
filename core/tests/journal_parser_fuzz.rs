//! The record parser never panics, whatever it is fed: arbitrary bytes, arbitrary JSON, and
//! mutations of a valid record. Whatever parses also re-serializes to a record that parses.

use cycles_core::journal::Record;
use proptest::prelude::*;

const VALID: &str = r#"{"version": 1, "reservation_id": "r\u00e9s/1", "base_url": "http://h", "mode": "commit", "commit_body": {"idempotency_key": "k", "actual": {"unit": "TOKENS", "amount": 5}}, "event_fallback_body": null, "recorded_at_ms": 10, "not_before_ms": null}"#;

fn json() -> impl Strategy<Value = serde_json::Value> {
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::from),
        any::<i64>().prop_map(serde_json::Value::from),
        any::<f64>().prop_map(serde_json::Value::from),
        ".{0,12}".prop_map(serde_json::Value::from),
        prop_oneof![
            Just("version"),
            Just("mode"),
            Just("commit"),
            Just("event"),
            Just("idempotency_key")
        ]
        .prop_map(serde_json::Value::from),
    ];
    leaf.prop_recursive(4, 48, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(serde_json::Value::Array),
            prop::collection::vec(
                (
                    prop_oneof![
                        Just("version".to_string()),
                        Just("reservation_id".to_string()),
                        Just("mode".to_string()),
                        Just("commit_body".to_string()),
                        Just("event_fallback_body".to_string()),
                        Just("not_before_ms".to_string()),
                        Just("recorded_at_ms".to_string()),
                        Just("idempotency_key".to_string()),
                        "[a-z_]{1,8}",
                    ],
                    inner
                ),
                0..8
            )
            .prop_map(|kv| serde_json::Value::Object(kv.into_iter().collect())),
        ]
    })
}

fn check(bytes: &[u8]) {
    if let Ok(r) = Record::parse(bytes) {
        let out = r.to_json();
        let again = Record::parse(&out).expect("what we write parses");
        assert_eq!(again.to_json(), out);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        check(&bytes);
    }

    #[test]
    fn arbitrary_json(v in json()) {
        check(v.to_string().as_bytes());
    }

    #[test]
    fn mutated_valid_record(pos in 0usize..VALID.len(), cut in 0usize..8, insert in ".{0,4}") {
        let mut s = VALID.as_bytes().to_vec();
        let end = (pos + cut).min(s.len());
        s.splice(pos..end, insert.bytes());
        check(&s);
    }
}
