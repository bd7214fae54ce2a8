//! Removes the configured API key from text a server sent back.
//!
//! A server (or a proxy in front of it) may echo the credential it received, e.g. an
//! `UNAUTHORIZED` message like "key sk-live-... is revoked". Everything the server supplies
//! flows into [`crate::Error`] (message, details, codes, ids), and from there into events,
//! `tracing` log lines, settlement outcomes and every binding's exceptions. The transport
//! therefore redacts every error it returns, once, at construction: nothing downstream needs
//! to know about it.
//!
//! What is redacted: every exact occurrence of the key, and of its JSON-escaped and
//! percent-encoded forms (upper- and lowercase hex) where those differ from it. Fragments
//! (a server that prints a prefix or a masked key) are deliberately not matched: a fragment is
//! not the credential, and matching short substrings would mangle unrelated text.

use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use serde_json::Value;

/// Every byte but the RFC 3986 unreserved characters is percent-encoded.
const UNRESERVED_KEPT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// What replaces the API key wherever a server echoed it.
pub const REDACTED: &str = "[REDACTED]";

/// Redacts one secret (and its encoded forms) from strings and JSON values.
#[derive(Clone, Default)]
pub(crate) struct Redactor {
    /// The forms of the secret to replace, longest first so that no form is left half
    /// replaced by a shorter one it contains.
    needles: Vec<String>,
}

impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Redactor(<redacted>)")
    }
}

impl Redactor {
    /// A redactor for `secret`; an empty secret redacts nothing.
    pub(crate) fn new(secret: &str) -> Redactor {
        if secret.is_empty() {
            return Redactor::default();
        }
        let json = serde_json::to_string(secret).unwrap_or_default();
        let json = json
            .strip_prefix('"')
            .and_then(|s| s.strip_suffix('"'))
            .unwrap_or(secret);
        // The URI component encoding: RFC 3986 unreserved characters stay as they are.
        let upper = utf8_percent_encode(secret, UNRESERVED_KEPT).to_string();
        let lower = lowercase_escapes(&upper);
        let mut needles = vec![
            secret.to_string(),
            json.to_string(),
            json.replace('/', "\\/"),
            upper,
            lower,
        ];
        needles.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        needles.dedup();
        Redactor { needles }
    }

    /// `s` with every form of the secret replaced by [`REDACTED`].
    pub(crate) fn text(&self, s: &str) -> String {
        let mut out = s.to_string();
        self.string(&mut out);
        out
    }

    /// Redacts `s` in place (no allocation when it holds no form of the secret).
    pub(crate) fn string(&self, s: &mut String) {
        for n in &self.needles {
            if s.contains(n.as_str()) {
                *s = s.replace(n.as_str(), REDACTED);
            }
        }
    }

    /// Redacts every string in `v`, object keys included.
    pub(crate) fn value(&self, v: &mut Value) {
        match v {
            Value::String(s) => self.string(s),
            Value::Array(items) => items.iter_mut().for_each(|i| self.value(i)),
            Value::Object(map) => self.map(map),
            Value::Null | Value::Bool(_) | Value::Number(_) => {}
        }
    }

    /// Redacts every key and value of a JSON object.
    pub(crate) fn map(&self, map: &mut serde_json::Map<String, Value>) {
        let leaks = map.keys().any(|k| self.text(k) != *k);
        if leaks {
            let old = std::mem::take(map);
            for (k, v) in old {
                map.insert(self.text(&k), v);
            }
        }
        map.values_mut().for_each(|v| self.value(v));
    }
}

/// `%2F` -> `%2f`: servers differ in the case of percent escapes.
fn lowercase_escapes(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut hex_left = 0;
    for c in s.chars() {
        if c == '%' {
            hex_left = 2;
            out.push(c);
        } else if hex_left > 0 {
            hex_left -= 1;
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn exact_and_encoded_forms_are_redacted() {
        let r = Redactor::new(r#"sk/live+"key"\1~_."#);
        for leak in [
            r#"sk/live+"key"\1~_."#,
            r#"sk/live+\"key\"\\1~_."#,
            r#"sk\/live+\"key\"\\1~_."#,
            "sk%2Flive%2B%22key%22%5C1~_.",
            "sk%2flive%2b%22key%22%5c1~_.",
        ] {
            let got = r.text(&format!("bad key {leak}!"));
            assert_eq!(got, format!("bad key {REDACTED}!"), "{leak}");
        }
    }

    #[test]
    fn plain_key_everywhere_in_json() {
        let r = Redactor::new("cycles-key-123");
        let mut v = json!({
            "received": "cycles-key-123",
            "nested": {"list": ["a cycles-key-123 b", 1, null, true]},
            "cycles-key-123": "as a key",
        });
        r.value(&mut v);
        let s = v.to_string();
        assert!(!s.contains("cycles-key-123"), "{s}");
        assert_eq!(v["received"], REDACTED);
        assert_eq!(v["nested"]["list"][0], format!("a {REDACTED} b"));
        assert_eq!(v[REDACTED], "as a key");
    }

    #[test]
    fn repeated_and_adjacent_occurrences() {
        let r = Redactor::new("abc");
        assert_eq!(
            r.text("abcabc-abc"),
            format!("{REDACTED}{REDACTED}-{REDACTED}")
        );
        assert_eq!(r.text("no secret here"), "no secret here");
    }

    #[test]
    fn empty_secret_redacts_nothing_and_debug_hides_it() {
        assert_eq!(Redactor::new("").text("anything"), "anything");
        assert!(!format!("{:?}", Redactor::new("hidden-key")).contains("hidden-key"));
    }
    #[test]
    fn every_server_field_of_an_error_is_redacted() {
        use crate::error::{Correlation, Error};
        let key = "cyc_live_0123456789";
        let body = format!(
            r#"{{"error":"KEY_{key}_REVOKED","message":"key {key} is revoked","request_id":"b-{key}",
            "trace_id":"t-{key}","details":{{"received":"{key}","{key}":[1,"x{key}"]}},
            "cycles_evidence":{{"evidence_id":"e{key}","cycles_evidence_url":"http://h/{key}"}}}}"#
        );
        let corr = Correlation {
            request_id: Some(format!("h-{key}")),
            trace_id: None,
        };
        let e = Error::from_http(409, body.as_bytes(), corr, Some(key.to_string()))
            .redacted(&Redactor::new(key));
        let shown = format!(
            "{e} {e:?} {:?} {:?} {:?} {:?}",
            e.kind(),
            e.cycles_evidence(),
            e.retry_after(),
            e.server_code()
        );
        assert!(!shown.contains(key), "{shown}");
        assert_eq!(e.message(), format!("key {REDACTED} is revoked"));
        assert_eq!(
            e.server_code(),
            Some(format!("KEY_{REDACTED}_REVOKED").as_str())
        );
        assert_eq!(e.code(), 199, "the kind is still an unknown server code");
        assert_eq!(e.request_id(), Some(format!("h-{REDACTED}").as_str()));
        assert_eq!(e.trace_id(), Some(format!("t-{REDACTED}").as_str()));
        assert_eq!(e.details().unwrap()["received"], REDACTED);
        assert_eq!(e.details().unwrap()[REDACTED][1], format!("x{REDACTED}"));
        assert_eq!(e.http_status(), Some(409));
    }
}
