//! The raw-JSON scanner (`cycles_core::rawjson`): on any text it never panics; on text
//! `parse` accepts (lone surrogates and big integers included) compacting is a fixed point,
//! every member value is itself valid JSON, and where `serde_json::Value` can read the text
//! too, the scanner's members agree with it (last duplicate wins, keys unescaped).
#![no_main]

use cycles_core::rawjson;
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    // Documented as total: `None` rather than a panic on anything.
    let _ = rawjson::members(text);
    let _ = rawjson::member(text, "idempotency_key");
    let _ = rawjson::string(text);
    let _ = rawjson::compact(text);
    let Ok(raw) = rawjson::parse(text) else {
        return;
    };
    let c = raw.get();
    assert_eq!(rawjson::compact(c), c, "compact is not idempotent");
    assert_eq!(rawjson::parse(c).expect("compacted parses").get(), c);
    if let Some(members) = rawjson::members(c) {
        for (k, v) in &members {
            assert!(rawjson::string(k).is_some(), "key {k:?} does not decode");
            assert!(rawjson::parse(v).is_ok(), "member value {v:?} is not JSON");
        }
    }
    if let Ok(Value::Object(map)) = serde_json::from_str::<Value>(text) {
        let members = rawjson::members(c).expect("an object has members");
        for (key, want) in &map {
            let got = rawjson::member(c, key).expect("member found");
            let got: Value = serde_json::from_str(got).expect("member value parses");
            assert_eq!(&got, want, "member {key:?}");
        }
        assert!(members.len() >= map.len());
    }
    if let Ok(Value::String(s)) = serde_json::from_str::<Value>(text) {
        let d = rawjson::string(c).expect("a string decodes");
        assert!(d.well_formed);
        assert_eq!(d.text, s);
    }
});
