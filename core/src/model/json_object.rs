//! [`JsonObject`]: a free-form JSON object carried as its exact text.

use std::fmt;

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;

use super::common::Metadata;
use crate::error::Error;
use crate::rawjson;

/// A free-form JSON object (commit and event `metadata`, `metrics.custom`) kept as the exact
/// JSON text it was given, compacted. It reaches the journal and the wire unchanged:
/// integers of any size, `-0.0`, `0.1` as spelled, key order, and unpaired-surrogate escapes
/// (`"\ud800"`, which JavaScript and Python write), none of which survive a round trip
/// through a `serde_json::Value`.
#[derive(Clone)]
pub struct JsonObject(Box<RawValue>);

// Any JSON object, carried verbatim: the generator gives hosts their free-form map type.
#[cfg(feature = "schema")]
impl schemars::JsonSchema for JsonObject {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "JsonObject".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({"type": "object", "additionalProperties": true})
    }
}

impl JsonObject {
    /// Parses JSON text that must be one object (`InvalidArgument` otherwise, e.g. `NaN`).
    pub fn parse(text: &str) -> Result<JsonObject, Error> {
        let raw = rawjson::parse(text).map_err(|e| {
            Error::invalid_argument(format!("not valid JSON: {}", crate::error::json_reason(&e)))
        })?;
        JsonObject::from_raw(raw).map_err(Error::invalid_argument)
    }

    fn from_raw(raw: Box<RawValue>) -> Result<JsonObject, String> {
        if rawjson::members(raw.get()).is_none() {
            return Err(format!("expected a JSON object, got {}", raw.get()));
        }
        Ok(JsonObject(raw))
    }

    /// The object from a map (its numbers are whatever `serde_json::Value` holds).
    pub fn from_map(map: &Metadata) -> JsonObject {
        // Serializing a map of `Value`s cannot fail (string keys, finite numbers).
        let text = serde_json::to_string(map).unwrap_or_else(|_| "{}".into());
        JsonObject(RawValue::from_string(text).unwrap_or_else(|_| empty()))
    }

    /// The exact JSON text.
    pub fn get(&self) -> &str {
        self.0.get()
    }

    /// The exact JSON text as a raw value.
    pub fn as_raw(&self) -> &RawValue {
        &self.0
    }

    /// The object decoded into a map, when it can be (no unpaired surrogates); integers
    /// beyond 64 bits become floats there.
    pub fn to_map(&self) -> Option<Metadata> {
        serde_json::from_str(self.get()).ok()
    }

    /// This object with `extra` members set: members of the same name are removed (keys
    /// compared after unescaping), then `extra` is appended in order. Every other member
    /// keeps its exact text.
    pub fn with_members(&self, extra: &[(&str, &RawValue)]) -> JsonObject {
        let mut parts: Vec<String> = rawjson::members(self.get())
            .unwrap_or_default()
            .into_iter()
            .filter(|(k, _)| {
                let name = rawjson::string(k).map(|d| d.text);
                !extra.iter().any(|(e, _)| name.as_deref() == Some(*e))
            })
            .map(|(k, v)| format!("{k}:{v}"))
            .collect();
        for (k, v) in extra {
            let key = serde_json::to_string(k).unwrap_or_else(|_| "\"\"".into());
            parts.push(format!("{key}:{}", v.get()));
        }
        let text = format!("{{{}}}", parts.join(","));
        JsonObject(RawValue::from_string(text).unwrap_or_else(|_| self.0.clone()))
    }
}

fn empty() -> Box<RawValue> {
    RawValue::from_string("{}".into()).expect("`{}` is JSON")
}

impl Default for JsonObject {
    fn default() -> Self {
        JsonObject(empty())
    }
}

impl From<Metadata> for JsonObject {
    fn from(map: Metadata) -> Self {
        JsonObject::from_map(&map)
    }
}

impl PartialEq for JsonObject {
    fn eq(&self, other: &Self) -> bool {
        self.get() == other.get()
    }
}

impl fmt::Debug for JsonObject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "JsonObject({})", self.get())
    }
}

impl fmt::Display for JsonObject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.get())
    }
}

impl Serialize for JsonObject {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

impl<'de> Deserialize<'de> for JsonObject {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = Box::<RawValue>::deserialize(d)?;
        let compacted = RawValue::from_string(rawjson::compact(raw.get())).unwrap_or(raw);
        JsonObject::from_raw(compacted).map_err(D::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_text_survives_parse_serialize_and_deserialize() {
        let text = "{\"z\": 123456789012345678901234567890, \"a\": -0.0, \"b\": 0.1, \"s\": \"ab\\ud800\", \"1\": 1e400}";
        let o = JsonObject::parse(text).unwrap();
        let exact = "{\"z\":123456789012345678901234567890,\"a\":-0.0,\"b\":0.1,\"s\":\"ab\\ud800\",\"1\":1e400}";
        assert_eq!(o.get(), exact);
        assert_eq!(serde_json::to_string(&o).unwrap(), exact);
        let back: JsonObject = serde_json::from_str(text).unwrap();
        assert_eq!(back, o);
        assert!(o.to_map().is_none(), "a lone surrogate has no map form");
        for bad in ["[1]", "1", "{\"a\": NaN}", "{", "\"x\""] {
            assert_eq!(
                *JsonObject::parse(bad).unwrap_err().kind(),
                crate::ErrorKind::InvalidArgument,
                "{bad}"
            );
            assert!(serde_json::from_str::<JsonObject>(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn with_members_replaces_by_name_and_keeps_the_rest() {
        let o = JsonObject::parse("{\"r\\u0065c\": 1, \"k\": \"\\udc00x\", \"n\": 1.50}").unwrap();
        let v = RawValue::from_string("\"x\"".into()).unwrap();
        assert_eq!(
            o.with_members(&[("rec", &v), ("new", &v)]).get(),
            "{\"k\":\"\\udc00x\",\"n\":1.50,\"rec\":\"x\",\"new\":\"x\"}"
        );
        assert_eq!(
            JsonObject::default().with_members(&[("a", &v)]).get(),
            "{\"a\":\"x\"}"
        );
    }

    #[test]
    fn from_map_and_value_path() {
        let mut m = Metadata::new();
        m.insert("b".into(), serde_json::json!(2));
        m.insert("a".into(), serde_json::json!("x"));
        let o = JsonObject::from(m.clone());
        assert_eq!(o.get(), "{\"b\":2,\"a\":\"x\"}");
        assert_eq!(o.to_map(), Some(m));
        let via_value: JsonObject =
            serde_json::from_value(serde_json::json!({"b": 2, "a": "x"})).unwrap();
        assert_eq!(via_value, o);
    }
}
