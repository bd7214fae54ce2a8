//! Event JSON: a `createEvent` body (`EventCreateRequest`, also the journal's fallback body) and
//! free-form metadata (`JsonObject`). What decodes re-encodes to text that decodes to the same
//! value, and the second encoding is byte-identical (metadata kept exactly as given).
#![no_main]

use cycles_core::model::JsonObject;
use cycles_core::EventCreateRequest;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(ev) = serde_json::from_slice::<EventCreateRequest>(data) {
        let once = serde_json::to_string(&ev).expect("an event encodes");
        let again: EventCreateRequest = serde_json::from_str(&once).expect("re-decodes");
        assert_eq!(again, ev);
        assert_eq!(serde_json::to_string(&again).unwrap(), once);
        if let Some(m) = &ev.metadata {
            assert!(once.contains(m.get()), "metadata not sent as given");
        }
    }
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(obj) = JsonObject::parse(text) {
        let same = JsonObject::parse(obj.get()).expect("its own text parses");
        assert_eq!(same.get(), obj.get());
        let v = serde_json::value::RawValue::from_string("1".into()).unwrap();
        let with = obj.with_members(&[("recovery_reason", &v)]);
        let again = JsonObject::parse(with.get()).expect("with_members gives an object");
        assert_eq!(
            cycles_core::rawjson::member(again.get(), "recovery_reason"),
            Some("1")
        );
        let _ = obj.to_map();
    }
});
