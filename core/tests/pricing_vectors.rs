//! Runs the shared pricing vectors (`conformance/vectors/pricing.json`) through core's pricing
//! functions directly (the bridge runs the same file through its JSON entry points). Every
//! face runs the same file; a missing or empty function section fails, and so does a
//! function this runner does not know.

use cycles_core::pricing::table::Matched;
use cycles_core::pricing::{caps, charge, tokens, Pricing, Settlement, Usage};
use cycles_core::{Amount, Caps, Error, Unit};
use serde_json::{json, Value};

const FUNCTIONS: [&str; 12] = [
    "text_tokens",
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
];

fn invalid(m: &str) -> Error {
    Error::invalid_argument(m)
}

/// A vector count: a JSON integer or a decimal string; anything else (negative included) is
/// an error, as a host's conversion would report it.
fn count(v: &Value, name: &str) -> Result<u64, Error> {
    let n = match v {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.parse().ok(),
        _ => None,
    };
    n.ok_or_else(|| invalid(&format!("{name} must be an integer in range")))
}

fn opt_count(o: &Value, name: &str) -> Result<Option<u64>, Error> {
    match o.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => count(v, name).map(Some),
    }
}

fn amount_out(a: &Amount) -> Value {
    let n = a.amount;
    let n = if n < (1 << 53) {
        json!(n)
    } else {
        json!(n.to_string())
    };
    json!({"unit": a.unit.as_str(), "amount": n})
}

fn amount_in(v: &Value, name: &str) -> Result<Amount, Error> {
    let n = v["amount"].as_i64().expect("vector amounts are integers");
    if n < 0 {
        return Err(invalid(&format!("{name}.amount must be non-negative")));
    }
    Ok(Amount::new(Unit::from(v["unit"].as_str().unwrap()), n))
}

fn caps_of(a: &Value) -> Caps {
    serde_json::from_value(a["caps"].clone()).expect("vector caps decode")
}

fn run(function: &str, a: &Value) -> Result<Value, Error> {
    let pricing = || Pricing::from_json(&a["pricing"]);
    let model = || a["model"].as_str().expect("model is a string");
    Ok(match function {
        "text_tokens" => {
            let t = a["text"]
                .as_str()
                .ok_or_else(|| invalid("text must be a string"))?;
            json!(tokens::text_tokens(t))
        }
        "prompt_tokens" => json!(tokens::prompt_tokens(&a["request"])),
        "output_bound" => json!(tokens::output_bound(
            &a["request"],
            opt_count(a, "default")?
        )?),
        "lookup_price" => {
            let Pricing::Table(t) = pricing()? else {
                return Err(invalid("unit TOKENS has no price table"));
            };
            let (m, p) = t.lookup(model())?;
            let m = match m {
                Matched::Entry(k) => json!(k),
                Matched::Default => Value::Null,
            };
            json!({"matched": m, "input_per_mtok": p.input_per_mtok, "output_per_mtok": p.output_per_mtok})
        }
        "cost" => amount_out(&pricing()?.cost(
            model(),
            count(&a["input_tokens"], "input_tokens")?,
            count(&a["output_tokens"], "output_tokens")?,
        )?),
        "estimate" => amount_out(&charge::estimate(
            &pricing()?,
            model(),
            count(&a["prompt_tokens"], "prompt_tokens")?,
            count(&a["output_bound"], "output_bound")?,
        )?),
        "estimate_request" => {
            let e = charge::estimate_request(
                &pricing()?,
                model(),
                &a["request"],
                opt_count(a, "default_output_bound")?,
            )?;
            json!({"prompt_tokens": e.prompt_tokens, "output_bound": e.output_bound, "amount": amount_out(&e.amount)})
        }
        "actual" => {
            let u = &a["usage"];
            let usage = Usage {
                input_tokens: opt_count(u, "input_tokens")?,
                output_tokens: opt_count(u, "output_tokens")?,
            };
            charge::actual(&pricing()?, model(), usage)?.map_or(Value::Null, |x| amount_out(&x))
        }
        "settlement" => {
            let actual = match &a["actual"] {
                Value::Null => None,
                v => Some(amount_in(v, "actual")?),
            };
            let estimate = amount_in(&a["estimate"], "estimate")?;
            match charge::settlement(actual, a["call_succeeded"].as_bool().unwrap(), &estimate) {
                Settlement::Commit(x) => json!({"action": "commit", "amount": amount_out(&x)}),
                Settlement::Release => json!({"action": "release"}),
            }
        }
        "lower_bound" => {
            let c = caps::lower_bound(opt_count(a, "bound")?, &caps_of(a))?;
            json!({"bound": c.bound, "changed": c.changed})
        }
        "tool_allowed" => json!(caps::tool_allowed(a["name"].as_str().unwrap(), &caps_of(a))),
        "filter_tools" => {
            let tools: Vec<String> = serde_json::from_value(a["tools"].clone()).unwrap();
            let f = caps::filter_tools(&tools, &caps_of(a));
            json!({"allowed": f.allowed, "removed": f.removed})
        }
        other => panic!("unknown function {other} in the vectors"),
    })
}

#[test]
fn every_pricing_vector() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../conformance/vectors/pricing.json"
    );
    let text = std::fs::read_to_string(path).expect("conformance/vectors/pricing.json must exist");
    let doc: Value = serde_json::from_str(&text).expect("vectors are JSON");
    assert_eq!(doc["format"], "cycles-pricing-vectors");
    assert_eq!(doc["version"], 1);
    let functions = doc["functions"].as_object().expect("functions");
    let mut names: Vec<&str> = functions.keys().map(String::as_str).collect();
    names.sort_unstable();
    let mut expected = FUNCTIONS.to_vec();
    expected.sort_unstable();
    assert_eq!(names, expected, "the vectors' functions");
    let mut ran = 0;
    for (function, cases) in functions {
        let cases = cases.as_array().expect("cases");
        assert!(!cases.is_empty(), "{function} has no cases");
        for case in cases {
            let name = case["name"].as_str().expect("name");
            let got = run(function, &case["input"]);
            match (case.get("expect"), case.get("error")) {
                (Some(expect), None) => {
                    let got = got.unwrap_or_else(|e| panic!("{function} {name}: {e:?}"));
                    assert_eq!(&got, expect, "{function} {name}");
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
    assert!(ran >= 100, "only {ran} vectors ran");
}

mod properties {
    use cycles_core::pricing::caps::lower_bound;
    use cycles_core::pricing::Price;
    use cycles_core::Caps;
    use proptest::prelude::*;

    proptest! {
        /// One rounding up per call: never under the exact cost, under it plus one unit.
        #[test]
        fn cost_is_the_exact_cost_rounded_up(
            input in 0u64..1 << 40, output in 0u64..1 << 40,
            pi in 0u64..1 << 34, po in 0u64..1 << 34,
        ) {
            let p = Price { input_per_mtok: pi, output_per_mtok: po };
            let exact = u128::from(input) * u128::from(pi) + u128::from(output) * u128::from(po);
            match p.cost(input, output) {
                Ok(c) => {
                    let scaled = u128::try_from(c).unwrap() * 1_000_000;
                    prop_assert!(scaled >= exact && scaled < exact + 1_000_000);
                }
                Err(_) => prop_assert!(exact.div_ceil(1_000_000) > i64::MAX as u128),
            }
        }

        /// Caps only ever lower a bound, and `changed` is exactly "differs".
        #[test]
        fn caps_never_raise_the_bound(bound in proptest::option::of(0u64..1 << 40), cap in proptest::option::of(0i64..1 << 40)) {
            let caps = Caps { max_tokens: cap, ..Caps::default() };
            let c = lower_bound(bound, &caps).unwrap();
            if let (Some(b), Some(l)) = (bound, c.bound) {
                prop_assert!(l <= b);
            }
            prop_assert_eq!(c.changed, c.bound != bound);
            prop_assert!(c.bound.is_some() || (bound.is_none() && cap.is_none()));
        }
    }
}
