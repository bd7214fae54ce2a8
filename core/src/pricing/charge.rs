//! Estimate before the call, actual after it, and what to settle.
//!
//! Rules:
//! - `estimate = cost(model, prompt_tokens, output_bound)`: the prompt estimate (or a host's
//!   exact count) and the request's output bound before caps (the reservation is made before
//!   the decision is known), priced by [`Pricing::cost`]. A request with no output bound and
//!   no configured default cannot be estimated: INVALID_ARGUMENT.
//! - `actual = cost(model, usage.input_tokens, usage.output_tokens)` of what the provider
//!   REPORTED, and only that: a stream that breaks after reporting its input tokens (Anthropic's
//!   `message_start`) is charged those alone; an unreported half counts 0; nothing is guessed.
//!   Nothing reported at all is no actual (`None`).
//! - Settlement: an actual is committed; no actual and the call failed: release (the provider
//!   charged nothing we can see); no actual and the call succeeded (e.g. a Chat Completions
//!   stream without `stream_options.include_usage`): commit the estimate, the bound the caller
//!   accepted for work nobody measured.

use serde_json::Value;

use super::table::Pricing;
use super::tokens;
use crate::error::Error;
use crate::model::Amount;

/// The usage a provider reported; a half it did not report is `None`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    /// Input (prompt) tokens, e.g. `prompt_tokens` / `input_tokens`.
    pub input_tokens: Option<u64>,
    /// Output (completion) tokens, e.g. `completion_tokens` / `output_tokens`.
    pub output_tokens: Option<u64>,
}

/// `estimate = cost(model, prompt_tokens, output_bound)`.
pub fn estimate(
    pricing: &Pricing,
    model: &str,
    prompt_tokens: u64,
    output_bound: u64,
) -> Result<Amount, Error> {
    pricing.cost(model, prompt_tokens, output_bound)
}

/// Every figure of one request's estimate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestEstimate {
    /// [`tokens::prompt_tokens`] of the request.
    pub prompt_tokens: u64,
    /// [`tokens::output_bound`] of the request.
    pub output_bound: u64,
    /// The priced estimate.
    pub amount: Amount,
}

/// The estimate of a request body: its prompt estimate (or, given `text_tokens`, a host
/// tokenizer's counts of its texts: [`tokens::counted_prompt_tokens`]) and output bound (or
/// `default_output_bound`), priced.
pub fn estimate_request(
    pricing: &Pricing,
    model: &str,
    request: &Value,
    default_output_bound: Option<u64>,
    text_tokens: Option<&[Vec<u64>]>,
) -> Result<RequestEstimate, Error> {
    let output_bound = tokens::output_bound(request, default_output_bound)?.ok_or_else(|| {
        Error::invalid_argument(
            "the request has no output bound (max_tokens, max_completion_tokens or max_output_tokens) and no default is configured",
        )
    })?;
    let prompt_tokens = match text_tokens {
        Some(counts) => tokens::counted_prompt_tokens(request, counts)?,
        None => tokens::prompt_tokens(request),
    };
    let amount = estimate(pricing, model, prompt_tokens, output_bound)?;
    Ok(RequestEstimate {
        prompt_tokens,
        output_bound,
        amount,
    })
}

/// `actual = cost(model, reported input, reported output)`; `None` when nothing was reported.
pub fn actual(pricing: &Pricing, model: &str, usage: Usage) -> Result<Option<Amount>, Error> {
    if usage.input_tokens.is_none() && usage.output_tokens.is_none() {
        return Ok(None);
    }
    pricing
        .cost(
            model,
            usage.input_tokens.unwrap_or(0),
            usage.output_tokens.unwrap_or(0),
        )
        .map(Some)
}

/// What to do with the reservation once the call is over.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Settlement {
    /// Commit this actual.
    Commit(Amount),
    /// Release the reservation: nothing to charge.
    Release,
}

/// Commit the actual; without one, release a failed call and commit a succeeded call's
/// estimate.
pub fn settlement(actual: Option<Amount>, call_succeeded: bool, estimate: &Amount) -> Settlement {
    match actual {
        Some(a) => Settlement::Commit(a),
        None if call_succeeded => Settlement::Commit(estimate.clone()),
        None => Settlement::Release,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Unit;
    use serde_json::json;

    #[test]
    fn estimate_needs_a_bound_and_actual_only_what_was_reported() {
        let p = Pricing::Tokens;
        let req = json!({"messages": [{"role": "user", "content": "abcdefgh"}], "max_tokens": 10});
        let e = estimate_request(&p, "m", &req, None, None).unwrap();
        assert_eq!(
            (e.prompt_tokens, e.output_bound, e.amount.amount),
            (6, 10, 16)
        );
        assert!(estimate_request(&p, "m", &json!({}), None, None).is_err());
        assert_eq!(
            estimate_request(&p, "m", &json!({}), Some(3), None)
                .unwrap()
                .amount
                .amount,
            3
        );
        let half = Usage {
            input_tokens: Some(5),
            output_tokens: None,
        };
        assert_eq!(
            actual(&p, "m", half).unwrap(),
            Some(Amount::new(Unit::Tokens, 5))
        );
        assert_eq!(actual(&p, "m", Usage::default()).unwrap(), None);
        let est = Amount::new(Unit::Tokens, 16);
        assert_eq!(settlement(None, false, &est), Settlement::Release);
        assert_eq!(
            settlement(None, true, &est),
            Settlement::Commit(est.clone())
        );
    }
}
