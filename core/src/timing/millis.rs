//! Overflow-safe millisecond durations where positive overflow means infinity.
//!
//! The heartbeat guidance requires integer milliseconds, overflow-safe arithmetic, and
//! "positive overflow is treated as positive infinity, never wraparound". `Millis` makes that
//! the only arithmetic available, so no caller can wrap by accident.

use std::fmt;

/// A non-negative duration in whole milliseconds, or positive infinity.
///
/// Ordering puts every finite value below `Infinite`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Millis {
    /// A finite number of milliseconds.
    Finite(u64),
    /// Unbounded: the result of an overflow, an unknown timeout, or an unbounded budget.
    Infinite,
}

impl Millis {
    /// Zero milliseconds.
    pub const ZERO: Millis = Millis::Finite(0);

    /// A finite duration.
    pub const fn ms(value: u64) -> Millis {
        Millis::Finite(value)
    }

    /// The finite value, or `None` for infinity.
    pub const fn finite(self) -> Option<u64> {
        match self {
            Millis::Finite(v) => Some(v),
            Millis::Infinite => None,
        }
    }

    /// True for positive infinity.
    pub const fn is_infinite(self) -> bool {
        matches!(self, Millis::Infinite)
    }

    /// Product with a small factor; overflow gives infinity. `Infinite * 0` is 0.
    pub fn times(self, factor: u64) -> Millis {
        match self {
            Millis::Finite(a) => a
                .checked_mul(factor)
                .map_or(Millis::Infinite, Millis::Finite),
            Millis::Infinite if factor == 0 => Millis::ZERO,
            Millis::Infinite => Millis::Infinite,
        }
    }

    /// `max(0, self - other)`: subtraction clamped at zero. Subtracting infinity gives zero;
    /// infinity minus a finite value stays infinite.
    pub fn saturating_sub(self, other: Millis) -> Millis {
        match (self, other) {
            (_, Millis::Infinite) => Millis::ZERO,
            (Millis::Infinite, Millis::Finite(_)) => Millis::Infinite,
            (Millis::Finite(a), Millis::Finite(b)) => Millis::Finite(a.saturating_sub(b)),
        }
    }

    /// `self - other` WITHOUT clamping, as a signed window (the spec's retry_window).
    pub fn signed_sub(self, other: Millis) -> SignedMillis {
        match (self, other) {
            (Millis::Finite(a), Millis::Finite(b)) => {
                SignedMillis::Finite(i128::from(a) - i128::from(b))
            }
            (Millis::Infinite, Millis::Finite(_)) => SignedMillis::PosInfinite,
            // Subtracting an unbounded budget can never leave room for anything.
            (_, Millis::Infinite) => SignedMillis::NegInfinite,
        }
    }

    /// Integer division rounding down (for leads and delays); infinity stays infinite.
    pub fn div_floor(self, divisor: u64) -> Millis {
        assert!(divisor > 0, "division by zero");
        match self {
            Millis::Finite(a) => Millis::Finite(a / divisor),
            Millis::Infinite => Millis::Infinite,
        }
    }

    /// The smaller value.
    pub fn min(self, other: Millis) -> Millis {
        std::cmp::min(self, other)
    }

    /// The larger value.
    pub fn max(self, other: Millis) -> Millis {
        std::cmp::max(self, other)
    }

    /// Rounds a duration in microseconds UP to whole milliseconds (for budgets, margins,
    /// elapsed time and rtt, which must never be understated).
    pub fn from_micros_ceil(micros: u128) -> Millis {
        let ms = micros.div_ceil(1000);
        u64::try_from(ms).map_or(Millis::Infinite, Millis::Finite)
    }

    /// Rounds a duration in microseconds DOWN to whole milliseconds (for leads and delays,
    /// which must never be overstated).
    pub fn from_micros_floor(micros: u128) -> Millis {
        u64::try_from(micros / 1000).map_or(Millis::Infinite, Millis::Finite)
    }
}

/// Sum; overflow or an infinite operand gives infinity.
impl std::ops::Add for Millis {
    type Output = Millis;

    fn add(self, other: Millis) -> Millis {
        match (self, other) {
            (Millis::Finite(a), Millis::Finite(b)) => {
                a.checked_add(b).map_or(Millis::Infinite, Millis::Finite)
            }
            _ => Millis::Infinite,
        }
    }
}

impl fmt::Display for Millis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Millis::Finite(v) => write!(f, "{v} ms"),
            Millis::Infinite => f.write_str("infinite"),
        }
    }
}

/// A signed millisecond window (may be negative), with both infinities.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SignedMillis {
    /// Below every finite value.
    NegInfinite,
    /// A finite signed value; i128 holds any difference of two u64 values exactly.
    Finite(i128),
    /// Above every finite value.
    PosInfinite,
}

impl SignedMillis {
    /// True when strictly below zero.
    pub fn is_negative(self) -> bool {
        match self {
            SignedMillis::NegInfinite => true,
            SignedMillis::Finite(v) => v < 0,
            SignedMillis::PosInfinite => false,
        }
    }

    /// True when exactly zero.
    pub fn is_zero(self) -> bool {
        self == SignedMillis::Finite(0)
    }

    /// The non-negative part as `Millis` (negative values give zero).
    pub fn clamp_to_millis(self) -> Millis {
        match self {
            SignedMillis::NegInfinite => Millis::ZERO,
            SignedMillis::Finite(v) if v <= 0 => Millis::ZERO,
            SignedMillis::Finite(v) => u64::try_from(v).map_or(Millis::Infinite, Millis::Finite),
            SignedMillis::PosInfinite => Millis::Infinite,
        }
    }
}

impl fmt::Display for SignedMillis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SignedMillis::NegInfinite => f.write_str("-infinite"),
            SignedMillis::Finite(v) => write!(f, "{v} ms"),
            SignedMillis::PosInfinite => f.write_str("infinite"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overflow_is_infinity_never_wraparound() {
        assert_eq!(Millis::ms(u64::MAX) + Millis::ms(1), Millis::Infinite);
        assert_eq!(Millis::ms(u64::MAX / 2 + 1).times(2), Millis::Infinite);
        assert_eq!(
            Millis::ms(i64::MAX as u64).times(2),
            Millis::ms(u64::MAX - 1)
        );
        assert_eq!(Millis::Infinite + Millis::ZERO, Millis::Infinite);
    }

    #[test]
    fn subtraction_rules() {
        assert_eq!(Millis::ms(5).saturating_sub(Millis::ms(9)), Millis::ZERO);
        assert_eq!(Millis::ms(5).saturating_sub(Millis::Infinite), Millis::ZERO);
        assert_eq!(
            Millis::Infinite.saturating_sub(Millis::ms(9)),
            Millis::Infinite
        );
        assert_eq!(
            Millis::ms(5).signed_sub(Millis::ms(9)),
            SignedMillis::Finite(-4)
        );
        assert_eq!(
            Millis::ms(0).signed_sub(Millis::ms(u64::MAX)),
            SignedMillis::Finite(-(u64::MAX as i128))
        );
        assert!(Millis::ms(5).signed_sub(Millis::Infinite).is_negative());
    }

    #[test]
    fn rounding_directions() {
        assert_eq!(Millis::from_micros_ceil(1), Millis::ms(1));
        assert_eq!(Millis::from_micros_ceil(1000), Millis::ms(1));
        assert_eq!(Millis::from_micros_ceil(1001), Millis::ms(2));
        assert_eq!(Millis::from_micros_floor(1999), Millis::ms(1));
        assert_eq!(Millis::from_micros_ceil(u128::MAX), Millis::Infinite);
    }

    #[test]
    fn ordering_puts_infinity_last() {
        assert!(Millis::ms(u64::MAX) < Millis::Infinite);
        assert!(SignedMillis::NegInfinite < SignedMillis::Finite(i128::MIN));
        assert!(SignedMillis::Finite(i128::MAX) < SignedMillis::PosInfinite);
    }
}
