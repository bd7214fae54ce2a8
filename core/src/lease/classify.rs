//! Maps a transport [`Error`] to the heartbeat's failure classes (HEARTBEAT GUIDANCE: timeout,
//! connection error, 5xx, 429 and ambiguous 2xx are transient; stop codes are permanent; any
//! other 4xx is a rejection).

use crate::error::{Error, ErrorKind};
use crate::timing::{ExtendFailure, RetryAfter};

/// The heartbeat class of an extend error.
pub fn classify(error: &Error) -> ExtendFailure {
    match error.kind() {
        ErrorKind::Connect
        | ErrorKind::Timeout
        | ErrorKind::ConnectionReset
        | ErrorKind::Transport
        | ErrorKind::ServerError
        | ErrorKind::AmbiguousSuccess => ExtendFailure::Transient,
        ErrorKind::RateLimited => ExtendFailure::RateLimited(
            error
                .retry_after()
                .map_or(RetryAfter::Missing, |r| r.parsed()),
        ),
        _ => ExtendFailure::from_error_code(error.http_status().unwrap_or(0), error.server_code()),
    }
}
