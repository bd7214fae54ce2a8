//! Property tests: the heartbeat planners driven against SIMULATED servers of every regime,
//! in simulated time (no clock, no sleeping), with random rtt, transient failures and 429s.
//!
//! Promises checked (HEARTBEAT GUIDANCE, spec 0.1.25.16):
//! - primary path, every attempt finishing within its budget: a positive-delay beat is sent
//!   early enough for that attempt AND one same-key retry to complete before expiry, and a
//!   same-key retry is sent early enough to complete before expiry, whatever the attempt's
//!   real duration (checked against the true simulated expiry with the full timeout); a
//!   zero-delay beat is best effort by the spec's own words and is exempt;
//! - liveness: with a lease that holds its retry reserve, isolated failures (each followed by
//!   a successful retry) never stop the heartbeat, so it does not pass by stopping early;
//! - no unbounded zero-delay loop: never two fresh zero-delay extensions in a row;
//! - retries reuse the key, fresh beats use a new one; stop codes stop;
//! - fallback: bounded over-beating (at most one attempt per cadence floor) and no lapse
//!   against an additive server; the spec's counterexample is a documented limit
//!   (see `fallback_vectors` and `fallback::tests::spec_counterexample_is_misclassified_forever`);
//! - derived extend timeouts (`timing::timeout`): every promise above still holds with the
//!   per-attempt budget the planner derives (attempts are cut off where the driver cuts them,
//!   and a timed-out attempt is charged its whole budget), and every lease the derived timeout
//!   can keep alive IS kept alive in the additive, grant-cap, maximum-lead and fallback regimes,
//!   whatever the configured timeout, with random rtt and isolated failures.

use std::collections::HashMap;

use cycles_core::timing::fallback::{self, FallbackPlanner};
use cycles_core::timing::timeout;
use cycles_core::timing::{
    Decision, ExtendFailure, KeyUse, Millis, PrimaryPlanner, RetryAfter, StopReason,
};
use proptest::prelude::*;

const US_PER_MS: u64 = 1000;

/// How the simulated server treats `extend_by_ms`.
#[derive(Clone, Copy, Debug)]
enum Clamp {
    Additive,
    GrantCap(u64),
    MaxLead(u64),
}

#[derive(Clone, Debug)]
struct SimServer {
    expires_us: u64,
    clamp: Clamp,
    extensions: u32,
    max_extensions: Option<u32>,
    /// key -> expires_us established by the first application (replays return it).
    applied: HashMap<u64, u64>,
}

enum Reply {
    Ok { expires_us: u64, remaining_ms: u64 },
    Expired,
    MaxExtensions,
}

impl SimServer {
    /// An extend request arriving at `now_us`.
    fn extend(&mut self, now_us: u64, key: u64, by_ms: u64) -> Reply {
        if let Some(&expires_us) = self.applied.get(&key) {
            // Same-key replay: original outcome, remaining recomputed (0 when no longer live).
            let remaining_ms = if now_us > self.expires_us {
                0
            } else {
                expires_us.saturating_sub(now_us) / US_PER_MS
            };
            return Reply::Ok {
                expires_us,
                remaining_ms,
            };
        }
        if now_us > self.expires_us {
            return Reply::Expired;
        }
        if self.max_extensions.is_some_and(|m| self.extensions >= m) {
            return Reply::MaxExtensions;
        }
        let by_us = by_ms * US_PER_MS;
        self.expires_us = match self.clamp {
            Clamp::Additive => self.expires_us + by_us,
            Clamp::GrantCap(cap) => self.expires_us + by_us.min(cap * US_PER_MS),
            Clamp::MaxLead(lead) => (self.expires_us + by_us).min(now_us + lead * US_PER_MS),
        };
        self.extensions += 1;
        self.applied.insert(key, self.expires_us);
        Reply::Ok {
            expires_us: self.expires_us,
            remaining_ms: (self.expires_us - now_us) / US_PER_MS,
        }
    }
}

/// A tiny deterministic generator so one proptest seed reproduces a whole run.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo + 1)
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

#[derive(Clone, Debug)]
struct Scenario {
    seed: u64,
    ttl_ms: u64,
    timeout_ms: u64,
    rtt_min_ms: u64,
    rtt_max_ms: u64,
    clamp: Clamp,
    initial_cap_ms: Option<u64>,
    max_extensions: Option<u32>,
    failure_percent: u64,
    rate_limit_percent: u64,
    /// Never fail an attempt right after a failure (each failure is followed by a success).
    isolated_failures: bool,
    /// Derive the enforced timeout from the lease (the lease driver's default).
    derive: bool,
}

fn scenario() -> impl Strategy<Value = Scenario> {
    (
        any::<u64>(),
        1_000u64..300_000,
        1_000u64..15_000,
        0u64..2_000,
        0u64..4_000,
        prop_oneof![
            Just(Clamp::Additive),
            (1_000u64..120_000).prop_map(Clamp::GrantCap),
            (1_000u64..120_000).prop_map(Clamp::MaxLead),
        ],
        proptest::option::of(1_000u64..120_000),
        proptest::option::of(1u32..20),
        0u64..40,
        0u64..20,
        any::<bool>(),
    )
        .prop_map(
            |(
                seed,
                ttl_ms,
                timeout_ms,
                a,
                b,
                clamp,
                initial_cap_ms,
                max_extensions,
                failure_percent,
                rate_limit_percent,
                derive,
            )| {
                let rtt_min_ms = a.min(b).min(timeout_ms);
                let rtt_max_ms = a.max(b).min(timeout_ms);
                Scenario {
                    seed: seed | 1,
                    ttl_ms,
                    timeout_ms,
                    rtt_min_ms,
                    rtt_max_ms,
                    clamp,
                    initial_cap_ms,
                    max_extensions,
                    failure_percent,
                    rate_limit_percent,
                    isolated_failures: false,
                    derive,
                }
            },
        )
}

/// What one simulated lease did.
#[derive(Debug, Default)]
struct Trace {
    attempts: u32,
    lapsed_attempts: u32,
    stop: Option<StopReason>,
    end_us: u64,
}

const HORIZON_US: u64 = 30 * 60 * 1_000_000;

fn run_primary(s: &Scenario) -> Result<Trace, TestCaseError> {
    let mut rng = Rng(s.seed);
    let mut trace = Trace::default();
    // Create: server applies at the midpoint of the attempt.
    let rtt0 = rng.range(s.rtt_min_ms, s.rtt_max_ms) * US_PER_MS;
    let granted_ms = s.initial_cap_ms.map_or(s.ttl_ms, |c| c.min(s.ttl_ms));
    let mut server = SimServer {
        expires_us: rtt0 / 2 + granted_ms * US_PER_MS,
        clamp: s.clamp,
        extensions: 0,
        max_extensions: s.max_extensions,
        applied: HashMap::new(),
    };
    let mut planner = if s.derive {
        PrimaryPlanner::with_derived_timeout(Millis::ms(s.timeout_ms))
    } else {
        PrimaryPlanner::new(Millis::ms(s.timeout_ms))
    };
    let mut now = rtt0;
    let rtt_ms = Millis::from_micros_ceil(u128::from(rtt0));
    let mut decision = planner.on_success(now, granted_ms, Some(rtt_ms));
    let mut key = 1u64;
    let mut last_was_failure = false;
    let mut zero_fresh_run = 0;
    while now < HORIZON_US {
        let (delay, key_use) = match &decision {
            Decision::Extend { delay, key } => (delay.finite().expect("finite delay"), *key),
            Decision::Stop(reason) => {
                trace.stop = Some(reason.clone());
                break;
            }
        };
        // Key discipline: retries reuse the key, beats after a success take a fresh one.
        prop_assert_eq!(
            key_use,
            if last_was_failure {
                KeyUse::Same
            } else {
                KeyUse::Fresh
            }
        );
        if key_use == KeyUse::Fresh {
            key += 1;
            zero_fresh_run = if delay == 0 { zero_fresh_run + 1 } else { 0 };
            prop_assert!(
                zero_fresh_run <= 1,
                "two fresh zero-delay extensions in a row"
            );
        }
        let sent = now + delay * US_PER_MS;
        trace.attempts += 1;
        // The budget the planner counts for this attempt, and where the driver cuts it off.
        let budget_ms = planner.attempt_timeout().finite().expect("finite budget");
        prop_assert!(
            budget_ms <= s.timeout_ms,
            "derived above the configured timeout"
        );
        let cutoff_us = timeout::attempt_cutoff(Millis::ms(budget_ms))
            .finite()
            .expect("finite cut-off")
            * US_PER_MS;
        let rtt = rng.range(s.rtt_min_ms, s.rtt_max_ms) * US_PER_MS;
        let arrival = sent + rtt / 2;
        // Worst case: the attempt (and, for a fresh beat, its retry) takes the whole budget.
        let must_fit_us = match (key_use, delay) {
            (KeyUse::Same, _) => Some(budget_ms * US_PER_MS),
            (KeyUse::Fresh, d) if d > 0 => Some(2 * budget_ms * US_PER_MS),
            (KeyUse::Fresh, _) => None,
        };
        if must_fit_us.is_some_and(|fit| sent + fit > server.expires_us)
            && !server.applied.contains_key(&key)
        {
            trace.lapsed_attempts += 1;
        }
        let may_fail = !(s.isolated_failures && last_was_failure);
        if may_fail && rng.chance(s.failure_percent) {
            // A timeout consumes the whole budget; the server may have applied it anyway.
            if rng.chance(50) {
                let _ = server.extend(arrival, key, s.ttl_ms);
            }
            now = sent + budget_ms * US_PER_MS;
            decision = planner.on_failure(now, &ExtendFailure::Transient);
            last_was_failure = true;
            continue;
        }
        if rtt > cutoff_us {
            // Slower than the enforced cut-off: a timeout, charged its whole budget (failure
            // detection included); the request reached the server if it arrived in time.
            if arrival <= sent + cutoff_us {
                let _ = server.extend(arrival, key, s.ttl_ms);
            }
            now = sent + budget_ms * US_PER_MS;
            decision = planner.on_failure(now, &ExtendFailure::Transient);
            last_was_failure = true;
            continue;
        }
        if may_fail && rng.chance(s.rate_limit_percent) {
            now = sent + rtt;
            let header = rng.range(0, 8).to_string();
            decision = planner.on_failure(
                now,
                &ExtendFailure::RateLimited(RetryAfter::parse(Some(&header))),
            );
            last_was_failure = true;
            continue;
        }
        now = sent + rtt;
        decision = match server.extend(arrival, key, s.ttl_ms) {
            Reply::Ok { remaining_ms, .. } => {
                last_was_failure = false;
                planner.on_success(
                    now,
                    remaining_ms,
                    Some(Millis::from_micros_ceil(u128::from(rtt))),
                )
            }
            Reply::Expired => {
                let d = planner.on_failure(
                    now,
                    &ExtendFailure::from_error_code(410, Some("RESERVATION_EXPIRED")),
                );
                prop_assert!(
                    matches!(d, Decision::Stop(StopReason::Permanent(_))),
                    "expiry must stop: {:?}",
                    d
                );
                d
            }
            Reply::MaxExtensions => {
                let d = planner.on_failure(
                    now,
                    &ExtendFailure::from_error_code(409, Some("MAX_EXTENSIONS_EXCEEDED")),
                );
                prop_assert!(
                    matches!(d, Decision::Stop(StopReason::Permanent(_))),
                    "MAX_EXTENSIONS_EXCEEDED must stop: {:?}",
                    d
                );
                d
            }
        };
    }
    trace.end_us = now;
    Ok(trace)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn primary_proven_attempts_never_lapse(s in scenario()) {
        let trace = run_primary(&s)?;
        prop_assert_eq!(trace.lapsed_attempts, 0, "a proven attempt reached the server after expiry: {:?}", trace);
    }

    /// Liveness: an additive server, a TTL that holds the retry reserve (ttl > 2 x budget +
    /// margin + rtt), and isolated transient failures: the heartbeat keeps the lease for the
    /// whole horizon.
    #[test]
    fn primary_survives_isolated_failures_when_the_lease_holds_its_reserve(
        seed in any::<u64>(), timeout_ms in 1_000u64..10_000, rtt_max_ms in 0u64..400, spare_ms in 1u64..100_000,
        failure_percent in 0u64..60
    ) {
        let margin = 1_000u64.max(2 * rtt_max_ms);
        let budget = timeout_ms.max(2 * rtt_max_ms);
        let ttl_ms = 2 * budget + margin + rtt_max_ms + spare_ms;
        let s = Scenario { seed: seed | 1, ttl_ms, timeout_ms, rtt_min_ms: 0, rtt_max_ms, clamp: Clamp::Additive,
            initial_cap_ms: None, max_extensions: None, failure_percent, rate_limit_percent: 0, isolated_failures: true,
            derive: false };
        let trace = run_primary(&s)?;
        prop_assert!(trace.stop.is_none(), "stopped early: {:?}", trace);
        prop_assert!(trace.end_us >= HORIZON_US);
        prop_assert_eq!(trace.lapsed_attempts, 0);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 500, ..ProptestConfig::default() })]

    /// Fallback (no remaining_ttl_ms) against every regime: never more than one attempt per
    /// cadence floor (bounded over-beating), MAX_EXTENSIONS_EXCEEDED stops it, and against an
    /// additive server without failures it never lapses. (Under grant caps and maximum-lead
    /// clamps it MAY lapse: the spec's documented limit, pinned in the vectors.)
    #[test]
    fn fallback_overbeating_is_bounded_in_every_regime(
        seed in any::<u64>(), ttl_ms in 4_000u64..300_000, rtt_ms in 0u64..500, prime in any::<bool>(),
        clamp in prop_oneof![
            Just(Clamp::Additive),
            (1_000u64..120_000).prop_map(Clamp::GrantCap),
            (1_000u64..120_000).prop_map(Clamp::MaxLead),
        ],
        max_extensions in proptest::option::of(1u32..30),
    ) {
        let mut rng = Rng(seed | 1);
        let rtt = rtt_ms * US_PER_MS;
        let mut server = SimServer { expires_us: rtt / 2 + ttl_ms * US_PER_MS, clamp, extensions: 0, max_extensions, applied: HashMap::new() };
        let mut now = rtt;
        let mut planner = FallbackPlanner::new(ttl_ms, now, i64::try_from(server.expires_us / US_PER_MS).unwrap());
        let mut decision = planner.first_beat(prime);
        let mut key = 0;
        let mut attempts = 0u64;
        while now < HORIZON_US / 3 {
            let Decision::Extend { delay, .. } = decision else { break };
            if attempts > 0 {
                prop_assert!(delay >= Millis::ms(fallback::MIN_CADENCE_MS), "over-beating below the floor");
            }
            key += 1;
            attempts += 1;
            let sent = now + delay.finite().unwrap() * US_PER_MS;
            let rtt = rng.range(0, rtt_ms) * US_PER_MS;
            let arrival = sent + rtt / 2;
            let additive = matches!(clamp, Clamp::Additive);
            if additive && max_extensions.is_none() {
                prop_assert!(arrival <= server.expires_us, "fallback lapsed against an additive server");
            }
            now = sent + rtt;
            decision = match server.extend(arrival, key, ttl_ms) {
                Reply::Ok { expires_us, .. } => planner.on_success(now, i64::try_from(expires_us / US_PER_MS).unwrap()),
                Reply::Expired => planner.on_failure(now, &ExtendFailure::from_error_code(410, Some("RESERVATION_EXPIRED"))),
                Reply::MaxExtensions => {
                    let d = planner.on_failure(now, &ExtendFailure::from_error_code(409, Some("MAX_EXTENSIONS_EXCEEDED")));
                    prop_assert!(matches!(d, Decision::Stop(StopReason::Permanent(_))), "MAX_EXTENSIONS_EXCEEDED must stop");
                    d
                }
            };
        }
        prop_assert!(attempts <= 1 + now / (fallback::MIN_CADENCE_MS * US_PER_MS));
    }
}

/// The regimes of the derived-timeout liveness test, each with a lease the derived timeout can
/// keep alive: the create leaves at least `3 x margin + 1` of lead, and every extension grants
/// enough to restore it even after a failed beat and its zero-window retry.
fn keepable_regime(margin: u64, rtt_max: u64) -> impl Strategy<Value = (Clamp, u64)> {
    let min_lead = 3 * margin + 1 + rtt_max;
    prop_oneof![
        (0u64..60_000).prop_map(move |spare| (Clamp::Additive, min_lead + spare)),
        // A capped grant g restores lead >= g + margin - 1.5 x rtt after a late retry.
        (0u64..60_000, 0u64..60_000)
            .prop_map(move |(g, spare)| (Clamp::GrantCap(3 * margin + g), min_lead + spare)),
        // Every extension re-anchors the lead at max_lead minus transit. A lost response's
        // same-key replay reports it minus what the failed attempt consumed: up to one whole
        // timeout T, and the configured timeout is kept whenever it gives a positive delay, so
        // T can reach floor((max_lead - margin - 1) / 2). The replayed lead, at least
        // max_lead - T - 1.5 x rtt - 1, must still hold 3 x margin + 1 for the next beat (a
        // zero-delay beat is best effort): max_lead >= 5 x margin + 3 x rtt + 3.
        (0u64..60_000).prop_map(move |l| {
            let max_lead = 5 * margin + 3 * rtt_max + 10 + l;
            (Clamp::MaxLead(max_lead), max_lead)
        }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    /// The promise: with ANY configured timeout (the 10 s default, or longer), a lease
    /// the derived timeout can keep alive is kept alive for the whole horizon in every regime,
    /// with random rtt and isolated transient failures each charged its whole budget: no stop,
    /// no lapse, and the spec's guards still hold (checked inside `run_primary`).
    #[test]
    fn derived_timeout_keeps_every_keepable_lease_alive(
        seed in any::<u64>(), timeout_ms in 1_000u64..60_000, failure_percent in 0u64..60,
        (rtt_max_ms, (clamp, ttl_ms)) in (0u64..450)
            .prop_flat_map(|r| (Just(r), keepable_regime(1_000u64.max(2 * r), r))),
    ) {
        let s = Scenario { seed: seed | 1, ttl_ms, timeout_ms, rtt_min_ms: 0, rtt_max_ms, clamp,
            initial_cap_ms: None, max_extensions: None, failure_percent, rate_limit_percent: 0,
            isolated_failures: true, derive: true };
        let trace = run_primary(&s)?;
        prop_assert!(trace.stop.is_none(), "stopped early: {:?} {:?}", trace, s);
        prop_assert!(trace.end_us >= HORIZON_US);
        prop_assert_eq!(trace.lapsed_attempts, 0);
    }

    /// The same leases WITHOUT derivation and a configured timeout too long for them stop
    /// (the two-zero guard or a failed window): the derived timeout is what keeps them alive.
    #[test]
    fn without_derivation_short_leases_stop(
        seed in any::<u64>(), rtt_max_ms in 0u64..450, spare in 0u64..5_000,
    ) {
        let margin = 1_000u64.max(2 * rtt_max_ms);
        let ttl_ms = 3 * margin + 1 + rtt_max_ms + spare;
        // A maximum-lead server cannot grow the lead past ttl: reserve 2 x 10 s + margin > ttl.
        let s = Scenario { seed: seed | 1, ttl_ms, timeout_ms: 10_000, rtt_min_ms: 0, rtt_max_ms,
            clamp: Clamp::MaxLead(ttl_ms), initial_cap_ms: None, max_extensions: None,
            failure_percent: 0, rate_limit_percent: 0, isolated_failures: true, derive: false };
        let trace = run_primary(&s)?;
        prop_assert_eq!(trace.stop, Some(StopReason::LeaseShorterThanRetryBudget));
        let trace = run_primary(&Scenario { derive: true, ..s })?;
        prop_assert!(trace.stop.is_none(), "{:?}", trace);
    }

    /// Fallback (no remaining_ttl_ms): the driver derives the timeout from the nominal lease
    /// (the requested ttl). Against an additive server, with the primed first beat and isolated
    /// transient failures each charged that whole timeout, a ttl of at least 8 x margin never
    /// lapses. The bound is wider than the primary path's 3 x margin + 1: a failed fallback
    /// beat costs its timeout plus a retry delay of up to a whole cadence (floor 1 s), so a
    /// ttl near the primary minimum erodes when every beat fails once. (Grant caps and
    /// maximum-lead clamps may lapse on this path: the spec's documented limit.)
    #[test]
    fn fallback_with_the_derived_timeout_keeps_an_additive_lease(
        seed in any::<u64>(), configured_ms in 1_000u64..60_000, rtt_ms in 0u64..450,
        spare in 0u64..60_000, failure_percent in 0u64..60,
    ) {
        let margin = 1_000u64.max(2 * rtt_ms);
        let ttl_ms = 8 * margin + spare;
        let mut rng = Rng(seed | 1);
        let rtt0 = rng.range(0, rtt_ms) * US_PER_MS;
        let mut server = SimServer { expires_us: rtt0 / 2 + ttl_ms * US_PER_MS, clamp: Clamp::Additive,
            extensions: 0, max_extensions: None, applied: HashMap::new() };
        let mut now = rtt0;
        let mut planner = FallbackPlanner::new(ttl_ms, now, i64::try_from(server.expires_us / US_PER_MS).unwrap());
        let mut max_rtt = Millis::from_micros_ceil(u128::from(rtt0));
        let mut decision = planner.first_beat(true);
        let (mut key, mut last_was_failure) = (0u64, false);
        while now < HORIZON_US / 3 {
            let Decision::Extend { delay, key: key_use } = decision else {
                return Err(TestCaseError::fail(format!("stopped: {decision:?}")));
            };
            if key_use == KeyUse::Fresh { key += 1; }
            let budget = timeout::extend_timeout(Millis::ms(ttl_ms), Some(max_rtt), Millis::ms(configured_ms));
            prop_assert!(budget.source != cycles_core::timing::TimeoutSource::TooShort);
            let budget_us = budget.timeout.finite().unwrap() * US_PER_MS;
            let sent = now + delay.finite().unwrap() * US_PER_MS;
            let rtt = rng.range(0, rtt_ms) * US_PER_MS;
            let arrival = sent + rtt / 2;
            prop_assert!(arrival <= server.expires_us, "fallback lapsed: {} > {}", arrival, server.expires_us);
            if !last_was_failure && rng.chance(failure_percent) {
                now = sent + budget_us;
                decision = planner.on_failure(now, &ExtendFailure::Transient);
                last_was_failure = true;
                continue;
            }
            last_was_failure = false;
            now = sent + rtt;
            max_rtt = max_rtt.max(Millis::from_micros_ceil(u128::from(rtt)));
            decision = match server.extend(arrival, key, ttl_ms) {
                Reply::Ok { expires_us, .. } => planner.on_success(now, i64::try_from(expires_us / US_PER_MS).unwrap()),
                _ => return Err(TestCaseError::fail("the additive server refused an extension")),
            };
        }
    }
}
