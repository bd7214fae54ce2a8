//! Extend failure handling on the primary path: lead estimates, retry windows, transient
//! retry delays and Retry-After conversion (HEARTBEAT GUIDANCE, "On an EXTEND transient
//! failure"). Pure functions; the planner strings them together.

use super::millis::{Millis, SignedMillis};

/// Upper bound of an ordinary transient retry delay.
pub const MAX_TRANSIENT_RETRY_MS: u64 = 30_000;

/// Reservation error codes that stop a heartbeat for good (they are permanent for the
/// reservation): RESERVATION_EXPIRED, RESERVATION_FINALIZED, MAX_EXTENSIONS_EXCEEDED,
/// TENANT_CLOSED (closure is irreversible) and NOT_FOUND.
pub const PERMANENT_STOP_CODES: [&str; 5] = [
    "RESERVATION_EXPIRED",
    "RESERVATION_FINALIZED",
    "MAX_EXTENSIONS_EXCEEDED",
    "TENANT_CLOSED",
    "NOT_FOUND",
];

/// True when `code` is one of [`PERMANENT_STOP_CODES`].
pub fn is_permanent_stop_code(code: &str) -> bool {
    PERMANENT_STOP_CODES.contains(&code)
}

/// `current_lead_estimate = max(0, last lead_floor − monotonic elapsed since that response)`.
///
/// `elapsed` must be rounded UP by the caller.
pub fn current_lead_estimate(last_lead_floor: Millis, elapsed: Millis) -> Millis {
    last_lead_floor.saturating_sub(elapsed)
}

/// `retry_window = current_lead_estimate − attempt_budget − safety_margin`, NOT clamped:
/// negative means no complete retry plus margin is provably safe.
pub fn retry_window(
    current_lead_estimate: Millis,
    attempt_budget: Millis,
    safety_margin: Millis,
) -> SignedMillis {
    current_lead_estimate.signed_sub(attempt_budget + safety_margin)
}

/// Delay of an ordinary transient retry (timeout, connection error, 5xx, ambiguous 2xx):
/// `min(30000 ms, current_lead_estimate / 4, retry_window)`, for a non-negative window.
pub fn transient_retry_delay(current_lead_estimate: Millis, retry_window: SignedMillis) -> Millis {
    Millis::ms(MAX_TRANSIENT_RETRY_MS)
        .min(current_lead_estimate.div_floor(4))
        .min(retry_window.clamp_to_millis())
}

/// A parsed `Retry-After` header. Only non-negative delta-seconds are valid in this protocol;
/// an HTTP-date or anything else is `Invalid`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RetryAfter {
    /// The header was absent.
    Missing,
    /// The header was present but not non-negative delta-seconds (HTTP-date, negative, junk,
    /// or too large to represent).
    Invalid,
    /// Non-negative delta-seconds.
    Seconds(u64),
}

impl RetryAfter {
    /// Parses a raw header value. Surrounding whitespace is allowed; everything else must be
    /// ASCII digits.
    pub fn parse(raw: Option<&str>) -> RetryAfter {
        let Some(raw) = raw else {
            return RetryAfter::Missing;
        };
        // Optional whitespace around the value is SP or HTAB only (RFC 9110 OWS).
        let text = raw.trim_matches(|c| c == ' ' || c == '\t');
        if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
            return RetryAfter::Invalid;
        }
        text.parse::<u64>()
            .map_or(RetryAfter::Invalid, RetryAfter::Seconds)
    }

    /// `retry_after_ms = 1000 × seconds` with overflow checking; `None` when missing, invalid
    /// or overflowing (the caller must then NOT invent an earlier retry).
    pub fn to_millis(self) -> Option<u64> {
        match self {
            RetryAfter::Seconds(s) => s.checked_mul(1000),
            RetryAfter::Missing | RetryAfter::Invalid => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_accepts_only_delta_seconds() {
        assert_eq!(RetryAfter::parse(None), RetryAfter::Missing);
        assert_eq!(RetryAfter::parse(Some("3")), RetryAfter::Seconds(3));
        assert_eq!(RetryAfter::parse(Some(" 0 ")), RetryAfter::Seconds(0));
        assert_eq!(RetryAfter::parse(Some("-1")), RetryAfter::Invalid);
        assert_eq!(RetryAfter::parse(Some("1.5")), RetryAfter::Invalid);
        assert_eq!(
            RetryAfter::parse(Some("Wed, 21 Oct 2015 07:28:00 GMT")),
            RetryAfter::Invalid
        );
        assert_eq!(
            RetryAfter::parse(Some("99999999999999999999999")),
            RetryAfter::Invalid
        );
        assert_eq!(RetryAfter::Seconds(u64::MAX).to_millis(), None);
        assert_eq!(
            RetryAfter::Seconds(u64::MAX / 1000).to_millis(),
            Some(u64::MAX / 1000 * 1000)
        );
    }

    #[test]
    fn window_is_not_clamped() {
        let w = retry_window(Millis::ms(1000), Millis::ms(1000), Millis::ms(1000));
        assert_eq!(w, SignedMillis::Finite(-1000));
        assert!(w.is_negative());
    }

    #[test]
    fn transient_delay_is_the_minimum_of_three() {
        let w = retry_window(Millis::ms(200_000), Millis::ms(10_000), Millis::ms(3000));
        assert_eq!(
            transient_retry_delay(Millis::ms(200_000), w),
            Millis::ms(30_000)
        );
        let w = retry_window(Millis::ms(40_000), Millis::ms(10_000), Millis::ms(3000));
        assert_eq!(
            transient_retry_delay(Millis::ms(40_000), w),
            Millis::ms(10_000)
        );
        let w = retry_window(Millis::ms(14_000), Millis::ms(10_000), Millis::ms(3000));
        assert_eq!(
            transient_retry_delay(Millis::ms(14_000), w),
            Millis::ms(1000)
        );
    }

    #[test]
    fn permanent_codes() {
        for code in PERMANENT_STOP_CODES {
            assert!(is_permanent_stop_code(code));
        }
        assert!(!is_permanent_stop_code("INVALID_REQUEST"));
    }
}
