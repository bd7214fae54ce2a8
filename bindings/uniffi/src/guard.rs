//! `Guard`: one running guarded action (the bridge's `Active`): its facts, the usage the
//! work reports, the caps rewrite, and phase two (finish or release). A guard dropped
//! unfinished is finished by core's drop (known usage settled, else released).

use cycles_bridge::Active;

use crate::error::{ffi, Result};
use crate::work::run_ok;

/// A running guarded action.
#[derive(uniffi::Object)]
pub struct Guard {
    active: Active,
}

impl Guard {
    pub(crate) fn new(active: Active) -> Guard {
        Guard { active }
    }
}

#[uniffi::export]
impl Guard {
    /// The reservation's id.
    pub fn reservation_id(&self) -> String {
        self.active.reservation_id().to_string()
    }

    /// The unit of the estimate and of every actual.
    pub fn unit(&self) -> String {
        self.active.unit().to_string()
    }

    /// The server's decision: `ALLOW` or `ALLOW_WITH_CAPS`.
    pub fn decision(&self) -> String {
        self.active.decision().to_string()
    }

    /// The caps under `ALLOW_WITH_CAPS` as the spec's `Caps` JSON; none otherwise.
    pub fn caps_json(&self) -> Option<String> {
        self.active.caps_json().map(str::to_string)
    }

    /// Sets the actual amount (replaces what was reported).
    pub fn set_actual(&self, amount: i64) -> Result<()> {
        ffi(|| Ok(self.active.usage().set_actual(amount)?))
    }

    /// Adds to the actual amount (streaming usage).
    pub fn add(&self, amount: i64) -> Result<()> {
        ffi(|| Ok(self.active.usage().add(amount)?))
    }

    /// The actual reported so far; none when nothing was.
    pub fn actual(&self) -> Option<i64> {
        self.active.usage().actual()
    }

    /// Sets the commit's metrics (`StandardMetrics` JSON).
    pub fn set_metrics_json(&self, json: String) -> Result<()> {
        ffi(|| Ok(self.active.usage().set_metrics_json(&json)?))
    }

    /// Sets the commit's metadata (a JSON object, sent exactly as given).
    pub fn set_metadata_json(&self, json: String) -> Result<()> {
        ffi(|| Ok(self.active.usage().set_metadata_json(&json)?))
    }

    /// Whether the heartbeat cancelled the work (policy `cancel`).
    pub fn is_cancelled(&self) -> bool {
        self.active.usage().cancellation().is_cancelled()
    }

    /// Whether phase two (finish or release) was called.
    pub fn is_finished(&self) -> bool {
        self.active.is_finished()
    }

    /// The caps rewrite of a provider request (`api`: `chat_completions`, `responses`,
    /// `messages`; the request's JSON): the plan's JSON. A rewrite is reported as the
    /// `caps_applied` event.
    pub fn plan_caps(&self, api: String, request_json: String) -> Result<String> {
        ffi(|| self.active.plan_caps(&api, &request_json))
    }

    /// Ends the action early and gives the estimate back: the finished JSON (outcome
    /// `released`). INVALID_ARGUMENT, the action left running, once usage was reported.
    pub async fn release(&self, reason: Option<String>) -> Result<String> {
        let work = ffi(|| self.active.release(reason))?;
        run_ok(work).await
    }

    /// Phase two: settle the known usage (journal first) or release; the finished JSON
    /// (docs/bindings.md). INVALID_ARGUMENT when already finished.
    pub async fn finish(&self, work_succeeded: bool) -> Result<String> {
        let work = ffi(|| self.active.finish(work_succeeded))?;
        run_ok(work).await
    }
}
