//! `cycles plan`: prints the heartbeat schedule the core planner computes for given inputs,
//! with its arithmetic, and optionally the decisions after scripted extend failures.

use clap::Args;
use cycles_core::timing::timeout::{self, TimeoutSource};
use cycles_core::timing::{
    primary, Decision, ExtendFailure, KeyUse, Millis, PrimaryPlanner, RetryAfter,
};

/// Options of `cycles plan`.
#[derive(Args, Debug)]
pub struct PlanArgs {
    /// `remaining_ttl_ms` from the create or extend response.
    #[arg(long)]
    remaining_ttl_ms: u64,
    /// Configured request timeout; omit for none (unbounded). Unless --no-derive, the
    /// heartbeat enforces a shorter one derived from the lease when this one leaves no
    /// positive delay, as the SDK's lease driver does.
    #[arg(long)]
    timeout_ms: Option<u64>,
    /// Use the configured timeout as is (the spec's plain arithmetic; an omitted timeout is
    /// then an infinite budget).
    #[arg(long)]
    no_derive: bool,
    /// Round trip of the attempt that produced the response; omit when timing is unreliable.
    #[arg(long)]
    rtt_ms: Option<u64>,
    /// Maximum rtt observed over the lease's life; --rtt-ms is folded in (it was observed).
    #[arg(long)]
    max_rtt_ms: Option<u64>,
    /// Script an extend failure at this many ms after the response: `transient@T`,
    /// `429@T:SECONDS`, or `CODE@T` (e.g. `RESERVATION_EXPIRED@40000`). Repeatable, in order.
    #[arg(long = "fail")]
    failures: Vec<String>,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

fn parse_failure(text: &str) -> Result<(u64, ExtendFailure), String> {
    let (what, at) = text
        .split_once('@')
        .ok_or_else(|| format!("failure {text:?} is not KIND@MS"))?;
    let (at, seconds) = match at.split_once(':') {
        Some((at, s)) => (at, Some(s)),
        None => (at, None),
    };
    let at: u64 = at
        .parse()
        .map_err(|_| format!("failure time {at:?} is not whole milliseconds"))?;
    let failure = match what {
        "transient" => ExtendFailure::Transient,
        "429" => ExtendFailure::RateLimited(RetryAfter::parse(seconds)),
        code if code.chars().all(|c| c.is_ascii_uppercase() || c == '_') && !code.is_empty() => {
            let status = match code {
                "RESERVATION_EXPIRED" => 410,
                "NOT_FOUND" => 404,
                "INVALID_REQUEST" | "UNIT_MISMATCH" => 400,
                "UNAUTHORIZED" => 401,
                "FORBIDDEN" => 403,
                _ => 409,
            };
            ExtendFailure::from_error_code(status, Some(code))
        }
        other => return Err(format!("unknown failure kind {other:?}")),
    };
    Ok((at, failure))
}

fn describe(decision: &Decision) -> String {
    match decision {
        Decision::Extend { delay, key } => format!(
            "extend after {delay} with {} idempotency key",
            match key {
                KeyUse::Fresh => "a fresh",
                KeyUse::Same => "the same",
            }
        ),
        Decision::Stop(reason) => format!("stop: {reason:?}"),
    }
}

fn json_millis(m: Millis) -> serde_json::Value {
    m.finite().map_or_else(|| "infinite".into(), Into::into)
}

/// Computes and prints the plan.
pub async fn run(args: PlanArgs) -> Result<(), String> {
    let configured = args.timeout_ms.map_or(Millis::Infinite, Millis::ms);
    let rtt = args.rtt_ms.map(Millis::ms);
    // The current attempt's rtt is an observed rtt too: the maximum includes it (the planner
    // folds it in the same way, so the printed arithmetic and the decision agree).
    let max_rtt = match (args.max_rtt_ms.map(Millis::ms), rtt) {
        (Some(m), Some(r)) => Some(m.max(r)),
        (m, r) => m.or(r),
    };
    // The enforced timeout: derived from the lead unless --no-derive (or timing is unknown).
    let choice = (!args.no_derive && rtt.is_some()).then(|| {
        timeout::extend_timeout(
            primary::lead_floor(args.remaining_ttl_ms, rtt),
            max_rtt,
            configured,
        )
    });
    let timeout = choice.map_or(configured, |c| c.timeout);
    let s = primary::schedule(args.remaining_ttl_ms, rtt, max_rtt, timeout);
    // The planner replays the same numbers and then the scripted failures.
    let mut planner = if args.no_derive {
        PrimaryPlanner::new(configured)
    } else {
        PrimaryPlanner::with_derived_timeout(configured)
    };
    if let Some(m) = max_rtt {
        planner.observe_rtt(m);
    }
    let first = planner.on_success(0, args.remaining_ttl_ms, rtt);
    debug_assert_eq!(planner.attempt_timeout(), timeout);
    let mut steps = Vec::new();
    for text in &args.failures {
        if matches!(steps.last(), Some((_, _, Decision::Stop(_)))) {
            return Err(format!(
                "the heartbeat already stopped before --fail {text}"
            ));
        }
        let (at, failure) = parse_failure(text)?;
        let math = planner.failure_math(at.saturating_mul(1000));
        let decision = planner.on_failure(at.saturating_mul(1000), &failure);
        steps.push((text.clone(), math, decision));
    }
    if args.json {
        let out = serde_json::json!({
            "configured_timeout_ms": json_millis(configured),
            "timeout_ms": json_millis(timeout),
            "timeout_source": choice.map_or("configured", |c| c.source.name()),
            "min_lead_floor_ms": json_millis(timeout::min_keepable_lead_floor(max_rtt)),
            "lead_floor_ms": json_millis(s.lead_floor),
            "attempt_budget_ms": json_millis(s.attempt_budget),
            "safety_margin_ms": json_millis(s.safety_margin),
            "retry_reserve_ms": json_millis(s.retry_reserve),
            "next_delay_ms": json_millis(s.next_delay),
            "decision": describe(&first),
            "failures": steps.iter().map(|(text, math, decision)| serde_json::json!({
                "failure": text,
                "current_lead_estimate_ms": math.map(|m| json_millis(m.current_lead_estimate)),
                "retry_window": math.map(|m| m.retry_window.to_string()),
                "decision": describe(decision),
            })).collect::<Vec<_>>(),
        });
        println!(
            "{}",
            serde_json::to_string_pretty(&out).map_err(|e| e.to_string())?
        );
        return Ok(());
    }
    let show = |m: Option<Millis>| m.map_or_else(|| "unknown".to_string(), |m| m.to_string());
    println!("primary heartbeat schedule (spec 0.1.25.16, remaining_ttl_ms present)");
    println!("  remaining_ttl_ms  {}", args.remaining_ttl_ms);
    println!("  rtt               {}", show(rtt));
    println!("  max observed rtt  {}", show(max_rtt));
    println!("  request timeout   {configured} (configured)");
    match choice {
        Some(c) if c.source == TimeoutSource::Derived => println!(
            "  extend timeout    {timeout} (derived from the lease: the configured timeout gives \
             no positive delay; cut off at {})",
            timeout::attempt_cutoff(timeout)
        ),
        Some(c) if c.source == TimeoutSource::TooShort => println!(
            "  extend timeout    {timeout} (the floor: no timeout keeps this lease alive; it \
             needs lead_floor >= {})",
            c.min_lead_floor
        ),
        _ => {}
    }
    match rtt {
        Some(r) => println!(
            "  lead_floor      = max(0, {} - {}) = {}",
            args.remaining_ttl_ms, r, s.lead_floor
        ),
        None => println!("  lead_floor      = 0 (attempt timing unknown or unreliable)"),
    }
    println!(
        "  attempt_budget  = max({timeout}, 1000 ms, 2 x {}) = {}",
        show(max_rtt),
        s.attempt_budget
    );
    println!(
        "  safety_margin   = max(1000 ms, 2 x {}) = {}",
        show(max_rtt),
        s.safety_margin
    );
    println!(
        "  retry_reserve   = 2 x {} + {} = {}",
        s.attempt_budget, s.safety_margin, s.retry_reserve
    );
    println!(
        "  next_delay      = max(0, {} - {}) = {} after response receipt",
        s.lead_floor, s.retry_reserve, s.next_delay
    );
    println!("  decision: {}", describe(&first));
    for (text, math, decision) in steps {
        println!("failure {text}:");
        if let Some(m) = math {
            println!(
                "  elapsed {} -> current_lead_estimate {} -> retry_window {}",
                m.elapsed, m.current_lead_estimate, m.retry_window
            );
        }
        println!("  decision: {}", describe(&decision));
    }
    Ok(())
}
