//! Journal record parsing (`Record::parse`) and its bridge form (`journal_json::parse_record`):
//! any bytes parse or fail with a typed error; a parsed record re-serializes to a record that
//! parses to the same thing, and serializing is a fixed point after one round.
#![no_main]

use cycles_core::journal::Record;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let parsed = Record::parse(data);
    let bridged = cycles_bridge::journal_json::parse_record(data);
    assert_eq!(parsed.is_ok(), bridged.is_ok(), "core and bridge disagree");
    let Ok(r) = parsed else { return };
    assert!(!r.reservation_id.is_empty());
    assert!(r.active_body().is_some());
    let _ = (r.idempotency_key(), r.actual());
    let once = r.to_json();
    let again = Record::parse(&once).expect("a written record parses");
    assert_eq!(again.reservation_id, r.reservation_id);
    assert_eq!(again.mode, r.mode);
    assert_eq!(again.base_url, r.base_url);
    assert_eq!(again.not_before_ms, r.not_before_ms);
    assert_eq!(again.recorded_at_ms, r.recorded_at_ms);
    let body =
        |b: &Option<Box<serde_json::value::RawValue>>| b.as_ref().map(|b| b.get().to_string());
    assert_eq!(body(&again.commit_body), body(&r.commit_body));
    assert_eq!(
        body(&again.event_fallback_body),
        body(&r.event_fallback_body)
    );
    assert_eq!(again.idempotency_key(), r.idempotency_key());
    assert_eq!(again.to_json(), once, "serialization is not stable");
});
