//! The bridge's pricing JSON (`pricing_json::call`): any function name and argument text gives
//! JSON or a typed INVALID_ARGUMENT, never a panic or an overflow. Input: `name\nargs`.
#![no_main]

use cycles_bridge::pricing_json::call;
use cycles_core::ErrorKind;
use cycles_fuzz::named;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((name, args)) = named(data) else {
        return;
    };
    match call(name, args) {
        Ok(out) => {
            serde_json::from_str::<serde_json::Value>(&out).expect("result is JSON");
        }
        Err(e) => assert_eq!(
            e.kind(),
            &ErrorKind::InvalidArgument,
            "{name}: {}",
            e.message()
        ),
    }
});
