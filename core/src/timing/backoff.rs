//! Settlement retry backoff: exponential with "equal jitter", a pure function of the attempt
//! number and a random draw the caller supplies (so it is testable and identical in every
//! binding).
//!
//! `ceiling = min(cap, base × 2^attempt)` (saturating), and the delay is uniform in
//! `[ceiling / 2, ceiling]`: half the ceiling guarantees real spacing between same-key retries,
//! the jittered half keeps many clients that failed together from retrying together.

use super::millis::Millis;

/// Default first ceiling of a settlement retry.
pub const DEFAULT_BASE_MS: u64 = 250;
/// Default cap of one backoff delay.
pub const DEFAULT_CAP_MS: u64 = 30_000;

/// The ceiling of attempt `attempt` (0-based): `min(cap, base × 2^attempt)`, saturating.
pub fn backoff_ceiling(attempt: u32, base_ms: u64, cap_ms: u64) -> u64 {
    let factor = 1u64.checked_shl(attempt.min(63)).unwrap_or(u64::MAX);
    base_ms.saturating_mul(factor).min(cap_ms)
}

/// The delay before retry `attempt` (0-based) given a uniformly random `draw`:
/// `ceiling/2 + draw mod (ceiling - ceiling/2 + 1)`, always within `[ceiling/2, ceiling]`.
pub fn backoff_delay(attempt: u32, base_ms: u64, cap_ms: u64, draw: u64) -> Millis {
    let ceiling = backoff_ceiling(attempt, base_ms, cap_ms);
    let floor = ceiling / 2;
    let span = ceiling - floor;
    let jitter = if span == u64::MAX {
        draw
    } else {
        draw % (span + 1)
    };
    Millis::ms(floor + jitter)
}

/// The absolute wall-clock floor (epoch ms) after a 429: `now + max(retry_after, backoff)`.
/// A valid `Retry-After` is never shortened (a restart must not retry earlier than the server
/// allowed); without one the backoff delay is the floor. Saturating.
pub fn rate_limit_floor(now_ms: u64, retry_after_ms: Option<u64>, backoff: Millis) -> u64 {
    let b = backoff.finite().unwrap_or(u64::MAX);
    now_ms.saturating_add(retry_after_ms.map_or(b, |ra| ra.max(b)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn ceilings_double_then_cap() {
        let c: Vec<u64> = (0..10).map(|a| backoff_ceiling(a, 250, 30_000)).collect();
        assert_eq!(
            c,
            [250, 500, 1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000]
        );
        assert_eq!(backoff_ceiling(200, u64::MAX, u64::MAX), u64::MAX);
        assert_eq!(backoff_ceiling(0, 0, 100), 0);
    }

    #[test]
    fn jitter_spans_the_upper_half() {
        assert_eq!(backoff_delay(0, 250, 30_000, 0), Millis::ms(125));
        assert_eq!(backoff_delay(0, 250, 30_000, 125), Millis::ms(250));
        assert_eq!(backoff_delay(0, 250, 30_000, 126), Millis::ms(125));
        assert_eq!(
            backoff_delay(99, 250, 30_000, u64::MAX),
            Millis::ms(15_000 + u64::MAX % 15_001)
        );
    }

    #[test]
    fn rate_limit_floor_never_shortens_retry_after() {
        assert_eq!(rate_limit_floor(1000, Some(5000), Millis::ms(200)), 6000);
        assert_eq!(rate_limit_floor(1000, Some(0), Millis::ms(200)), 1200);
        assert_eq!(rate_limit_floor(1000, None, Millis::ms(300)), 1300);
        assert_eq!(
            rate_limit_floor(u64::MAX - 1, Some(5), Millis::ZERO),
            u64::MAX
        );
    }

    proptest! {
        #[test]
        fn delay_is_within_bounds(attempt in 0u32..100, base in 0u64..1_000_000, cap in 0u64..u64::MAX, draw: u64) {
            let ceiling = backoff_ceiling(attempt, base, cap);
            let d = backoff_delay(attempt, base, cap, draw).finite().unwrap();
            prop_assert!(d >= ceiling / 2 && d <= ceiling && d <= cap);
        }
    }
}
