//! Runs the shared heartbeat vectors (`conformance/vectors/heartbeat.json`) through the pure
//! timing functions. Every binding runs the same file; a missing or empty section fails.

use cycles_core::timing::fallback::{self, FallbackPlanner, FallbackRegime};
use cycles_core::timing::primary;
use cycles_core::timing::retry::{self, RetryAfter};
use cycles_core::timing::timeout::{self, TimeoutSource};
use cycles_core::timing::{
    Decision, ExtendFailure, KeyUse, Millis, PrimaryPlanner, SignedMillis, StopReason,
};
use serde_json::Value;

fn vectors() -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../conformance/vectors/heartbeat.json"
    );
    let text =
        std::fs::read_to_string(path).expect("conformance/vectors/heartbeat.json must exist");
    let doc: Value = serde_json::from_str(&text).expect("vectors are JSON");
    assert_eq!(doc["format"], "cycles-heartbeat-vectors");
    assert_eq!(doc["version"], 1);
    doc
}

fn section<'a>(doc: &'a Value, name: &str) -> &'a Vec<Value> {
    let cases = doc[name]
        .as_array()
        .unwrap_or_else(|| panic!("section {name} missing"));
    assert!(!cases.is_empty(), "section {name} is empty");
    cases
}

/// Reads a vector number: an integer, a decimal string beyond 2^53, or "infinite".
fn millis(v: &Value) -> Millis {
    match v {
        Value::String(s) if s == "infinite" => Millis::Infinite,
        Value::String(s) => Millis::ms(s.parse().expect("decimal string")),
        Value::Number(n) => Millis::ms(n.as_u64().expect("non-negative integer")),
        other => panic!("not a duration: {other}"),
    }
}

fn opt_millis(v: &Value) -> Option<Millis> {
    (!v.is_null()).then(|| millis(v))
}

fn signed(v: &Value) -> SignedMillis {
    match v {
        Value::String(s) if s == "-infinite" => SignedMillis::NegInfinite,
        Value::String(s) if s == "infinite" => SignedMillis::PosInfinite,
        Value::Number(n) => SignedMillis::Finite(i128::from(n.as_i64().expect("integer"))),
        other => panic!("not a signed duration: {other}"),
    }
}

fn u64_of(v: &Value) -> u64 {
    millis(v).finite().expect("finite")
}

fn failure(v: &Value) -> ExtendFailure {
    match v["kind"].as_str().expect("failure kind") {
        "transient" => ExtendFailure::Transient,
        "rate_limited" => ExtendFailure::RateLimited(RetryAfter::parse(v["retry_after"].as_str())),
        "error" => ExtendFailure::from_error_code(
            u16::try_from(v["status"].as_u64().expect("status")).expect("u16"),
            v["code"].as_str(),
        ),
        other => panic!("unknown failure kind {other}"),
    }
}

fn check_decision(case: &str, got: &Decision, want: &Value) {
    if let Some(ext) = want.get("extend") {
        let key = match ext["key"].as_str() {
            Some("fresh") => KeyUse::Fresh,
            Some("same") => KeyUse::Same,
            other => panic!("{case}: bad key {other:?}"),
        };
        assert_eq!(
            got,
            &Decision::Extend {
                delay: millis(&ext["delay_ms"]),
                key
            },
            "{case}"
        );
        return;
    }
    let reason = want["stop"]
        .as_str()
        .unwrap_or_else(|| panic!("{case}: decision is extend or stop"));
    let Decision::Stop(stop) = got else {
        panic!("{case}: expected stop {reason}, got {got:?}");
    };
    let name = match stop {
        StopReason::LeaseShorterThanRetryBudget => "lease_shorter_than_retry_budget",
        StopReason::NoSafeRetryWindow { .. } => "no_safe_retry_window",
        StopReason::ZeroWindowRetryFailed => "zero_window_retry_failed",
        StopReason::NoProgress => "no_progress",
        StopReason::RateLimitBeyondWindow { .. } => "rate_limit_beyond_window",
        StopReason::Permanent(code) => {
            assert_eq!(Some(code.as_str()), want["code"].as_str(), "{case}");
            "permanent"
        }
        StopReason::Rejected { status, .. } => {
            assert_eq!(Some(u64::from(*status)), want["status"].as_u64(), "{case}");
            "rejected"
        }
        StopReason::NoValidResponse => "no_valid_response",
    };
    assert_eq!(name, reason, "{case}");
}

#[test]
fn schedule_vectors() {
    let doc = vectors();
    for case in section(&doc, "schedule") {
        let name = case["name"].as_str().unwrap();
        let i = &case["input"];
        let s = primary::schedule(
            u64_of(&i["remaining_ttl_ms"]),
            opt_millis(&i["rtt_ms"]),
            opt_millis(&i["max_rtt_ms"]),
            millis(&i["request_timeout_ms"]),
        );
        let e = &case["expect"];
        assert_eq!(
            s.lead_floor,
            millis(&e["lead_floor_ms"]),
            "{name} lead_floor"
        );
        assert_eq!(
            s.attempt_budget,
            millis(&e["attempt_budget_ms"]),
            "{name} attempt_budget"
        );
        assert_eq!(
            s.safety_margin,
            millis(&e["safety_margin_ms"]),
            "{name} safety_margin"
        );
        assert_eq!(
            s.retry_reserve,
            millis(&e["retry_reserve_ms"]),
            "{name} retry_reserve"
        );
        assert_eq!(
            s.next_delay,
            millis(&e["next_delay_ms"]),
            "{name} next_delay"
        );
    }
}

#[test]
fn retry_after_vectors() {
    let doc = vectors();
    for case in section(&doc, "retry_after") {
        let parsed = RetryAfter::parse(case["raw"].as_str());
        let kind = match parsed {
            RetryAfter::Missing => "missing",
            RetryAfter::Invalid => "invalid",
            RetryAfter::Seconds(_) => "seconds",
        };
        assert_eq!(kind, case["kind"].as_str().unwrap(), "{case}");
        assert_eq!(
            parsed.to_millis().map(Millis::ms),
            opt_millis(&case["ms"]),
            "{case}"
        );
    }
}

#[test]
fn retry_vectors() {
    let doc = vectors();
    for case in section(&doc, "retry") {
        let name = case["name"].as_str().unwrap();
        let i = &case["input"];
        let cle = retry::current_lead_estimate(
            millis(&i["last_lead_floor_ms"]),
            millis(&i["elapsed_ms"]),
        );
        let window = retry::retry_window(
            cle,
            millis(&i["attempt_budget_ms"]),
            millis(&i["safety_margin_ms"]),
        );
        let e = &case["expect"];
        assert_eq!(cle, millis(&e["current_lead_estimate_ms"]), "{name}");
        assert_eq!(window, signed(&e["retry_window_ms"]), "{name}");
        let delay = (!window.is_negative()).then(|| retry::transient_retry_delay(cle, window));
        assert_eq!(delay, opt_millis(&e["transient_retry_delay_ms"]), "{name}");
    }
}

#[test]
fn planner_vectors() {
    let doc = vectors();
    for case in section(&doc, "planner") {
        let name = case["name"].as_str().unwrap();
        let mut planner = PrimaryPlanner::new(millis(&case["request_timeout_ms"]));
        let steps = case["steps"].as_array().unwrap();
        let expect = case["expect"].as_array().unwrap();
        assert_eq!(
            steps.len(),
            expect.len(),
            "{name}: one expectation per step"
        );
        for (step, want) in steps.iter().zip(expect) {
            let at = step["at_us"].as_u64().unwrap();
            let got = match step["event"].as_str().unwrap() {
                "success" => planner.on_success(
                    at,
                    u64_of(&step["remaining_ttl_ms"]),
                    opt_millis(&step["rtt_ms"]),
                ),
                "failure" => planner.on_failure(at, &failure(&step["failure"])),
                other => panic!("{name}: unknown event {other}"),
            };
            check_decision(name, &got, want);
        }
    }
}

#[test]
fn fallback_vectors() {
    let doc = vectors();
    for case in section(&doc, "fallback") {
        let name = case["name"].as_str().unwrap();
        let ttl = case["requested_ttl_ms"].as_u64().unwrap();
        let create = &case["create"];
        let mut planner = FallbackPlanner::new(
            ttl,
            create["at_us"].as_u64().unwrap(),
            create["expires_at_ms"].as_i64().unwrap(),
        );
        let expect = &case["expect"];
        check_decision(
            name,
            &planner.first_beat(case["prime"].as_bool().unwrap()),
            &expect["first_beat"],
        );
        let steps = case["steps"].as_array().unwrap();
        let decisions = expect["decisions"].as_array().unwrap();
        let regimes = expect["regimes"].as_array().unwrap();
        assert_eq!(steps.len(), decisions.len(), "{name}");
        assert_eq!(steps.len(), regimes.len(), "{name}");
        let mut last_at = 0;
        for ((step, want), regime) in steps.iter().zip(decisions).zip(regimes) {
            last_at = step["at_us"].as_u64().unwrap();
            let got = match step["event"].as_str().unwrap() {
                "success" => planner.on_success(last_at, step["expires_at_ms"].as_i64().unwrap()),
                "failure" => planner.on_failure(last_at, &failure(&step["failure"])),
                other => panic!("{name}: unknown event {other}"),
            };
            check_decision(name, &got, want);
            let regime_name = match planner.regime() {
                FallbackRegime::Unknown => "unknown",
                FallbackRegime::Normal => "normal",
                FallbackRegime::GrantClamped => "grant_clamped",
                FallbackRegime::MaxLeadClamped => "max_lead_clamped",
            };
            assert_eq!(regime_name, regime.as_str().unwrap(), "{name}");
        }
        if let Some(lead) = expect.get("final_lead_min_ms") {
            assert_eq!(
                planner.lead_min_ms(last_at),
                i128::from(lead.as_i64().unwrap()),
                "{name}"
            );
        }
    }
    // The cadence floor is part of the contract too.
    assert_eq!(fallback::MIN_CADENCE_MS, 1000);
}

#[test]
fn extend_timeout_vectors() {
    let doc = vectors();
    for case in section(&doc, "extend_timeout") {
        let name = case["name"].as_str().unwrap();
        let i = &case["input"];
        let lead = millis(&i["lead_floor_ms"]);
        let max_rtt = opt_millis(&i["max_rtt_ms"]);
        let got = timeout::extend_timeout(lead, max_rtt, millis(&i["configured_timeout_ms"]));
        let e = &case["expect"];
        let source = match got.source {
            TimeoutSource::Configured => "configured",
            TimeoutSource::Derived => "derived",
            TimeoutSource::TooShort => "too_short",
        };
        assert_eq!(source, e["source"].as_str().unwrap(), "{name} source");
        assert_eq!(source, got.source.name(), "{name}");
        assert_eq!(got.timeout, millis(&e["timeout_ms"]), "{name} timeout");
        assert_eq!(
            got.min_lead_floor,
            millis(&e["min_lead_floor_ms"]),
            "{name} min_lead_floor"
        );
        assert_eq!(
            timeout::min_keepable_lead_floor(max_rtt),
            got.min_lead_floor,
            "{name}"
        );
        assert_eq!(
            timeout::max_keeping_timeout(lead, max_rtt),
            opt_millis(&e["max_keeping_timeout_ms"]),
            "{name} max_keeping_timeout"
        );
        assert_eq!(
            timeout::target_timeout(lead, max_rtt),
            millis(&e["target_timeout_ms"]),
            "{name} target_timeout"
        );
        assert_eq!(
            timeout::attempt_cutoff(got.timeout),
            millis(&e["attempt_cutoff_ms"]),
            "{name} attempt_cutoff"
        );
    }
}

#[test]
fn planner_derived_vectors() {
    let doc = vectors();
    for case in section(&doc, "planner_derived") {
        let name = case["name"].as_str().unwrap();
        let mut planner =
            PrimaryPlanner::with_derived_timeout(millis(&case["configured_timeout_ms"]));
        let steps = case["steps"].as_array().unwrap();
        let expect = case["expect"].as_array().unwrap();
        assert_eq!(
            steps.len(),
            expect.len(),
            "{name}: one expectation per step"
        );
        for (step, want) in steps.iter().zip(expect) {
            let at = step["at_us"].as_u64().unwrap();
            let got = match step["event"].as_str().unwrap() {
                "success" => planner.on_success(
                    at,
                    u64_of(&step["remaining_ttl_ms"]),
                    opt_millis(&step["rtt_ms"]),
                ),
                "failure" => planner.on_failure(at, &failure(&step["failure"])),
                other => panic!("{name}: unknown event {other}"),
            };
            check_decision(name, &got, want);
            assert_eq!(
                planner.attempt_timeout(),
                millis(&want["attempt_timeout_ms"]),
                "{name}: attempt timeout after {step}"
            );
        }
    }
}

/// A section no test here reads would be silently skipped by this binding.
#[test]
fn every_section_is_covered() {
    let doc = vectors();
    let mut keys: Vec<&str> = doc
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "about",
            "extend_timeout",
            "fallback",
            "format",
            "planner",
            "planner_derived",
            "retry",
            "retry_after",
            "schedule",
            "version"
        ],
        "a new vector section needs a test here"
    );
}
