//! Trace-id extraction per the spec's CORRELATION AND TRACING precedence:
//! valid `traceparent` > valid `X-Cycles-Trace-Id` > freshly generated. Malformed headers are
//! ignored, never rejected.

use hyper::HeaderMap;

fn is_hex(s: &str, len: usize) -> bool {
    s.len() == len
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

fn non_zero(s: &str) -> bool {
    s.bytes().any(|b| b != b'0')
}

/// The trace-id of a valid version-00 `traceparent`.
pub(crate) fn from_traceparent(v: &str) -> Option<String> {
    let parts: Vec<&str> = v.trim().split('-').collect();
    match parts.as_slice() {
        [ver, trace, span, flags]
            if *ver == "00"
                && is_hex(trace, 32)
                && non_zero(trace)
                && is_hex(span, 16)
                && non_zero(span)
                && is_hex(flags, 2) =>
        {
            Some(trace.to_string())
        }
        _ => None,
    }
}

/// Pick the request's trace id.
pub(crate) fn extract(h: &HeaderMap) -> String {
    let get = |n: &str| h.get(n).and_then(|v| v.to_str().ok());
    if let Some(t) = get("traceparent").and_then(from_traceparent) {
        return t;
    }
    if let Some(t) = get("x-cycles-trace-id") {
        if is_hex(t, 32) && non_zero(t) {
            return t.to_string();
        }
    }
    generate()
}

/// 16 random bytes as 32 lowercase hex; UUIDv4 bits are never all zero.
pub(crate) fn generate() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}
