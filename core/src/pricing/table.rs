//! The price table: model name -> input and output price, in the budget's unit.
//!
//! Rules:
//! - Prices are integers **per million tokens** in the budget's unit (`input_per_mtok`,
//!   `output_per_mtok`). Providers quote per million tokens, and in `USD_MICROCENTS` (10^8 per
//!   USD) every list price is then an exact integer: $2.50 / 1M is `250_000_000`, $0.075 / 1M is
//!   `7_500_000`; a per-token integer could not say $0.075 / 1M (7.5 microcents a token).
//! - `cost = ceil((input_tokens × input_per_mtok + output_tokens × output_per_mtok) / 10^6)`:
//!   exact integer arithmetic, ONE rounding up per call (never per token, so a call is
//!   overcharged by less than one unit, and never undercharged). A result beyond the wire's
//!   int64 is INVALID_ARGUMENT, never wrapped or saturated.
//! - Unit `TOKENS` needs no table: `cost = input_tokens + output_tokens`.
//! - Lookup of a model name, first match wins:
//!   1. the entry named exactly so;
//!   2. a dated id's undated name: `gpt-4o-2024-08-06` -> `gpt-4o` (suffix `-YYYY-MM-DD`),
//!      `claude-3-5-sonnet-20241022` -> `claude-3-5-sonnet` (suffix `-YYYYMMDD`), exactly;
//!   3. the longest pattern entry `P*` whose `P` the name starts with (`ft:gpt-4o*`);
//!   4. the table's `default`;
//!   5. otherwise INVALID_ARGUMENT (an unknown model is never free).
//!
//!   Names are case-sensitive. Rule 2 is a strict suffix rule, not a general prefix
//!   match, so `gpt-4o-mini` never falls back to `gpt-4o`'s price.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{json_reason, Error};
use crate::model::{Amount, Unit};

/// Tokens per price quantum: prices are per million tokens.
pub const TOKENS_PER_PRICE: u128 = 1_000_000;

/// One model's price in the budget's unit per million tokens.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    /// Price of one million input (prompt) tokens.
    pub input_per_mtok: u64,
    /// Price of one million output (completion) tokens.
    pub output_per_mtok: u64,
}

impl Price {
    /// `ceil((input × input_per_mtok + output × output_per_mtok) / 10^6)`, checked against
    /// int64.
    pub fn cost(&self, input_tokens: u64, output_tokens: u64) -> Result<i64, Error> {
        let input = u128::from(input_tokens) * u128::from(self.input_per_mtok);
        let output = u128::from(output_tokens) * u128::from(self.output_per_mtok);
        let total = input
            .checked_add(output)
            .map(|t| t.div_ceil(TOKENS_PER_PRICE))
            .and_then(|t| i64::try_from(t).ok());
        total.ok_or_else(|| overflow(input_tokens, output_tokens))
    }
}

fn overflow(input_tokens: u64, output_tokens: u64) -> Error {
    Error::invalid_argument(format!(
        "cost of {input_tokens} input and {output_tokens} output tokens overflows int64"
    ))
}

/// Where a lookup found a price.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Matched {
    /// An entry (exact, undated or pattern): its key in the table.
    Entry(String),
    /// The table's default.
    Default,
}

/// A price table in one unit (not `TOKENS`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PriceTable {
    unit: Unit,
    models: BTreeMap<String, Price>,
    default: Option<Price>,
}

/// The undated name of a dated model id (`-YYYYMMDD` or `-YYYY-MM-DD` suffix), if it is one.
pub fn undated(model: &str) -> Option<&str> {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if let Some((base, date)) = model.rsplit_once('-') {
        if !base.is_empty() && date.len() == 8 && digits(date) {
            return Some(base);
        }
    }
    let cut = model.len().checked_sub(11)?;
    let (base, tail) = (model.get(..cut)?, model.get(cut..)?);
    // Bytes, not str slices: a non-ASCII tail must not split a character.
    let b = tail.as_bytes();
    let all_digits = |r: &[u8]| r.iter().all(u8::is_ascii_digit);
    let dashed = b[0] == b'-'
        && b[5] == b'-'
        && b[8] == b'-'
        && all_digits(&b[1..5])
        && all_digits(&b[6..8])
        && all_digits(&b[9..]);
    (dashed && !base.is_empty()).then_some(base)
}

impl PriceTable {
    /// A table in `unit`; entries ending in `*` are patterns. Refuses unit `TOKENS` (it needs
    /// no table) and an empty model name.
    pub fn new(
        unit: Unit,
        models: BTreeMap<String, Price>,
        default: Option<Price>,
    ) -> Result<PriceTable, Error> {
        if unit == Unit::Tokens {
            return Err(Error::invalid_argument(
                "unit TOKENS needs no price table (cost = tokens); give only {\"unit\": \"TOKENS\"}",
            ));
        }
        if models.keys().any(|k| k.is_empty()) {
            return Err(Error::invalid_argument(
                "a price table's model name must not be empty",
            ));
        }
        Ok(PriceTable {
            unit,
            models,
            default,
        })
    }

    /// The table's unit.
    pub fn unit(&self) -> &Unit {
        &self.unit
    }

    /// The price of `model` by the lookup rules of the module doc.
    pub fn lookup(&self, model: &str) -> Result<(Matched, Price), Error> {
        let entry = |k: &str| {
            self.models
                .get(k)
                .map(|p| (Matched::Entry(k.to_string()), *p))
        };
        if let Some(found) = entry(model).or_else(|| undated(model).and_then(entry)) {
            return Ok(found);
        }
        let pattern = self
            .models
            .iter()
            .filter_map(|(k, p)| Some((k.strip_suffix('*')?, k, p)))
            .filter(|(prefix, _, _)| model.starts_with(prefix))
            .max_by_key(|(prefix, _, _)| prefix.len());
        if let Some((_, k, p)) = pattern {
            return Ok((Matched::Entry(k.clone()), *p));
        }
        match self.default {
            Some(p) => Ok((Matched::Default, p)),
            None => Err(Error::invalid_argument(format!(
                "no price for model {model:?}: no entry matches and the table has no default"
            ))),
        }
    }
}

/// How a budget's unit prices tokens: `TOKENS` (cost = tokens) or a table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Pricing {
    /// Unit `TOKENS`: `cost = input_tokens + output_tokens`.
    Tokens,
    /// Any other unit: by the table.
    Table(PriceTable),
}

/// The JSON form: `{"unit": "TOKENS"}` or `{"unit", "models": {name: Price}, "default"?}`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PricingJson {
    unit: Unit,
    #[serde(default)]
    models: Option<BTreeMap<String, Price>>,
    #[serde(default)]
    default: Option<Price>,
}

impl Pricing {
    /// Reads the JSON form (`{"unit": "TOKENS"}`, or `unit`, `models` and an optional
    /// `default`); unknown members, negative or fractional prices are INVALID_ARGUMENT.
    pub fn from_json(v: &Value) -> Result<Pricing, Error> {
        let p = PricingJson::deserialize(v)
            .map_err(|e| Error::invalid_argument(format!("pricing: {}", json_reason(&e))))?;
        if p.unit == Unit::Tokens {
            if p.models.is_some() || p.default.is_some() {
                return Err(Error::invalid_argument(
                    "pricing: unit TOKENS needs no price table (cost = tokens); remove models and default",
                ));
            }
            return Ok(Pricing::Tokens);
        }
        if p.models.is_none() && p.default.is_none() {
            return Err(Error::invalid_argument(format!(
                "pricing: unit {} needs models or a default price",
                p.unit.as_str()
            )));
        }
        PriceTable::new(p.unit, p.models.unwrap_or_default(), p.default).map(Pricing::Table)
    }

    /// The unit amounts are in.
    pub fn unit(&self) -> Unit {
        match self {
            Pricing::Tokens => Unit::Tokens,
            Pricing::Table(t) => t.unit.clone(),
        }
    }

    /// The cost of a call to `model` of `input_tokens` and `output_tokens`.
    pub fn cost(
        &self,
        model: &str,
        input_tokens: u64,
        output_tokens: u64,
    ) -> Result<Amount, Error> {
        let amount = match self {
            Pricing::Tokens => input_tokens
                .checked_add(output_tokens)
                .and_then(|t| i64::try_from(t).ok())
                .ok_or_else(|| overflow(input_tokens, output_tokens))?,
            Pricing::Table(t) => t.lookup(model)?.1.cost(input_tokens, output_tokens)?,
        };
        Ok(Amount::new(self.unit(), amount))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn table() -> Pricing {
        Pricing::from_json(&json!({"unit": "USD_MICROCENTS", "models": {
            "gpt-4o": {"input_per_mtok": 250_000_000, "output_per_mtok": 1_000_000_000},
            "gpt-4o-mini": {"input_per_mtok": 15_000_000, "output_per_mtok": 60_000_000},
            "ft:gpt-4o*": {"input_per_mtok": 1, "output_per_mtok": 2},
            "ft:*": {"input_per_mtok": 3, "output_per_mtok": 4}
        }}))
        .unwrap()
    }

    #[test]
    fn cost_rounds_up_once_per_call() {
        let p = Price {
            input_per_mtok: 7_500_000,
            output_per_mtok: 0,
        };
        assert_eq!(p.cost(1, 0).unwrap(), 8); // 7.5 -> 8
        assert_eq!(p.cost(2, 0).unwrap(), 15); // exact
        assert_eq!(p.cost(0, 0).unwrap(), 0);
        let huge = Price {
            input_per_mtok: u64::MAX,
            output_per_mtok: u64::MAX,
        };
        assert!(huge
            .cost(u64::MAX, u64::MAX)
            .unwrap_err()
            .message()
            .contains("overflows int64"));
    }

    #[test]
    fn lookup_exact_then_undated_then_pattern() {
        let Pricing::Table(t) = table() else { panic!() };
        let key = |m: &str| match t.lookup(m) {
            Ok((Matched::Entry(k), _)) => k,
            other => panic!("{other:?}"),
        };
        assert_eq!(key("gpt-4o-2024-08-06"), "gpt-4o");
        assert_eq!(key("gpt-4o-mini-2024-07-18"), "gpt-4o-mini");
        assert_eq!(key("ft:gpt-4o-mini:org::abc"), "ft:gpt-4o*");
        assert_eq!(key("ft:other"), "ft:*");
        assert!(t
            .lookup("gpt-4o-turbo")
            .unwrap_err()
            .message()
            .contains("no default"));
        assert_eq!(
            undated("claude-3-5-sonnet-20241022"),
            Some("claude-3-5-sonnet")
        );
        assert_eq!(undated("gpt-4o"), None);
        assert_eq!(undated("-2024-08-06"), None);
        assert_eq!(undated("x-2024-0806"), None);
        assert_eq!(undated("m-日本語"), None);
        // The date would begin inside "é": not split, not dated.
        assert_eq!(undated("gpt-é2024-08-06"), None);
        assert_eq!(undated("gpt-4o-2024-08-06"), Some("gpt-4o"));
    }

    #[test]
    fn tokens_needs_no_table_and_refuses_one() {
        let p = Pricing::from_json(&json!({"unit": "TOKENS"})).unwrap();
        assert_eq!(p.cost("any", 3, 4).unwrap(), Amount::new(Unit::Tokens, 7));
        assert!(Pricing::from_json(&json!({"unit": "TOKENS", "models": {}})).is_err());
        let e = Pricing::from_json(
            &json!({"unit": "CREDITS", "models": {"m": {"input_per_mtok": -1, "output_per_mtok": 0}}}),
        );
        assert!(e
            .unwrap_err()
            .message()
            .starts_with("pricing: invalid value"));
    }
}
