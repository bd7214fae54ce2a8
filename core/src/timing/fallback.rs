//! The NON-NORMATIVE fallback heartbeat, only for servers that do not emit
//! `remaining_ttl_ms` (HEARTBEAT GUIDANCE, "FALLBACK" and "LIMITS").
//!
//! It keeps a conservative lower bound on the lead from same-frame differences only:
//! `lead_min = Σ measured grants − monotonic elapsed since the reserve response`, where each
//! grant is the difference of successive returned `expires_at_ms`. Regime detection from
//! (grant, elapsed) is undecidable in general (the spec's counterexample is a tested limit),
//! so this planner prefers bounded over-beating: a cadence floor, a held cadence under
//! suspected maximum-lead clamping, and MAX_EXTENSIONS_EXCEEDED as the terminal signal.
//!
//! Unlike the official SDKs it honours Retry-After on 429 and stops on terminal 4xx.

use super::millis::Millis;
use super::planner::{Decision, ExtendFailure, KeyUse, StopReason};

/// Shortest cadence the fallback ever uses: bounded over-beating, never a tight loop.
pub const MIN_CADENCE_MS: u64 = 1000;
/// Upper bound of the held cadence under suspected maximum-lead clamping.
pub const MAX_HELD_CADENCE_MS: u64 = 30_000;

/// What the fallback currently believes about the server's extension regime.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FallbackRegime {
    /// No extension measured yet.
    Unknown,
    /// Grants near the requested ttl: beat at about grant/2.
    Normal,
    /// Smaller grants: a per-extend delta cap, so the lease really is shorter; tighten.
    GrantClamped,
    /// Grants that echo the call spacing (or are <= 0): maximum-lead clamping suspected.
    /// Holds a fixed cadence and burns extension budget; MAX_EXTENSIONS_EXCEEDED ends it.
    MaxLeadClamped,
}

/// Classifies one measured grant against the monotonic time since the previous success.
///
/// Order matters and follows the guidance: a grant of at least 0.9 × the requested ttl is
/// treated as normal; a grant <= 0 or within [0.75, 1.25] × elapsed as maximum-lead
/// clamping; anything else as a genuinely smaller per-extend grant.
pub fn classify_grant(grant_ms: i64, elapsed: Millis, requested_ttl_ms: u64) -> FallbackRegime {
    let grant = i128::from(grant_ms);
    if grant * 10 >= i128::from(requested_ttl_ms) * 9 {
        return FallbackRegime::Normal;
    }
    if grant <= 0 {
        return FallbackRegime::MaxLeadClamped;
    }
    let elapsed = i128::from(elapsed.finite().unwrap_or(u64::MAX));
    if grant * 4 >= elapsed * 3 && grant * 4 <= elapsed * 5 {
        return FallbackRegime::MaxLeadClamped;
    }
    FallbackRegime::GrantClamped
}

/// The cadence for a regime: about grant/2 (never under the floor) when the grant is the
/// lease, `min(requested ttl/2, 30 s)` held when the grant only echoes call spacing.
pub fn cadence(regime: FallbackRegime, last_grant_ms: i64, requested_ttl_ms: u64) -> Millis {
    let held = Millis::ms(requested_ttl_ms / 2)
        .min(Millis::ms(MAX_HELD_CADENCE_MS))
        .max(Millis::ms(MIN_CADENCE_MS));
    match regime {
        FallbackRegime::Unknown | FallbackRegime::MaxLeadClamped => held,
        FallbackRegime::Normal | FallbackRegime::GrantClamped => {
            Millis::ms(u64::try_from(last_grant_ms.max(0) / 2).unwrap_or(0))
                .max(Millis::ms(MIN_CADENCE_MS))
        }
    }
}

/// Delay until the first beat at a multiple of `cadence` whose projected `lead_min` is below
/// 1.5 × the last grant (the skip rule): beats that would find plenty of lead are skipped.
pub fn delay_with_skips(lead_min_now_ms: i128, last_grant_ms: i64, cadence: Millis) -> Millis {
    let Some(c) = cadence.finite().filter(|c| *c > 0) else {
        return cadence;
    };
    let threshold = i128::from(last_grant_ms) * 3 / 2;
    // Saturating: any i128 lead may come in (the bridge takes it from JSON), and a saturated
    // excess still gives a delay past u64, i.e. infinite, as the exact one would.
    let excess = lead_min_now_ms.saturating_sub(threshold);
    // Smallest k >= 1 with lead_min_now − k·c < threshold.
    let k = if excess < 0 {
        1
    } else {
        (excess / i128::from(c)).saturating_add(1)
    };
    let delay = k.saturating_mul(i128::from(c));
    u64::try_from(delay).map_or(Millis::Infinite, Millis::Finite)
}

/// Fallback planner for one lease on a server without `remaining_ttl_ms`.
#[derive(Clone, Debug)]
pub struct FallbackPlanner {
    requested_ttl_ms: u64,
    reserve_received_us: u64,
    last_success_us: u64,
    last_expires_at_ms: i64,
    sum_grants_ms: i128,
    last_grant_ms: Option<i64>,
    regime: FallbackRegime,
}

impl FallbackPlanner {
    /// Starts from the create response: its receipt time and returned `expires_at_ms`.
    pub fn new(
        requested_ttl_ms: u64,
        reserve_received_us: u64,
        expires_at_ms: i64,
    ) -> FallbackPlanner {
        FallbackPlanner {
            requested_ttl_ms,
            reserve_received_us,
            last_success_us: reserve_received_us,
            last_expires_at_ms: expires_at_ms,
            sum_grants_ms: 0,
            last_grant_ms: None,
            regime: FallbackRegime::Unknown,
        }
    }

    /// The first beat: immediately when `prime` (spends one extension, possibly for zero added
    /// lifetime under maximum-lead clamping, to avoid lapsing an unknown small initial lease),
    /// else after `min(requested ttl/2, 30 s)`.
    pub fn first_beat(&self, prime: bool) -> Decision {
        let delay = if prime {
            Millis::ZERO
        } else {
            cadence(FallbackRegime::Unknown, 0, self.requested_ttl_ms)
        };
        Decision::Extend {
            delay,
            key: KeyUse::Fresh,
        }
    }

    /// The requested ttl (`extend_by_ms` of every extension).
    pub fn requested_ttl_ms(&self) -> u64 {
        self.requested_ttl_ms
    }

    /// The current regime belief.
    pub fn regime(&self) -> FallbackRegime {
        self.regime
    }

    /// The last measured grant, if any.
    pub fn last_grant_ms(&self) -> Option<i64> {
        self.last_grant_ms
    }

    /// `lead_min` at monotonic `now_us` (elapsed rounded up, so it never overstates).
    pub fn lead_min_ms(&self, now_us: u64) -> i128 {
        let elapsed =
            Millis::from_micros_ceil(u128::from(now_us.saturating_sub(self.reserve_received_us)));
        self.sum_grants_ms - i128::from(elapsed.finite().unwrap_or(u64::MAX))
    }

    /// A schema-valid extend success received at `received_us` with the new `expires_at_ms`.
    pub fn on_success(&mut self, received_us: u64, expires_at_ms: i64) -> Decision {
        let grant = i128::from(expires_at_ms) - i128::from(self.last_expires_at_ms);
        let grant = i64::try_from(grant).unwrap_or(if grant > 0 { i64::MAX } else { i64::MIN });
        let elapsed =
            Millis::from_micros_ceil(u128::from(received_us.saturating_sub(self.last_success_us)));
        self.sum_grants_ms += i128::from(grant);
        self.last_expires_at_ms = expires_at_ms;
        self.last_success_us = received_us;
        self.last_grant_ms = Some(grant);
        self.regime = classify_grant(grant, elapsed, self.requested_ttl_ms);
        let cadence = cadence(self.regime, grant, self.requested_ttl_ms);
        Decision::Extend {
            delay: delay_with_skips(self.lead_min_ms(received_us), grant, cadence),
            key: KeyUse::Fresh,
        }
    }

    /// A failed or ambiguous attempt at `now_us`. Transient failures retry with the same key at
    /// the current cadence, but no later than half the remaining `lead_min` (floor 1 s); 429
    /// waits at least its Retry-After; stop codes and other 4xx stop.
    pub fn on_failure(&mut self, now_us: u64, failure: &ExtendFailure) -> Decision {
        let current = cadence(
            self.regime,
            self.last_grant_ms.unwrap_or(0),
            self.requested_ttl_ms,
        );
        let half_lead = u64::try_from(self.lead_min_ms(now_us).max(0) / 2).unwrap_or(u64::MAX);
        let transient = current
            .min(Millis::ms(half_lead))
            .max(Millis::ms(MIN_CADENCE_MS));
        match failure {
            ExtendFailure::Permanent(code) => Decision::Stop(StopReason::Permanent(code.clone())),
            ExtendFailure::Rejected { status, code } => Decision::Stop(StopReason::Rejected {
                status: *status,
                code: code.clone(),
            }),
            ExtendFailure::Transient => Decision::Extend {
                delay: transient,
                key: KeyUse::Same,
            },
            ExtendFailure::RateLimited(retry_after) => {
                let floor = retry_after.to_millis().map_or(Millis::ZERO, Millis::ms);
                Decision::Extend {
                    delay: transient.max(floor),
                    key: KeyUse::Same,
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timing::retry::RetryAfter;

    const MS: u64 = 1000;

    #[test]
    fn classification_follows_the_guidance_order() {
        assert_eq!(
            classify_grant(60_000, Millis::ms(60_000), 60_000),
            FallbackRegime::Normal
        );
        assert_eq!(
            classify_grant(0, Millis::ms(1), 60_000),
            FallbackRegime::MaxLeadClamped
        );
        assert_eq!(
            classify_grant(-5, Millis::ms(1), 60_000),
            FallbackRegime::MaxLeadClamped
        );
        assert_eq!(
            classify_grant(30_000, Millis::ms(30_000), 60_000),
            FallbackRegime::MaxLeadClamped
        );
        assert_eq!(
            classify_grant(10_000, Millis::ms(30_000), 60_000),
            FallbackRegime::GrantClamped
        );
    }

    #[test]
    fn additive_server_settles_into_a_skip_pattern() {
        let mut p = FallbackPlanner::new(60_000, 0, 60_000);
        assert_eq!(
            p.first_beat(true),
            Decision::Extend {
                delay: Millis::ZERO,
                key: KeyUse::Fresh
            }
        );
        let d = p.on_success(10 * MS, 120_000);
        assert_eq!(p.regime(), FallbackRegime::Normal);
        assert_eq!(
            d,
            Decision::Extend {
                delay: Millis::ms(30_000),
                key: KeyUse::Fresh
            }
        );
    }

    #[test]
    fn spec_counterexample_is_misclassified_forever() {
        // Requested 24 s, per-extend grant cap 10 s, beats at the held 12 s cadence: ratio 10/12
        // sits inside [0.75, 1.25], so the planner keeps the held cadence while the lease erodes
        // 2 s per cycle. This is the documented limit of the fallback, not a bug to fix here.
        let mut p = FallbackPlanner::new(24_000, 0, 24_000);
        let mut expires = 24_000i64;
        let mut now_ms = 0u64;
        for _ in 0..5 {
            now_ms += 12_000;
            expires += 10_000;
            let d = p.on_success(now_ms * MS, expires);
            assert_eq!(p.regime(), FallbackRegime::MaxLeadClamped);
            assert!(matches!(d, Decision::Extend { delay, .. } if delay >= Millis::ms(12_000)));
        }
        assert!(
            p.lead_min_ms(now_ms * MS) < 0,
            "lead_min records the erosion"
        );
    }

    #[test]
    fn failures_honour_retry_after_and_stop_on_terminal_codes() {
        let mut p = FallbackPlanner::new(60_000, 0, 60_000);
        p.on_success(0, 120_000);
        let d = p.on_failure(MS, &ExtendFailure::RateLimited(RetryAfter::Seconds(45)));
        assert_eq!(
            d,
            Decision::Extend {
                delay: Millis::ms(45_000),
                key: KeyUse::Same
            }
        );
        let d = p.on_failure(MS, &ExtendFailure::Transient);
        assert!(
            matches!(d, Decision::Extend { key: KeyUse::Same, delay } if delay >= Millis::ms(MIN_CADENCE_MS))
        );
        let d = p.on_failure(
            MS,
            &ExtendFailure::from_error_code(409, Some("MAX_EXTENSIONS_EXCEEDED")),
        );
        assert_eq!(
            d,
            Decision::Stop(StopReason::Permanent("MAX_EXTENSIONS_EXCEEDED".into()))
        );
        let d = p.on_failure(
            MS,
            &ExtendFailure::from_error_code(400, Some("INVALID_REQUEST")),
        );
        assert!(matches!(
            d,
            Decision::Stop(StopReason::Rejected { status: 400, .. })
        ));
    }

    #[test]
    fn skip_rule() {
        assert_eq!(
            delay_with_skips(0, 60_000, Millis::ms(30_000)),
            Millis::ms(30_000)
        );
        // 150 s of lead_min, threshold 90 s, cadence 30 s: beats at 30 (120), 60 (90) skip, 90 (60) fires.
        assert_eq!(
            delay_with_skips(150_000, 60_000, Millis::ms(30_000)),
            Millis::ms(90_000)
        );
    }

    /// Fuzz finding (scripts/fuzz.sh timing): any i128 lead, as the bridge's JSON takes it,
    /// overflowed `lead − threshold` and `excess / cadence + 1` (a panic with overflow checks,
    /// a wrapped delay without). Extremes saturate to what the exact arithmetic gives.
    #[test]
    fn skip_rule_at_the_extremes_does_not_overflow() {
        assert_eq!(
            delay_with_skips(i128::MIN, i64::MAX, Millis::ms(1)),
            Millis::ms(1)
        );
        assert_eq!(
            delay_with_skips(i128::MAX, i64::MIN, Millis::ms(1)),
            Millis::Infinite
        );
        assert_eq!(
            delay_with_skips(i128::MAX, 0, Millis::ms(u64::MAX)),
            Millis::Infinite
        );
        assert_eq!(
            delay_with_skips(i128::MIN, i64::MIN, Millis::ms(7)),
            Millis::ms(7)
        );
    }
}
