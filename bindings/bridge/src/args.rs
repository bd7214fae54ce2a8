//! JSON arguments read member by member from their exact text.
//!
//! A host encodes a call's arguments (or a guard spec) as one JSON object. Decoding it into a
//! `serde_json::Value` first would round integers beyond 64 bits, and reject the
//! unpaired-surrogate escapes (`"\ud800"`) that Python's and JavaScript's JSON encoders
//! write, before core's exact [`cycles_core::model::JsonObject`] ever saw the metadata. Each
//! member is kept as its raw text instead and decoded straight into core's types, so
//! metadata reaches the wire exactly as the user gave it (docs/journal.md, "exact metadata").

use std::collections::HashMap;

use cycles_core::error::json_reason;
use cycles_core::Error;
use serde::de::DeserializeOwned;
use serde_json::value::RawValue;
use serde_json::Value;

/// A JSON object's members, each kept as its exact text.
pub struct Args {
    text: String,
    members: HashMap<String, Box<RawValue>>,
}

impl Args {
    /// Parses `text`, which must be one JSON object; `what` names it in the error
    /// (`"<what>: <reason>"`, `InvalidArgument`).
    pub fn parse(text: &str, what: &str) -> Result<Args, Error> {
        let members = serde_json::from_str(text)
            .map_err(|e| Error::invalid_argument(format!("{what}: {}", json_reason(&e))))?;
        Ok(Args {
            text: text.to_string(),
            members,
        })
    }

    /// These arguments with `name: value` added first (`value` is JSON text), the rest of the
    /// text kept byte for byte (so free-form metadata reaches the wire as given).
    pub fn with_leading_member(&self, name: &str, value: &str) -> Result<Args, Error> {
        let rest = self
            .text
            .trim_start()
            .strip_prefix('{')
            .ok_or_else(|| Error::invalid_argument("arguments must be a JSON object"))?;
        let sep = if self.members.is_empty() { "" } else { "," };
        let name = serde_json::Value::from(name);
        Args::parse(&format!("{{{name}:{value}{sep}{rest}"), "arguments")
    }

    /// The object's JSON text, exactly as given.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// INVALID_ARGUMENT naming the first member (in sorted order) that is not in `known`:
    /// a misspelt option must not be ignored in silence.
    pub fn only(&self, known: &[&str], what: &str) -> Result<(), Error> {
        let mut unknown: Vec<&str> = self
            .members
            .keys()
            .map(String::as_str)
            .filter(|k| !known.contains(k))
            .collect();
        unknown.sort_unstable();
        match unknown.first() {
            None => Ok(()),
            Some(k) => Err(Error::invalid_argument(format!(
                "unknown {what} {k:?} (known: {})",
                known.join(", ")
            ))),
        }
    }

    /// Whether the member is present (`null` included).
    pub fn has(&self, name: &str) -> bool {
        self.members.contains_key(name)
    }

    /// A member's raw text; `None` when it is absent or `null`.
    pub fn raw(&self, name: &str) -> Option<&RawValue> {
        self.members
            .get(name)
            .map(AsRef::as_ref)
            .filter(|r| r.get() != "null")
    }

    /// A required member decoded into `T` (`missing <what>` / `invalid <what>: <reason>`).
    pub fn required<T: DeserializeOwned>(&self, name: &str, what: &str) -> Result<T, Error> {
        let raw = self
            .raw(name)
            .ok_or_else(|| Error::invalid_argument(format!("missing {what}")))?;
        decode(raw.get(), what)
    }

    /// An optional member decoded into `T`; absent and `null` are `None`.
    pub fn optional<T: DeserializeOwned>(&self, name: &str) -> Result<Option<T>, Error> {
        self.raw(name).map(|r| decode(r.get(), name)).transpose()
    }

    /// The whole object decoded into `T` (`invalid <what>: <reason>`).
    pub fn whole<T: DeserializeOwned>(&self, what: &str) -> Result<T, Error> {
        decode(&self.text, what)
    }

    /// The whole object as a `Value`, for arguments that carry no free-form JSON (queries).
    pub fn value(&self) -> Result<Value, Error> {
        decode(&self.text, "arguments")
    }
}

fn decode<T: DeserializeOwned>(text: &str, what: &str) -> Result<T, Error> {
    serde_json::from_str(text)
        .map_err(|e| Error::invalid_argument(format!("invalid {what}: {}", json_reason(&e))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use cycles_core::model::JsonObject;
    use cycles_core::CommitRequest;

    const EXACT: &str = r#"{"big":123456789012345678901234567890,"z":-0.0,"p":0.1,"s":"ab\ud800"}"#;

    #[test]
    fn members_keep_their_exact_text_into_core_types() {
        let text = format!(
            r#"{{"reservation_id":"r1","request":{{"idempotency_key":"k","actual":{{"unit":"TOKENS","amount":5}},"metadata":{EXACT}}},"n":null}}"#
        );
        let a = Args::parse(&text, "arguments").unwrap();
        assert_eq!(
            a.required::<String>("reservation_id", "reservation_id")
                .unwrap(),
            "r1"
        );
        let req: CommitRequest = a.required("request", "commit request").unwrap();
        assert_eq!(req.metadata.as_ref().map(JsonObject::get), Some(EXACT));
        let wire = serde_json::to_string(&req).unwrap();
        assert!(wire.contains(EXACT), "{wire}");
        assert_eq!(a.optional::<String>("n").unwrap(), None);
        assert_eq!(a.optional::<String>("absent").unwrap(), None);
    }

    #[test]
    fn errors_name_what_is_wrong() {
        assert!(Args::parse("[1]", "guard spec")
            .err()
            .unwrap()
            .message()
            .starts_with("guard spec: "));
        let a = Args::parse(r#"{"x":3,"y":null}"#, "arguments").unwrap();
        assert_eq!(
            a.required::<String>("y", "y").unwrap_err().message(),
            "missing y"
        );
        assert!(a
            .required::<String>("x", "x")
            .unwrap_err()
            .message()
            .starts_with("invalid x: "));
        assert!(a.value().is_ok());
    }
}
