//! The PRIMARY heartbeat schedule: NORMATIVE whenever a create or extend response carries
//! `remaining_ttl_ms` (HEARTBEAT GUIDANCE of `extendReservation`, spec 0.1.25.16).
//!
//! Each rule is its own function so every binding can expose the same names and the shared
//! vectors can test each one. Rounding: budgets and margins are rounded up by the caller's
//! conversions (`Millis::from_micros_ceil`), leads and delays are computed by clamped
//! subtraction, so rounding can never consume the reserved margin.

use super::millis::Millis;

/// The spec's 1000 ms floor for attempt budgets and safety margins.
pub const MIN_BUDGET_MS: u64 = 1000;

/// `lead_floor = max(0, remaining_ttl_ms − rtt)`.
///
/// `rtt = None` means attempt timing is unavailable or unreliable: the spec then forces
/// `lead_floor = 0` (unknown timing must never count as zero elapsed time).
pub fn lead_floor(remaining_ttl_ms: u64, rtt: Option<Millis>) -> Millis {
    match rtt {
        Some(rtt) => Millis::ms(remaining_ttl_ms).saturating_sub(rtt),
        None => Millis::ZERO,
    }
}

/// `attempt_budget = max(request_timeout_budget, 1000 ms, 2 × maximum observed rtt)`.
///
/// An unknown or unbounded request timeout is `Millis::Infinite`, which makes the budget
/// infinite. `max_rtt = None` (no reliable measurement yet) contributes nothing.
pub fn attempt_budget(request_timeout: Millis, max_rtt: Option<Millis>) -> Millis {
    request_timeout
        .max(Millis::ms(MIN_BUDGET_MS))
        .max(max_rtt.unwrap_or(Millis::ZERO).times(2))
}

/// `safety_margin = max(1000 ms, 2 × maximum observed rtt)`.
pub fn safety_margin(max_rtt: Option<Millis>) -> Millis {
    Millis::ms(MIN_BUDGET_MS).max(max_rtt.unwrap_or(Millis::ZERO).times(2))
}

/// `retry_reserve = 2 × attempt_budget + safety_margin`: one failed attempt, one same-key
/// retry, and scheduling/network margin.
pub fn retry_reserve(attempt_budget: Millis, safety_margin: Millis) -> Millis {
    attempt_budget.times(2) + safety_margin
}

/// `next_delay = max(0, lead_floor − retry_reserve)`, measured from response receipt.
pub fn next_delay(lead_floor: Millis, retry_reserve: Millis) -> Millis {
    lead_floor.saturating_sub(retry_reserve)
}

/// Every intermediate value of one primary-path schedule, for display and for vectors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Schedule {
    /// Conservative lower bound of the lead when the response was received.
    pub lead_floor: Millis,
    /// Budget reserved for one complete extend attempt.
    pub attempt_budget: Millis,
    /// Scheduling and network margin.
    pub safety_margin: Millis,
    /// `2 × attempt_budget + safety_margin`.
    pub retry_reserve: Millis,
    /// Delay from response receipt to the next extension.
    pub next_delay: Millis,
}

/// Computes the whole schedule from one schema-valid success.
///
/// `rtt` is this attempt's round trip (`None` when unreliable, which also forces the delay
/// to zero); `max_rtt` is the maximum observed over the lease's life, including this one.
pub fn schedule(
    remaining_ttl_ms: u64,
    rtt: Option<Millis>,
    max_rtt: Option<Millis>,
    request_timeout: Millis,
) -> Schedule {
    let lead_floor = lead_floor(remaining_ttl_ms, rtt);
    let attempt_budget = attempt_budget(request_timeout, max_rtt);
    let safety_margin = safety_margin(max_rtt);
    let retry_reserve = retry_reserve(attempt_budget, safety_margin);
    let next_delay = if rtt.is_some() {
        next_delay(lead_floor, retry_reserve)
    } else {
        Millis::ZERO
    };
    Schedule {
        lead_floor,
        attempt_budget,
        safety_margin,
        retry_reserve,
        next_delay,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_worked_example_sixty_second_lead() {
        // 60000 ms lead, 10000 ms timeout, 1500 ms max rtt: reserve 23000, delay ~37000.
        let s = schedule(
            60_000,
            Some(Millis::ms(0)),
            Some(Millis::ms(1500)),
            Millis::ms(10_000),
        );
        assert_eq!(s.attempt_budget, Millis::ms(10_000));
        assert_eq!(s.safety_margin, Millis::ms(3000));
        assert_eq!(s.retry_reserve, Millis::ms(23_000));
        assert_eq!(s.next_delay, Millis::ms(37_000));
    }

    #[test]
    fn spec_worked_example_thirty_second_timeout_gives_zero() {
        let s = schedule(
            60_000,
            Some(Millis::ms(0)),
            Some(Millis::ms(1500)),
            Millis::ms(30_000),
        );
        assert!(s.retry_reserve >= Millis::ms(61_000));
        assert_eq!(s.next_delay, Millis::ZERO);
    }

    #[test]
    fn unknown_timing_forces_zero_lead_and_delay() {
        let s = schedule(60_000, None, None, Millis::ms(1000));
        assert_eq!(s.lead_floor, Millis::ZERO);
        assert_eq!(s.next_delay, Millis::ZERO);
    }

    #[test]
    fn unknown_timeout_makes_budget_infinite() {
        let s = schedule(
            u64::MAX,
            Some(Millis::ms(1)),
            Some(Millis::ms(1)),
            Millis::Infinite,
        );
        assert_eq!(s.attempt_budget, Millis::Infinite);
        assert_eq!(s.retry_reserve, Millis::Infinite);
        assert_eq!(s.next_delay, Millis::ZERO);
    }

    #[test]
    fn largest_remaining_ttl_does_not_overflow() {
        let max = i64::MAX as u64;
        let s = schedule(
            max,
            Some(Millis::ms(0)),
            Some(Millis::ms(0)),
            Millis::ms(1000),
        );
        assert_eq!(s.next_delay, Millis::ms(max - 3000));
        let huge_rtt = schedule(
            max,
            Some(Millis::ms(u64::MAX)),
            Some(Millis::ms(u64::MAX)),
            Millis::ms(1000),
        );
        assert_eq!(huge_rtt.lead_floor, Millis::ZERO);
        assert_eq!(huge_rtt.attempt_budget, Millis::Infinite);
        assert_eq!(huge_rtt.next_delay, Millis::ZERO);
    }
}
