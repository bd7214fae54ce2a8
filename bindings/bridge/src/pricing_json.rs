//! Core's pure pricing functions (`cycles_core::pricing`) as JSON in, JSON out, so every host's
//! integrations charge what core says. Values use the shared vectors' encoding
//! (`conformance/vectors/pricing.json`): token counts and amounts are integers (a decimal
//! string beyond 2^53 - 1), an amount is `{"unit", "amount"}`, a pricing is
//! `{"unit": "TOKENS"}` or `{"unit", "models": {name: {"input_per_mtok", "output_per_mtok"}},
//! "default"?}`, caps are the spec's `Caps`. Behaviour is core's; this only converts.

use cycles_core::pricing::table::Matched;
use cycles_core::pricing::{caps, charge, tokens, wire, Api, CapsPlan, Pricing, Settlement, Usage};
use cycles_core::{Amount, Caps, Error, Unit};
use serde_json::{json, Value};
use std::borrow::Cow;

use crate::timing_json::{arg, int_arg, int_out, parse, str_arg};

fn bad(name: &str, what: &str) -> Error {
    Error::invalid_argument(format!("{name} must be {what}"))
}

/// The call's pricing: the one parsed by the host beforehand ([`call_with`]), or its
/// `pricing` argument.
fn pricing_arg<'p>(a: &Value, given: Option<&'p Pricing>) -> Result<Cow<'p, Pricing>, Error> {
    match given {
        Some(p) => Ok(Cow::Borrowed(p)),
        None => Pricing::from_json(arg(a, "pricing")?).map(Cow::Owned),
    }
}

/// A pricing as JSON (`{"unit", "models"?, "default"?}`) parsed once, for [`call_with`]: an
/// integration prices every call of a guard with one table, and parsing it on each crossing
/// was a measurable share of the guard's cost (docs/benchmarks.md).
pub fn parse_pricing(json: &str) -> Result<Pricing, Error> {
    Pricing::from_json(&parse(json, "pricing")?)
}

fn caps_arg(a: &Value) -> Result<Caps, Error> {
    let v = arg(a, "caps")?;
    serde_json::from_value(v.clone()).map_err(|e| {
        Error::invalid_argument(format!("caps: {}", cycles_core::error::json_reason(&e)))
    })
}

/// The optional count member `name` of `o` (absent or null: `None`).
fn opt_count(o: &Value, name: &str) -> Result<Option<u64>, Error> {
    match o.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(_) => int_arg::<u64>(o, name).map(Some),
    }
}

/// The optional `text_tokens` member: a host tokenizer's counts of `prompt_texts`, in its shape.
fn text_tokens_arg(a: &Value) -> Result<Option<Vec<Vec<u64>>>, Error> {
    match a.get("text_tokens") {
        None | Some(Value::Null) => Ok(None),
        Some(v) => serde_json::from_value(v.clone())
            .map(Some)
            .map_err(|_| bad_text_tokens()),
    }
}

/// A host tokenizer's counts of `prompt_texts` as JSON text (`text_tokens`, on its own).
pub fn parse_text_tokens(json: &str) -> Result<Vec<Vec<u64>>, Error> {
    serde_json::from_str(json).map_err(|_| bad_text_tokens())
}

fn bad_text_tokens() -> Error {
    bad(
        "text_tokens",
        "an array (one per message) of arrays of non-negative integers",
    )
}

fn amount_out(a: &Amount) -> Value {
    json!({"unit": a.unit.as_str(), "amount": int_out(i128::from(a.amount))})
}

fn amount_in(v: &Value, name: &str) -> Result<Amount, Error> {
    let unit = v
        .get("unit")
        .and_then(Value::as_str)
        .ok_or_else(|| bad(name, "an amount {\"unit\", \"amount\"}"))?;
    let amount = int_arg::<i64>(v, "amount")?;
    if amount < 0 {
        return Err(bad(&format!("{name}.amount"), "non-negative"));
    }
    Ok(Amount::new(Unit::from(unit), amount))
}

/// The optional `usage` argument: the usage so far (absent or null: nothing reported yet).
fn usage_so_far(a: &Value) -> Result<Usage, Error> {
    match a.get("usage") {
        None | Some(Value::Null) => Ok(Usage::default()),
        Some(u) if u.is_object() => Ok(Usage {
            input_tokens: opt_count(u, "input_tokens")?,
            output_tokens: opt_count(u, "output_tokens")?,
        }),
        Some(_) => Err(bad("usage", "an object")),
    }
}

fn usage_out(u: &Usage) -> Value {
    json!({"input_tokens": u.input_tokens, "output_tokens": u.output_tokens})
}

/// A caps plan as hosts read it: `{"bound_from", "bound_to", "set", "unset", "removed_tools",
/// "send", "changed"}`; a host sets each `set` member on its request and removes each `unset`
/// one.
pub fn plan_json(p: &CapsPlan) -> Value {
    json!({
        "bound_from": p.bound_from, "bound_to": p.bound_to, "set": p.set, "unset": p.unset,
        "removed_tools": p.removed_tools, "send": p.send, "changed": p.changed(),
    })
}

/// The `api` member as an [`Api`].
pub fn api_arg(a: &Value) -> Result<Api, Error> {
    Api::parse(str_arg(a, "api")?)
}

fn bool_arg(a: &Value, name: &str) -> Result<bool, Error> {
    arg(a, name)?
        .as_bool()
        .ok_or_else(|| bad(name, "a boolean"))
}

/// The names [`call`] knows, in its table's order.
pub const FUNCTIONS: [&str; 18] = [
    "text_tokens",
    "prompt_texts",
    "prompt_tokens",
    "output_bound",
    "lookup_price",
    "cost",
    "estimate",
    "estimate_request",
    "actual",
    "settlement",
    "lower_bound",
    "tool_allowed",
    "filter_tools",
    "plan_caps",
    "usage",
    "stream_request",
    "call_failed",
    "observe",
];

/// One pure pricing function by name, its arguments a JSON object, its result JSON text.
///
/// | name | arguments | result |
/// |---|---|---|
/// | `text_tokens` | `text` | integer |
/// | `prompt_texts` | `request` | the texts a tokenizer counts: an array per message of its texts |
/// | `prompt_tokens` | `request` (a provider request body), `text_tokens`? (a tokenizer's counts of `prompt_texts`, in its shape) | integer |
/// | `output_bound` | `request`, `default`? | integer or null |
/// | `lookup_price` | `pricing` (a table), `model` | `{"matched": key or null (the default), "input_per_mtok", "output_per_mtok"}` |
/// | `cost` | `pricing`, `model`, `input_tokens`, `output_tokens` | amount |
/// | `estimate` | `pricing`, `model`, `prompt_tokens`, `output_bound` | amount |
/// | `estimate_request` | `pricing`, `model`, `request`, `default_output_bound`?, `text_tokens`? | `{"prompt_tokens", "output_bound", "amount"}` |
/// | `actual` | `pricing`, `model`, `usage` (`{"input_tokens"?, "output_tokens"?}`) | amount or null |
/// | `settlement` | `actual` (amount or null), `call_succeeded`, `estimate` (amount) | `{"action": "commit", "amount"}` or `{"action": "release"}` |
/// | `lower_bound` | `bound`?, `caps` | `{"bound" (integer or null), "changed"}` |
/// | `tool_allowed` | `name`, `caps` | bool |
/// | `filter_tools` | `tools` (strings), `caps` | `{"allowed", "removed"}` |
/// | `plan_caps` | `api`, `request`, `caps` | [`plan_json`] |
/// | `usage` | `api`, `body` (a response body or one stream event), `usage`? (so far) | `{"input_tokens", "output_tokens"}` (null: unreported) |
/// | `stream_request` | `api`, `request` (a streaming request) | `{"set"}`: members to set so the stream reports usage |
/// | `call_failed` | `api`, `body` (a response body or one stream event) | bool: it says the call failed |
/// | `observe` | `pricing`, `model`, `api`, `body`, `usage`? (so far) | `{"usage", "failed", "actual"}`: `usage`, `call_failed` and `actual` of one body in one call |
pub fn call(name: &str, args_json: &str) -> Result<String, Error> {
    call_with(name, None, args_json)
}

/// [`call`] with the pricing parsed beforehand ([`parse_pricing`]): the functions that take a
/// `pricing` use `pricing` instead, and their arguments must not carry one (`Some`); `None` is
/// [`call`].
pub fn call_with(name: &str, pricing: Option<&Pricing>, args_json: &str) -> Result<String, Error> {
    let a = parse(args_json, "arguments")?;
    if pricing.is_some() && a.get("pricing").is_some() {
        return Err(Error::invalid_argument(
            "pricing is given twice: parsed beforehand and in the arguments",
        ));
    }
    let out = match name {
        "text_tokens" => int_out(i128::from(tokens::text_tokens(str_arg(&a, "text")?))),
        "prompt_texts" => json!(tokens::messages(arg(&a, "request")?)),
        "prompt_tokens" => {
            let request = arg(&a, "request")?;
            let n = match text_tokens_arg(&a)? {
                Some(counts) => tokens::counted_prompt_tokens(request, &counts)?,
                None => tokens::prompt_tokens(request),
            };
            int_out(i128::from(n))
        }
        "output_bound" => {
            let bound = tokens::output_bound(arg(&a, "request")?, opt_count(&a, "default")?)?;
            bound.map_or(Value::Null, |b| int_out(i128::from(b)))
        }
        "lookup_price" => {
            let priced = pricing_arg(&a, pricing)?;
            let Pricing::Table(table) = priced.as_ref() else {
                return Err(Error::invalid_argument(
                    "unit TOKENS has no price table (cost = tokens)",
                ));
            };
            let (matched, p) = table.lookup(str_arg(&a, "model")?)?;
            let matched = match matched {
                Matched::Entry(k) => json!(k),
                Matched::Default => Value::Null,
            };
            json!({"matched": matched, "input_per_mtok": p.input_per_mtok, "output_per_mtok": p.output_per_mtok})
        }
        "cost" => amount_out(&pricing_arg(&a, pricing)?.cost(
            str_arg(&a, "model")?,
            int_arg(&a, "input_tokens")?,
            int_arg(&a, "output_tokens")?,
        )?),
        "estimate" => amount_out(&charge::estimate(
            pricing_arg(&a, pricing)?.as_ref(),
            str_arg(&a, "model")?,
            int_arg(&a, "prompt_tokens")?,
            int_arg(&a, "output_bound")?,
        )?),
        "estimate_request" => {
            let e = charge::estimate_request(
                pricing_arg(&a, pricing)?.as_ref(),
                str_arg(&a, "model")?,
                arg(&a, "request")?,
                opt_count(&a, "default_output_bound")?,
                text_tokens_arg(&a)?.as_deref(),
            )?;
            json!({
                "prompt_tokens": int_out(i128::from(e.prompt_tokens)),
                "output_bound": int_out(i128::from(e.output_bound)),
                "amount": amount_out(&e.amount),
            })
        }
        "actual" => {
            let u = arg(&a, "usage")?;
            if !u.is_object() {
                return Err(bad("usage", "an object"));
            }
            let usage = Usage {
                input_tokens: opt_count(u, "input_tokens")?,
                output_tokens: opt_count(u, "output_tokens")?,
            };
            charge::actual(
                pricing_arg(&a, pricing)?.as_ref(),
                str_arg(&a, "model")?,
                usage,
            )?
            .map_or(Value::Null, |x| amount_out(&x))
        }
        "settlement" => {
            let actual = match a.get("actual") {
                None | Some(Value::Null) => None,
                Some(v) => Some(amount_in(v, "actual")?),
            };
            let estimate = amount_in(arg(&a, "estimate")?, "estimate")?;
            match charge::settlement(actual, bool_arg(&a, "call_succeeded")?, &estimate) {
                Settlement::Commit(x) => json!({"action": "commit", "amount": amount_out(&x)}),
                Settlement::Release => json!({"action": "release"}),
            }
        }
        "lower_bound" => {
            let c = caps::lower_bound(opt_count(&a, "bound")?, &caps_arg(&a)?)?;
            json!({"bound": c.bound.map(|b| int_out(i128::from(b))), "changed": c.changed})
        }
        "tool_allowed" => json!(caps::tool_allowed(str_arg(&a, "name")?, &caps_arg(&a)?)),
        "filter_tools" => {
            let tools: Vec<String> = serde_json::from_value(arg(&a, "tools")?.clone())
                .map_err(|_| bad("tools", "an array of strings"))?;
            let f = caps::filter_tools(&tools, &caps_arg(&a)?);
            json!({"allowed": f.allowed, "removed": f.removed})
        }
        "plan_caps" => plan_json(&wire::plan_caps(
            api_arg(&a)?,
            arg(&a, "request")?,
            &caps_arg(&a)?,
        )?),
        "usage" => usage_out(&wire::usage_update(
            api_arg(&a)?,
            usage_so_far(&a)?,
            arg(&a, "body")?,
        )),
        "stream_request" => {
            json!({"set": wire::stream_request(api_arg(&a)?, arg(&a, "request")?)})
        }
        "call_failed" => json!(wire::call_failed(api_arg(&a)?, arg(&a, "body")?)),
        // One crossing per response or stream event instead of three: an integration folds
        // every event, and each crossing re-encodes the body.
        "observe" => {
            let (api, body) = (api_arg(&a)?, arg(&a, "body")?);
            let usage = wire::usage_update(api, usage_so_far(&a)?, body);
            let actual = charge::actual(
                pricing_arg(&a, pricing)?.as_ref(),
                str_arg(&a, "model")?,
                usage,
            )?;
            json!({
                "usage": usage_out(&usage),
                "failed": wire::call_failed(api, body),
                "actual": actual.map_or(Value::Null, |x| amount_out(&x)),
            })
        }
        other => {
            return Err(Error::invalid_argument(format!(
                "unknown pricing function {other:?}"
            )))
        }
    };
    Ok(out.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every case of the shared vectors through `call`: the encoding hosts use.
    #[test]
    fn shared_vectors_through_the_bridge() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../conformance/vectors/pricing.json"
        );
        let doc: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        assert_eq!(doc["format"], "cycles-pricing-vectors");
        assert_eq!(doc["version"], 1);
        // Every function has vectors, and the vectors name no function `call` lacks.
        let mut names: Vec<&str> = doc["functions"]
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        names.sort_unstable();
        let mut known = FUNCTIONS.to_vec();
        known.sort_unstable();
        assert_eq!(names, known, "the vectors' functions");
        let mut ran = 0;
        for (function, cases) in doc["functions"].as_object().unwrap() {
            let cases = cases.as_array().unwrap();
            assert!(!cases.is_empty(), "{function} has no cases");
            for case in cases {
                let name = &case["name"];
                let got = call(function, &case["input"].to_string());
                match (&case.get("expect"), &case.get("error")) {
                    (Some(expect), None) => {
                        let got: Value = serde_json::from_str(&got.unwrap()).unwrap();
                        assert_eq!(&got, *expect, "{function} {name}");
                    }
                    (None, Some(err)) => {
                        let e = got.expect_err(&format!("{function} {name} must fail"));
                        assert_eq!(e.kind().name(), err["kind"], "{function} {name}");
                        let part = err["message_contains"].as_str().unwrap();
                        assert!(
                            e.message().contains(part),
                            "{function} {name}: {}",
                            e.message()
                        );
                    }
                    _ => panic!("{function} {name}: exactly one of expect and error"),
                }
                ran += 1;
            }
        }
        assert!(ran >= 166, "only {ran} vectors ran");
    }

    /// The vectors whose pricing parses, with it parsed beforehand: the same answers (or the
    /// same errors) as through `call`.
    #[test]
    fn a_pricing_parsed_beforehand_answers_as_the_argument_does() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../conformance/vectors/pricing.json"
        );
        let doc: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let mut ran = 0;
        for (function, cases) in doc["functions"].as_object().unwrap() {
            for case in cases.as_array().unwrap() {
                let mut input = case["input"].clone();
                let Some(p) = input.as_object_mut().unwrap().remove("pricing") else {
                    continue;
                };
                let Ok(parsed) = parse_pricing(&p.to_string()) else {
                    continue; // a bad pricing: parse_pricing's own error, tested below
                };
                let once = call_with(function, Some(&parsed), &input.to_string());
                let each = call(function, &case["input"].to_string());
                match (once, each) {
                    (Ok(x), Ok(y)) => assert_eq!(x, y, "{function} {}", case["name"]),
                    (Err(x), Err(y)) => assert_eq!(x.message(), y.message()),
                    (x, y) => panic!("{function} {}: {x:?} against {y:?}", case["name"]),
                }
                ran += 1;
            }
        }
        assert!(ran >= 40, "only {ran} vectors ran");
        let e = parse_pricing(r#"{"unit":"USD_MICROCENTS"}"#).unwrap_err();
        assert!(e.message().starts_with("pricing"), "{}", e.message());
        let e = parse_pricing("{").unwrap_err();
        assert_eq!(e.kind().name(), "INVALID_ARGUMENT");
        let tokens = parse_pricing(r#"{"unit":"TOKENS"}"#).unwrap();
        let e = call_with(
            "cost",
            Some(&tokens),
            r#"{"pricing":{"unit":"TOKENS"},"model":"m","input_tokens":1,"output_tokens":2}"#,
        )
        .unwrap_err();
        assert!(e.message().contains("given twice"), "{}", e.message());
    }

    #[test]
    fn bad_arguments_are_typed() {
        let e = call("nope", "{}").unwrap_err();
        assert_eq!(e.message(), "unknown pricing function \"nope\"");
        let e = call(
            "cost",
            r#"{"pricing":{"unit":"TOKENS"},"model":"m","input_tokens":-1,"output_tokens":0}"#,
        )
        .unwrap_err();
        assert_eq!(e.message(), "input_tokens must be an integer in range");
        let e = call("filter_tools", r#"{"tools":[1],"caps":{}}"#).unwrap_err();
        assert_eq!(e.message(), "tools must be an array of strings");
        let e = call(
            "actual",
            r#"{"pricing":{"unit":"TOKENS"},"model":"m","usage":3}"#,
        )
        .unwrap_err();
        assert_eq!(e.message(), "usage must be an object");
    }
}
