//! The pure timing functions and both planners on any input: no panic, no overflow (the fuzz
//! build checks overflow), and the heartbeat invariants hold: a delay is never negative (the
//! types are unsigned, and no signed result escapes) and never past the lead, a same-key retry
//! always fits its window, a derived timeout never exceeds the configured one, a backoff delay
//! stays within `[ceiling / 2, ceiling]`.
#![no_main]

use arbitrary::Arbitrary;
use cycles_core::timing::backoff::{backoff_ceiling, backoff_delay, rate_limit_floor};
use cycles_core::timing::fallback::{
    cadence, classify_grant, delay_with_skips, MAX_HELD_CADENCE_MS, MIN_CADENCE_MS,
};
use cycles_core::timing::retry::{current_lead_estimate, retry_window, transient_retry_delay};
use cycles_core::timing::timeout::{attempt_cutoff, extend_timeout, too_short_at_start};
use cycles_core::timing::{
    primary, Decision, ExtendFailure, FallbackPlanner, FallbackRegime, KeyUse, Millis,
    PrimaryPlanner, RetryAfter, SignedMillis, TimeoutSource,
};
use libfuzzer_sys::fuzz_target;

#[derive(Arbitrary, Debug, Clone, Copy)]
enum M {
    Finite(u64),
    Small(u16),
    Infinite,
}

impl M {
    fn get(self) -> Millis {
        match self {
            M::Finite(v) => Millis::ms(v),
            M::Small(v) => Millis::ms(u64::from(v)),
            M::Infinite => Millis::Infinite,
        }
    }
}

#[derive(Arbitrary, Debug)]
enum Failure {
    Transient,
    RateLimited(Option<u64>),
    RateLimitedInvalid,
    Permanent,
    Rejected(u16),
}

impl Failure {
    fn get(&self) -> ExtendFailure {
        match self {
            Failure::Transient => ExtendFailure::Transient,
            Failure::RateLimited(Some(s)) => ExtendFailure::RateLimited(RetryAfter::Seconds(*s)),
            Failure::RateLimited(None) => ExtendFailure::RateLimited(RetryAfter::Missing),
            Failure::RateLimitedInvalid => ExtendFailure::RateLimited(RetryAfter::Invalid),
            Failure::Permanent => ExtendFailure::from_error_code(410, Some("RESERVATION_EXPIRED")),
            Failure::Rejected(s) => ExtendFailure::from_error_code(*s, Some("INVALID_REQUEST")),
        }
    }
}

#[derive(Arbitrary, Debug)]
enum Step {
    Success {
        dt_us: u32,
        remaining_ttl_ms: u64,
        rtt: Option<M>,
    },
    Failure {
        dt_us: u32,
        failure: Failure,
    },
    Observe(M),
}

#[derive(Arbitrary, Debug)]
enum FStep {
    Success { dt_us: u32, expires_at_ms: i64 },
    Failure { dt_us: u32, failure: Failure },
}

#[derive(Arbitrary, Debug)]
struct Input {
    timeout: M,
    derive: bool,
    start_us: u64,
    steps: Vec<Step>,
    ttl: u64,
    expires_at_ms: i64,
    fsteps: Vec<FStep>,
    a: M,
    b: M,
    c: M,
    big: u128,
    signed: i128,
    grant: i64,
    attempt: u32,
    draw: u64,
    prime: bool,
}

fn primary_run(i: &Input) {
    let configured = i.timeout.get();
    let mut p = if i.derive {
        PrimaryPlanner::with_derived_timeout(configured)
    } else {
        PrimaryPlanner::new(configured)
    };
    let mut now = i.start_us;
    for s in &i.steps {
        match s {
            Step::Observe(m) => p.observe_rtt(m.get()),
            Step::Success {
                dt_us,
                remaining_ttl_ms,
                rtt,
            } => {
                now = now.saturating_add(u64::from(*dt_us));
                let d = p.on_success(now, *remaining_ttl_ms, rtt.map(M::get));
                assert!(
                    p.attempt_timeout() <= configured,
                    "derived above configured"
                );
                let sch = p.last_schedule().expect("a success leaves a schedule");
                assert!(sch.lead_floor <= Millis::ms(*remaining_ttl_ms));
                assert!(
                    sch.next_delay <= sch.lead_floor,
                    "delay past the lead: {sch:?}"
                );
                if sch.next_delay > Millis::ZERO {
                    // What is left after the delay is the whole reserve.
                    assert_eq!(
                        sch.next_delay + sch.retry_reserve,
                        sch.lead_floor,
                        "{sch:?}"
                    );
                }
                if let Decision::Extend { delay, key } = d {
                    assert_eq!(key, KeyUse::Fresh);
                    assert_eq!(delay, sch.next_delay);
                }
            }
            Step::Failure { dt_us, failure } => {
                now = now.saturating_add(u64::from(*dt_us));
                let math = p.failure_math(now);
                let d = p.on_failure(now, &failure.get());
                if let Decision::Extend { delay, key } = d {
                    let m = math.expect("a retry needs a lead");
                    assert_eq!(key, KeyUse::Same);
                    assert!(delay <= m.current_lead_estimate, "retry past the lead");
                    assert!(!m.retry_window.is_negative());
                    assert!(
                        delay <= m.retry_window.clamp_to_millis(),
                        "retry past its window"
                    );
                }
            }
        }
    }
}

fn fallback_run(i: &Input) {
    let mut f = FallbackPlanner::new(i.ttl, i.start_us, i.expires_at_ms);
    // The first beat: at once when primed, else the held cadence (within 1 s and 30 s); a
    // fresh key either way.
    match f.first_beat(i.prime) {
        Decision::Extend {
            delay,
            key: KeyUse::Fresh,
        } => {
            let (least, most) = if i.prime {
                (Millis::ZERO, Millis::ZERO)
            } else {
                (Millis::ms(MIN_CADENCE_MS), Millis::ms(MAX_HELD_CADENCE_MS))
            };
            assert!(least <= delay && delay <= most, "first beat {delay}");
        }
        other => panic!("first beat {other:?}"),
    }
    let mut now = i.start_us;
    for s in &i.fsteps {
        let d = match s {
            FStep::Success {
                dt_us,
                expires_at_ms,
            } => {
                now = now.saturating_add(u64::from(*dt_us));
                f.on_success(now, *expires_at_ms)
            }
            FStep::Failure { dt_us, failure } => {
                now = now.saturating_add(u64::from(*dt_us));
                f.on_failure(now, &failure.get())
            }
        };
        let _ = f.lead_min_ms(now);
        if let Decision::Extend { delay, .. } = d {
            // Bounded over-beating: never a tight loop.
            assert!(delay >= Millis::ms(1000), "fallback delay {delay}");
        }
    }
}

fn pure(i: &Input) {
    let (a, b, c) = (i.a.get(), i.b.get(), i.c.get());
    let rtt = Some(b);
    let s = primary::schedule(i.ttl, rtt, Some(c), a);
    assert!(s.next_delay <= s.lead_floor);
    assert!(primary::attempt_budget(a, Some(c)) >= Millis::ms(1000));
    let est = current_lead_estimate(a, b);
    assert!(est <= a);
    let w = retry_window(est, b, c);
    let d = transient_retry_delay(est, w);
    assert!(d <= est && d <= Millis::ms(30_000) && d <= w.clamp_to_millis());
    let w2 = match i.signed {
        i128::MIN => SignedMillis::NegInfinite,
        i128::MAX => SignedMillis::PosInfinite,
        v => SignedMillis::Finite(v),
    };
    assert!(transient_retry_delay(a, w2) <= a);
    let t = extend_timeout(a, Some(b), c);
    assert!(t.timeout <= c);
    if t.source == TimeoutSource::Derived {
        let reserve = primary::retry_reserve(
            primary::attempt_budget(t.timeout, Some(b)),
            primary::safety_margin(Some(b)),
        );
        assert!(
            primary::next_delay(a, reserve) > Millis::ZERO,
            "{t:?} keeps nothing"
        );
    }
    let _ = too_short_at_start(a, b, Some(c), c, i.derive);
    assert!(attempt_cutoff(a) <= a);
    let _ = (
        Millis::from_micros_ceil(i.big),
        Millis::from_micros_floor(i.big),
    );
    assert!(Millis::from_micros_floor(i.big) <= Millis::from_micros_ceil(i.big));
    let regime = classify_grant(i.grant, b, i.ttl);
    // A positive grant that echoes the time since the previous success, below 0.9 × the
    // requested ttl, is maximum-lead clamping (the guidance's order).
    if i.grant > 0 {
        let echo = Millis::ms(i.grant.unsigned_abs());
        assert_eq!(
            classify_grant(i.grant, echo, u64::MAX),
            FallbackRegime::MaxLeadClamped
        );
    }
    let cad = cadence(regime, i.grant, i.ttl);
    assert!(cad >= Millis::ms(1000));
    for r in [
        FallbackRegime::Unknown,
        FallbackRegime::Normal,
        FallbackRegime::GrantClamped,
        FallbackRegime::MaxLeadClamped,
    ] {
        assert!(cadence(r, i.grant, i.ttl) >= Millis::ms(1000));
    }
    let skip = delay_with_skips(i.signed, i.grant, a);
    if a > Millis::ZERO {
        assert!(skip >= a, "skip delay {skip} below the cadence {a}");
    }
    let base = i.ttl;
    let cap = i.draw.rotate_left(7);
    let ceiling = backoff_ceiling(i.attempt, base, cap);
    let delay = backoff_delay(i.attempt, base, cap, i.draw)
        .finite()
        .expect("finite");
    assert!(delay >= ceiling / 2 && delay <= ceiling && ceiling <= cap);
    let floor = rate_limit_floor(i.start_us, Some(i.draw), Millis::ms(delay));
    assert!(floor >= i.start_us);
}

fuzz_target!(|i: Input| {
    primary_run(&i);
    fallback_run(&i);
    pure(&i);
});
