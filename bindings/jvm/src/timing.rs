//! `dev.cycles.Timing`'s native half: core's pure heartbeat math through the bridge's
//! `timing_json` (the shared vectors' encoding), and both planners as ids.

use std::sync::Mutex;

use cycles_bridge::timing_json::{self, FallbackJson, PrimaryJson};
use cycles_bridge::ErrorFields;
use jni::objects::JString;
use jni::sys::{jlong, JNI_TRUE};
use jni::JNIEnv;

use crate::entry::{jstr, string};
use crate::handles;

struct Primary(Mutex<PrimaryJson>);
struct Fallback(Mutex<FallbackJson>);

fn primary(id: jlong) -> Result<std::sync::Arc<Primary>, ErrorFields> {
    handles::get::<Primary>(id, "planner")
}

fn fallback(id: jlong) -> Result<std::sync::Arc<Fallback>, ErrorFields> {
    handles::get::<Fallback>(id, "planner")
}

fn u64_arg(v: jlong, name: &str) -> Result<u64, ErrorFields> {
    u64::try_from(v).map_err(|_| ErrorFields::invalid(format!("{name} must not be negative")))
}

/// A u64 passed as decimal text: Java has no unsigned 64-bit integer type.
fn u64_text(env: &mut JNIEnv<'_>, v: &JString<'_>, name: &str) -> Result<u64, ErrorFields> {
    let t = string(env, v, name)?;
    t.parse().map_err(|_| {
        ErrorFields::invalid(format!(
            "{name} must be an integer in 0..={}, got {t:?}",
            u64::MAX
        ))
    })
}

natives! {
    /// One pure timing function by name, arguments and result as JSON.
    fn timingCall(env, name: JString, args_json: JString) -> jstring {
        let name = string(env, &name, "name")?;
        let out = timing_json::call(&name, &string(env, &args_json, "args")?)?;
        jstr(env, &out)
    }

    /// A primary planner (`request_timeout` a JSON duration; `derive`: derive from short leases).
    fn primaryNew(env, request_timeout_json: JString, derive: jboolean) -> jlong {
        let t = string(env, &request_timeout_json, "request_timeout")?;
        let p = PrimaryJson::new(&t, derive == JNI_TRUE)?;
        Ok(handles::put(Primary(Mutex::new(p))))
    }

    /// One primary step (JSON in, the decision JSON out).
    fn primaryStep(env, planner: jlong, step_json: JString) -> jstring {
        let s = string(env, &step_json, "step")?;
        let out = primary(planner)?
            .0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .step(&s)?;
        jstr(env, &out)
    }

    /// The cut-off the primary planner's next attempt must use (JSON duration).
    fn primaryAttemptTimeout(env, planner: jlong) -> jstring {
        let out = primary(planner)?
            .0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .attempt_timeout();
        jstr(env, &out)
    }

    /// A fallback planner of a reservation requested with `requested_ttl_ms`, received at
    /// `received_us` (both u64 as decimal text), expiring at `expires_at_ms`.
    fn fallbackNew(
        env,
        requested_ttl_ms: JString,
        received_us: JString,
        expires_at_ms: jlong,
    ) -> jlong {
        let p = FallbackJson::new(
            u64_text(env, &requested_ttl_ms, "requested_ttl_ms")?,
            u64_text(env, &received_us, "received_us")?,
            expires_at_ms,
        );
        Ok(handles::put(Fallback(Mutex::new(p))))
    }

    /// The fallback planner's first beat (`prime`: the lead is primed).
    fn fallbackFirstBeat(env, planner: jlong, prime: jboolean) -> jstring {
        let out = fallback(planner)?
            .0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .first_beat(prime == JNI_TRUE);
        jstr(env, &out)
    }

    /// One fallback step (JSON in, the decision JSON out).
    fn fallbackStep(env, planner: jlong, step_json: JString) -> jstring {
        let s = string(env, &step_json, "step")?;
        let out = fallback(planner)?
            .0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .step(&s)?;
        jstr(env, &out)
    }

    /// The fallback planner's regime name.
    fn fallbackRegime(env, planner: jlong) -> jstring {
        let r = fallback(planner)?
            .0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .regime();
        jstr(env, r)
    }

    /// The lower bound of the lead at `now_us` as a decimal string (it may exceed a long).
    fn fallbackLeadMinMs(env, planner: jlong, now_us: jlong) -> jstring {
        let now = u64_arg(now_us, "now_us")?;
        let v = fallback(planner)?
            .0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .lead_min_ms(now);
        jstr(env, &v.to_string())
    }
}
