//! The server's authoritative clock: wall clock plus an offset tests can advance, so expiry
//! and grace can be exercised without sleeping.

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// Wall clock + a monotonically growing offset.
#[derive(Debug, Default)]
pub struct Clock {
    offset_ms: AtomicI64,
}

impl Clock {
    /// Current server time in epoch milliseconds.
    pub fn now_ms(&self) -> i64 {
        let wall = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0);
        wall.saturating_add(self.offset_ms.load(Ordering::SeqCst))
    }

    /// Move the clock forward by `ms`.
    pub fn advance(&self, ms: u64) {
        let ms = i64::try_from(ms).unwrap_or(i64::MAX);
        self.offset_ms.fetch_add(ms, Ordering::SeqCst);
    }
}
