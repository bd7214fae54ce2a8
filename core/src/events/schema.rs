//! The stable, language-neutral form of an [`Event`]: a `kind` name, a [`Level`], and a flat
//! JSON object. Every binding forwards exactly this object to its host (Python's `logging`
//! and `on_event`, Node, the JVM, C), so no binding maps event variants itself and the names
//! cannot drift between languages. The field table is in `docs/events.md`.

use serde_json::{json, Map, Value};

use super::{Disposition, Event, HeartbeatEnd, HeartbeatPath, SettleDisposition};
use crate::journal::Mode;
use crate::timing::{Millis, RetryAfter, SignedMillis, StopReason};

/// How important an event is; bindings map it to the host's log levels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    /// Routine progress (a heartbeat beat, a heartbeat that ended with its work).
    Debug,
    /// A normal outcome worth a line (a settlement that needed retries or the event fallback,
    /// a record migrated).
    Info,
    /// Something failed but is being handled (a retry, a pending settlement).
    Warning,
    /// Something needs attention (a heartbeat that stopped, a quarantined file, journal I/O).
    Error,
}

impl Level {
    /// Every level, least severe first (their `Ord` order).
    pub const ALL: [Level; 4] = [Level::Debug, Level::Info, Level::Warning, Level::Error];

    /// The level named `name` (an [`Level::as_str`] spelling), if any.
    pub fn from_name(name: &str) -> Option<Level> {
        Level::ALL.into_iter().find(|l| l.as_str() == name)
    }

    /// `debug`, `info`, `warning` or `error`.
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Debug => "debug",
            Level::Info => "info",
            Level::Warning => "warning",
            Level::Error => "error",
        }
    }
}

/// A signed window as JSON: a number, or `"infinite"` / `"-infinite"`.
fn signed(m: SignedMillis) -> Value {
    match m {
        SignedMillis::Finite(v) => i64::try_from(v).map_or_else(
            |_| json!(if v < 0 { "-infinite" } else { "infinite" }),
            |v| json!(v),
        ),
        SignedMillis::PosInfinite => json!("infinite"),
        SignedMillis::NegInfinite => json!("-infinite"),
    }
}

/// The details of a stop reason (empty for reasons without any).
fn stop_detail(reason: &StopReason) -> Map<String, Value> {
    let v = match reason {
        StopReason::NoSafeRetryWindow { retry_window } => {
            json!({"retry_window_ms": signed(*retry_window)})
        }
        StopReason::RateLimitBeyondWindow {
            retry_after,
            retry_window,
        } => {
            let (kind, seconds) = match retry_after {
                RetryAfter::Missing => ("missing", None),
                RetryAfter::Invalid => ("invalid", None),
                RetryAfter::Seconds(s) => ("seconds", Some(*s)),
            };
            json!({"retry_after_kind": kind, "retry_after_seconds": seconds,
                   "retry_window_ms": signed(*retry_window)})
        }
        StopReason::Permanent(code) => json!({"code": code}),
        StopReason::Rejected { status, code } => json!({"status": status, "code": code}),
        StopReason::LeaseShorterThanRetryBudget
        | StopReason::ZeroWindowRetryFailed
        | StopReason::NoProgress
        | StopReason::NoValidResponse => json!({}),
    };
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

fn path_name(path: HeartbeatPath) -> &'static str {
    path.name()
}

impl HeartbeatPath {
    /// Stable snake_case name: `primary` or `fallback`.
    pub fn name(self) -> &'static str {
        match self {
            HeartbeatPath::Primary => "primary",
            HeartbeatPath::Fallback => "fallback",
        }
    }
}

fn stopped(reason: &StopReason) -> Value {
    json!({"disposition": "stopped", "stop_reason": reason.name(), "stop_detail": stop_detail(reason)})
}

impl StopReason {
    /// The reason's details as a flat JSON object, the `stop_detail` of events and of every
    /// binding's lease report: `retry_window_ms`, `retry_after_kind` / `retry_after_seconds`,
    /// `code`, `status` (empty for reasons without any; see docs/events.md).
    pub fn detail_json(&self) -> Map<String, Value> {
        stop_detail(self)
    }
}

/// `name`, then the details when there are any: `permanent {"code":"RESERVATION_FINALIZED"}`.
impl std::fmt::Display for StopReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let detail = self.detail_json();
        if detail.is_empty() {
            f.write_str(self.name())
        } else {
            write!(f, "{} {}", self.name(), Value::Object(detail))
        }
    }
}

/// `finished`, or `stopped: ` and the reason.
impl std::fmt::Display for HeartbeatEnd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HeartbeatEnd::Finished => f.write_str("finished"),
            HeartbeatEnd::Stopped(r) => write!(f, "stopped: {r}"),
        }
    }
}

impl HeartbeatEnd {
    /// Stable snake_case name: `finished` (stopped by its owner) or `stopped` (by the
    /// planner; see the [`StopReason`]).
    pub fn name(&self) -> &'static str {
        match self {
            HeartbeatEnd::Finished => "finished",
            HeartbeatEnd::Stopped(_) => "stopped",
        }
    }
}

impl Event {
    /// Stable snake_case name of the variant (`heartbeat_extended`, `settlement_settled`, ...).
    pub fn kind(&self) -> &'static str {
        match self {
            Event::HeartbeatExtended { .. } => "heartbeat_extended",
            Event::HeartbeatFailed { .. } => "heartbeat_failed",
            Event::HeartbeatLeaseTooShort { .. } => "heartbeat_lease_too_short",
            Event::HeartbeatEnded { .. } => "heartbeat_ended",
            Event::SettlementSettled { .. } => "settlement_settled",
            Event::SettlementAttemptFailed { .. } => "settlement_attempt_failed",
            Event::SettlementModeSwitched { .. } => "settlement_mode_switched",
            Event::SettlementPending { .. } => "settlement_pending",
            Event::JournalQuarantined { .. } => "journal_quarantined",
            Event::JournalIoFailed { .. } => "journal_io_failed",
            Event::JournalMigrated { .. } => "journal_migrated",
            Event::CapsApplied { .. } => "caps_applied",
        }
    }

    /// How important it is (core logs it to `tracing` at this level too).
    pub fn level(&self) -> Level {
        match self {
            Event::HeartbeatExtended { .. } => Level::Debug,
            Event::HeartbeatFailed {
                disposition: Disposition::Stopped(_),
                ..
            } => Level::Error,
            Event::HeartbeatFailed { .. } | Event::HeartbeatLeaseTooShort { .. } => Level::Warning,
            Event::HeartbeatEnded {
                end: HeartbeatEnd::Finished,
                ..
            } => Level::Debug,
            Event::HeartbeatEnded { .. } => Level::Warning,
            // The normal end of every guarded call is routine (debug), like a finished
            // heartbeat: at info, a host's default logging (the JVM's prints INFO) wrote a
            // line per call. A settlement that took retries or the event fallback is news.
            Event::SettlementSettled {
                via: Mode::Commit,
                attempts: 0 | 1,
                ..
            } => Level::Debug,
            Event::SettlementSettled { .. }
            | Event::SettlementModeSwitched { .. }
            | Event::JournalMigrated { .. }
            | Event::CapsApplied { .. } => Level::Info,
            // Pending but not durable: the actual lives only in memory.
            Event::SettlementPending {
                journaled: false, ..
            } => Level::Error,
            Event::SettlementAttemptFailed { .. } | Event::SettlementPending { .. } => {
                Level::Warning
            }
            Event::JournalQuarantined { .. } | Event::JournalIoFailed { .. } => Level::Error,
        }
    }

    /// The event as one flat JSON object: `kind`, `level`, `reservation_id` (empty when
    /// none), `message` (the `Display` text), and the variant's own fields.
    pub fn to_json(&self) -> Value {
        let fields = match self {
            Event::HeartbeatExtended {
                expires_at_ms,
                remaining_ttl_ms,
                next_delay,
                path,
                ..
            } => json!({
                "expires_at_ms": expires_at_ms, "remaining_ttl_ms": remaining_ttl_ms,
                "next_delay_ms": next_delay.finite(),
                "path": path_name(*path),
            }),
            Event::HeartbeatFailed {
                error_kind,
                error,
                disposition,
                ..
            } => {
                let mut v = match disposition {
                    Disposition::RetryAfter { delay } => {
                        json!({"disposition": "retry", "retry_in_ms": delay.finite()})
                    }
                    Disposition::Stopped(r) => stopped(r),
                };
                v["error_kind"] = json!(error_kind);
                v["error"] = json!(error);
                v
            }
            Event::HeartbeatLeaseTooShort {
                lead_floor,
                min_ttl,
                timeout,
                working_timeout,
                path,
                ..
            } => json!({
                "lead_floor_ms": lead_floor.finite(), "min_ttl_ms": min_ttl.finite(),
                "timeout_ms": timeout.finite(),
                "working_timeout_ms": working_timeout.and_then(Millis::finite),
                "path": path_name(*path),
            }),
            Event::HeartbeatEnded {
                end, extensions, ..
            } => {
                let mut v = match end {
                    HeartbeatEnd::Finished => json!({"disposition": "finished"}),
                    HeartbeatEnd::Stopped(r) => stopped(r),
                };
                v["extensions"] = json!(extensions);
                v
            }
            Event::SettlementSettled { via, attempts, .. } => json!({
                "disposition": "settled", "mode": via.to_string(), "attempts": attempts,
            }),
            Event::SettlementAttemptFailed {
                mode,
                error_kind,
                error,
                disposition,
                ..
            } => {
                let (disp, value) = match disposition {
                    SettleDisposition::RetryIn { delay } => ("retry", json!(delay.finite())),
                    SettleDisposition::NotBefore { not_before_ms } => {
                        ("not_before", json!(not_before_ms))
                    }
                    SettleDisposition::SwitchToEvent => ("switch_to_event", Value::Null),
                    SettleDisposition::Kept => ("kept", Value::Null),
                    SettleDisposition::Rejected => ("rejected", Value::Null),
                };
                json!({"mode": mode.to_string(), "error_kind": error_kind, "error": error,
                       "disposition": disp, "disposition_value": value})
            }
            Event::SettlementModeSwitched { .. } => json!({"disposition": "switch_to_event"}),
            Event::SettlementPending {
                reason,
                not_before_ms,
                journaled,
                ..
            } => {
                json!({"disposition": "pending", "reason": reason, "not_before_ms": not_before_ms,
                       "journaled": journaled})
            }
            Event::JournalQuarantined {
                file,
                quarantined_as,
                reason,
                ..
            } => json!({"disposition": "quarantined", "file": file,
                        "quarantined_as": quarantined_as, "reason": reason}),
            Event::JournalIoFailed {
                operation, error, ..
            } => json!({"operation": operation, "error": error}),
            Event::JournalMigrated { .. } => json!({"disposition": "migrated"}),
            Event::CapsApplied {
                api,
                bound_from,
                bound_to,
                removed_tools,
                send,
                ..
            } => json!({"api": api, "bound_from": bound_from, "bound_to": bound_to,
                        "removed_tools": removed_tools, "send": send}),
        };
        let mut out = json!({
            "kind": self.kind(),
            "level": self.level().as_str(),
            "reservation_id": self.reservation_id(),
            "message": self.to_string(),
        });
        if let (Value::Object(o), Value::Object(f)) = (&mut out, fields) {
            o.extend(f);
        }
        out
    }
}
