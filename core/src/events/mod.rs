//! The one event stream of core: every heartbeat outcome, settlement, settlement retry,
//! journal quarantine and journal I/O failure is an [`Event`], delivered to an optional host callback and always to the
//! `tracing` crate, so bindings forward a single channel to their host's logging.

use std::fmt;
use std::sync::Arc;

use crate::journal::Mode;
use crate::timing::{Millis, StopReason};

mod schema;
pub use schema::Level;

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

/// What the settlement engine does after a failed settlement attempt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SettleDisposition {
    /// Retry with the SAME idempotency key after `delay`.
    RetryIn {
        /// Delay before the retry.
        delay: Millis,
    },
    /// Rate limited: the absolute floor (epoch ms) was persisted; no retry before it.
    NotBefore {
        /// Wall-clock floor of the next attempt.
        not_before_ms: u64,
    },
    /// The reservation expired: the record switches to event mode.
    SwitchToEvent,
    /// The record is kept for later replay (auth failure, unclassifiable response, retries
    /// exhausted); the settlement is not given up.
    Kept,
    /// A genuine, understood terminal rejection: the record is removed.
    Rejected,
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
    /// Emitted when a heartbeat starts: the lease as created cannot be kept alive by the safe
    /// schedule (its lead is below the smallest retry reserve, or below the configured
    /// timeout's when derivation is off). The heartbeat still makes its one immediate
    /// extension (an additive server may grant enough lead), but the work should not rely on it.
    HeartbeatLeaseTooShort {
        /// The reservation.
        reservation_id: String,
        /// The lead the create response established (primary: `remaining_ttl_ms − rtt`;
        /// fallback: the requested ttl).
        lead_floor: Millis,
        /// The smallest `ttl_ms` (as the server's `remaining_ttl_ms`) that could be kept alive
        /// with the timeout the heartbeat may use.
        min_ttl: Millis,
        /// The enforced extend timeout the heartbeat uses.
        timeout: Millis,
        /// A request timeout that would keep THIS lease alive, when one exists (only when
        /// timeout derivation is turned off).
        working_timeout: Option<Millis>,
        /// Algorithm in use.
        path: HeartbeatPath,
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
    /// A settlement was applied (schema-valid success) and its record removed.
    SettlementSettled {
        /// The reservation.
        reservation_id: String,
        /// `Commit` for the commit, `Event` for the expired-reservation fallback event.
        via: Mode,
        /// HTTP attempts made by this worker for it.
        attempts: u32,
    },
    /// A settlement attempt failed.
    SettlementAttemptFailed {
        /// The reservation.
        reservation_id: String,
        /// Which request failed.
        mode: Mode,
        /// Stable error name (`ErrorKind::name`).
        error_kind: &'static str,
        /// Human-readable error (never contains the API key).
        error: String,
        /// What happens next.
        disposition: SettleDisposition,
    },
    /// The record was durably switched to event mode (the reservation expired) before the
    /// event request.
    SettlementModeSwitched {
        /// The reservation.
        reservation_id: String,
    },
    /// A settlement is left pending for later replay: in the journal, or, when `journaled`
    /// is false, only in the engine's memory (an error: it is lost if the process ends).
    SettlementPending {
        /// The reservation.
        reservation_id: String,
        /// Why it is not settled yet.
        reason: String,
        /// Persisted floor of the next attempt, if any.
        not_before_ms: Option<u64>,
        /// Whether the settlement is durable in the journal.
        journaled: bool,
    },
    /// A journal file was moved aside (corrupt, unsupported version, or unrecoverable); the
    /// evidence is kept under `quarantined_as`.
    JournalQuarantined {
        /// The reservation, when the file could be read.
        reservation_id: Option<String>,
        /// Original file path.
        file: String,
        /// New file name in the same directory.
        quarantined_as: String,
        /// Why.
        reason: String,
    },
    /// Journal I/O failed; durability is best-effort for this settlement, which still runs.
    JournalIoFailed {
        /// The reservation, when the failure concerns one.
        reservation_id: Option<String>,
        /// What was being done (`write`, `remove`, `scan`, `lock`, ...).
        operation: &'static str,
        /// The I/O error.
        error: String,
    },
    /// A legacy-named record was migrated to its standard file name.
    JournalMigrated {
        /// The reservation.
        reservation_id: String,
    },
    /// An integration rewrote a provider request under `ALLOW_WITH_CAPS`
    /// ([`crate::pricing::wire::plan_caps`]), or refused to send it (a cap of 0).
    CapsApplied {
        /// The reservation.
        reservation_id: String,
        /// The provider API (`chat_completions`, `responses`, `messages`).
        api: &'static str,
        /// The request's own output bound.
        bound_from: Option<u64>,
        /// The bound sent.
        bound_to: Option<u64>,
        /// The tools the caps removed.
        removed_tools: Vec<String>,
        /// Whether the request is sent at all.
        send: bool,
    },
}

impl Event {
    /// The reservation the event is about (empty for a journal event about no known record).
    pub fn reservation_id(&self) -> &str {
        match self {
            Event::HeartbeatExtended { reservation_id, .. }
            | Event::HeartbeatFailed { reservation_id, .. }
            | Event::HeartbeatLeaseTooShort { reservation_id, .. }
            | Event::HeartbeatEnded { reservation_id, .. }
            | Event::SettlementSettled { reservation_id, .. }
            | Event::SettlementAttemptFailed { reservation_id, .. }
            | Event::SettlementModeSwitched { reservation_id }
            | Event::SettlementPending { reservation_id, .. }
            | Event::JournalMigrated { reservation_id }
            | Event::CapsApplied { reservation_id, .. } => reservation_id,
            Event::JournalQuarantined { reservation_id, .. }
            | Event::JournalIoFailed { reservation_id, .. } => {
                reservation_id.as_deref().unwrap_or("")
            }
        }
    }
}

impl fmt::Display for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Event::HeartbeatExtended { reservation_id, expires_at_ms, remaining_ttl_ms, next_delay, path } => write!(
                f,
                "heartbeat extended {reservation_id}: expires_at_ms {expires_at_ms}, remaining_ttl_ms {}, next beat in {next_delay} ({})",
                remaining_ttl_ms.map_or("absent".to_string(), |v| v.to_string()),
                path.name()
            ),
            Event::HeartbeatFailed { reservation_id, error_kind, error, disposition } => match disposition {
                Disposition::RetryAfter { delay } => write!(
                    f,
                    "heartbeat failure on {reservation_id}: {error_kind}: {error}; retrying with the same key in {delay}"
                ),
                Disposition::Stopped(reason) => write!(
                    f,
                    "heartbeat failure on {reservation_id}: {error_kind}: {error}; stopped: {reason}"
                ),
            },
            Event::HeartbeatLeaseTooShort { reservation_id, lead_floor, min_ttl, timeout, working_timeout, .. } => {
                write!(
                    f,
                    "the lease of {reservation_id} cannot be kept alive: its lead {lead_floor} is below the retry reserve of a {timeout} extend timeout; reserve with ttl_ms >= {}",
                    min_ttl.finite().map_or("(none: the rtt is too large)".to_string(), |v| v.to_string())
                )?;
                match working_timeout {
                    Some(t) => write!(f, " or use a request timeout of {t}"),
                    None => Ok(()),
                }
            }
            Event::HeartbeatEnded { reservation_id, end, extensions } => {
                write!(f, "heartbeat ended for {reservation_id} after {extensions} extension(s): {end}")
            }
            Event::SettlementSettled { reservation_id, via, attempts } => {
                write!(f, "settled {reservation_id} via {via} after {attempts} attempt(s)")
            }
            Event::SettlementAttemptFailed { reservation_id, mode, error_kind, error, disposition } => {
                write!(f, "{mode} attempt for {reservation_id} failed: {error_kind}: {error}; ")?;
                match disposition {
                    SettleDisposition::RetryIn { delay } => write!(f, "retrying with the same key in {delay}"),
                    SettleDisposition::NotBefore { not_before_ms } => write!(f, "rate limited; no retry before epoch ms {not_before_ms} (persisted)"),
                    SettleDisposition::SwitchToEvent => f.write_str("reservation expired; switching to the event fallback"),
                    SettleDisposition::Kept => f.write_str("record kept for later replay"),
                    SettleDisposition::Rejected => f.write_str("terminal rejection; record removed"),
                }
            }
            Event::SettlementModeSwitched { reservation_id } => {
                write!(f, "journal record of {reservation_id} switched to event mode")
            }
            Event::SettlementPending { reservation_id, reason, not_before_ms, journaled } => {
                write!(f, "settlement of {reservation_id} pending ({reason})")?;
                if let Some(t) = not_before_ms {
                    write!(f, "; not before epoch ms {t}")?;
                }
                if !journaled {
                    // Said in the line itself: a log reader must see that this actual is at risk.
                    write!(f, "; NOT journaled: kept only in this process's memory")?;
                }
                Ok(())
            }
            Event::JournalQuarantined { file, quarantined_as, reason, .. } => {
                write!(f, "journal file {file} quarantined as {quarantined_as}: {reason}")
            }
            Event::JournalIoFailed { reservation_id, operation, error } => write!(
                f,
                "journal {operation} failed{}: {error}; durability is best-effort",
                reservation_id.as_deref().map(|r| format!(" for {r}")).unwrap_or_default()
            ),
            Event::JournalMigrated { reservation_id } => {
                write!(f, "legacy journal record of {reservation_id} migrated to its standard name")
            }
            Event::CapsApplied { reservation_id, api, bound_from, bound_to, removed_tools, send } => {
                let b = |v: &Option<u64>| v.map_or("none".to_string(), |n| n.to_string());
                write!(f, "caps on {reservation_id} ({api}): output bound {} -> {}", b(bound_from), b(bound_to))?;
                if !removed_tools.is_empty() {
                    write!(f, ", tools removed: {}", removed_tools.join(", "))?;
                }
                if !send {
                    f.write_str("; not sent (a bound of 0)")?;
                }
                Ok(())
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

    /// Delivers one event: to `tracing` at [`Event::level`] (target `cycles::heartbeat`,
    /// `cycles::settle` or `cycles::journal`), then to the callback.
    pub fn emit(&self, event: Event) {
        // tracing needs its level and target as constants at each call site.
        macro_rules! at {
            ($target:literal) => {
                match event.level() {
                    Level::Debug => tracing::debug!(target: $target, reservation_id = %event.reservation_id(), kind = event.kind(), "{event}"),
                    Level::Info => tracing::info!(target: $target, reservation_id = %event.reservation_id(), kind = event.kind(), "{event}"),
                    Level::Warning => tracing::warn!(target: $target, reservation_id = %event.reservation_id(), kind = event.kind(), "{event}"),
                    Level::Error => tracing::error!(target: $target, reservation_id = %event.reservation_id(), kind = event.kind(), "{event}"),
                }
            };
        }
        match &event {
            Event::HeartbeatExtended { .. }
            | Event::HeartbeatFailed { .. }
            | Event::HeartbeatLeaseTooShort { .. }
            | Event::HeartbeatEnded { .. } => at!("cycles::heartbeat"),
            Event::SettlementSettled { .. }
            | Event::SettlementAttemptFailed { .. }
            | Event::SettlementModeSwitched { .. }
            | Event::SettlementPending { .. } => at!("cycles::settle"),
            Event::JournalQuarantined { .. }
            | Event::JournalIoFailed { .. }
            | Event::JournalMigrated { .. } => at!("cycles::journal"),
            Event::CapsApplied { .. } => at!("cycles::caps"),
        }
        if let Some(cb) = &self.callback {
            // A panicking host callback must not take the heartbeat down with it.
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| cb(&event)));
        }
    }
}
