//! A decoded response with its correlation ids and per-attempt monotonic timing.

use std::time::{Duration, Instant};

/// Monotonic timing of ONE HTTP attempt. The heartbeat rules require rtt per attempt
/// (never borrowed from an earlier attempt) and a monotonic clock, hence `Instant`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttemptTiming {
    /// Taken immediately before the request was handed to the HTTP client.
    pub sent: Instant,
    /// Taken after the complete response body was received.
    pub received: Instant,
}

impl AttemptTiming {
    /// Round-trip time of the attempt (zero if the clock did not advance).
    pub fn rtt(&self) -> Duration {
        self.received.saturating_duration_since(self.sent)
    }
}

/// A schema-valid success: the decoded body plus transport facts.
#[derive(Clone, Debug)]
pub struct Response<T> {
    /// Decoded body.
    pub body: T,
    /// HTTP status (200, or 201 for `createEvent`).
    pub status: u16,
    /// `X-Request-Id` response header.
    pub request_id: Option<String>,
    /// `X-Cycles-Trace-Id` response header.
    pub trace_id: Option<String>,
    /// Timing of the attempt that produced this response.
    pub timing: AttemptTiming,
}
