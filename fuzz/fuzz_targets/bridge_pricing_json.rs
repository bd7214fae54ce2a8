//! The bridge's pricing JSON (`pricing_json::call`): any function name and argument text gives
//! JSON or a typed INVALID_ARGUMENT, never a panic or an overflow. Input: `name\nargs`.
//! Where the arguments carry a `pricing` that parses on its own (`parse_pricing`, what an
//! integration does once per guard), `call_with` that pricing and the other arguments gives
//! what `call` gave. The args text is also read as a host tokenizer's counts
//! (`parse_text_tokens`).
#![no_main]

use cycles_bridge::pricing_json::{call, call_with, parse_pricing, parse_text_tokens};
use cycles_core::ErrorKind;
use cycles_fuzz::named;
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let Some((name, args)) = named(data) else {
        return;
    };
    let _ = parse_text_tokens(args);
    let inline = call(name, args);
    match &inline {
        Ok(out) => {
            serde_json::from_str::<Value>(out).expect("result is JSON");
        }
        Err(e) => assert_eq!(
            e.kind(),
            &ErrorKind::InvalidArgument,
            "{name}: {}",
            e.message()
        ),
    }
    let Ok(Value::Object(mut rest)) = serde_json::from_str::<Value>(args) else {
        return;
    };
    let Some(given) = rest.remove("pricing") else {
        return;
    };
    let Ok(pricing) = parse_pricing(&given.to_string()) else {
        return;
    };
    let rest = Value::Object(rest).to_string();
    let parsed = call_with(name, Some(&pricing), &rest);
    match (&inline, &parsed) {
        (Ok(a), Ok(b)) => assert_eq!(a, b, "{name}: the pricing parsed beforehand"),
        (Ok(a), Err(e)) => panic!("{name}: {a} inline, {} parsed beforehand", e.message()),
        (Err(_), Ok(_)) => {}
        (Err(_), Err(e)) => assert_eq!(e.kind(), &ErrorKind::InvalidArgument, "{}", e.message()),
    }
});
