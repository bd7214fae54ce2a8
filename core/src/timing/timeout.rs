//! The enforced per-extend timeout, derived from the lease when the configured request
//! timeout leaves no positive heartbeat cadence.
//!
//! The spec's `request_timeout_budget` is the client's ENFORCED upper bound for one extend
//! attempt. With the default 10 s request timeout every lead below about 21 s gives
//! `next_delay = 0` (one immediate extension, then a stop), although a shorter enforced timeout
//! would keep such a lease alive. These pure functions choose that shorter timeout:
//!
//! - keep the configured timeout whenever it already gives a positive `next_delay`;
//! - otherwise aim the next beat at about half the lead, `T = floor((floor(lead_floor/2) −
//!   safety_margin) / 2)` (then `retry_reserve = 2T + margin ≈ lead/2` and `next_delay ≈
//!   lead/2`: as much time before the beat as is reserved after it), clamped to
//!   `[max(1000 ms, 2 × max rtt), largest T that still gives next_delay > 0]`, and never above
//!   the configured timeout;
//! - when even the floor gives no positive delay the lease cannot be kept alive by the safe
//!   schedule: use the floor (it leaves the most room for a same-key retry of the immediate
//!   extension) and report the smallest lead that would work.
//!
//! Because the chosen timeout is at least `max(1000 ms, 2 × max rtt)`, the spec's
//! `attempt_budget` equals the enforced timeout exactly: there is no rounding gap between what
//! is enforced and what is reserved. The target is rounded DOWN (it must stay strictly inside
//! the positive-delay bound); thresholds are exact integer comparisons.

use super::millis::Millis;
use super::primary;

/// Where the enforced extend timeout came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TimeoutSource {
    /// The configured request timeout already gives a positive `next_delay`.
    Configured,
    /// Derived from the lease: the configured timeout gave `next_delay = 0`.
    Derived,
    /// No timeout can give a positive `next_delay` for this lead: the lease is shorter than
    /// the smallest retry reserve. The floor (or the configured timeout, if smaller) is used.
    TooShort,
}

impl TimeoutSource {
    /// Stable snake_case name: `configured`, `derived` or `too_short`.
    pub fn name(self) -> &'static str {
        match self {
            TimeoutSource::Configured => "configured",
            TimeoutSource::Derived => "derived",
            TimeoutSource::TooShort => "too_short",
        }
    }
}

/// The enforced timeout for the next extend attempts, and why.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExtendTimeout {
    /// The timeout every extend attempt must be cut off at until the next schema-valid
    /// response; also the spec's `request_timeout_budget`.
    pub timeout: Millis,
    /// Where it came from.
    pub source: TimeoutSource,
    /// The smallest `lead_floor` any timeout keeps alive: `3 × safety_margin + 1`.
    pub min_lead_floor: Millis,
}

/// The smallest enforced timeout worth choosing: `max(1000 ms, 2 × max rtt)` (the spec's floor
/// of `attempt_budget`; a shorter timeout lowers no budget, it only fails more attempts).
pub fn timeout_floor(max_rtt: Option<Millis>) -> Millis {
    primary::safety_margin(max_rtt)
}

/// The smallest `lead_floor` that gives a positive `next_delay` with `timeout`:
/// `2 × attempt_budget + safety_margin + 1` (infinite when the budget is).
pub fn min_lead_floor(timeout: Millis, max_rtt: Option<Millis>) -> Millis {
    let budget = primary::attempt_budget(timeout, max_rtt);
    primary::retry_reserve(budget, primary::safety_margin(max_rtt)) + Millis::ms(1)
}

/// The smallest `lead_floor` ANY timeout keeps alive: [`min_lead_floor`] at the floor,
/// `3 × safety_margin + 1`.
pub fn min_keepable_lead_floor(max_rtt: Option<Millis>) -> Millis {
    min_lead_floor(Millis::ZERO, max_rtt)
}

/// The largest timeout (at least [`timeout_floor`]) that still gives `next_delay > 0` for
/// `lead_floor`: `floor((lead_floor − safety_margin − 1) / 2)`. `None` when even the floor
/// cannot (or the smallest reserve overflows). For an infinite lead it is the largest timeout
/// whose reserve is still finite.
pub fn max_keeping_timeout(lead_floor: Millis, max_rtt: Option<Millis>) -> Option<Millis> {
    let margin = primary::safety_margin(max_rtt).finite()?;
    let needed = min_keepable_lead_floor(max_rtt);
    // An unrepresentable smallest reserve keeps nothing alive, not even an infinite lead.
    if needed.is_infinite() || lead_floor < needed {
        return None;
    }
    let top = match lead_floor {
        // 2T + margin < lead  <=>  T <= (lead − margin − 1) / 2.
        Millis::Finite(lead) => (lead - margin - 1) / 2,
        // Any finite reserve leaves an infinite delay; keep 2T + margin representable.
        Millis::Infinite => (u64::MAX - margin) / 2,
    };
    Some(Millis::ms(top))
}

/// The timeout that puts the next beat at about half the lead:
/// `max(0, floor((floor(lead_floor / 2) − safety_margin) / 2))` (before clamping).
pub fn target_timeout(lead_floor: Millis, max_rtt: Option<Millis>) -> Millis {
    lead_floor
        .div_floor(2)
        .saturating_sub(primary::safety_margin(max_rtt))
        .div_floor(2)
}

/// Chooses the enforced extend timeout for a lead (see the module docs). `configured` is the
/// client's request timeout (`Millis::Infinite` when it has none: a derived finite one is then
/// enforced instead). `lead_floor` is the primary path's `max(0, remaining_ttl_ms − rtt)`.
pub fn extend_timeout(
    lead_floor: Millis,
    max_rtt: Option<Millis>,
    configured: Millis,
) -> ExtendTimeout {
    let min_keepable = min_keepable_lead_floor(max_rtt);
    let floor = timeout_floor(max_rtt);
    let configured_reserve = primary::retry_reserve(
        primary::attempt_budget(configured, max_rtt),
        primary::safety_margin(max_rtt),
    );
    // Compared as the spec computes it, so an infinite lead with an unbounded timeout
    // (infinity minus infinity: delay 0) is not mistaken for a working configuration.
    if primary::next_delay(lead_floor, configured_reserve) > Millis::ZERO {
        return ExtendTimeout {
            timeout: configured,
            source: TimeoutSource::Configured,
            min_lead_floor: min_keepable,
        };
    }
    match max_keeping_timeout(lead_floor, max_rtt) {
        Some(top) => ExtendTimeout {
            timeout: target_timeout(lead_floor, max_rtt)
                .max(floor)
                .min(top)
                .min(configured),
            source: TimeoutSource::Derived,
            min_lead_floor: min_keepable,
        },
        None => ExtendTimeout {
            timeout: floor.min(configured),
            source: TimeoutSource::TooShort,
            min_lead_floor: min_keepable,
        },
    }
}

/// The most of an attempt's budget kept back for failure detection.
pub const MAX_DETECTION_ALLOWANCE_MS: u64 = 100;

/// The cut-off actually armed for an attempt whose budget is `timeout`:
/// `timeout − min(floor(timeout / 10), 100 ms)` (infinite stays infinite).
///
/// The spec's `request_timeout_budget` bounds one complete attempt INCLUDING failure
/// detection. A timer fires late by scheduling jitter; armed at the full budget, every
/// timed-out beat would overrun its reserve by that lateness (`retry_window` a few ms below
/// zero) and stop the heartbeat instead of making the same-key retry the reserve was kept for.
/// The schedule keeps counting the full `timeout`, the conservative direction.
pub fn attempt_cutoff(timeout: Millis) -> Millis {
    timeout.saturating_sub(
        timeout
            .div_floor(10)
            .min(Millis::ms(MAX_DETECTION_ALLOWANCE_MS)),
    )
}

/// What a heartbeat warns about when it starts on a lease it cannot keep alive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TooShort {
    /// The lead the create response established.
    pub lead_floor: Millis,
    /// The smallest `remaining_ttl_ms` that would be kept alive: the minimum lead plus the
    /// create's rtt (with derivation: any timeout; without: the configured one).
    pub min_ttl: Millis,
    /// The enforced extend timeout the heartbeat uses.
    pub timeout: Millis,
    /// Without derivation: the timeout that would keep this lease alive, if any.
    pub working_timeout: Option<Millis>,
}

/// The start-of-heartbeat check: `None` when the lease as created can be kept alive with the
/// timeout the heartbeat will enforce (`derive` says whether it derives one), else what to
/// warn about. `rtt` is the create attempt's rtt (the lead lost in transit).
pub fn too_short_at_start(
    lead_floor: Millis,
    rtt: Millis,
    max_rtt: Option<Millis>,
    configured: Millis,
    derive: bool,
) -> Option<TooShort> {
    let choice = extend_timeout(lead_floor, max_rtt, configured);
    match (derive, choice.source) {
        (_, TimeoutSource::Configured) | (true, TimeoutSource::Derived) => None,
        (true, TimeoutSource::TooShort) => Some(TooShort {
            lead_floor,
            min_ttl: choice.min_lead_floor + rtt,
            timeout: choice.timeout,
            working_timeout: None,
        }),
        (false, source) => Some(TooShort {
            lead_floor,
            min_ttl: min_lead_floor(configured, max_rtt) + rtt,
            timeout: configured,
            working_timeout: (source == TimeoutSource::Derived).then_some(choice.timeout),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn delay(lead: Millis, rtt: Option<Millis>, timeout: Millis) -> Millis {
        let budget = primary::attempt_budget(timeout, rtt);
        primary::next_delay(
            lead,
            primary::retry_reserve(budget, primary::safety_margin(rtt)),
        )
    }

    #[test]
    fn six_second_lease_with_the_default_timeout() {
        // The case: 10 s configured gives delay 0; derived 1000 ms gives ~3 s.
        let rtt = Some(Millis::ms(5));
        let lead = Millis::ms(5990);
        assert_eq!(delay(lead, rtt, Millis::ms(10_000)), Millis::ZERO);
        let t = extend_timeout(lead, rtt, Millis::ms(10_000));
        assert_eq!(t.source, TimeoutSource::Derived);
        assert_eq!(t.timeout, Millis::ms(1000));
        assert_eq!(delay(lead, rtt, t.timeout), Millis::ms(2990));
    }

    #[test]
    fn configured_is_kept_when_it_already_works() {
        let t = extend_timeout(
            Millis::ms(60_000),
            Some(Millis::ms(1500)),
            Millis::ms(10_000),
        );
        assert_eq!(t.source, TimeoutSource::Configured);
        assert_eq!(t.timeout, Millis::ms(10_000));
        // Exactly at the threshold: 2 x 10000 + 3000 + 1.
        let t = extend_timeout(
            Millis::ms(23_001),
            Some(Millis::ms(1500)),
            Millis::ms(10_000),
        );
        assert_eq!(t.source, TimeoutSource::Configured);
        let t = extend_timeout(
            Millis::ms(23_000),
            Some(Millis::ms(1500)),
            Millis::ms(10_000),
        );
        assert_eq!(t.source, TimeoutSource::Derived);
        assert_eq!(t.timeout, Millis::ms(4250));
    }

    #[test]
    fn the_edge_of_keepability() {
        assert_eq!(min_keepable_lead_floor(None), Millis::ms(3001));
        let t = extend_timeout(Millis::ms(3001), None, Millis::ms(10_000));
        assert_eq!(
            (t.source, t.timeout),
            (TimeoutSource::Derived, Millis::ms(1000))
        );
        assert_eq!(delay(Millis::ms(3001), None, t.timeout), Millis::ms(1));
        let t = extend_timeout(Millis::ms(3000), None, Millis::ms(10_000));
        assert_eq!(
            (t.source, t.timeout),
            (TimeoutSource::TooShort, Millis::ms(1000))
        );
        // A configured timeout below the floor is never raised.
        let t = extend_timeout(Millis::ms(0), None, Millis::ms(500));
        assert_eq!(t.timeout, Millis::ms(500));
    }

    #[test]
    fn infinities() {
        // No configured bound: a finite one is derived.
        let t = extend_timeout(Millis::ms(60_000), None, Millis::Infinite);
        assert_eq!(
            (t.source, t.timeout),
            (TimeoutSource::Derived, Millis::ms(14_500))
        );
        // Infinite lead, no bound: the largest timeout with a finite reserve.
        let t = extend_timeout(Millis::Infinite, None, Millis::Infinite);
        assert_eq!(t.timeout, Millis::ms((u64::MAX - 1000) / 2));
        assert_eq!(delay(Millis::Infinite, None, t.timeout), Millis::Infinite);
        // An overflowing rtt: nothing can be kept alive.
        let t = extend_timeout(Millis::Infinite, Some(Millis::ms(u64::MAX)), Millis::ms(1));
        assert_eq!(t.source, TimeoutSource::TooShort);
        assert_eq!(t.min_lead_floor, Millis::Infinite);
    }

    #[test]
    fn cutoff_keeps_back_a_detection_allowance() {
        assert_eq!(attempt_cutoff(Millis::ms(1000)), Millis::ms(900));
        assert_eq!(attempt_cutoff(Millis::ms(999)), Millis::ms(900));
        assert_eq!(attempt_cutoff(Millis::ms(500)), Millis::ms(450));
        assert_eq!(attempt_cutoff(Millis::ms(9)), Millis::ms(9));
        assert_eq!(
            attempt_cutoff(Millis::ms(u64::MAX)),
            Millis::ms(u64::MAX - 100)
        );
        assert_eq!(attempt_cutoff(Millis::Infinite), Millis::Infinite);
    }

    #[test]
    fn start_warnings_name_what_would_work() {
        let rtt = Millis::ms(10);
        let max = Some(rtt);
        // Keepable with derivation: no warning; without it, the derived timeout is named.
        let lead = Millis::ms(5990);
        assert_eq!(
            too_short_at_start(lead, rtt, max, Millis::ms(10_000), true),
            None
        );
        assert_eq!(
            too_short_at_start(lead, rtt, max, Millis::ms(10_000), false),
            Some(TooShort {
                lead_floor: lead,
                min_ttl: Millis::ms(21_011),
                timeout: Millis::ms(10_000),
                working_timeout: Some(Millis::ms(1000)),
            })
        );
        // 2 s: nothing works; the smallest ttl is 3001 + rtt.
        let lead = Millis::ms(1990);
        assert_eq!(
            too_short_at_start(lead, rtt, max, Millis::ms(10_000), true),
            Some(TooShort {
                lead_floor: lead,
                min_ttl: Millis::ms(3011),
                timeout: Millis::ms(1000),
                working_timeout: None,
            })
        );
        assert_eq!(
            too_short_at_start(lead, rtt, max, Millis::ms(10_000), false)
                .and_then(|t| t.working_timeout),
            None
        );
    }

    proptest! {
        /// Whatever the inputs: never above the configured timeout; Derived gives a positive
        /// delay with the floor respected and the budget equal to the timeout; TooShort means
        /// no timeout at all would give a positive delay; Configured means it already works.
        #[test]
        fn choice_is_sound(lead in 0u64..200_000, rtt in proptest::option::of(0u64..5_000), configured in 1u64..100_000) {
            let (lead, rtt, configured) = (Millis::ms(lead), rtt.map(Millis::ms), Millis::ms(configured));
            let t = extend_timeout(lead, rtt, configured);
            prop_assert!(t.timeout <= configured);
            match t.source {
                TimeoutSource::Configured => prop_assert!(delay(lead, rtt, configured) > Millis::ZERO),
                TimeoutSource::Derived => {
                    prop_assert_eq!(delay(lead, rtt, configured), Millis::ZERO);
                    prop_assert!(delay(lead, rtt, t.timeout) > Millis::ZERO);
                    prop_assert!(t.timeout >= timeout_floor(rtt));
                    prop_assert_eq!(primary::attempt_budget(t.timeout, rtt), t.timeout);
                    // Largest: one more millisecond would give no cadence, or the target was hit.
                    let top = max_keeping_timeout(lead, rtt).unwrap();
                    prop_assert_eq!(delay(lead, rtt, top + Millis::ms(1)), Millis::ZERO);
                }
                TimeoutSource::TooShort => {
                    prop_assert!(lead < t.min_lead_floor);
                    prop_assert_eq!(delay(lead, rtt, Millis::ZERO), Millis::ZERO);
                }
            }
            prop_assert_eq!(lead >= t.min_lead_floor, t.source != TimeoutSource::TooShort);
        }
    }
}
