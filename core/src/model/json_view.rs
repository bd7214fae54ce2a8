//! The read-only view of a JSON document the success predicates ([`super::validate`]) check,
//! implemented for `serde_json::Value` and for [`BorrowedJson`], a parse that borrows its
//! strings from the response body.
//!
//! Why a second tree: every 2xx response is checked and then decoded. Parsed into a `Value`,
//! each key and string is copied into its own allocation and each object becomes an
//! order-preserving map hashing every key (serde_json's `preserve_order` is on in this
//! workspace), which cost more than decoding the typed response itself. A [`BorrowedJson`]
//! copies only strings with escapes and keeps members in a vector; lookups scan it (objects
//! here have a handful of members). Its answers are the `Value`'s: numbers are
//! `serde_json::Number`s built by the same parser, and a repeated key reads as its last
//! occurrence, as a `Value` keeps it. The typed response is then decoded from the same parse
//! ([`decode`]; parsing the bytes a second time cost as much again), which, as serde_json's
//! decode of the bytes, refuses a repeated member it reads (a `Value` kept the last one): such
//! a body is not a success to trust (the transport's `a_repeated_member_is_ambiguous_for_a_write`).

use std::borrow::Cow;
use std::fmt;

use serde::de::value::{MapDeserializer, SeqDeserializer};
use serde::de::{
    self, Deserialize, Deserializer, IntoDeserializer, MapAccess, SeqAccess, Unexpected, Visitor,
};
use serde_json::{Number, Value};

/// What a success predicate may ask of a JSON value.
pub trait JsonView: Sized {
    /// The member `k` of an object (`None` for a non-object or a missing member).
    fn get(&self, k: &str) -> Option<&Self>;
    /// True for an object.
    fn is_object(&self) -> bool;
    /// The members' values of an object, in document order (empty for a non-object).
    fn object_values(&self) -> impl Iterator<Item = &Self>;
    /// The items of an array.
    fn as_array(&self) -> Option<&[Self]>;
    /// The value of an integer that fits an `i64` (a float such as `1.5` or `1e3` is not one).
    fn as_i64(&self) -> Option<i64>;
    /// The text of a string.
    fn as_str(&self) -> Option<&str>;
    /// True for a string.
    fn is_string(&self) -> bool {
        self.as_str().is_some()
    }
    /// True for `true` or `false`.
    fn is_boolean(&self) -> bool;
    /// True for `null`.
    fn is_null(&self) -> bool;
}

impl JsonView for Value {
    fn get(&self, k: &str) -> Option<&Value> {
        self.as_object()?.get(k)
    }

    fn is_object(&self) -> bool {
        Value::is_object(self)
    }

    fn object_values(&self) -> impl Iterator<Item = &Value> {
        self.as_object().into_iter().flat_map(|o| o.values())
    }

    fn as_array(&self) -> Option<&[Value]> {
        Value::as_array(self).map(Vec::as_slice)
    }

    fn as_i64(&self) -> Option<i64> {
        Value::as_i64(self)
    }

    fn as_str(&self) -> Option<&str> {
        Value::as_str(self)
    }

    fn is_boolean(&self) -> bool {
        Value::is_boolean(self)
    }

    fn is_null(&self) -> bool {
        Value::is_null(self)
    }
}

/// A JSON document parsed without copying its unescaped strings (see the module docs).
#[derive(Clone, Debug, PartialEq)]
pub enum BorrowedJson<'a> {
    /// `null`.
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// A number, as serde_json reads it.
    Number(Number),
    /// A string: borrowed from the document unless it had escapes.
    String(Cow<'a, str>),
    /// An array.
    Array(Vec<BorrowedJson<'a>>),
    /// An object's members in document order, repeated keys included.
    Object(Vec<(Cow<'a, str>, BorrowedJson<'a>)>),
}

impl<'a> BorrowedJson<'a> {
    /// Parses `body` (serde_json's parser and its errors, the same as for a `Value`).
    pub fn parse(body: &'a [u8]) -> Result<BorrowedJson<'a>, serde_json::Error> {
        serde_json::from_slice(body)
    }
}

impl JsonView for BorrowedJson<'_> {
    fn get(&self, k: &str) -> Option<&Self> {
        match self {
            // The last occurrence wins, as in a `Value`.
            BorrowedJson::Object(m) => m.iter().rev().find(|(n, _)| n == k).map(|(_, v)| v),
            _ => None,
        }
    }

    fn is_object(&self) -> bool {
        matches!(self, BorrowedJson::Object(_))
    }

    fn object_values(&self) -> impl Iterator<Item = &Self> {
        let members: &[(Cow<'_, str>, BorrowedJson<'_>)] = match self {
            BorrowedJson::Object(m) => m,
            _ => &[],
        };
        members.iter().map(|(_, v)| v)
    }

    fn as_array(&self) -> Option<&[Self]> {
        match self {
            BorrowedJson::Array(a) => Some(a),
            _ => None,
        }
    }

    fn as_i64(&self) -> Option<i64> {
        match self {
            BorrowedJson::Number(n) => n.as_i64(),
            _ => None,
        }
    }

    fn as_str(&self) -> Option<&str> {
        match self {
            BorrowedJson::String(s) => Some(s),
            _ => None,
        }
    }

    fn is_boolean(&self) -> bool {
        matches!(self, BorrowedJson::Bool(_))
    }

    fn is_null(&self) -> bool {
        matches!(self, BorrowedJson::Null)
    }
}

impl<'de> Deserialize<'de> for BorrowedJson<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(BorrowedVisitor)
    }
}

/// Builds a [`BorrowedJson`] from serde_json's events.
struct BorrowedVisitor;

impl<'de> Visitor<'de> for BorrowedVisitor {
    type Value = BorrowedJson<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any valid JSON value")
    }

    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(BorrowedJson::Null)
    }

    fn visit_none<E>(self) -> Result<Self::Value, E> {
        Ok(BorrowedJson::Null)
    }

    fn visit_bool<E>(self, b: bool) -> Result<Self::Value, E> {
        Ok(BorrowedJson::Bool(b))
    }

    fn visit_i64<E>(self, n: i64) -> Result<Self::Value, E> {
        Ok(BorrowedJson::Number(n.into()))
    }

    fn visit_u64<E>(self, n: u64) -> Result<Self::Value, E> {
        Ok(BorrowedJson::Number(n.into()))
    }

    fn visit_f64<E>(self, n: f64) -> Result<Self::Value, E> {
        // serde_json's parser never yields a non-finite float; `Value` maps one to null.
        Ok(Number::from_f64(n).map_or(BorrowedJson::Null, BorrowedJson::Number))
    }

    fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Self::Value, E> {
        Ok(BorrowedJson::String(Cow::Borrowed(s)))
    }

    fn visit_str<E>(self, s: &str) -> Result<Self::Value, E> {
        Ok(BorrowedJson::String(Cow::Owned(s.to_owned())))
    }

    fn visit_string<E>(self, s: String) -> Result<Self::Value, E> {
        Ok(BorrowedJson::String(Cow::Owned(s)))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(v) = seq.next_element()? {
            items.push(v);
        }
        Ok(BorrowedJson::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut members = Vec::new();
        while let Some((k, v)) = map.next_entry::<MemberKey<'de>, BorrowedJson<'de>>()? {
            members.push((k.0, v));
        }
        Ok(BorrowedJson::Object(members))
    }
}

/// An object key, borrowed unless it had escapes.
struct MemberKey<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for MemberKey<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = MemberKey<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object key")
            }
            fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Self::Value, E> {
                Ok(MemberKey(Cow::Borrowed(s)))
            }
            fn visit_str<E>(self, s: &str) -> Result<Self::Value, E> {
                Ok(MemberKey(Cow::Owned(s.to_owned())))
            }
            fn visit_string<E>(self, s: String) -> Result<Self::Value, E> {
                Ok(MemberKey(Cow::Owned(s)))
            }
        }
        d.deserialize_str(KeyVisitor)
    }
}

/// Decodes `T` from an already parsed document instead of parsing its bytes again (a checked
/// response was parsed once for its checks; decoding the bytes a second time cost as much as
/// the parse). The typed result is the one `serde_json::from_slice` gives for the same bytes,
/// a repeated member included: the members are visited in document order, so a struct that
/// reads one twice refuses it (`duplicate field`). Errors carry no position.
pub fn decode<'a, T: Deserialize<'a>>(doc: &BorrowedJson<'a>) -> Result<T, serde_json::Error> {
    T::deserialize(doc)
}

impl<'de> Deserializer<'de> for &BorrowedJson<'de> {
    type Error = serde_json::Error;

    fn deserialize_any<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Self::Error> {
        match self {
            BorrowedJson::Null => v.visit_unit(),
            BorrowedJson::Bool(b) => v.visit_bool(*b),
            BorrowedJson::Number(n) => n.deserialize_any(v),
            BorrowedJson::String(Cow::Borrowed(s)) => v.visit_borrowed_str(s),
            BorrowedJson::String(Cow::Owned(s)) => v.visit_str(s),
            BorrowedJson::Array(items) => {
                let mut seq = SeqDeserializer::new(items.iter());
                let out = v.visit_seq(&mut seq)?;
                seq.end()?;
                Ok(out)
            }
            BorrowedJson::Object(members) => {
                let mut map =
                    MapDeserializer::new(members.iter().map(|(k, v)| (MemberName(k.as_ref()), v)));
                let out = v.visit_map(&mut map)?;
                map.end()?;
                Ok(out)
            }
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Self::Error> {
        match self {
            BorrowedJson::Null => v.visit_none(),
            _ => v.visit_some(self),
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        v: V,
    ) -> Result<V::Value, Self::Error> {
        v.visit_newtype_struct(self)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        v: V,
    ) -> Result<V::Value, Self::Error> {
        match self {
            // A unit variant, as serde_json reads `"NAME"`.
            BorrowedJson::String(s) => v.visit_enum(s.as_ref().into_deserializer()),
            // `{"NAME": value}`, as serde_json reads a variant with content.
            BorrowedJson::Object(members) if members.len() == 1 => {
                let (name, value) = &members[0];
                v.visit_enum(Variant { name, value })
            }
            other => Err(de::Error::invalid_type(other.unexpected(), &"an enum")),
        }
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        unit unit_struct seq tuple tuple_struct map struct identifier ignored_any
    }
}

impl<'a, 'de> IntoDeserializer<'de, serde_json::Error> for &'a BorrowedJson<'de> {
    type Deserializer = &'a BorrowedJson<'de>;

    fn into_deserializer(self) -> Self::Deserializer {
        self
    }
}

impl BorrowedJson<'_> {
    /// What a type error says was found.
    fn unexpected(&self) -> Unexpected<'_> {
        match self {
            BorrowedJson::Null => Unexpected::Unit,
            BorrowedJson::Bool(b) => Unexpected::Bool(*b),
            BorrowedJson::Number(_) => Unexpected::Other("number"),
            BorrowedJson::String(s) => Unexpected::Str(s),
            BorrowedJson::Array(_) => Unexpected::Seq,
            BorrowedJson::Object(_) => Unexpected::Map,
        }
    }
}

/// A member's name as a map key (visited as text: a struct's field names are compared, not
/// kept).
struct MemberName<'k>(&'k str);

impl<'de> IntoDeserializer<'de, serde_json::Error> for MemberName<'_> {
    type Deserializer = Self;

    fn into_deserializer(self) -> Self {
        self
    }
}

impl<'de> Deserializer<'de> for MemberName<'_> {
    type Error = serde_json::Error;

    fn deserialize_any<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Self::Error> {
        v.visit_str(self.0)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map struct enum
        identifier ignored_any
    }
}

/// The variant of an enum written as `{"NAME": value}`.
struct Variant<'t, 'de> {
    name: &'t Cow<'de, str>,
    value: &'t BorrowedJson<'de>,
}

impl<'t, 'de> de::EnumAccess<'de> for Variant<'t, 'de> {
    type Error = serde_json::Error;
    type Variant = &'t BorrowedJson<'de>;

    fn variant_seed<S: de::DeserializeSeed<'de>>(
        self,
        seed: S,
    ) -> Result<(S::Value, Self::Variant), Self::Error> {
        let name = seed.deserialize(MemberName(self.name.as_ref()))?;
        Ok((name, self.value))
    }
}

impl<'de> de::VariantAccess<'de> for &BorrowedJson<'de> {
    type Error = serde_json::Error;

    fn unit_variant(self) -> Result<(), Self::Error> {
        Deserialize::deserialize(self)
    }

    fn newtype_variant_seed<S: de::DeserializeSeed<'de>>(
        self,
        seed: S,
    ) -> Result<S::Value, Self::Error> {
        seed.deserialize(self)
    }

    fn tuple_variant<V: Visitor<'de>>(self, _len: usize, v: V) -> Result<V::Value, Self::Error> {
        self.deserialize_any(v)
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        _fields: &'static [&'static str],
        v: V,
    ) -> Result<V::Value, Self::Error> {
        self.deserialize_any(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both views agree on every question, for each value of a document that covers the
    /// kinds, escapes, big and float numbers, and a repeated key.
    #[test]
    fn borrowed_answers_like_value() {
        let doc =
            br#"{"a":1,"b":-2,"c":18446744073709551615,"d":1.5,"e":1e3,"f":"x\"y","g":"plain",
            "h":true,"i":null,"j":[1,"2",{"k":[]}],"l":{"m":{"n":0}},"a":"again","-0":-0}"#;
        let v: Value = serde_json::from_slice(doc).unwrap();
        let b = BorrowedJson::parse(doc).unwrap();
        fn same(v: &Value, b: &BorrowedJson<'_>) {
            assert_eq!(JsonView::is_object(v), b.is_object());
            assert_eq!(JsonView::as_i64(v), b.as_i64());
            assert_eq!(JsonView::as_str(v), b.as_str());
            assert_eq!(JsonView::is_boolean(v), b.is_boolean());
            assert_eq!(JsonView::is_null(v), b.is_null());
            assert_eq!(
                JsonView::as_array(v).map(<[Value]>::len),
                b.as_array().map(<[BorrowedJson<'_>]>::len)
            );
            for (x, y) in JsonView::as_array(v)
                .unwrap_or(&[])
                .iter()
                .zip(b.as_array().unwrap_or(&[]))
            {
                same(x, y);
            }
            if let Some(o) = v.as_object() {
                for k in o.keys() {
                    same(JsonView::get(v, k).unwrap(), b.get(k).unwrap());
                }
                // A Value keeps one member per key; the borrowed view keeps repeats.
                assert!(JsonView::object_values(v).count() <= b.object_values().count());
            }
        }
        same(&v, &b);
        assert_eq!(b.get("a").and_then(JsonView::as_str), Some("again"));
        assert_eq!(b.get("c").and_then(JsonView::as_i64), None);
        assert_eq!(b.get("e").and_then(JsonView::as_i64), None);
        assert!(matches!(
            b.get("g"),
            Some(BorrowedJson::String(Cow::Borrowed("plain")))
        ));
        assert_eq!(b.get("f").and_then(JsonView::as_str), Some("x\"y"));
    }

    /// The decode from a parse gives what `serde_json::from_slice` gives from the bytes, or
    /// refuses what it refuses, for the shapes core's models use.
    #[test]
    fn decoding_a_parse_is_decoding_the_bytes() {
        use serde::Deserialize as De;
        use std::collections::BTreeMap;

        #[derive(De, Debug, PartialEq)]
        enum Kind {
            #[serde(rename = "ALLOW")]
            Allow,
            Deny,
            Wrapped(i64),
            Pair {
                a: u8,
            },
        }
        #[derive(De, Debug, PartialEq)]
        struct Inner {
            n: i64,
            f: Option<f64>,
        }
        #[derive(De, Debug, PartialEq)]
        struct Newtype(String);
        #[derive(De, Debug, PartialEq)]
        struct Doc {
            kind: Kind,
            text: String,
            opt: Option<Inner>,
            #[serde(default)]
            list: Vec<Inner>,
            map: Option<BTreeMap<String, Value>>,
            id: Option<Newtype>,
            #[serde(flatten)]
            rest: BTreeMap<String, Value>,
        }

        fn both(doc: &str) -> (Result<Doc, String>, Result<Doc, String>) {
            let parsed = BorrowedJson::parse(doc.as_bytes()).expect("JSON");
            (
                decode::<Doc>(&parsed).map_err(|e| e.to_string()),
                serde_json::from_str::<Doc>(doc).map_err(|e| e.to_string()),
            )
        }
        for ok in [
            r#"{"kind":"ALLOW","text":"a\"b\u00e9","opt":null,"map":{"x":[1,-2,1.5,1e3,18446744073709551615,"s",null,{"y":true}]}}"#,
            r#"{"kind":"Deny","text":"","opt":{"n":-9,"f":2},"list":[{"n":1,"f":null}],"id":"rsv_1","extra":{"z":0},"more":7}"#,
            r#"{"kind":{"Wrapped":5},"text":"t","map":{"k":1,"k":2}}"#,
            r#"{"kind":{"Pair":{"a":3}},"text":"t","opt":[4,0.5]}"#,
        ] {
            let (parsed, bytes) = both(ok);
            assert!(parsed.is_ok(), "{ok}: {parsed:?}");
            assert_eq!(parsed, bytes, "{ok}");
        }
        for bad in [
            r#"{"kind":"ALLOW","text":"a","text":"b"}"#,
            r#"{"kind":"NOPE","text":"a"}"#,
            r#"{"kind":{"Wrapped":5,"Deny":null},"text":"a"}"#,
            r#"{"kind":"ALLOW"}"#,
            r#"{"kind":"ALLOW","text":1}"#,
            r#"{"kind":"ALLOW","text":"a","opt":{"n":1.5}}"#,
            r#"{"kind":"ALLOW","text":"a","opt":{"n":9223372036854775808}}"#,
            r#"{"kind":{"Pair":{"a":256}},"text":"a"}"#,
            r#"{"kind":"ALLOW","text":"a","list":{}}"#,
            r#"[1]"#,
            r#"{"kind":"ALLOW","text":"a","opt":[1,2,3]}"#,
        ] {
            let (parsed, bytes) = both(bad);
            assert!(
                parsed.is_err() && bytes.is_err(),
                "{bad}: {parsed:?} / {bytes:?}"
            );
        }
        let (parsed, _) = both(r#"{"kind":"ALLOW","text":"a","text":"b"}"#);
        assert!(parsed.unwrap_err().contains("duplicate field `text`"));
    }

    #[test]
    fn errors_are_the_parsers() {
        for bad in [
            &b""[..],
            b"{",
            b"[1,]",
            b"\"\\ud800\"",
            b"nul",
            b"{\"a\" 1}",
        ] {
            let v = serde_json::from_slice::<Value>(bad)
                .unwrap_err()
                .to_string();
            let b = BorrowedJson::parse(bad).unwrap_err().to_string();
            assert_eq!(v, b, "{:?}", String::from_utf8_lossy(bad));
        }
    }
}
