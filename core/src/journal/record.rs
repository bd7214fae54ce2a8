//! The version-1 record: one JSON object per file (`JOURNAL.md`, "Record").
//!
//! Reading accepts everything the official SDKs write: Python's `", "`/`": "` separators and
//! `\uXXXX` escapes, compact JSON, missing `base_url`/`recorded_at_ms`/`mode`/`not_before_ms`,
//! and unknown extra keys (kept and written back). Writing is compact JSON.
//!
//! The two bodies are kept as raw JSON ([`RawValue`]) in their original key order, numbers and
//! escapes: a replay must send the payload the server saw first, because the reference server
//! compares idempotent payloads order-sensitively (a re-ordered replay of an applied commit
//! gets `409 IDEMPOTENCY_MISMATCH` instead of the original success). Only insignificant
//! whitespace outside strings is removed. The API key is never part of a record.
//!
//! Bodies are checked by scanning their text, never by decoding them into a `Value`: a body
//! with a lone-surrogate escape (`"\ud800"`, which the TypeScript and Python SDKs write for a
//! string cut inside a surrogate pair) or a 30-digit integer is a valid record, replayed as
//! written; the server decides. Only what is not JSON or not a record is corrupt.

use std::fmt;

use serde::de::{Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;

use crate::rawjson;
pub use crate::rawjson::compact;

/// The only record format version this SDK reads and writes.
pub const RECORD_VERSION: u64 = 1;
/// `metadata.recovery_reason` of an event that settles an expired reservation.
pub const RECOVERY_REASON: &str = "commit_after_reservation_expired";

/// How a record is settled next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// `POST /v1/reservations/{id}/commit` with `commit_body`.
    Commit,
    /// `POST /v1/events` with `event_fallback_body` (the reservation expired).
    Event,
}

impl Mode {
    /// The wire spelling (`"commit"`, `"event"`).
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Commit => "commit",
            Mode::Event => "event",
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One pending settlement.
#[derive(Clone, Debug)]
pub struct Record {
    /// Exact server reservation id (the file name derives from it).
    pub reservation_id: String,
    /// Server the record belongs to; `None` when an SDK omitted it.
    pub base_url: Option<String>,
    /// Commit or event.
    pub mode: Mode,
    /// Exact wire body of the commit, when known.
    pub commit_body: Option<Box<RawValue>>,
    /// Exact wire body of the fallback event, when known.
    pub event_fallback_body: Option<Box<RawValue>>,
    /// Wall clock (epoch ms) of the latest write; `None` when an SDK omitted it.
    pub recorded_at_ms: Option<u64>,
    /// Absolute wall-clock floor (epoch ms) for the next attempt, from a 429.
    pub not_before_ms: Option<u64>,
    /// Unknown top-level keys, in file order; written back unchanged.
    pub extra: Vec<(String, Box<RawValue>)>,
}

/// Why bytes are not a usable record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ParseError {
    /// Not a well-formed version-1 record (bad JSON, wrong types, missing fields).
    Corrupt(String),
    /// A `version` other than 1.
    Unsupported(String),
}

impl ParseError {
    /// The quarantine category of a record that fails to parse this way.
    pub fn quarantine_kind(&self) -> super::names::QuarantineKind {
        match self {
            ParseError::Unsupported(_) => super::names::QuarantineKind::Unsupported,
            ParseError::Corrupt(_) => super::names::QuarantineKind::Corrupt,
        }
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParseError::Corrupt(m) => write!(f, "corrupt record: {m}"),
            ParseError::Unsupported(m) => write!(f, "unsupported record: {m}"),
        }
    }
}

impl std::error::Error for ParseError {}

fn corrupt<T>(m: impl Into<String>) -> Result<T, ParseError> {
    Err(ParseError::Corrupt(m.into()))
}

/// Top-level entries in file order, values raw.
struct Entries(Vec<(String, Box<RawValue>)>);

impl<'de> Deserialize<'de> for Entries {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Entries;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Entries, A::Error> {
                let mut out = Vec::new();
                while let Some((k, v)) = m.next_entry::<String, Box<RawValue>>()? {
                    // Last occurrence wins, like Python's json and JavaScript's JSON.parse.
                    out.retain(|(key, _): &(String, Box<RawValue>)| *key != k);
                    out.push((k, v));
                }
                Ok(Entries(out))
            }
        }
        d.deserialize_map(V)
    }
}

fn compact_raw(raw: &RawValue) -> Box<RawValue> {
    // Compacting valid JSON yields valid JSON; fall back to the original if that ever fails.
    RawValue::from_string(compact(raw.get())).unwrap_or_else(|_| raw.to_owned())
}

fn value(raw: &RawValue, field: &str) -> Result<Value, ParseError> {
    serde_json::from_str(raw.get()).or_else(|e| corrupt(format!("`{field}`: {e}")))
}

/// A non-negative epoch-ms field. Integers as written by the SDKs; a float (not written by any
/// known SDK, but harmless) is rounded in the safe direction (`up` for floors).
fn epoch_ms(v: &Value, field: &str, up: bool) -> Result<Option<u64>, ParseError> {
    match v {
        Value::Null => Ok(None),
        Value::Number(n) => {
            if let Some(u) = n.as_u64() {
                return Ok(Some(u));
            }
            match n.as_f64() {
                Some(f) if f.is_finite() && f >= 0.0 => {
                    let r = if up { f.ceil() } else { f.floor() };
                    // `as` saturates at u64::MAX, which is the safe direction for a floor.
                    Ok(Some(r as u64))
                }
                _ => corrupt(format!("`{field}` must be an integer >= 0")),
            }
        }
        _ => corrupt(format!("`{field}` must be an integer >= 0")),
    }
}

/// Checks a body: an object with a non-empty string `idempotency_key`. Checked by scanning
/// the raw text, not by decoding it into a `Value`: a body may legitimately hold lone-surrogate
/// escapes (the TypeScript and Python SDKs write them) or integers beyond 64 bits, and its
/// bytes are what gets replayed (`crate::rawjson`).
fn body(raw: &RawValue, field: &str) -> Result<Option<Box<RawValue>>, ParseError> {
    if raw.get() == "null" {
        return Ok(None);
    }
    if rawjson::members(raw.get()).is_none() {
        return corrupt(format!("`{field}` must be an object or null"));
    }
    match rawjson::member(raw.get(), "idempotency_key").and_then(rawjson::string) {
        Some(k) if !k.text.is_empty() => Ok(Some(compact_raw(raw))),
        _ => corrupt(format!(
            "`{field}.idempotency_key` must be a non-empty string"
        )),
    }
}

impl Record {
    /// A new commit-mode record.
    pub fn new_commit(
        reservation_id: impl Into<String>,
        base_url: impl Into<String>,
        commit_body: Box<RawValue>,
        event_fallback_body: Option<Box<RawValue>>,
    ) -> Record {
        Record {
            reservation_id: reservation_id.into(),
            base_url: Some(base_url.into()),
            mode: Mode::Commit,
            commit_body: Some(commit_body),
            event_fallback_body,
            recorded_at_ms: None,
            not_before_ms: None,
            extra: Vec::new(),
        }
    }

    /// Parses a version-1 record. Never panics, whatever the bytes.
    pub fn parse(bytes: &[u8]) -> Result<Record, ParseError> {
        let entries = match serde_json::from_slice::<Entries>(bytes) {
            Ok(e) => e.0,
            Err(e) => return corrupt(format!("not a JSON object: {e}")),
        };
        let mut version = None;
        let mut rec = Record {
            reservation_id: String::new(),
            base_url: None,
            mode: Mode::Commit,
            commit_body: None,
            event_fallback_body: None,
            recorded_at_ms: None,
            not_before_ms: None,
            extra: Vec::new(),
        };
        let mut id = None;
        let mut mode = None;
        for (k, raw) in entries {
            match k.as_str() {
                "version" => version = Some(value(&raw, "version")?),
                "reservation_id" => id = Some(value(&raw, "reservation_id")?),
                "base_url" => match value(&raw, "base_url")? {
                    Value::String(s) => rec.base_url = Some(s),
                    Value::Null => {}
                    _ => return corrupt("`base_url` must be a string"),
                },
                "mode" => mode = Some(value(&raw, "mode")?),
                "commit_body" => rec.commit_body = body(&raw, "commit_body")?,
                "event_fallback_body" => {
                    rec.event_fallback_body = body(&raw, "event_fallback_body")?
                }
                "recorded_at_ms" => {
                    rec.recorded_at_ms = epoch_ms(&value(&raw, &k)?, "recorded_at_ms", false)?
                }
                "not_before_ms" => {
                    rec.not_before_ms = epoch_ms(&value(&raw, &k)?, "not_before_ms", true)?
                }
                _ => {
                    let c = compact_raw(&raw);
                    rec.extra.push((k, c));
                }
            }
        }
        // The version decides first: a newer format may legitimately lack v1 fields.
        match version {
            None => return corrupt("missing `version`"),
            Some(v) if v.as_u64() == Some(RECORD_VERSION) => {}
            Some(v) => return Err(ParseError::Unsupported(format!("version {v}"))),
        }
        match id {
            Some(Value::String(s)) if !s.is_empty() => rec.reservation_id = s,
            Some(_) => return corrupt("`reservation_id` must be a non-empty string"),
            None => return corrupt("missing `reservation_id`"),
        }
        rec.mode = match mode {
            None => Mode::Commit,
            Some(Value::String(s)) if s == "commit" => Mode::Commit,
            Some(Value::String(s)) if s == "event" => Mode::Event,
            Some(other) => return corrupt(format!("invalid `mode` {other}")),
        };
        match rec.mode {
            Mode::Commit if rec.commit_body.is_none() => {
                corrupt("mode \"commit\" without a `commit_body`")
            }
            Mode::Event if rec.event_fallback_body.is_none() => {
                corrupt("mode \"event\" without an `event_fallback_body`")
            }
            _ => Ok(rec),
        }
    }

    /// Serializes as compact JSON, known fields first in the documented order, then unknown
    /// keys as read. `recorded_at_ms` is written as set (callers stamp it before writing).
    pub fn to_json(&self) -> Vec<u8> {
        fn s(v: &str) -> String {
            serde_json::to_string(v).unwrap_or_else(|_| "\"\"".into())
        }
        fn raw(v: &Option<Box<RawValue>>) -> &str {
            v.as_deref().map_or("null", RawValue::get)
        }
        let mut o = format!(
            "{{\"version\":{RECORD_VERSION},\"reservation_id\":{}",
            s(&self.reservation_id)
        );
        if let Some(b) = &self.base_url {
            o.push_str(&format!(",\"base_url\":{}", s(b)));
        }
        o.push_str(&format!(
            ",\"mode\":\"{}\",\"commit_body\":{},\"event_fallback_body\":{}",
            self.mode,
            raw(&self.commit_body),
            raw(&self.event_fallback_body)
        ));
        if let Some(t) = self.recorded_at_ms {
            o.push_str(&format!(",\"recorded_at_ms\":{t}"));
        }
        match self.not_before_ms {
            Some(t) => o.push_str(&format!(",\"not_before_ms\":{t}")),
            None => o.push_str(",\"not_before_ms\":null"),
        }
        for (k, v) in &self.extra {
            o.push_str(&format!(",{}:{}", s(k), v.get()));
        }
        o.push('}');
        o.into_bytes()
    }

    /// The body the current mode sends.
    pub fn active_body(&self) -> Option<&RawValue> {
        match self.mode {
            Mode::Commit => self.commit_body.as_deref(),
            Mode::Event => self.event_fallback_body.as_deref(),
        }
    }

    /// The idempotency key of the active body (the same for commit and event), for reports;
    /// an unpaired surrogate in it shows as U+FFFD (the body itself is sent unchanged).
    pub fn idempotency_key(&self) -> Option<String> {
        let raw = rawjson::member(self.active_body()?.get(), "idempotency_key")?;
        rawjson::string(raw).map(|k| k.text)
    }

    /// The actual amount (`unit`, `amount`) of the active body, for reports.
    pub fn actual(&self) -> Option<(String, i64)> {
        let a = rawjson::member(self.active_body()?.get(), "actual")?;
        let unit = rawjson::string(rawjson::member(a, "unit")?)?.text;
        let amount = serde_json::from_str(rawjson::member(a, "amount")?).ok()?;
        Some((unit, amount))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compact_keeps_strings_and_order() {
        assert_eq!(
            compact("{\"b\": 1, \"a\": \"x y\\\" \\u00e9\",\n \"c\": [1.50, 2]}"),
            "{\"b\":1,\"a\":\"x y\\\" \\u00e9\",\"c\":[1.50,2]}"
        );
    }

    #[test]
    fn round_trip_is_compact_and_stable() {
        let py = br#"{"version": 1, "reservation_id": "r\u00e9s/1", "base_url": "http://h", "mode": "commit", "commit_body": {"idempotency_key": "k", "actual": {"unit": "TOKENS", "amount": 5}, "metadata": {"z": 1, "a": "\u2603"}}, "event_fallback_body": null, "recorded_at_ms": 10, "not_before_ms": null, "x_future": {"a": 1}}"#;
        let r = Record::parse(py).unwrap();
        assert_eq!(r.reservation_id, "rés/1");
        let out = String::from_utf8(r.to_json()).unwrap();
        assert_eq!(
            out,
            r#"{"version":1,"reservation_id":"rés/1","base_url":"http://h","mode":"commit","commit_body":{"idempotency_key":"k","actual":{"unit":"TOKENS","amount":5},"metadata":{"z":1,"a":"\u2603"}},"event_fallback_body":null,"recorded_at_ms":10,"not_before_ms":null,"x_future":{"a":1}}"#
        );
        let again = Record::parse(out.as_bytes()).unwrap();
        assert_eq!(again.to_json(), out.as_bytes());
        assert_eq!(r.idempotency_key().as_deref(), Some("k"));
        assert_eq!(r.actual(), Some(("TOKENS".into(), 5)));
    }
}
