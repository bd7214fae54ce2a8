//! The `Retry-After` header as received on an error. Parsing is the one pure rule in
//! [`crate::timing::retry::RetryAfter`] (delta-seconds only; an HTTP-date, a sign, a fraction
//! or a value too large to represent is invalid), so the heartbeat, settlement and every
//! binding read the header identically; this type only keeps the raw value beside it.

use crate::timing::retry::RetryAfter as Parsed;

/// A `Retry-After` header: the raw value (for logs and for callers with their own policy)
/// and its parsed delta, when valid.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RetryAfter {
    /// The header value exactly as received.
    pub raw: String,
    /// Valid delta-seconds, or `None` for an HTTP-date, negative, fractional, signed, empty,
    /// overflowing or otherwise invalid value.
    pub delta_seconds: Option<u64>,
}

impl RetryAfter {
    /// Parses a raw header value.
    pub fn from_raw(raw: impl Into<String>) -> RetryAfter {
        let raw = raw.into();
        let delta_seconds = match Parsed::parse(Some(&raw)) {
            Parsed::Seconds(s) => Some(s),
            Parsed::Missing | Parsed::Invalid => None,
        };
        RetryAfter { raw, delta_seconds }
    }

    /// The parsed form the timing rules take.
    pub fn parsed(&self) -> Parsed {
        self.delta_seconds.map_or(Parsed::Invalid, Parsed::Seconds)
    }

    /// The delay in milliseconds, or `None` when the value is invalid or `1000 × seconds`
    /// overflows (a caller must then not invent an earlier retry).
    pub fn delay_ms(&self) -> Option<u64> {
        self.parsed().to_millis()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_raw_and_parses_with_the_timing_rule() {
        let r = RetryAfter::from_raw(" 7\t");
        assert_eq!(
            (r.raw.as_str(), r.delta_seconds, r.delay_ms()),
            (" 7\t", Some(7), Some(7000))
        );
        for raw in [
            "Wed, 21 Oct 2015 07:28:00 GMT",
            "-1",
            "+1",
            "1.5",
            "1e3",
            "",
            "  ",
            "１",
            "99999999999999999999999",
        ] {
            let r = RetryAfter::from_raw(raw);
            assert_eq!(r.raw, raw);
            assert_eq!((r.delta_seconds, r.delay_ms()), (None, None), "{raw:?}");
        }
        let r = RetryAfter::from_raw("18446744073709552");
        assert_eq!(
            (r.delta_seconds, r.delay_ms()),
            (Some(18446744073709552), None)
        );
    }
}
