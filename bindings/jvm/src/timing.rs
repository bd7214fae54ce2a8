//! `dev.cycles.Timing`'s native half: core's pure heartbeat math through the bridge's
//! `timing_json` (the shared vectors' encoding), and both planners as ids.

use std::sync::Mutex;

use cycles_bridge::timing_json::{self, FallbackJson, PrimaryJson};
use cycles_bridge::ErrorFields;
use jni::objects::{JClass, JString};
use jni::sys::{jboolean, jlong, jstring, JNI_TRUE};
use jni::JNIEnv;

use crate::entry::{entry, jstr, string};
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

/// One pure timing function by name, arguments and result as JSON.
#[no_mangle]
pub extern "system" fn Java_dev_cycles_internal_Native_timingCall<'l>(
    mut env: JNIEnv<'l>,
    _c: JClass<'l>,
    name: JString<'l>,
    args: JString<'l>,
) -> jstring {
    entry(&mut env, std::ptr::null_mut(), |env| {
        let out = timing_json::call(&string(env, &name, "name")?, &string(env, &args, "args")?)?;
        jstr(env, &out)
    })
}

/// A primary planner (`request_timeout` a JSON duration; `derive`: derive from short leases).
#[no_mangle]
pub extern "system" fn Java_dev_cycles_internal_Native_primaryNew<'l>(
    mut env: JNIEnv<'l>,
    _c: JClass<'l>,
    request_timeout: JString<'l>,
    derive: jboolean,
) -> jlong {
    entry(&mut env, 0, |env| {
        let t = string(env, &request_timeout, "request_timeout")?;
        let p = PrimaryJson::new(&t, derive == JNI_TRUE)?;
        Ok(handles::put(Primary(Mutex::new(p))))
    })
}

/// One primary step (JSON in, the decision JSON out).
#[no_mangle]
pub extern "system" fn Java_dev_cycles_internal_Native_primaryStep<'l>(
    mut env: JNIEnv<'l>,
    _c: JClass<'l>,
    id: jlong,
    step: JString<'l>,
) -> jstring {
    entry(&mut env, std::ptr::null_mut(), |env| {
        let s = string(env, &step, "step")?;
        let out = primary(id)?
            .0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .step(&s)?;
        jstr(env, &out)
    })
}

/// The cut-off the primary planner's next attempt must use (JSON duration).
#[no_mangle]
pub extern "system" fn Java_dev_cycles_internal_Native_primaryAttemptTimeout<'l>(
    mut env: JNIEnv<'l>,
    _c: JClass<'l>,
    id: jlong,
) -> jstring {
    entry(&mut env, std::ptr::null_mut(), |env| {
        let out = primary(id)?
            .0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .attempt_timeout();
        jstr(env, &out)
    })
}

/// A fallback planner of a reservation requested with `requested_ttl_ms`, received at
/// `received_us` (both u64 as decimal text), expiring at `expires_at_ms`.
#[no_mangle]
pub extern "system" fn Java_dev_cycles_internal_Native_fallbackNew<'l>(
    mut env: JNIEnv<'l>,
    _c: JClass<'l>,
    requested_ttl_ms: JString<'l>,
    received_us: JString<'l>,
    expires_at_ms: jlong,
) -> jlong {
    entry(&mut env, 0, |env| {
        let p = FallbackJson::new(
            u64_text(env, &requested_ttl_ms, "requested_ttl_ms")?,
            u64_text(env, &received_us, "received_us")?,
            expires_at_ms,
        );
        Ok(handles::put(Fallback(Mutex::new(p))))
    })
}

/// The fallback planner's first beat (`prime`: the lead is primed).
#[no_mangle]
pub extern "system" fn Java_dev_cycles_internal_Native_fallbackFirstBeat<'l>(
    mut env: JNIEnv<'l>,
    _c: JClass<'l>,
    id: jlong,
    prime: jboolean,
) -> jstring {
    entry(&mut env, std::ptr::null_mut(), |env| {
        let out = fallback(id)?
            .0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .first_beat(prime == JNI_TRUE);
        jstr(env, &out)
    })
}

/// One fallback step (JSON in, the decision JSON out).
#[no_mangle]
pub extern "system" fn Java_dev_cycles_internal_Native_fallbackStep<'l>(
    mut env: JNIEnv<'l>,
    _c: JClass<'l>,
    id: jlong,
    step: JString<'l>,
) -> jstring {
    entry(&mut env, std::ptr::null_mut(), |env| {
        let s = string(env, &step, "step")?;
        let out = fallback(id)?
            .0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .step(&s)?;
        jstr(env, &out)
    })
}

/// The fallback planner's regime name.
#[no_mangle]
pub extern "system" fn Java_dev_cycles_internal_Native_fallbackRegime<'l>(
    mut env: JNIEnv<'l>,
    _c: JClass<'l>,
    id: jlong,
) -> jstring {
    entry(&mut env, std::ptr::null_mut(), |env| {
        let r = fallback(id)?
            .0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .regime();
        jstr(env, r)
    })
}

/// The lower bound of the lead at `now_us` as a decimal string (it may exceed a long).
#[no_mangle]
pub extern "system" fn Java_dev_cycles_internal_Native_fallbackLeadMinMs<'l>(
    mut env: JNIEnv<'l>,
    _c: JClass<'l>,
    id: jlong,
    now_us: jlong,
) -> jstring {
    entry(&mut env, std::ptr::null_mut(), |env| {
        let now = u64_arg(now_us, "now_us")?;
        let v = fallback(id)?
            .0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .lead_min_ms(now);
        jstr(env, &v.to_string())
    })
}
