//! What a response body or stream event says about its call, and only that: its `type`,
//! whether it carries a non-null `error`, and the usage counts at the three places the wire
//! formats keep them (`usage`, `response.usage`, `message.usage`). [`wire`](super::wire)'s
//! failure and usage rules are applied to a [`Reading`].
//!
//! [`Reading::of_text`] reads it straight from the JSON text and skips every other member
//! unparsed: a completion's text, tool calls and output items are scanned, never built into
//! a document (that build was about half of a guarded call's crossing instructions,
//! docs/benchmarks.md, "Integrations"). [`Reading::of_value`] reads the same from a parsed
//! document. Both read a member the way `serde_json::Value`'s accessors do: the last of
//! duplicate keys wins, a member of another shape is absent, and a count is a non-negative
//! integer or nothing (`Value::as_u64`). The text read is more lenient in one way only:
//! what it skips is checked for JSON syntax but not decoded, so a lone surrogate escape in
//! a completion's text does not hide the usage beside it.

use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

/// The usage counts one `usage` object reports (absent: not reported, or not a non-negative
/// integer).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Chat Completions' prompt tokens.
    pub prompt_tokens: Option<u64>,
    /// Chat Completions' output tokens.
    pub completion_tokens: Option<u64>,
    /// Responses' and Messages' (uncached) prompt tokens.
    pub input_tokens: Option<u64>,
    /// Responses' and Messages' output tokens.
    pub output_tokens: Option<u64>,
    /// Messages' prompt tokens written to the cache.
    pub cache_creation_input_tokens: Option<u64>,
    /// Messages' prompt tokens read from the cache.
    pub cache_read_input_tokens: Option<u64>,
}

const COUNT_NAMES: [&str; 6] = [
    "prompt_tokens",
    "completion_tokens",
    "input_tokens",
    "output_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
];

impl Counts {
    fn slot(&mut self, i: usize) -> &mut Option<u64> {
        match i {
            0 => &mut self.prompt_tokens,
            1 => &mut self.completion_tokens,
            2 => &mut self.input_tokens,
            3 => &mut self.output_tokens,
            4 => &mut self.cache_creation_input_tokens,
            _ => &mut self.cache_read_input_tokens,
        }
    }

    /// The counts of a parsed `usage` value (none unless it is an object).
    pub fn of_value(usage: Option<&Value>) -> Counts {
        let mut c = Counts::default();
        if let Some(u) = usage {
            for (i, name) in COUNT_NAMES.iter().enumerate() {
                *c.slot(i) = u.get(name).and_then(Value::as_u64);
            }
        }
        c
    }
}

/// What one body or event says about its call.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Reading {
    /// Its `type`, when that is a string.
    pub kind: Option<String>,
    /// Whether it has an `error` member that is not `null`.
    pub error: bool,
    /// Its own `usage`.
    pub usage: Counts,
    /// `response.usage` (Responses' final events).
    pub response_usage: Counts,
    /// `message.usage` (Messages' `message_start`).
    pub message_usage: Counts,
}

impl Reading {
    /// Reads a parsed body or event.
    pub fn of_value(v: &Value) -> Reading {
        Reading {
            kind: v.get("type").and_then(Value::as_str).map(str::to_owned),
            error: v.get("error").is_some_and(|e| !e.is_null()),
            usage: Counts::of_value(v.get("usage")),
            response_usage: Counts::of_value(v.pointer("/response/usage")),
            message_usage: Counts::of_value(v.pointer("/message/usage")),
        }
    }

    /// Reads a body or event from its JSON text (the module doc). An error when the text is
    /// not JSON or not an object.
    pub fn of_text(text: &str) -> Result<Reading, serde_json::Error> {
        let mut de = serde_json::Deserializer::from_str(text);
        let r = de.deserialize_map(Top)?;
        de.end()?;
        Ok(r)
    }
}

/// The body or event itself: an object, its members read as [`Want`]s.
struct Top;

impl<'de> Visitor<'de> for Top {
    type Value = Reading;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Reading, A::Error> {
        let mut r = Reading::default();
        while let Some(k) = map.next_key_seed(Key(&TOP_NAMES))? {
            match k {
                Some(0) => r.kind = str_of(map.next_value_seed(Want::Str)?),
                Some(1) => r.error = matches!(map.next_value_seed(Want::NonNull)?, Got::Present),
                Some(2) => r.usage = counts_of(map.next_value_seed(Want::Counts)?),
                Some(3) => r.response_usage = counts_of(map.next_value_seed(Want::Nested)?),
                Some(4) => r.message_usage = counts_of(map.next_value_seed(Want::Nested)?),
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(r)
    }
}

/// What a member is read as; any other shape reads as [`Got::Nothing`] (consumed, unbuilt).
#[derive(Clone, Copy)]
enum Want {
    /// `response` or `message`: only their `usage`.
    Nested,
    Counts,
    Count,
    Str,
    NonNull,
}

enum Got {
    Nothing,
    Counts(Counts),
    Count(u64),
    Str(String),
    Present,
}

/// A key's index in a list of names, `None` for any other key.
struct Key(&'static [&'static str]);

impl<'de> DeserializeSeed<'de> for Key {
    type Value = Option<usize>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Option<usize>, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for Key {
    type Value = Option<usize>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a member name")
    }
    fn visit_str<E: de::Error>(self, s: &str) -> Result<Option<usize>, E> {
        Ok(self.0.iter().position(|n| *n == s))
    }
}

const TOP_NAMES: [&str; 5] = ["type", "error", "usage", "response", "message"];

impl Want {
    fn map<'de, A: MapAccess<'de>>(self, mut map: A) -> Result<Got, A::Error> {
        match self {
            Want::Nested => {
                let mut c = Counts::default();
                while let Some(k) = map.next_key_seed(Key(&["usage"]))? {
                    match k {
                        Some(_) => c = counts_of(map.next_value_seed(Want::Counts)?),
                        None => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(Got::Counts(c))
            }
            Want::Counts => {
                let mut c = Counts::default();
                while let Some(k) = map.next_key_seed(Key(&COUNT_NAMES))? {
                    match k {
                        Some(i) => {
                            *c.slot(i) = match map.next_value_seed(Want::Count)? {
                                Got::Count(n) => Some(n),
                                _ => None,
                            }
                        }
                        None => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(Got::Counts(c))
            }
            Want::Count | Want::Str | Want::NonNull => {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(self.other())
            }
        }
    }

    /// A value of a shape this member is not read from.
    fn other(self) -> Got {
        match self {
            Want::NonNull => Got::Present,
            _ => Got::Nothing,
        }
    }
}

fn str_of(g: Got) -> Option<String> {
    match g {
        Got::Str(s) => Some(s),
        _ => None,
    }
}

fn counts_of(g: Got) -> Counts {
    match g {
        Got::Counts(c) => c,
        _ => Counts::default(),
    }
}

impl<'de> DeserializeSeed<'de> for Want {
    type Value = Got;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Got, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Want {
    type Value = Got;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Got, A::Error> {
        self.map(map)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Got, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(self.other())
    }
    fn visit_unit<E: de::Error>(self) -> Result<Got, E> {
        Ok(Got::Nothing)
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Got, E> {
        Ok(self.other())
    }
    fn visit_u64<E: de::Error>(self, n: u64) -> Result<Got, E> {
        Ok(match self {
            Want::Count => Got::Count(n),
            _ => self.other(),
        })
    }
    fn visit_i64<E: de::Error>(self, n: i64) -> Result<Got, E> {
        // serde_json hands non-negative integers to visit_u64; what arrives here is negative
        // (`-0` aside, which `Value` stores as 0 too).
        match u64::try_from(n) {
            Ok(n) => self.visit_u64(n),
            Err(_) => Ok(self.other()),
        }
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Got, E> {
        Ok(self.other())
    }
    fn visit_str<E: de::Error>(self, s: &str) -> Result<Got, E> {
        Ok(match self {
            Want::Str => Got::Str(s.to_owned()),
            _ => self.other(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn both(text: &str) -> Reading {
        let v: Value = serde_json::from_str(text).unwrap();
        let r = Reading::of_text(text).unwrap();
        assert_eq!(r, Reading::of_value(&v), "{text}");
        r
    }

    #[test]
    fn the_text_read_equals_the_document_read() {
        let r = both(
            r#"{"id":"x","type":"message_start","message":{"content":[{"text":"hi"}],
                "usage":{"input_tokens":7,"cache_read_input_tokens":3,"output_tokens":1}},
                "error":null,"usage":{"prompt_tokens":2,"completion_tokens":-1,"output_tokens":2.0}}"#,
        );
        assert_eq!(r.kind.as_deref(), Some("message_start"));
        assert!(!r.error);
        assert_eq!(r.message_usage.input_tokens, Some(7));
        assert_eq!(r.message_usage.cache_read_input_tokens, Some(3));
        assert_eq!(r.usage.prompt_tokens, Some(2));
        assert_eq!(r.usage.completion_tokens, None, "negative");
        assert_eq!(r.usage.output_tokens, None, "a float is not a count");
        let r = both(
            r#"{"type":"response.completed","response":{"output":[1,[2],{"a":{}}],"usage":{"input_tokens":5,"output_tokens":6}}}"#,
        );
        assert_eq!(r.response_usage.output_tokens, Some(6));
    }

    #[test]
    fn members_of_another_shape_are_absent_and_the_last_duplicate_wins() {
        for text in [
            r#"{"type":3,"error":false,"usage":[1,2],"response":"done","message":{"usage":null}}"#,
            r#"{"type":null,"error":{},"usage":{"input_tokens":"7"},"response":[{"usage":{"input_tokens":1}}]}"#,
            r#"{"usage":{"input_tokens":1},"usage":{"output_tokens":2},"type":"a","type":"b"}"#,
            r#"{"usage":{"input_tokens":18446744073709551615,"output_tokens":18446744073709551616}}"#,
            r#"{"usage":{"input_tokens":-0,"output_tokens":1e2}}"#,
            r#"{"t\u0079pe":"message_delta","usage":{"output_tokens":4}}"#,
            "{}",
        ] {
            both(text);
        }
        let r = both(
            r#"{"usage":{"input_tokens":1},"usage":{"output_tokens":2},"type":"a","type":"b"}"#,
        );
        assert_eq!(
            (
                r.kind.as_deref(),
                r.usage.input_tokens,
                r.usage.output_tokens
            ),
            (Some("b"), None, Some(2))
        );
        assert!(both(r#"{"error":{}}"#).error);
        assert!(both(r#"{"error":0}"#).error);
        assert!(!both(r#"{"error":null}"#).error);
    }

    #[test]
    fn not_an_object_or_not_json_is_an_error() {
        for text in ["[]", "3", "\"x\"", "null", "{", "{} {}", "{\"a\":}"] {
            assert!(Reading::of_text(text).is_err(), "{text}");
        }
    }

    #[test]
    fn a_lone_surrogate_in_skipped_text_does_not_hide_the_usage() {
        let text = r#"{"choices":[{"delta":{"content":"\ud83d"}}],"usage":{"prompt_tokens":3,"completion_tokens":4}}"#;
        assert!(serde_json::from_str::<Value>(text).is_err());
        let r = Reading::of_text(text).unwrap();
        assert_eq!(
            (r.usage.prompt_tokens, r.usage.completion_tokens),
            (Some(3), Some(4))
        );
    }
}
