//! The primary-path heartbeat planner: a small state machine over the pure rules in
//! [`super::primary`] and [`super::retry`]. It holds no clock: callers pass monotonic
//! microsecond timestamps, so simulations and real leases drive the very same code.

use super::millis::{Millis, SignedMillis};
use super::primary::{self, Schedule};
use super::retry::{self, RetryAfter};
use super::timeout::{self, ExtendTimeout};

/// What went wrong with one extend attempt, classified for the heartbeat.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ExtendFailure {
    /// Timeout, connection error or reset, 5xx, or a 2xx that is not schema-valid.
    Transient,
    /// HTTP 429 with its `Retry-After`.
    RateLimited(RetryAfter),
    /// A server error code that is permanent for the reservation (see
    /// [`retry::PERMANENT_STOP_CODES`]).
    Permanent(String),
    /// Any other 4xx: a request or authorization failure; never retried with a rotated key.
    Rejected {
        /// HTTP status.
        status: u16,
        /// The server's error code, when it sent one.
        code: Option<String>,
    },
}

impl ExtendFailure {
    /// Classifies a non-transient, non-429 error response by its code.
    pub fn from_error_code(status: u16, code: Option<&str>) -> ExtendFailure {
        match code {
            Some(c) if retry::is_permanent_stop_code(c) => ExtendFailure::Permanent(c.to_string()),
            _ => ExtendFailure::Rejected {
                status,
                code: code.map(str::to_string),
            },
        }
    }
}

/// Which idempotency key the next extend attempt uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyUse {
    /// A new extension after a schema-valid success: a fresh key.
    Fresh,
    /// A retry of a failed or ambiguous attempt: the SAME key, so it is never applied twice.
    Same,
}

/// Why the heartbeat stopped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StopReason {
    /// Two consecutive schema-valid successes both produced a zero delay: the lease is shorter
    /// than its retry-safety budget (or attempt timing is unreliable).
    LeaseShorterThanRetryBudget,
    /// The recomputed retry window is negative: no complete retry plus margin is provably safe.
    NoSafeRetryWindow {
        /// The (negative) window.
        retry_window: SignedMillis,
    },
    /// A zero-window immediate retry failed too.
    ZeroWindowRetryFailed,
    /// Neither elapsed time nor the retry window moved between consecutive failures.
    NoProgress,
    /// 429 whose Retry-After is missing, invalid, overflowing, or longer than the window.
    RateLimitBeyondWindow {
        /// The parsed header.
        retry_after: RetryAfter,
        /// The window it had to fit.
        retry_window: SignedMillis,
    },
    /// A permanent reservation error (expired, finalized, max extensions, tenant closed, not found).
    Permanent(String),
    /// Another 4xx: the request or its authorization was rejected.
    Rejected {
        /// HTTP status.
        status: u16,
        /// The server's error code, when it sent one.
        code: Option<String>,
    },
    /// A failure arrived before any schema-valid success established a lead.
    NoValidResponse,
}

impl StopReason {
    /// Stable snake_case name, the same in every binding (`no_safe_retry_window`, ...).
    pub fn name(&self) -> &'static str {
        match self {
            StopReason::LeaseShorterThanRetryBudget => "lease_shorter_than_retry_budget",
            StopReason::NoSafeRetryWindow { .. } => "no_safe_retry_window",
            StopReason::ZeroWindowRetryFailed => "zero_window_retry_failed",
            StopReason::NoProgress => "no_progress",
            StopReason::RateLimitBeyondWindow { .. } => "rate_limit_beyond_window",
            StopReason::Permanent(_) => "permanent",
            StopReason::Rejected { .. } => "rejected",
            StopReason::NoValidResponse => "no_valid_response",
        }
    }
}

/// The planner's instruction for the lease driver.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Start the next extend attempt after `delay` (from response receipt, or from the failure
    /// for a retry), with a fresh or the same idempotency key.
    Extend {
        /// Delay before the attempt, rounded down.
        delay: Millis,
        /// Key discipline for the attempt.
        key: KeyUse,
    },
    /// Stop heartbeating and surface the reason.
    Stop(StopReason),
}

/// The arithmetic behind a failure decision, for events and `cycles plan`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FailureMath {
    /// Elapsed since the last schema-valid response, rounded up.
    pub elapsed: Millis,
    /// `max(0, last lead_floor − elapsed)`.
    pub current_lead_estimate: Millis,
    /// `current_lead_estimate − attempt_budget − safety_margin`, unclamped.
    pub retry_window: SignedMillis,
}

#[derive(Clone, Copy, Debug)]
struct LastValid {
    lead_floor: Millis,
    received_us: u64,
}

/// Primary-path planner for one lease. Feed it every create/extend outcome in order.
#[derive(Clone, Debug)]
pub struct PrimaryPlanner {
    /// The enforced per-attempt timeout in force (the spec's `request_timeout_budget`).
    request_timeout: Millis,
    /// The client's configured timeout; with `derive` it is the upper bound of derivation.
    configured_timeout: Millis,
    /// Derive the enforced timeout from each response's lead (see [`timeout::extend_timeout`]).
    derive: bool,
    last_timeout: Option<ExtendTimeout>,
    max_rtt: Option<Millis>,
    last: Option<LastValid>,
    last_schedule: Option<Schedule>,
    previous_success_had_zero_delay: bool,
    previous_failure: Option<(Millis, SignedMillis)>,
    zero_window_retry_in_flight: bool,
}

impl PrimaryPlanner {
    /// A planner for a client whose enforced per-attempt timeout is `request_timeout`
    /// (`Millis::Infinite` when unknown or unbounded).
    pub fn new(request_timeout: Millis) -> PrimaryPlanner {
        PrimaryPlanner {
            request_timeout,
            configured_timeout: request_timeout,
            derive: false,
            last_timeout: None,
            max_rtt: None,
            last: None,
            last_schedule: None,
            previous_success_had_zero_delay: false,
            previous_failure: None,
            zero_window_retry_in_flight: false,
        }
    }

    /// A planner that derives the enforced per-extend timeout from every schema-valid response
    /// ([`timeout::extend_timeout`]): `configured` while it gives a positive delay, else a
    /// shorter one, never above `configured`. The caller MUST cut each extend attempt off at
    /// [`Self::attempt_timeout`], since the schedule and the retry windows count that value.
    /// A response with unreliable timing (`rtt = None`) establishes no lead to derive from:
    /// the configured timeout applies.
    pub fn with_derived_timeout(configured: Millis) -> PrimaryPlanner {
        PrimaryPlanner {
            derive: true,
            ..PrimaryPlanner::new(configured)
        }
    }

    /// The enforced timeout the next extend attempt must use (the spec's
    /// `request_timeout_budget`); changes only on a schema-valid success.
    pub fn attempt_timeout(&self) -> Millis {
        self.request_timeout
    }

    /// The timeout choice made on the latest success (derived mode and reliable timing only).
    pub fn last_timeout(&self) -> Option<ExtendTimeout> {
        self.last_timeout
    }

    /// The maximum reliable rtt observed so far.
    pub fn max_rtt(&self) -> Option<Millis> {
        self.max_rtt
    }

    /// Records a reliable rtt measured outside `on_success` (e.g. an earlier lease's attempts),
    /// so margins account for it.
    pub fn observe_rtt(&mut self, rtt: Millis) {
        self.max_rtt = Some(self.max_rtt.map_or(rtt, |m| m.max(rtt)));
    }

    /// The schedule computed from the latest success.
    pub fn last_schedule(&self) -> Option<Schedule> {
        self.last_schedule
    }

    /// A schema-valid create or extend success carrying `remaining_ttl_ms`, received at
    /// monotonic `received_us`, whose attempt took `rtt` (`None` when timing is unreliable).
    pub fn on_success(
        &mut self,
        received_us: u64,
        remaining_ttl_ms: u64,
        rtt: Option<Millis>,
    ) -> Decision {
        if let Some(rtt) = rtt {
            self.observe_rtt(rtt);
        }
        if self.derive {
            // Recomputed from every response: the lead, and so the best timeout, changes.
            self.last_timeout = rtt.map(|_| {
                let lead = primary::lead_floor(remaining_ttl_ms, rtt);
                timeout::extend_timeout(lead, self.max_rtt, self.configured_timeout)
            });
            self.request_timeout = self
                .last_timeout
                .map_or(self.configured_timeout, |t| t.timeout);
        }
        let schedule = primary::schedule(remaining_ttl_ms, rtt, self.max_rtt, self.request_timeout);
        self.last = Some(LastValid {
            lead_floor: schedule.lead_floor,
            received_us,
        });
        self.last_schedule = Some(schedule);
        self.previous_failure = None;
        self.zero_window_retry_in_flight = false;
        if schedule.next_delay == Millis::ZERO {
            if self.previous_success_had_zero_delay {
                return Decision::Stop(StopReason::LeaseShorterThanRetryBudget);
            }
            self.previous_success_had_zero_delay = true;
        } else {
            self.previous_success_had_zero_delay = false;
        }
        Decision::Extend {
            delay: schedule.next_delay,
            key: KeyUse::Fresh,
        }
    }

    /// The arithmetic a failure at monotonic `now_us` would use, if a success came before.
    pub fn failure_math(&self, now_us: u64) -> Option<FailureMath> {
        let last = self.last?;
        let elapsed = Millis::from_micros_ceil(u128::from(now_us.saturating_sub(last.received_us)));
        let current_lead_estimate = retry::current_lead_estimate(last.lead_floor, elapsed);
        let attempt_budget = primary::attempt_budget(self.request_timeout, self.max_rtt);
        let safety_margin = primary::safety_margin(self.max_rtt);
        Some(FailureMath {
            elapsed,
            current_lead_estimate,
            retry_window: retry::retry_window(current_lead_estimate, attempt_budget, safety_margin),
        })
    }

    /// A failed or ambiguous extend attempt, observed at monotonic `now_us`.
    pub fn on_failure(&mut self, now_us: u64, failure: &ExtendFailure) -> Decision {
        match failure {
            ExtendFailure::Permanent(code) => {
                return Decision::Stop(StopReason::Permanent(code.clone()))
            }
            ExtendFailure::Rejected { status, code } => {
                return Decision::Stop(StopReason::Rejected {
                    status: *status,
                    code: code.clone(),
                })
            }
            ExtendFailure::Transient | ExtendFailure::RateLimited(_) => {}
        }
        let Some(math) = self.failure_math(now_us) else {
            return Decision::Stop(StopReason::NoValidResponse);
        };
        if self.zero_window_retry_in_flight {
            return Decision::Stop(StopReason::ZeroWindowRetryFailed);
        }
        if let Some((prev_elapsed, prev_window)) = self.previous_failure {
            if math.elapsed <= prev_elapsed && math.retry_window >= prev_window {
                return Decision::Stop(StopReason::NoProgress);
            }
        }
        self.previous_failure = Some((math.elapsed, math.retry_window));
        if math.retry_window.is_negative() {
            return Decision::Stop(StopReason::NoSafeRetryWindow {
                retry_window: math.retry_window,
            });
        }
        let delay = match failure {
            ExtendFailure::RateLimited(retry_after) => match retry_after.to_millis() {
                Some(ms) if Millis::ms(ms) <= math.retry_window.clamp_to_millis() => Millis::ms(ms),
                _ => {
                    return Decision::Stop(StopReason::RateLimitBeyondWindow {
                        retry_after: *retry_after,
                        retry_window: math.retry_window,
                    })
                }
            },
            _ => retry::transient_retry_delay(math.current_lead_estimate, math.retry_window),
        };
        if math.retry_window.is_zero() {
            self.zero_window_retry_in_flight = true;
        }
        Decision::Extend {
            delay,
            key: KeyUse::Same,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1000; // microseconds per millisecond

    fn planner() -> PrimaryPlanner {
        PrimaryPlanner::new(Millis::ms(10_000))
    }

    #[test]
    fn first_beat_from_create_uses_the_schedule() {
        let mut p = planner();
        let d = p.on_success(0, 60_000, Some(Millis::ms(1500)));
        assert_eq!(
            d,
            Decision::Extend {
                delay: Millis::ms(60_000 - 1500 - 23_000),
                key: KeyUse::Fresh
            }
        );
    }

    #[test]
    fn two_consecutive_zero_delays_stop() {
        let mut p = planner();
        assert_eq!(
            p.on_success(0, 5000, Some(Millis::ms(10))),
            Decision::Extend {
                delay: Millis::ZERO,
                key: KeyUse::Fresh
            }
        );
        assert_eq!(
            p.on_success(20 * MS, 5000, Some(Millis::ms(10))),
            Decision::Stop(StopReason::LeaseShorterThanRetryBudget)
        );
    }

    #[test]
    fn zero_then_positive_then_zero_is_allowed() {
        let mut p = planner();
        p.on_success(0, 5000, Some(Millis::ms(10)));
        assert!(matches!(
            p.on_success(10 * MS, 120_000, Some(Millis::ms(10))),
            Decision::Extend {
                key: KeyUse::Fresh,
                ..
            }
        ));
        assert!(matches!(
            p.on_success(20 * MS, 5000, Some(Millis::ms(10))),
            Decision::Extend {
                delay: Millis::ZERO,
                ..
            }
        ));
    }

    #[test]
    fn unknown_timing_allows_one_immediate_extension_then_stops() {
        let mut p = planner();
        assert_eq!(
            p.on_success(0, 600_000, None),
            Decision::Extend {
                delay: Millis::ZERO,
                key: KeyUse::Fresh
            }
        );
        assert_eq!(
            p.on_success(MS, 600_000, None),
            Decision::Stop(StopReason::LeaseShorterThanRetryBudget)
        );
    }

    #[test]
    fn transient_failure_retries_with_same_key_inside_the_window() {
        let mut p = planner();
        p.on_success(0, 60_000, Some(Millis::ms(1000)));
        // lead_floor 59000; at 20 s elapsed the estimate is 39000, window 39000-10000-2000.
        let d = p.on_failure(20_000 * MS, &ExtendFailure::Transient);
        assert_eq!(
            d,
            Decision::Extend {
                delay: Millis::ms(9750),
                key: KeyUse::Same
            }
        );
    }

    #[test]
    fn negative_window_stops() {
        let mut p = planner();
        p.on_success(0, 60_000, Some(Millis::ms(1000)));
        let d = p.on_failure(50_000 * MS, &ExtendFailure::Transient);
        assert!(matches!(
            d,
            Decision::Stop(StopReason::NoSafeRetryWindow { .. })
        ));
    }

    #[test]
    fn rate_limit_retries_only_when_retry_after_fits() {
        let mut p = planner();
        p.on_success(0, 60_000, Some(Millis::ms(1000)));
        assert_eq!(
            p.on_failure(MS, &ExtendFailure::RateLimited(RetryAfter::Seconds(5))),
            Decision::Extend {
                delay: Millis::ms(5000),
                key: KeyUse::Same
            }
        );
        let mut p = planner();
        p.on_success(0, 60_000, Some(Millis::ms(1000)));
        assert!(matches!(
            p.on_failure(MS, &ExtendFailure::RateLimited(RetryAfter::Seconds(100))),
            Decision::Stop(StopReason::RateLimitBeyondWindow { .. })
        ));
        let mut p = planner();
        p.on_success(0, 60_000, Some(Millis::ms(1000)));
        assert!(matches!(
            p.on_failure(MS, &ExtendFailure::RateLimited(RetryAfter::Invalid)),
            Decision::Stop(StopReason::RateLimitBeyondWindow { .. })
        ));
    }

    #[test]
    fn zero_window_permits_exactly_one_immediate_retry() {
        let mut p = planner();
        // lead_floor 13000 = 10000 budget + 2000 margin + 1000 elapsed -> window 0 at 1 s.
        p.on_success(0, 14_000, Some(Millis::ms(1000)));
        assert_eq!(
            p.on_failure(1000 * MS, &ExtendFailure::Transient),
            Decision::Extend {
                delay: Millis::ZERO,
                key: KeyUse::Same
            }
        );
        assert_eq!(
            p.on_failure(1000 * MS, &ExtendFailure::Transient),
            Decision::Stop(StopReason::ZeroWindowRetryFailed)
        );
    }

    #[test]
    fn derived_timeout_keeps_a_short_lease_beating() {
        // 6 s lease, 10 s configured: the plain planner gives delay 0 twice and stops; the
        // derived one enforces 1000 ms and beats every ~3 s, recomputing on every success.
        let mut plain = planner();
        plain.on_success(0, 6000, Some(Millis::ms(10)));
        assert_eq!(
            plain.on_success(20 * MS, 11_990, Some(Millis::ms(10))),
            Decision::Stop(StopReason::LeaseShorterThanRetryBudget)
        );
        let mut p = PrimaryPlanner::with_derived_timeout(Millis::ms(10_000));
        assert_eq!(
            p.attempt_timeout(),
            Millis::ms(10_000),
            "before any response"
        );
        assert_eq!(
            p.on_success(0, 6000, Some(Millis::ms(10))),
            Decision::Extend {
                delay: Millis::ms(2990),
                key: KeyUse::Fresh
            }
        );
        assert_eq!(p.attempt_timeout(), Millis::ms(1000));
        // Additive server: 9 s left after the beat -> target floor((4490 - 1000) / 2) = 1745.
        assert_eq!(
            p.on_success(3000 * MS, 9000, Some(Millis::ms(20))),
            Decision::Extend {
                delay: Millis::ms(8980 - 2 * 1745 - 1000),
                key: KeyUse::Fresh
            }
        );
        assert_eq!(p.attempt_timeout(), Millis::ms(1745));
        // A failure's window counts the enforced (derived) budget, not the configured one.
        let math = p.failure_math(4000 * MS).unwrap();
        assert_eq!(
            math.retry_window,
            SignedMillis::Finite(8980 - 1000 - 1745 - 1000)
        );
        // A long lead goes back to the configured timeout.
        p.on_success(5000 * MS, 60_000, Some(Millis::ms(20)));
        assert_eq!(p.attempt_timeout(), Millis::ms(10_000));
        // Unreliable timing: nothing to derive from, the configured timeout, delay 0.
        assert_eq!(
            p.on_success(6000 * MS, 6000, None),
            Decision::Extend {
                delay: Millis::ZERO,
                key: KeyUse::Fresh
            }
        );
        assert_eq!(p.attempt_timeout(), Millis::ms(10_000));
        assert_eq!(p.last_timeout(), None);
    }

    #[test]
    fn no_progress_between_failures_stops() {
        let mut p = planner();
        p.on_success(0, 60_000, Some(Millis::ms(1000)));
        assert!(matches!(
            p.on_failure(5000 * MS, &ExtendFailure::Transient),
            Decision::Extend { .. }
        ));
        assert_eq!(
            p.on_failure(5000 * MS, &ExtendFailure::Transient),
            Decision::Stop(StopReason::NoProgress)
        );
    }

    #[test]
    fn stop_codes_and_other_4xx_stop() {
        let mut p = planner();
        p.on_success(0, 60_000, Some(Millis::ms(1000)));
        for code in retry::PERMANENT_STOP_CODES {
            let f = ExtendFailure::from_error_code(409, Some(code));
            assert_eq!(
                p.clone().on_failure(MS, &f),
                Decision::Stop(StopReason::Permanent(code.into()))
            );
        }
        let f = ExtendFailure::from_error_code(401, Some("UNAUTHORIZED"));
        assert!(matches!(
            p.on_failure(MS, &f),
            Decision::Stop(StopReason::Rejected { status: 401, .. })
        ));
    }

    #[test]
    fn failure_before_any_success_stops() {
        let mut p = planner();
        assert_eq!(
            p.on_failure(0, &ExtendFailure::Transient),
            Decision::Stop(StopReason::NoValidResponse)
        );
    }
}
