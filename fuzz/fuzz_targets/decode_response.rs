//! The response decoder of every operation (`decode_response`: status, headers, body) and the
//! bridge's `decode_captured` on top of it. Never a panic; a non-2xx is always an error; an
//! invalid 2xx is AMBIGUOUS_SUCCESS for a write and INVALID_RESPONSE for a read; a decoded
//! success re-encodes to JSON that the same operation decodes again; the typed body decoded
//! from the parse (what the decoder does) is the one decoded from the bytes, or both refuse.
#![no_main]

use cycles_core::model::json_view::BorrowedJson;
use cycles_core::transport::decode::{
    decode_body_from_bytes, decode_body_from_parse, decode_response, http_error, Operation,
};
use cycles_core::ErrorKind;
use cycles_fuzz::exchange;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some(x) = exchange(data) else { return };
    let bridged = cycles_bridge::decode_captured(x.operation, x.status, &x.headers, x.body);
    let Some(op) = x.operation.and_then(Operation::from_operation_id) else {
        if x.operation.is_none() && !(200..300).contains(&x.status) {
            let e = http_error(x.status, &x.headers, x.body);
            assert!(bridged.is_err());
            let _ = (e.kind(), e.message(), e.retry_after(), e.to_string());
        }
        return;
    };
    if let Ok(doc) = BorrowedJson::parse(x.body) {
        let parsed = decode_body_from_parse(op, &doc);
        let bytes = decode_body_from_bytes(op, x.body);
        assert_eq!(
            parsed.as_ref().ok(),
            bytes.as_ref().ok(),
            "{op}: decoded from the parse {:?}, from the bytes {:?}",
            parsed.as_ref().err().map(ToString::to_string),
            bytes.as_ref().err().map(ToString::to_string)
        );
    }
    let got = decode_response(op, x.status, &x.headers, x.body);
    assert_eq!(got.is_ok(), bridged.is_ok(), "core and bridge disagree");
    match got {
        Ok(d) => {
            assert!((200..300).contains(&x.status));
            let text = bridged.expect("bridge decoded it too").body;
            let again = decode_response(op, x.status, &[], text.as_bytes());
            assert!(
                again.is_ok(),
                "{op}: re-encoded success {text} fails: {:?}",
                again.err()
            );
            assert_eq!(
                again.unwrap().body,
                d.body,
                "{op}: round trip changed the body"
            );
        }
        Err(e) if (200..300).contains(&x.status) => {
            let want = if op.has_side_effect() {
                ErrorKind::AmbiguousSuccess
            } else {
                ErrorKind::InvalidResponse
            };
            assert_eq!(e.kind(), &want, "{op} {}: {}", x.status, e.message());
        }
        Err(e) => {
            let _ = (
                e.kind(),
                e.message(),
                e.retryable(),
                e.retry_after(),
                e.to_string(),
            );
        }
    }
});
