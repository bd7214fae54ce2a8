//! Reading JSON text that must never be rewritten: settlement bodies and user metadata.
//!
//! RFC 8259 allows `\uXXXX` escapes of unpaired UTF-16 surrogates (`"\ud800"`): JavaScript's
//! `JSON.stringify` and Python's `json` write one whenever a string was cut inside a
//! surrogate pair, and their parsers read it back. A `serde_json::Value` (or any Rust
//! `String`) cannot hold one, and without the `arbitrary_precision` feature a `Value` also
//! rounds integers beyond 64 bits to floats. So these bodies are kept as raw text
//! ([`RawValue`], whose syntax check does not pair surrogates) and inspected here, by
//! scanning, without decoding them into a `Value`.
//!
//! Every function expects text that is already known to be valid JSON (a [`RawValue`], or
//! the output of [`parse`]); on anything else it returns `None` rather than panicking.

use serde_json::value::RawValue;

/// Checks `text` is one JSON value and returns it compacted (see [`compact`]). Lone-surrogate
/// escapes and numbers of any size are accepted and kept exactly; `NaN`, bad escapes,
/// trailing data and the like are errors.
pub fn parse(text: &str) -> Result<Box<RawValue>, serde_json::Error> {
    // `RawValue`'s check validates the grammar (strings, escapes, numbers, nesting) but,
    // unlike decoding into a `String`, does not require surrogate escapes to be paired.
    let checked: &RawValue = serde_json::from_str(text)?;
    RawValue::from_string(compact(checked.get()))
}

/// Removes insignificant whitespace outside strings; everything else (key order, number
/// spelling, escapes) is kept byte for byte. `raw` must be valid JSON.
pub fn compact(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut in_string = false;
    let mut escaped = false;
    for c in raw.chars() {
        if in_string {
            out.push(c);
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
        } else if c == '"' {
            in_string = true;
            out.push(c);
        } else if !matches!(c, ' ' | '\t' | '\n' | '\r') {
            out.push(c);
        }
    }
    out
}

/// The members of a JSON object, in text order, as (raw key token with its quotes, raw
/// value text). `None` when `text` is not an object.
pub fn members(text: &str) -> Option<Vec<(&str, &str)>> {
    let b = text.as_bytes();
    let mut i = skip_ws(b, 0);
    if b.get(i) != Some(&b'{') {
        return None;
    }
    i += 1;
    let mut out = Vec::new();
    loop {
        i = skip_ws(b, i);
        match b.get(i)? {
            b'}' => return Some(out),
            b',' => {
                i += 1;
                continue;
            }
            b'"' => {}
            _ => return None,
        }
        let key_end = value_end(b, i)?;
        let key = &text[i..key_end];
        i = skip_ws(b, key_end);
        if b.get(i) != Some(&b':') {
            return None;
        }
        let start = skip_ws(b, i + 1);
        let end = value_end(b, start)?;
        out.push((key, &text[start..end]));
        i = end;
    }
}

/// The raw value of member `key` of a JSON object (the last one, as JSON parsers do), keys
/// compared after unescaping.
pub fn member<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    members(text)?
        .into_iter()
        .rev()
        .find(|(k, _)| string(k).is_some_and(|s| s.text == key))
        .map(|(_, v)| v)
}

/// A decoded JSON string.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decoded {
    /// The text; each unpaired surrogate escape is replaced by U+FFFD.
    pub text: String,
    /// False when the string held an unpaired surrogate (so `text` is not exact).
    pub well_formed: bool,
}

/// Decodes a JSON string token (with its quotes); `None` when `token` is not a string.
pub fn string(token: &str) -> Option<Decoded> {
    let inner = token.strip_prefix('"')?.strip_suffix('"')?;
    let mut text = String::with_capacity(inner.len());
    let mut well_formed = true;
    let mut chars = inner.chars();
    // A high surrogate waiting for its low half.
    let mut high: Option<u16> = None;
    while let Some(c) = chars.next() {
        if c != '\\' {
            flush(&mut high, &mut text, &mut well_formed);
            text.push(c);
            continue;
        }
        let unit = match chars.next()? {
            '"' => Some('"'),
            '\\' => Some('\\'),
            '/' => Some('/'),
            'b' => Some('\u{8}'),
            'f' => Some('\u{c}'),
            'n' => Some('\n'),
            'r' => Some('\r'),
            't' => Some('\t'),
            'u' => {
                let hex: String = chars.by_ref().take(4).collect();
                let u = u16::from_str_radix(&hex, 16).ok()?;
                match u {
                    0xD800..=0xDBFF => {
                        flush(&mut high, &mut text, &mut well_formed);
                        high = Some(u);
                        None
                    }
                    0xDC00..=0xDFFF => match high.take() {
                        Some(h) => {
                            let cp =
                                0x10000 + ((u32::from(h) - 0xD800) << 10) + (u32::from(u) - 0xDC00);
                            Some(char::from_u32(cp)?)
                        }
                        None => {
                            well_formed = false;
                            Some('\u{FFFD}')
                        }
                    },
                    _ => Some(char::from_u32(u32::from(u))?),
                }
            }
            _ => return None,
        };
        if let Some(c) = unit {
            flush(&mut high, &mut text, &mut well_formed);
            text.push(c);
        }
    }
    flush(&mut high, &mut text, &mut well_formed);
    Some(Decoded { text, well_formed })
}

/// A pending high surrogate that found no low half is unpaired.
fn flush(high: &mut Option<u16>, text: &mut String, well_formed: &mut bool) {
    if high.take().is_some() {
        *well_formed = false;
        text.push('\u{FFFD}');
    }
}

fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while matches!(b.get(i), Some(b' ' | b'\t' | b'\n' | b'\r')) {
        i += 1;
    }
    i
}

/// The end (exclusive) of the JSON value starting at `i`.
fn value_end(b: &[u8], start: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut i = start;
    let mut in_string = false;
    let mut escaped = false;
    while let Some(&c) = b.get(i) {
        if in_string {
            if escaped {
                escaped = false;
            } else if c == b'\\' {
                escaped = true;
            } else if c == b'"' {
                in_string = false;
                if depth == 0 {
                    return Some(i + 1);
                }
            }
        } else {
            match c {
                b'"' => in_string = true,
                b'{' | b'[' => depth += 1,
                b'}' | b']' => {
                    if depth == 0 {
                        return Some(trim_end(b, start, i));
                    }
                    depth -= 1;
                    if depth == 0 {
                        return Some(i + 1);
                    }
                }
                b',' if depth == 0 => return Some(trim_end(b, start, i)),
                _ => {}
            }
        }
        i += 1;
    }
    (depth == 0 && !in_string && i > start).then(|| trim_end(b, start, i))
}

fn trim_end(b: &[u8], start: usize, mut end: usize) -> usize {
    while end > start && matches!(b[end - 1], b' ' | b'\t' | b'\n' | b'\r') {
        end -= 1;
    }
    end
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lone_surrogates_pass_the_syntax_check_and_are_kept() {
        let raw =
            parse("{\"a\": \"ab\\ud800\", \"n\": 123456789012345678901234567890, \"z\": -0.0}")
                .unwrap();
        assert_eq!(
            raw.get(),
            "{\"a\":\"ab\\ud800\",\"n\":123456789012345678901234567890,\"z\":-0.0}"
        );
        assert!(parse("{\"a\": NaN}").is_err());
        assert!(parse("{\"a\": \"\\x\"}").is_err());
        assert!(parse("{\"a\": 1} x").is_err());
    }

    #[test]
    fn members_in_order_with_raw_values() {
        let t = r#" { "b" : [1, {"x": "}"}] , "a":"q\"" ,"c": 1.50 } "#;
        assert_eq!(
            members(t).unwrap(),
            vec![
                ("\"b\"", "[1, {\"x\": \"}\"}]"),
                ("\"a\"", "\"q\\\"\""),
                ("\"c\"", "1.50")
            ]
        );
        assert_eq!(members("{}").unwrap(), vec![]);
        assert_eq!(members("[1]"), None);
        assert_eq!(members("\"x\""), None);
        assert_eq!(member(r#"{"k":1,"\u006b":2}"#, "k"), Some("2"));
        assert_eq!(member(r#"{"k":1}"#, "j"), None);
    }

    #[test]
    fn strings_decode_pairs_and_flag_lone_halves() {
        let d = |s: &str| string(s).unwrap();
        assert_eq!(d(r#""caf\u00e9 \ud83d\ude00 \n""#).text, "café 😀 \n");
        assert!(d(r#""\ud83d\ude00""#).well_formed);
        for lone in [
            r#""ab\ud800""#,
            r#""\udc00x""#,
            r#""\ud800\ud800""#,
            r#""\ud800a""#,
        ] {
            let got = d(lone);
            assert!(!got.well_formed, "{lone}");
            assert!(got.text.contains('\u{FFFD}'), "{lone}");
        }
        assert_eq!(d(r#""\ud800\ud83d\ude00""#).text, "\u{FFFD}😀");
        assert_eq!(string("12"), None);
    }
}
