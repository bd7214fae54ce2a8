//! `cycles-sdk/timing`: core's pure heartbeat math through the bridge's `timing_json` (the
//! shared vectors' encoding: an integer within ±(2^53 − 1) is a JSON number, a larger one a
//! decimal string, the infinities `"infinite"` / `"-infinite"`, absent `null`). Arguments are
//! named JSON objects; `node/src/timing.ts` maps `number`, `bigint` and `±Infinity` to and
//! from the encoding. Nothing here converts a value itself: one table serves every binding.

use std::sync::{Mutex, MutexGuard};

use cycles_bridge::timing_json::{self, int_arg, int_out, parse, FallbackJson, PrimaryJson};
use napi_derive::napi;

use crate::errors::{core, guard};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// `now_us` of a `{"now_us": n}` argument object.
fn now_us(args_json: &str) -> napi::Result<u64> {
    let a = parse(args_json, "arguments").map_err(core)?;
    int_arg(&a, "now_us").map_err(core)
}

/// One pure timing function by name (`timing_json::call`'s table), its arguments a JSON
/// object; the result as JSON.
#[napi]
pub fn timing_call(name: String, args_json: String) -> napi::Result<String> {
    guard(|| timing_json::call(&name, &args_json).map_err(core))
}

/// Core's primary heartbeat planner (the bridge's `PrimaryJson`).
#[napi]
pub struct NativePrimaryPlanner {
    inner: Mutex<PrimaryJson>,
}

#[napi]
impl NativePrimaryPlanner {
    /// A planner with `request_timeout_json` (a JSON duration); `derive` derives the enforced
    /// timeout from a short lease.
    #[napi(constructor)]
    pub fn new(request_timeout_json: String, derive: bool) -> napi::Result<Self> {
        guard(|| {
            let p = PrimaryJson::new(&request_timeout_json, derive).map_err(core)?;
            Ok(NativePrimaryPlanner {
                inner: Mutex::new(p),
            })
        })
    }

    /// One step (the vectors' step object); the decision JSON.
    #[napi]
    pub fn step(&self, step_json: String) -> napi::Result<String> {
        guard(|| lock(&self.inner).step(&step_json).map_err(core))
    }

    /// The enforced timeout of the next attempt (JSON duration).
    #[napi]
    pub fn attempt_timeout(&self) -> napi::Result<String> {
        guard(|| Ok(lock(&self.inner).attempt_timeout()))
    }

    /// The largest round trip seen (JSON duration or `null`).
    #[napi]
    pub fn max_rtt(&self) -> napi::Result<String> {
        guard(|| Ok(lock(&self.inner).max_rtt()))
    }

    /// Records a round trip (`rtt_json`, a JSON duration).
    #[napi]
    pub fn observe_rtt(&self, rtt_json: String) -> napi::Result<()> {
        guard(|| lock(&self.inner).observe_rtt(&rtt_json).map_err(core))
    }

    /// The failure arithmetic at `{"now_us"}` (JSON object or `null`).
    #[napi]
    pub fn failure_math(&self, args_json: String) -> napi::Result<String> {
        guard(|| Ok(lock(&self.inner).failure_math(now_us(&args_json)?)))
    }
}

/// Core's fallback heartbeat planner (the bridge's `FallbackJson`).
#[napi]
pub struct NativeFallbackPlanner {
    inner: Mutex<FallbackJson>,
}

#[napi]
impl NativeFallbackPlanner {
    /// `{"requested_ttl_ms", "reserve_received_us", "expires_at_ms"}`.
    #[napi(constructor)]
    pub fn new(args_json: String) -> napi::Result<Self> {
        guard(|| {
            let a = parse(&args_json, "arguments").map_err(core)?;
            let p = FallbackJson::new(
                int_arg(&a, "requested_ttl_ms").map_err(core)?,
                int_arg(&a, "reserve_received_us").map_err(core)?,
                int_arg(&a, "expires_at_ms").map_err(core)?,
            );
            Ok(NativeFallbackPlanner {
                inner: Mutex::new(p),
            })
        })
    }

    /// The first beat's decision JSON (`prime`: extend at once).
    #[napi]
    pub fn first_beat(&self, prime: bool) -> napi::Result<String> {
        guard(|| Ok(lock(&self.inner).first_beat(prime)))
    }

    /// One step (the vectors' step object); the decision JSON.
    #[napi]
    pub fn step(&self, step_json: String) -> napi::Result<String> {
        guard(|| lock(&self.inner).step(&step_json).map_err(core))
    }

    /// The current regime's name.
    #[napi]
    pub fn regime(&self) -> napi::Result<String> {
        guard(|| Ok(lock(&self.inner).regime().to_string()))
    }

    /// The last grant (JSON integer or `null`).
    #[napi]
    pub fn last_grant_ms(&self) -> napi::Result<String> {
        guard(|| Ok(lock(&self.inner).last_grant_ms()))
    }

    /// The lower bound of the lead at `{"now_us"}` (JSON integer).
    #[napi]
    pub fn lead_min_ms(&self, args_json: String) -> napi::Result<String> {
        guard(|| {
            let now = now_us(&args_json)?;
            Ok(int_out(lock(&self.inner).lead_min_ms(now)).to_string())
        })
    }
}
