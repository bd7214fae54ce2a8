//! The wire models as the emitters see them: core's JSON Schemas (schemars reflection of the
//! serde types, feature `schema`) reduced to structs, fields and open enums. Anything the
//! reduction does not understand is an error, so a new kind of field cannot be emitted wrong
//! in silence.

use std::collections::BTreeMap;

use cycles_core::model::ErrorResponse;
use cycles_core::transport::decode::Operation;
use schemars::generate::SchemaSettings;
use serde_json::{Map, Value};

/// A field's type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ty {
    /// A string (open enums and `ReasonCode` included: hosts keep unknown values).
    Str,
    /// A 64-bit integer of the wire (`format: int64`).
    Int64,
    /// A small integer (`uint32` and the like).
    Int,
    /// A boolean.
    Bool,
    /// Any JSON value.
    Any,
    /// A free-form JSON object (metadata, custom metrics): the user's own keys.
    Object,
    /// An object of string values (subject dimensions): the user's own keys.
    StrMap,
    /// Another model, by core's name.
    Model(String),
    /// A list.
    List(Box<Ty>),
}

impl Ty {
    /// True for a type whose members are the user's (or the server's) own keys, which a
    /// host must never rename.
    pub fn is_opaque(&self) -> bool {
        matches!(self, Ty::Any | Ty::Object | Ty::StrMap)
    }

    /// The model this type holds, directly or as a list's items.
    pub fn model(&self) -> Option<&str> {
        match self {
            Ty::Model(m) => Some(m),
            Ty::List(t) => t.model(),
            _ => None,
        }
    }
}

/// One member of a model.
#[derive(Clone, Debug)]
pub struct Field {
    /// The wire (snake_case) name.
    pub name: String,
    /// Its type.
    pub ty: Ty,
    /// False when the member may be absent (or null).
    pub required: bool,
    /// Core's doc comment.
    pub doc: String,
    /// The open enum (core's name) whose known values a string member (or a list's items)
    /// takes, if any.
    pub open_enum: Option<String>,
}

/// One struct of core's model.
#[derive(Clone, Debug)]
pub struct Model {
    /// Core's type name.
    pub name: String,
    /// Core's doc comment.
    pub doc: String,
    /// Members, in core's order.
    pub fields: Vec<Field>,
    /// True when unknown members are kept (`#[serde(flatten)]` of a map).
    pub extra: bool,
}

/// One open string enum: known values, any other string carried through.
#[derive(Clone, Debug)]
pub struct OpenEnum {
    /// Core's type name.
    pub name: String,
    /// Core's doc comment.
    pub doc: String,
    /// `(wire value, doc)` of each known value.
    pub values: Vec<(String, String)>,
}

/// One operation: its names, and the core models of its request body and success body.
#[derive(Clone, Debug)]
pub struct Op {
    /// The spec's operationId.
    pub operation_id: &'static str,
    /// The host method name.
    pub method: &'static str,
    /// `GET` or `POST`.
    pub http_method: &'static str,
    /// The spec's path template (`/v1/reservations/{reservation_id}`).
    pub path: &'static str,
    /// The path template's parameters: each host method's positional arguments.
    pub path_params: Vec<&'static str>,
    /// What the operation does, in one sentence (core's `Operation::summary`).
    pub summary: &'static str,
    /// The request body's model (`None`: a path or query).
    pub request: Option<String>,
    /// The success body's model.
    pub response: String,
}

/// Everything the emitters need.
#[derive(Clone, Debug)]
pub struct Ir {
    /// Every model, by core's name.
    pub models: BTreeMap<String, Model>,
    /// Every open enum, in first-use order.
    pub enums: Vec<OpenEnum>,
    /// Every operation, in core's order (`Operation::ALL`).
    pub ops: Vec<Op>,
}

impl Ir {
    /// The model of a core name (the names come from the schemas, so it exists).
    pub fn model(&self, name: &str) -> &Model {
        &self.models[name]
    }
}

/// Reads core's schemas.
pub fn load() -> Result<Ir, String> {
    let mut g = SchemaSettings::draft2020_12().into_generator();
    let mut ops = Vec::new();
    for op in Operation::ALL {
        let (req, resp) = op.schemas(&mut g);
        ops.push(Op {
            operation_id: op.operation_id(),
            method: op.method_name(),
            http_method: op.http_method(),
            path: op.path(),
            path_params: op.path_params(),
            summary: op.summary(),
            request: req.map(|s| ref_name(s.as_value())).transpose()?,
            response: ref_name(resp.as_value())?,
        });
    }
    // The error envelope is no operation's success, but hosts read its free-form `details`.
    g.subschema_for::<ErrorResponse>();
    let defs = g.definitions().clone();
    let mut models = BTreeMap::new();
    let mut enums = Vec::new();
    for (name, schema) in &defs {
        let obj = schema
            .as_object()
            .ok_or_else(|| format!("{name}: not a schema object"))?;
        if let Some(values) = obj.get("x-open-enum") {
            enums.push(open_enum(name, obj, values)?);
        } else if obj.get("type") == Some(&Value::from("object")) {
            models.insert(name.clone(), model(name, obj, &defs)?);
        } else if obj.get("type") != Some(&Value::from("string")) {
            return Err(format!("{name}: a definition the generator does not know"));
        }
    }
    Ok(Ir { models, enums, ops })
}

fn ref_name(v: &Value) -> Result<String, String> {
    v.get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| r.strip_prefix("#/$defs/"))
        .map(str::to_string)
        .ok_or_else(|| format!("expected a reference to a definition, got {v}"))
}

/// Core's doc comment without the leading space rustdoc keeps per line.
pub fn clean_doc(s: &str) -> String {
    s.lines()
        .map(|l| l.strip_prefix(' ').unwrap_or(l).trim_end())
        .collect::<Vec<_>>()
        .join("\n")
        .trim()
        .to_string()
}

fn doc_of(obj: &Map<String, Value>) -> String {
    clean_doc(obj.get("description").and_then(Value::as_str).unwrap_or(""))
}

fn open_enum(name: &str, obj: &Map<String, Value>, values: &Value) -> Result<OpenEnum, String> {
    let values = values
        .as_array()
        .ok_or_else(|| format!("{name}: x-open-enum is not a list"))?
        .iter()
        .map(|v| {
            let wire = v["value"]
                .as_str()
                .ok_or_else(|| format!("{name}: a value"))?;
            Ok((
                wire.to_string(),
                clean_doc(v["description"].as_str().unwrap_or("")),
            ))
        })
        .collect::<Result<_, String>>()?;
    Ok(OpenEnum {
        name: name.to_string(),
        doc: doc_of(obj),
        values,
    })
}

fn model(name: &str, obj: &Map<String, Value>, defs: &Map<String, Value>) -> Result<Model, String> {
    let required: Vec<&str> = obj
        .get("required")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut fields = Vec::new();
    if let Some(props) = obj.get("properties").and_then(Value::as_object) {
        for (field, schema) in props {
            // `serde_json::Value` reflects as the schema `true`: any value.
            let (ty, nullable) = match schema {
                Value::Bool(true) => (Ty::Any, false),
                Value::Object(s) => ty(s, defs).map_err(|e| format!("{name}.{field}: {e}"))?,
                _ => return Err(format!("{name}.{field}: not a schema object")),
            };
            let s = schema.as_object().cloned().unwrap_or_default();
            fields.push(Field {
                name: field.clone(),
                open_enum: enum_ref(&s, defs),
                ty,
                required: required.contains(&field.as_str()) && !nullable,
                doc: doc_of(&s),
            });
        }
    }
    Ok(Model {
        name: name.to_string(),
        doc: doc_of(obj),
        fields,
        extra: obj.get("additionalProperties") == Some(&Value::Bool(true)),
    })
}

/// The open enum a property refers to, directly, as the non-null side of an `anyOf`, or as a
/// list's items (`include`: a list of `ListInclude` tokens).
fn enum_ref(s: &Map<String, Value>, defs: &Map<String, Value>) -> Option<String> {
    let direct = s
        .get("$ref")
        .and_then(|r| ref_name(&serde_json::json!({ "$ref": r })).ok());
    let name = direct
        .or_else(|| {
            s.get("anyOf")?
                .as_array()?
                .iter()
                .find_map(|v| enum_ref(v.as_object()?, defs))
        })
        .or_else(|| enum_ref(s.get("items")?.as_object()?, defs))?;
    defs.get(&name)?.get("x-open-enum").map(|_| name)
}

/// A property's type and whether it may be null.
fn ty(s: &Map<String, Value>, defs: &Map<String, Value>) -> Result<(Ty, bool), String> {
    if let Some(any_of) = s.get("anyOf").and_then(Value::as_array) {
        let not_null: Vec<&Value> = any_of
            .iter()
            .filter(|v| v.get("type") != Some(&Value::from("null")))
            .collect();
        let [one] = not_null.as_slice() else {
            return Err("a union the generator does not know".into());
        };
        let inner = one.as_object().ok_or("not a schema object")?;
        return Ok((ty(inner, defs)?.0, not_null.len() < any_of.len()));
    }
    if let Some(r) = s.get("$ref") {
        let name = ref_name(&serde_json::json!({ "$ref": r }))?;
        let def = defs
            .get(&name)
            .ok_or_else(|| format!("no definition {name}"))?;
        let t = if def.get("type") == Some(&Value::from("string")) {
            Ty::Str
        } else {
            Ty::Model(name)
        };
        return Ok((t, false));
    }
    let (kind, nullable) = match s.get("type") {
        None => return Ok((Ty::Any, false)),
        Some(Value::String(k)) => (k.as_str(), false),
        Some(Value::Array(ks)) => {
            let ks: Vec<&str> = ks.iter().filter_map(Value::as_str).collect();
            match ks.as_slice() {
                [k, "null"] | ["null", k] => (*k, true),
                _ => return Err(format!("types {ks:?}")),
            }
        }
        Some(other) => return Err(format!("type {other}")),
    };
    let t = match kind {
        "string" => Ty::Str,
        "boolean" => Ty::Bool,
        "integer" if s.get("format") == Some(&Value::from("int64")) => Ty::Int64,
        "integer" => Ty::Int,
        "array" => {
            let items = s
                .get("items")
                .and_then(Value::as_object)
                .ok_or("an array without items")?;
            Ty::List(Box::new(ty(items, defs)?.0))
        }
        "object" => match s.get("additionalProperties") {
            Some(Value::Object(v)) if v.get("type") == Some(&Value::from("string")) => Ty::StrMap,
            Some(Value::Bool(true)) | None => Ty::Object,
            Some(other) => return Err(format!("an object of {other}")),
        },
        other => return Err(format!("type {other:?}")),
    };
    Ok((t, nullable))
}
