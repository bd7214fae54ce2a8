//! What a provider body or event says (`cycles_core::pricing::Reading`): on any text the text
//! read never panics; where `serde_json::Value` reads the text as an object, the text read
//! reads it too and says exactly what the document read says (the kind, the failure, every
//! usage count), so the guards' fast path charges what the document rules charge.
#![no_main]

use cycles_core::pricing::{wire, Api, Reading, Usage};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let fast = Reading::of_text(text);
    let Ok(v @ Value::Object(_)) = serde_json::from_str::<Value>(text) else {
        return;
    };
    let fast = fast.expect("the text read refused an object the document read accepts");
    assert_eq!(fast, Reading::of_value(&v), "the two reads differ");
    let acc = Usage {
        input_tokens: Some(1),
        output_tokens: None,
    };
    for api in Api::ALL {
        assert_eq!(
            wire::usage_in(api, acc, &fast),
            wire::usage_update(api, acc, &v)
        );
        assert_eq!(wire::failed_in(api, &fast), wire::call_failed(api, &v));
    }
});
