//! Request-body JSON as the reference server reads it.
//!
//! RFC 8259 allows escapes of unpaired UTF-16 surrogates (`"ab\ud800"`); the official
//! TypeScript and Python SDKs send one whenever a metadata string was cut inside a surrogate
//! pair, and the reference server accepts such bodies (commit 200, its same-key replay 200,
//! event 201). `serde_json` cannot put one in a `String`, so an unpaired surrogate escape is
//! read as U+FFFD instead (its only effect: payloads differing only in which unpaired
//! surrogate they hold compare equal). Integers beyond 64 bits and `-0.0` parse as numbers
//! (floats); the schema's integer fields still require 64-bit integers.

use serde_json::value::RawValue;
use serde_json::Value;

/// Parses a request body, tolerating unpaired-surrogate escapes in strings.
pub(crate) fn parse(bytes: &[u8]) -> Result<Value, serde_json::Error> {
    match serde_json::from_slice(bytes) {
        Ok(v) => Ok(v),
        Err(e) => {
            // Only a body that is valid JSON apart from surrogate pairing gets a second try:
            // the raw-value check validates the grammar without pairing surrogates.
            if serde_json::from_slice::<&RawValue>(bytes).is_err() {
                return Err(e);
            }
            serde_json::from_slice(&replace_unpaired(bytes))
        }
    }
}

/// `bytes` with every unpaired `\uD800`-`\uDFFF` escape replaced by `\ufffd` (same length).
fn replace_unpaired(bytes: &[u8]) -> Vec<u8> {
    let mut out = bytes.to_vec();
    let mut i = 0;
    let mut in_string = false;
    while i < out.len() {
        let c = out[i];
        if !in_string {
            in_string = c == b'"';
            i += 1;
            continue;
        }
        match c {
            b'"' => {
                in_string = false;
                i += 1;
            }
            b'\\' if out.get(i + 1) == Some(&b'u') => {
                let Some(u) = hex4(&out, i + 2) else {
                    i += 2;
                    continue;
                };
                let next = (out.get(i + 6..i + 8) == Some(b"\\u"))
                    .then(|| hex4(&out, i + 8))
                    .flatten();
                match u {
                    0xD800..=0xDBFF if matches!(next, Some(0xDC00..=0xDFFF)) => i += 12,
                    0xD800..=0xDFFF => {
                        out[i + 2..i + 6].copy_from_slice(b"fffd");
                        i += 6;
                    }
                    _ => i += 6,
                }
            }
            b'\\' => i += 2,
            _ => i += 1,
        }
    }
    out
}

fn hex4(b: &[u8], at: usize) -> Option<u16> {
    let s = std::str::from_utf8(b.get(at..at + 4)?).ok()?;
    u16::from_str_radix(s, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unpaired_surrogates_read_as_replacement_characters() {
        let v =
            parse(br#"{"a":"ab\ud800","b":"\udc00x","c":"\ud83d\ude00","d":"\ud800\ud800\udc00"}"#)
                .unwrap();
        assert_eq!(v["a"], "ab\u{FFFD}");
        assert_eq!(v["b"], "\u{FFFD}x");
        assert_eq!(v["c"], "\u{1F600}");
        assert_eq!(v["d"], "\u{FFFD}\u{10000}");
    }

    #[test]
    fn big_numbers_and_negative_zero_parse() {
        let v = parse(br#"{"n":123456789012345678901234567890,"z":-0.0}"#).unwrap();
        assert!(v["n"].is_f64() && v["z"].as_f64() == Some(-0.0));
    }

    #[test]
    fn what_is_not_json_stays_an_error() {
        for bad in [
            &b"{\"a\":\"\\ud800\""[..],
            b"{\"a\":NaN}",
            b"nope",
            b"{\"a\":\"\\x\"}",
        ] {
            assert!(parse(bad).is_err(), "{}", String::from_utf8_lossy(bad));
        }
    }
}
