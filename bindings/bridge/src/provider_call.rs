//! One guarded provider call for hosts: core's [`Meter`] with the pricing it is priced by,
//! reporting each grown actual straight to the running action's [`Usage`], and
//! [`Active::finish_call`] ending the action by core's settlement rule. An integration then
//! crosses into core once per step (the estimate, each body or stream event, the end) and
//! carries no usage, actual or settlement JSON between them (docs/benchmarks.md,
//! "Integrations": those crossings were a measured share of a guard's cost).

use std::sync::{Arc, Mutex, MutexGuard};

use cycles_core::guard::{Finished, Usage};
use cycles_core::pricing::{charge, Api, Meter, Pricing, Reading, Settlement};
use cycles_core::{Amount, Error};

use crate::error::ErrorFields;
use crate::lifecycle::Active;
use crate::pricing_json::parse_text_tokens;
use crate::task::Work;
use crate::timing_json::parse;

/// A provider call's meter and its pricing (shared by every call of one guard).
pub struct ProviderCall {
    pricing: Arc<Pricing>,
    meter: Mutex<Meter>,
}

impl ProviderCall {
    /// A call whose estimate is core's of its request body (`charge::estimate_request`: the
    /// prompt estimate, or a host tokenizer's counts of its texts, `text_tokens_json`, plus
    /// the output bound or `default_output_bound`). `api` is a wire name
    /// (`chat_completions`, `responses`, `messages`); INVALID_ARGUMENT for a bad name,
    /// request or counts, or when there is no bound.
    pub fn for_request(
        pricing: Arc<Pricing>,
        api: &str,
        model: &str,
        request_json: &str,
        default_output_bound: Option<u64>,
        text_tokens_json: Option<&str>,
    ) -> Result<ProviderCall, Error> {
        let api = Api::parse(api)?;
        let request = parse(request_json, "the request")?;
        let counts = text_tokens_json.map(parse_text_tokens).transpose()?;
        let e = charge::estimate_request(
            &pricing,
            model,
            &request,
            default_output_bound,
            counts.as_deref(),
        )?;
        Ok(ProviderCall::new(pricing, api, model, e.amount))
    }

    /// A call reserving `estimate` (the caller's own, in the pricing's unit).
    pub fn with_estimate(
        pricing: Arc<Pricing>,
        api: &str,
        model: &str,
        estimate: Amount,
    ) -> Result<ProviderCall, Error> {
        let api = Api::parse(api)?;
        let unit = pricing.unit();
        if estimate.unit != unit {
            return Err(Error::invalid_argument(format!(
                "the estimate's unit {} differs from the pricing's {}",
                estimate.unit.as_str(),
                unit.as_str()
            )));
        }
        if estimate.amount < 0 {
            return Err(Error::invalid_argument("the estimate must be non-negative"));
        }
        Ok(ProviderCall::new(pricing, api, model, estimate))
    }

    fn new(pricing: Arc<Pricing>, api: Api, model: &str, estimate: Amount) -> ProviderCall {
        ProviderCall {
            pricing,
            meter: Mutex::new(Meter::new(api, model, estimate)),
        }
    }

    fn meter(&self) -> MutexGuard<'_, Meter> {
        self.meter.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Reads the bodies and events that follow as `api`'s (core's `Meter::read_as`).
    pub fn read_as(&self, api: &str) -> Result<(), Error> {
        let api = Api::parse(api)?;
        self.meter().read_as(api);
        Ok(())
    }

    /// The amount to reserve.
    pub fn estimate(&self) -> Amount {
        self.meter().estimate().clone()
    }

    /// Folds one response body or stream event (JSON text, as the provider sent it or as the
    /// host library decoded it) and reports a grown actual to `report` (the action's usage).
    /// Returns whether a body said the call failed so far.
    /// Only the members core's rules read are decoded (`Reading::of_text`); text that read
    /// refuses gets the document read's error.
    pub fn observe(&self, body_json: &str, report: &Usage) -> Result<bool, Error> {
        let reading = match Reading::of_text(body_json) {
            Ok(r) => r,
            Err(_) => Reading::of_value(&parse(body_json, "the response body")?),
        };
        let mut m = self.meter();
        if let Some(a) = m.observe_reading(&self.pricing, &reading)? {
            report.set_actual(a.amount)?;
        }
        Ok(m.failed())
    }

    /// Takes `usage` as the usage so far (a library that reports the counts itself) and
    /// reports a changed actual to `report`.
    pub fn take_usage(&self, usage: charge::Usage, report: &Usage) -> Result<(), Error> {
        if let Some(a) = self.meter().take_usage(&self.pricing, usage)? {
            report.set_actual(a.amount)?;
        }
        Ok(())
    }

    fn settlement(&self, raised: bool) -> Settlement {
        self.meter().settlement(raised)
    }
}

impl Active {
    /// Ends the action a provider call ran in by core's settlement rule
    /// (`charge::settlement` of the call's actual; a call that raised or whose body said it
    /// failed counts as failed): an actual is committed (also when the call then failed), no
    /// actual and the call failed releases, no actual and the call succeeded commits the
    /// estimate. `work_succeeded` is whether the host's call returned (false: it raised, and
    /// the host rethrows its exception). The output is the finished JSON, as
    /// [`Active::finish`]'s; a failed call that did not raise ends `released`. An actual the
    /// action holds from elsewhere is never dropped: it is committed instead of a release.
    pub fn finish_call(
        &self,
        call: &ProviderCall,
        work_succeeded: bool,
    ) -> Result<Work<String>, ErrorFields> {
        self.finish_call_report(call, work_succeeded)
            .map(crate::lifecycle::as_text)
    }

    /// [`Active::finish_call`] with core's `Finished` as the output (see
    /// [`Active::finish_report`]).
    pub fn finish_call_report(
        &self,
        call: &ProviderCall,
        work_succeeded: bool,
    ) -> Result<Work<Finished>, ErrorFields> {
        match call.settlement(!work_succeeded) {
            Settlement::Commit(a) => {
                if a.unit.as_str() != self.unit() {
                    return Err(ErrorFields::invalid(format!(
                        "the call's unit {} differs from the reservation's {}",
                        a.unit.as_str(),
                        self.unit()
                    )));
                }
                if self.usage().actual() != Some(a.amount) {
                    self.usage().set_actual(a.amount)?;
                }
                self.finish_report(work_succeeded)
            }
            Settlement::Release if work_succeeded && self.usage().actual().is_none() => {
                self.release_report(None)
            }
            Settlement::Release => self.finish_report(work_succeeded),
        }
    }
}
