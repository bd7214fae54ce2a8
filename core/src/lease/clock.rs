//! Monotonic microseconds for the planners, from one process-wide epoch, so `Instant`s taken by
//! the transport and by the driver are on the same axis.

use std::sync::OnceLock;
use std::time::Instant;

static EPOCH: OnceLock<Instant> = OnceLock::new();

/// The process's monotonic epoch (first use).
pub fn epoch() -> Instant {
    *EPOCH.get_or_init(Instant::now)
}

/// Microseconds from the epoch to `at` (0 if `at` precedes the epoch).
pub fn micros(at: Instant) -> u64 {
    u64::try_from(at.saturating_duration_since(epoch()).as_micros()).unwrap_or(u64::MAX)
}

/// Microseconds from the epoch to now.
pub fn now_micros() -> u64 {
    micros(Instant::now())
}
