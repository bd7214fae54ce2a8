//! Durable settlement: journal first, then commit with the ORIGINAL idempotency key.
//!
//! [`Settler::settle`] writes the pending settlement to the journal (fsync'd, before any
//! request can leave the process), then commits, retrying transient failures (timeout,
//! connect, reset, 5xx, ambiguous 2xx) with the same key under exponential backoff with jitter
//! ([`crate::timing::backoff`]). A 429 persists the absolute `not_before_ms` before waiting. A
//! 410 / `RESERVATION_EXPIRED` persists event mode, then settles through `POST /v1/events`
//! with the same key. A genuine, understood rejection ([`classify`] documents the terminal
//! set) removes the record; retry exhaustion, 401/403 and unclassifiable responses keep it.
//! Nothing here ever releases a reservation.
//!
//! Pending records are replayed continuously by [`Settler::start_replay`] (bounded
//! concurrency, honouring `not_before_ms`, leaving other base URLs' records alone), and
//! [`Settler::flush`] / [`Settler::drain`] settle what they can before a deadline and report
//! what is left, in place.
//!
//! If the journal cannot be written (a full disk, a read-only or removed directory, no file
//! descriptors left), the failure is reported as
//! [`Event::JournalIoFailed`](crate::events::Event::JournalIoFailed) and the synchronous
//! attempt still runs (best-effort durability, as the recovery profile allows). A settlement
//! that is then neither journaled nor settled comes back `Pending` with `journaled: false`
//! and a `journal_error`, is reported by an error-level
//! [`Event::SettlementPending`](crate::events::Event::SettlementPending), and is kept in
//! memory: every replay pass, `flush` and `drain` first tries to journal it again, else to
//! settle it directly, so once the disk is back it drains like any record.

mod bodies;
pub mod classify;
mod engine;
mod wire;

use std::time::Duration;

pub use bodies::{commit_body, event_fallback_body, EventFallback};
pub(crate) use engine::registered_settlers;
pub use engine::{ReplayHandle, Settler};

use crate::error::ErrorKind;
use crate::events::EventSink;
use crate::journal::Mode;
use crate::model::{Amount, CommitRequest, CommitResponse, EventCreateResponse};

/// Settings of the settlement engine (the journal directory and switch come from
/// [`crate::Config::journal`]).
#[derive(Clone, Debug)]
pub struct SettleConfig {
    /// HTTP attempts per settlement episode (one `settle` call, or one replay of a record)
    /// before the record is left for later replay.
    pub max_attempts: u32,
    /// First backoff ceiling.
    pub backoff_base: Duration,
    /// Largest backoff delay.
    pub backoff_cap: Duration,
    /// Longest wait (backoff or rate-limit floor) an episode sleeps through; a longer one
    /// leaves the record pending for the replayer. Bounded-delay policy for `Retry-After`: the
    /// persisted floor is never shortened, only the inline wait is bounded.
    pub max_inline_wait: Duration,
    /// Records replayed at once by the background replayer, `flush` and `drain`.
    pub replay_concurrency: usize,
    /// Pause between background replay passes.
    pub replay_interval: Duration,
    /// Where events go.
    pub events: EventSink,
}

impl SettleConfig {
    /// CONFIG when a setting would make settlement impossible or spin: no attempt per episode
    /// (nothing would ever be sent) or a zero pause between replay passes. Every language
    /// builds its settle overrides through this check.
    pub fn validate(&self) -> Result<(), crate::Error> {
        if self.max_attempts == 0 {
            return Err(crate::Error::config(
                "settle max_attempts must be at least 1",
            ));
        }
        if self.replay_interval.is_zero() {
            return Err(crate::Error::config(
                "the replay interval must be at least 1 ms",
            ));
        }
        Ok(())
    }
}

impl Default for SettleConfig {
    fn default() -> Self {
        SettleConfig {
            max_attempts: 5,
            backoff_base: Duration::from_millis(crate::timing::backoff::DEFAULT_BASE_MS),
            backoff_cap: Duration::from_millis(crate::timing::backoff::DEFAULT_CAP_MS),
            max_inline_wait: Duration::from_secs(30),
            replay_concurrency: 4,
            replay_interval: Duration::from_secs(5),
            events: EventSink::tracing_only(),
        }
    }
}

/// One settlement: the reservation, its commit request (with the idempotency key every
/// attempt reuses), and what the event fallback needs.
#[derive(Clone, Debug)]
pub struct Settlement {
    /// The reservation to commit.
    pub reservation_id: String,
    /// The commit; its `idempotency_key` is reused by every retry and by the fallback event.
    pub commit: CommitRequest,
    /// Subject and action of the reservation; without them an expired reservation cannot be
    /// recovered and its record is quarantined as unrecoverable.
    pub fallback: Option<EventFallback>,
}

/// Why a settlement was rejected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rejection {
    /// Stable error kind.
    pub kind: ErrorKind,
    /// Human-readable message.
    pub message: String,
    /// HTTP status, when a response was received.
    pub http_status: Option<u16>,
    /// The server's error code verbatim.
    pub server_code: Option<String>,
}

/// The result of a settlement the caller can act on.
#[derive(Clone, Debug)]
pub enum SettleOutcome {
    /// The commit was applied (schema-valid 200); the record is removed.
    Committed(CommitResponse),
    /// The reservation had expired; the spend was recorded by the fallback event (201).
    RecoveredViaEvent(EventRecovery),
    /// Not settled yet; when `journaled`, the record stays and is replayed later.
    Pending {
        /// Why it is not settled yet.
        reason: String,
        /// The last error's kind, if an attempt failed.
        last_error: Option<ErrorKind>,
        /// Whether the settlement's latest state is durable in the journal (false when
        /// journaling is off or a journal write failed; see `Event::JournalIoFailed`).
        journaled: bool,
        /// Why it is not journaled when journaling is on: the failed journal operation and
        /// its error (`write: No space left on device (os error 28)`). Such a settlement is
        /// kept in this engine's memory and retried (journal first, then the server) by
        /// every replay pass, `flush` and `drain` until it is journaled or settled; it is
        /// lost only if the process ends first (the drain report lists it as unjournaled).
        journal_error: Option<String>,
        /// The persisted rate-limit floor (epoch ms), if any.
        not_before_ms: Option<u64>,
    },
    /// A genuine, understood terminal rejection; the record is removed (or quarantined as
    /// unrecoverable when an expired reservation has no event fallback).
    Rejected(Rejection),
}

/// A settlement recovered through the event fallback: the server's response and the amount
/// it applied.
#[derive(Clone, Debug)]
pub struct EventRecovery {
    /// The server's `EventCreateResponse`, as received.
    pub response: EventCreateResponse,
    /// The amount applied to the budget. The spec's `EventCreateResponse.charged` is "the
    /// amount actually applied", present only when the server capped the actual
    /// (`ALLOW_IF_AVAILABLE`); when it is absent the whole actual of the event that was sent
    /// was applied, so this is the response's `charged` when present, else the sent body's
    /// `actual`. `None` only if the response has no `charged` and the sent body has no
    /// readable `actual`, which never happens for a body core built.
    pub charged: Option<Amount>,
}

impl EventRecovery {
    /// Pairs an event response with the body that was sent for it (see [`Self::charged`]).
    pub fn new(response: EventCreateResponse, sent_body: &str) -> Self {
        #[derive(serde::Deserialize)]
        struct Sent {
            actual: Amount,
        }
        let charged = response.charged.clone().or_else(|| {
            serde_json::from_str::<Sent>(sent_body)
                .ok()
                .map(|s| s.actual)
        });
        EventRecovery { response, charged }
    }
}

impl SettleOutcome {
    /// The amount applied to the budget, whichever path applied it: the commit's `charged`,
    /// or [`EventRecovery::charged`] after the event fallback. `None` when not settled.
    pub fn charged(&self) -> Option<&Amount> {
        match self {
            SettleOutcome::Committed(r) => Some(&r.charged),
            SettleOutcome::RecoveredViaEvent(r) => r.charged.as_ref(),
            SettleOutcome::Pending { .. } | SettleOutcome::Rejected(_) => None,
        }
    }

    /// True for `Committed` and `RecoveredViaEvent`.
    pub fn is_settled(&self) -> bool {
        matches!(
            self,
            SettleOutcome::Committed(_) | SettleOutcome::RecoveredViaEvent(_)
        )
    }

    /// True for `Pending`.
    pub fn is_pending(&self) -> bool {
        matches!(self, SettleOutcome::Pending { .. })
    }
}

/// A record still in the journal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PendingRecord {
    /// The reservation.
    pub reservation_id: String,
    /// Commit or event.
    pub mode: Mode,
    /// Last write (epoch ms), when recorded.
    pub recorded_at_ms: Option<u64>,
    /// Rate-limit floor (epoch ms), when set.
    pub not_before_ms: Option<u64>,
    /// File name in the partition directory.
    pub file: String,
}

/// What a `flush` or `drain` did and what it left.
#[derive(Clone, Debug, Default)]
pub struct DrainReport {
    /// Outcomes of the records worked on, by reservation id (the last outcome of each).
    pub outcomes: Vec<(String, SettleOutcome)>,
    /// Records still in the journal afterwards (left in place).
    pub remaining: Vec<PendingRecord>,
    /// Files quarantined during the drain (new names).
    pub quarantined: Vec<String>,
    /// Reservations still pending that could not be journaled: they live only in this
    /// engine's memory (retried by every pass) and are lost if the process ends now.
    pub unjournaled: Vec<String>,
}

impl DrainReport {
    /// Number of settlements applied (commit or event).
    pub fn settled(&self) -> usize {
        self.outcomes.iter().filter(|(_, o)| o.is_settled()).count()
    }
}

#[cfg(test)]
mod config_tests {
    use super::*;

    #[test]
    fn zero_attempts_or_interval_is_a_config_error() {
        assert!(SettleConfig::default().validate().is_ok());
        for bad in [
            SettleConfig {
                max_attempts: 0,
                ..SettleConfig::default()
            },
            SettleConfig {
                replay_interval: Duration::ZERO,
                ..SettleConfig::default()
            },
        ] {
            assert_eq!(bad.validate().unwrap_err().kind(), &ErrorKind::Config);
        }
    }
}
