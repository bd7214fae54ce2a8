//! One provider call metered from its estimate to its settlement: the usage folded body by
//! body (or stream event by event), whether a body said the call failed, the actual of what
//! was reported, and [`charge::settlement`] at the end. The same steps as the pure functions
//! ([`wire::usage_update`], [`wire::call_failed`], [`charge::actual`]) in the order an
//! integration applies them, with the state between them kept here, so a host crosses into
//! core once per step instead of carrying the usage through every crossing.

use serde_json::Value;

use super::charge::{self, Settlement, Usage};
use super::reading::Reading;
use super::table::Pricing;
use super::wire::{self, Api};
use crate::error::Error;
use crate::model::Amount;

/// A provider call's metering: created with the amount reserved for it.
#[derive(Clone, Debug)]
pub struct Meter {
    api: Api,
    model: String,
    estimate: Amount,
    usage: Usage,
    failed: bool,
    actual: Option<Amount>,
}

impl Meter {
    /// A call of `model` through `api`, `estimate` reserved for it (core's or the caller's).
    pub fn new(api: Api, model: impl Into<String>, estimate: Amount) -> Meter {
        Meter {
            api,
            model: model.into(),
            estimate,
            usage: Usage::default(),
            failed: false,
            actual: None,
        }
    }

    /// The provider API.
    pub fn api(&self) -> Api {
        self.api
    }

    /// Reads the bodies and events that follow as `api`'s (a library that converts one API's
    /// stream into another's, e.g. the Agents SDK's Responses events of any model).
    pub fn read_as(&mut self, api: Api) {
        self.api = api;
    }

    /// The model the call is priced as.
    pub fn model(&self) -> &str {
        &self.model
    }

    /// The amount reserved.
    pub fn estimate(&self) -> &Amount {
        &self.estimate
    }

    /// The usage reported so far.
    pub fn usage(&self) -> Usage {
        self.usage
    }

    /// Whether a body or event said the call failed ([`wire::call_failed`]).
    pub fn failed(&self) -> bool {
        self.failed
    }

    /// The actual of the usage so far (`None`: nothing reported).
    pub fn actual(&self) -> Option<&Amount> {
        self.actual.as_ref()
    }

    /// Folds one response body or stream event: its usage ([`wire::usage_update`]) and
    /// whether it says the call failed. Returns the new actual when the usage changed (to
    /// report to the reservation), `None` when it did not.
    pub fn observe(
        &mut self,
        pricing: &Pricing,
        body_or_event: &Value,
    ) -> Result<Option<Amount>, Error> {
        self.observe_reading(pricing, &Reading::of_value(body_or_event))
    }

    /// [`Meter::observe`] of what a body or event says, however it was read (e.g.
    /// [`Reading::of_text`], which skips all but the members the rules read).
    pub fn observe_reading(
        &mut self,
        pricing: &Pricing,
        reading: &Reading,
    ) -> Result<Option<Amount>, Error> {
        if wire::failed_in(self.api, reading) {
            self.failed = true;
        }
        let usage = wire::usage_in(self.api, self.usage, reading);
        self.take_usage(pricing, usage)
    }

    /// Takes `usage` as the usage so far (a library that reports the counts itself). Returns
    /// the new actual when it changed, as [`Meter::observe`].
    pub fn take_usage(&mut self, pricing: &Pricing, usage: Usage) -> Result<Option<Amount>, Error> {
        if usage == self.usage {
            return Ok(None);
        }
        let actual = charge::actual(pricing, &self.model, usage)?;
        self.usage = usage;
        self.actual = actual.clone();
        Ok(actual)
    }

    /// How the call ends ([`charge::settlement`]): `raised` when the call raised; a body that
    /// said the call failed counts as failed too.
    pub fn settlement(&self, raised: bool) -> Settlement {
        charge::settlement(self.actual.clone(), !raised && !self.failed, &self.estimate)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Unit;
    use serde_json::json;

    fn tokens(n: i64) -> Amount {
        Amount::new(Unit::Tokens, n)
    }

    #[test]
    fn a_stream_reports_each_growth_once_and_commits_what_was_reported() {
        let p = Pricing::Tokens;
        let mut m = Meter::new(Api::Messages, "claude", tokens(100));
        let start = json!({"type": "message_start", "message": {"usage": {"input_tokens": 7, "output_tokens": 1}}});
        assert_eq!(m.observe(&p, &start).unwrap(), Some(tokens(8)));
        assert_eq!(m.observe(&p, &json!({"type": "ping"})).unwrap(), None);
        let delta = json!({"type": "message_delta", "usage": {"output_tokens": 20}});
        assert_eq!(m.observe(&p, &delta).unwrap(), Some(tokens(27)));
        assert_eq!(m.settlement(false), Settlement::Commit(tokens(27)));
        // Raised after usage: what was reported is still committed.
        assert_eq!(m.settlement(true), Settlement::Commit(tokens(27)));
    }

    #[test]
    fn no_usage_commits_the_estimate_unless_the_call_failed() {
        let p = Pricing::Tokens;
        let mut m = Meter::new(Api::Responses, "gpt", tokens(100));
        assert_eq!(m.settlement(false), Settlement::Commit(tokens(100)));
        assert_eq!(m.settlement(true), Settlement::Release);
        assert_eq!(m.observe(&p, &json!({"type": "error"})).unwrap(), None);
        assert!(m.failed());
        assert_eq!(m.settlement(false), Settlement::Release);
    }

    #[test]
    fn events_read_as_another_api_after_read_as() {
        let p = Pricing::Tokens;
        let mut m = Meter::new(Api::ChatCompletions, "gpt", tokens(100));
        let done = json!({"type": "response.completed", "response": {"usage": {"input_tokens": 5, "output_tokens": 6}}});
        assert_eq!(
            m.observe(&p, &done).unwrap(),
            None,
            "not a chat completion's usage"
        );
        m.read_as(Api::Responses);
        assert_eq!(m.api(), Api::Responses);
        assert_eq!(m.observe(&p, &done).unwrap(), Some(tokens(11)));
    }

    #[test]
    fn usage_taken_as_counts_is_priced_once_per_change() {
        let p = Pricing::Tokens;
        let mut m = Meter::new(Api::ChatCompletions, "gpt", tokens(100));
        let u = Usage {
            input_tokens: Some(3),
            output_tokens: Some(4),
        };
        assert_eq!(m.take_usage(&p, u).unwrap(), Some(tokens(7)));
        assert_eq!(m.take_usage(&p, u).unwrap(), None);
        assert_eq!(m.usage(), u);
        assert_eq!(m.actual(), Some(&tokens(7)));
    }
}
