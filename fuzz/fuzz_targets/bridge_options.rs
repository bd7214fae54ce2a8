//! The bridge's client options (`options::host_client`, every host's spelling, endpoint given
//! or in the options) and guard specs (`guard::parse_spec`): any JSON text builds a client or
//! fails with a typed error naming the member, never a panic.
#![no_main]

use cycles_bridge::guard::parse_spec;
use cycles_bridge::options::{host_client, C, JVM, NODE, PYTHON};
use cycles_bridge::Connection;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let Ok(json) = std::str::from_utf8(rest) else {
        return;
    };
    let given = Connection::Given {
        base_url: "http://127.0.0.1:1",
        api_key: "k",
        tenant: Some("t"),
    };
    let (host, connection) = match selector.wrapping_sub(b'0') % 5 {
        0 => (C, given),
        1 => (JVM, Connection::InOptions),
        2 => (NODE, Connection::InOptions),
        3 => (PYTHON, Connection::InOptions),
        _ => {
            let _ = parse_spec(json);
            return;
        }
    };
    if let Err(e) = host_client(json, host, connection) {
        assert!(!e.name.is_empty() && !e.message.is_empty());
    }
});
