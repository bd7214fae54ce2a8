//! The bridge's timing JSON (`timing_json::call`, and the planners driven by JSON steps): any
//! function name and argument text gives JSON or a typed INVALID_ARGUMENT, never a panic.
//! Input: `name\nargs` (`primary`/`primary_derived`/`fallback`: a timeout or ttl line, then
//! one step JSON a line; for the primary planners a line `rtt <duration JSON>` records a round
//! trip instead, as hosts' `observe_rtt` does).
#![no_main]

use cycles_bridge::timing_json::{call, FallbackJson, PrimaryJson};
use cycles_core::ErrorKind;
use cycles_fuzz::named;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((name, rest)) = named(data) else {
        return;
    };
    match name {
        "primary" | "primary_derived" => {
            let (timeout, steps) = rest.split_once('\n').unwrap_or((rest, ""));
            let Ok(mut p) = PrimaryJson::new(timeout, name == "primary_derived") else {
                return;
            };
            for s in steps.lines() {
                if let Some(rtt) = s.strip_prefix("rtt ") {
                    if let Err(e) = p.observe_rtt(rtt) {
                        assert_eq!(e.kind(), &ErrorKind::InvalidArgument, "{}", e.message());
                    }
                } else if let Ok(out) = p.step(s) {
                    serde_json::from_str::<serde_json::Value>(&out).expect("decision is JSON");
                }
                let _ = (p.attempt_timeout(), p.max_rtt(), p.failure_math(u64::MAX));
            }
        }
        "fallback" => {
            let (head, steps) = rest.split_once('\n').unwrap_or((rest, ""));
            let mut it = head.split_whitespace().map(|t| t.parse::<i128>().ok());
            let (Some(Some(ttl)), Some(Some(at)), Some(Some(exp))) =
                (it.next(), it.next(), it.next())
            else {
                return;
            };
            let (Ok(ttl), Ok(at), Ok(exp)) =
                (u64::try_from(ttl), u64::try_from(at), i64::try_from(exp))
            else {
                return;
            };
            let mut f = FallbackJson::new(ttl, at, exp);
            let _ = f.first_beat(true);
            for s in steps.lines() {
                let _ = f.step(s);
                let _ = (f.regime(), f.last_grant_ms(), f.lead_min_ms(u64::MAX));
            }
        }
        _ => match call(name, rest) {
            Ok(out) => {
                serde_json::from_str::<serde_json::Value>(&out).expect("result is JSON");
            }
            Err(e) => assert_eq!(e.kind(), &ErrorKind::InvalidArgument, "{}", e.message()),
        },
    }
});
