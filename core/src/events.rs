//! The one event stream of core: every heartbeat outcome (and, later, retries, quarantines and
//! settlements) is an [`Event`], delivered to an optional host callback and always to the
//! `tracing` crate, so bindings forward a single channel to their host's logging.

use std::fmt;
use std::sync::Arc;

use crate::timing::{Millis, StopReason};

/// Which heartbeat algorithm scheduled a lease.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HeartbeatPath {
    /// NORMATIVE: the server returned `remaining_ttl_ms`.
    Primary,
    /// NON-NORMATIVE fallback for servers without `remaining_ttl_ms`.
    Fallback,
}

/// What the heartbeat does after a failure.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Disposition {
    /// Retry with the SAME idempotency key after `delay`.
    RetryAfter {
        /// Delay before the retry.
        delay: Millis,
    },
    /// The heartbeat stopped.
    Stopped(StopReason),
}

/// Why a heartbeat ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HeartbeatEnd {
    /// The guarded work finished and the heartbeat was stopped by its owner.
    Finished,
    /// The planner stopped it (see the reason); the lease may lapse.
    Stopped(StopReason),
}

/// One observable thing that happened in core.
#[derive(Clone, Debug)]
pub enum Event {
    /// A schema-valid extend success and the next scheduled beat.
    HeartbeatExtended {
        /// The reservation.
        reservation_id: String,
        /// Authoritative new expiry (server epoch ms).
        expires_at_ms: i64,
        /// The server's remaining lifetime observation, when it sent one.
        remaining_ttl_ms: Option<i64>,
        /// Delay until the next beat, from response receipt.
        next_delay: Millis,
        /// Algorithm in use.
        path: HeartbeatPath,
    },
    /// An extend attempt failed (transport, 5xx, 429, ambiguous 2xx or an error code).
    HeartbeatFailed {
        /// The reservation.
        reservation_id: String,
        /// Stable error name (`ErrorKind::name`).
        error_kind: &'static str,
        /// Human-readable error (never contains the API key).
        error: String,
        /// Retry with the same key after a delay, or stopped and why.
        disposition: Disposition,
    },
    /// The heartbeat ended.
    HeartbeatEnded {
        /// The reservation.
        reservation_id: String,
        /// Why.
        end: HeartbeatEnd,
        /// Successful extensions over the lease's life.
        extensions: u32,
    },
}

impl Event {
    /// The reservation the event is about.
    pub fn reservation_id(&self) -> &str {
        match self {
            Event::HeartbeatExtended { reservation_id, .. }
            | Event::HeartbeatFailed { reservation_id, .. }
            | Event::HeartbeatEnded { reservation_id, .. } => reservation_id,
        }
    }
}

impl fmt::Display for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Event::HeartbeatExtended { reservation_id, expires_at_ms, remaining_ttl_ms, next_delay, path } => write!(
                f,
                "heartbeat extended {reservation_id}: expires_at_ms {expires_at_ms}, remaining_ttl_ms {}, next beat in {next_delay} ({path:?})",
                remaining_ttl_ms.map_or("absent".to_string(), |v| v.to_string())
            ),
            Event::HeartbeatFailed { reservation_id, error_kind, error, disposition } => match disposition {
                Disposition::RetryAfter { delay } => write!(
                    f,
                    "heartbeat failure on {reservation_id}: {error_kind}: {error}; retrying with the same key in {delay}"
                ),
                Disposition::Stopped(reason) => write!(
                    f,
                    "heartbeat failure on {reservation_id}: {error_kind}: {error}; stopped: {reason:?}"
                ),
            },
            Event::HeartbeatEnded { reservation_id, end, extensions } => {
                write!(f, "heartbeat ended for {reservation_id} after {extensions} extension(s): {end:?}")
            }
        }
    }
}

/// Where events go: an optional host callback, plus `tracing` always. Cheap to clone.
///
/// The callback runs on a runtime worker; it must be quick and must not block. Core never
/// calls it while holding a lock (binding rule 6).
#[derive(Clone, Default)]
pub struct EventSink {
    callback: Option<Callback>,
}

/// A host callback receiving every event.
pub type Callback = Arc<dyn Fn(&Event) + Send + Sync>;

impl fmt::Debug for EventSink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EventSink")
            .field("callback", &self.callback.is_some())
            .finish()
    }
}

impl EventSink {
    /// Events go to `tracing` only.
    pub fn tracing_only() -> EventSink {
        EventSink { callback: None }
    }

    /// Events go to `callback` and to `tracing`.
    pub fn with_callback(callback: impl Fn(&Event) + Send + Sync + 'static) -> EventSink {
        EventSink {
            callback: Some(Arc::new(callback)),
        }
    }

    /// Delivers one event.
    pub fn emit(&self, event: Event) {
        match &event {
            Event::HeartbeatFailed {
                reservation_id,
                error_kind,
                disposition,
                ..
            } => match disposition {
                Disposition::Stopped(_) => {
                    tracing::error!(target: "cycles::heartbeat", reservation_id = %reservation_id, error_kind, "{event}")
                }
                Disposition::RetryAfter { .. } => {
                    tracing::warn!(target: "cycles::heartbeat", reservation_id = %reservation_id, error_kind, "{event}")
                }
            },
            Event::HeartbeatEnded {
                reservation_id,
                end: HeartbeatEnd::Stopped(_),
                ..
            } => {
                tracing::warn!(target: "cycles::heartbeat", reservation_id = %reservation_id, "{event}")
            }
            _ => {
                tracing::debug!(target: "cycles::heartbeat", reservation_id = %event.reservation_id(), "{event}")
            }
        }
        if let Some(cb) = &self.callback {
            // A panicking host callback must not take the heartbeat down with it.
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| cb(&event)));
        }
    }
}
