//! `Retry-After` parsing: exactly the delta-seconds rule (optional SP/HTAB around ASCII digits
//! that fit a u64), the raw value kept, and `delay_ms` the checked `1000 × seconds`.
#![no_main]

use cycles_core::timing::RetryAfter as Parsed;
use cycles_core::RetryAfter;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(raw) = std::str::from_utf8(data) else {
        return;
    };
    let r = RetryAfter::from_raw(raw);
    assert_eq!(r.raw, raw);
    let t = raw.trim_matches(|c| c == ' ' || c == '\t');
    let model = (!t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()))
        .then(|| t.parse::<u64>().ok())
        .flatten();
    assert_eq!(r.delta_seconds, model, "{raw:?}");
    assert_eq!(r.delay_ms(), model.and_then(|s| s.checked_mul(1000)));
    assert_eq!(Parsed::parse(Some(raw)).to_millis(), r.delay_ms());
    if let Some(err) = cycles_core::transport::decode::decode_response(
        cycles_core::Operation::CommitReservation,
        429,
        &[("Retry-After", raw)],
        br#"{"error":"LIMIT_EXCEEDED","message":"m"}"#,
    )
    .err()
    {
        let got = err.retry_after().map(|a| a.delta_seconds);
        assert_eq!(got, Some(model), "{raw:?} through the decoder");
    }
});
