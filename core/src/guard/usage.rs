//! [`Usage`]: how guarded work reports what it really cost, once or as it streams.

use std::sync::{Arc, Mutex};

use crate::error::Error;
use crate::lease::CancellationToken;
use crate::model::{JsonObject, Metadata, StandardMetrics};

#[derive(Debug, Default)]
struct State {
    actual: Option<i64>,
    metrics: Option<StandardMetrics>,
    metadata: Option<JsonObject>,
    /// Taken for the settlement (or the release): later reports would not be sent.
    taken: bool,
}

/// Why a report after the action ended is refused.
const LATE: &str = "the guarded action has finished: usage reported after it would not be \
                    settled (report the actual before the action ends)";

/// Handed to the guarded work. The work reports its actual amount with [`Usage::set_actual`],
/// or accumulates it with [`Usage::add`] while a stream runs; whatever is known when the work
/// ends (even if it fails) is what gets settled. Cheap to clone and `Send`.
///
/// Once the action has ended (its usage taken for the settlement or the release) every
/// report is refused with `INVALID_ARGUMENT` instead of being dropped unseen: it would not
/// be settled.
#[derive(Clone, Debug)]
pub struct Usage {
    state: Arc<Mutex<State>>,
    cancel: CancellationToken,
}

impl Usage {
    pub(super) fn new(cancel: CancellationToken) -> Usage {
        Usage {
            state: Arc::new(Mutex::new(State::default())),
            cancel,
        }
    }

    fn with<R>(&self, f: impl FnOnce(&mut State) -> R) -> R {
        // A poisoned lock only means another holder panicked mid-update; the numbers are
        // still the best knowledge we have, and a known actual must never be dropped.
        let mut guard = self.state.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut guard)
    }

    /// Applies one report, unless the usage was already taken.
    fn report(&self, f: impl FnOnce(&mut State)) -> Result<(), Error> {
        self.with(|s| {
            if s.taken {
                return Err(Error::invalid_argument(LATE));
            }
            f(s);
            Ok(())
        })
    }

    /// Sets the actual amount (in the estimate's unit), replacing anything reported before.
    /// `INVALID_ARGUMENT` once the action has ended.
    pub fn set_actual(&self, amount: i64) -> Result<(), Error> {
        self.report(|s| s.actual = Some(amount))
    }

    /// Adds to the actual amount (streaming); the first call starts from zero.
    /// `INVALID_ARGUMENT` once the action has ended.
    pub fn add(&self, amount: i64) -> Result<(), Error> {
        self.report(|s| s.actual = Some(s.actual.unwrap_or(0).saturating_add(amount)))
    }

    /// The actual amount known so far, if any.
    pub fn actual(&self) -> Option<i64> {
        self.with(|s| s.actual)
    }

    /// Metrics sent with the commit (and with the event fallback). `INVALID_ARGUMENT` once
    /// the action has ended.
    pub fn set_metrics(&self, metrics: StandardMetrics) -> Result<(), Error> {
        self.report(|s| s.metrics = Some(metrics))
    }

    /// Metrics from JSON text (a `StandardMetrics` object). `custom` is kept exactly as
    /// written (see [`JsonObject`]); bad input is `InvalidArgument` and changes nothing.
    pub fn set_metrics_json(&self, json: &str) -> Result<(), Error> {
        let metrics: StandardMetrics = serde_json::from_str(json).map_err(|e| {
            Error::invalid_argument(format!("metrics: {}", crate::error::json_reason(&e)))
        })?;
        self.set_metrics(metrics)
    }

    /// Commit-time metadata. `INVALID_ARGUMENT` once the action has ended.
    pub fn set_metadata(&self, metadata: Metadata) -> Result<(), Error> {
        self.set_metadata_exact(JsonObject::from(metadata))
    }

    /// Commit-time metadata kept exactly as given: numbers of any size and spelling, key
    /// order, unpaired-surrogate escapes. `INVALID_ARGUMENT` once the action has ended.
    pub fn set_metadata_exact(&self, metadata: JsonObject) -> Result<(), Error> {
        self.report(|s| s.metadata = Some(metadata))
    }

    /// Commit-time metadata from JSON text (one object), kept exactly as written; bad input
    /// is `InvalidArgument` and changes nothing.
    pub fn set_metadata_json(&self, json: &str) -> Result<(), Error> {
        let m = JsonObject::parse(json)
            .map_err(|e| Error::invalid_argument(format!("metadata: {}", e.message())))?;
        self.set_metadata_exact(m)
    }

    /// Cancelled when the heartbeat stops abnormally under
    /// [`FailurePolicy::Cancel`](crate::lease::FailurePolicy::Cancel): long work should
    /// `select!` on `usage.cancellation().cancelled()`.
    pub fn cancellation(&self) -> CancellationToken {
        self.cancel.clone()
    }

    /// What the settlement sends; every later report is refused.
    pub(super) fn take(&self) -> (Option<i64>, Option<StandardMetrics>, Option<JsonObject>) {
        self.with(|s| {
            s.taken = true;
            (s.actual, s.metrics.take(), s.metadata.take())
        })
    }
}
