//! `CyclesClient`'s native half: a bridge `ClientHandle`, its guarded lifecycle (created on
//! first use), operations (blocking or queued for the completion thread), guarded actions,
//! events, and the process-wide exports (error table, poll, live handles, debug panic).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use cycles_bridge::ops::Call;
use cycles_bridge::options::{host_client, JVM};
use cycles_bridge::task::Work;
use cycles_bridge::{
    error_codes, Active, ClientHandle, Connection, ErrorFields, Lifecycle, SettleOverrides,
};
use cycles_core::events::Level;
use jni::objects::{JClass, JString};
use jni::sys::{jboolean, jint, jlong, jstring, JNI_FALSE, JNI_TRUE};
use jni::JNIEnv;
use serde_json::json;

use crate::completions;
use crate::entry::{block, entry, jstr, opt_string, string};
use crate::handles;

/// One Java client.
pub struct Client {
    handle: ClientHandle,
    settle: SettleOverrides,
    close_timeout_ms: u64,
    life: Mutex<Option<Arc<Lifecycle>>>,
}

impl Client {
    /// The lifecycle, created on first use (the closed error once closed).
    fn life(&self) -> Result<Arc<Lifecycle>, ErrorFields> {
        let mut slot = self.life.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(l) = slot.as_ref() {
            return Ok(l.clone());
        }
        let client = self.handle.live()?;
        let l = Arc::new(Lifecycle::new(
            client,
            self.handle.config(),
            self.settle.max_attempts,
            self.settle.replay_interval_ms,
        )?);
        *slot = Some(l.clone());
        Ok(l)
    }
}

fn call_work(call: Call) -> Work<Result<String, ErrorFields>> {
    Box::pin(async move { call.run().await.map(|r| r.to_json()) })
}

fn client(id: jlong) -> Result<Arc<Client>, ErrorFields> {
    handles::get::<Client>(id, "client")
}

fn active(id: jlong) -> Result<Arc<Active>, ErrorFields> {
    handles::get::<Active>(id, "guarded action")
}

/// Core's error table as `[[name, code], ...]`.
#[no_mangle]
pub extern "system" fn Java_dev_cycles_internal_Native_errorCodes<'l>(
    mut env: JNIEnv<'l>,
    _c: JClass<'l>,
) -> jstring {
    entry(&mut env, std::ptr::null_mut(), |env| {
        jstr(env, &json!(error_codes()).to_string())
    })
}

/// A client from options JSON (the bridge's one options table, `options::host_client`:
/// `base_url`, `api_key`, `tenant`, `default_unit`, timeouts, journal,
/// `max_concurrent_requests`, `max_response_bytes`, settle overrides, `close_timeout_ms`; an
/// unknown member is
/// INVALID_ARGUMENT); `from_env`: the `CYCLES_*` environment, the options overriding it.
#[no_mangle]
pub extern "system" fn Java_dev_cycles_internal_Native_clientNew<'l>(
    mut env: JNIEnv<'l>,
    _c: JClass<'l>,
    options: JString<'l>,
    from_env: jboolean,
) -> jlong {
    entry(&mut env, 0, |env| {
        let options = string(env, &options, "options")?;
        let connection = if from_env == JNI_TRUE {
            Connection::Env
        } else {
            Connection::InOptions
        };
        let host = host_client(&options, JVM, connection)?;
        Ok(handles::put(Client {
            handle: host.client,
            settle: host.settle,
            close_timeout_ms: host.close_timeout_ms,
            life: Mutex::new(None),
        }))
    })
}

/// The client's settings as JSON (`base_url`, `tenant`, timeouts, the default drain bound),
/// never the key.
#[no_mangle]
pub extern "system" fn Java_dev_cycles_internal_Native_clientInfo<'l>(
    mut env: JNIEnv<'l>,
    _c: JClass<'l>,
    id: jlong,
) -> jstring {
    entry(&mut env, std::ptr::null_mut(), |env| {
        let c = client(id)?;
        let cfg = c.handle.config();
        let info = json!({
            "base_url": cfg.base_url,
            "tenant": cfg.tenant,
            "request_timeout_ms": c.handle.request_timeout_ms(),
            "connect_timeout_ms": c.handle.connect_timeout_ms(),
            "close_timeout_ms": c.close_timeout_ms,
        });
        jstr(env, &info.to_string())
    })
}

/// One operation, blocking: the reply JSON.
#[no_mangle]
pub extern "system" fn Java_dev_cycles_internal_Native_clientCall<'l>(
    mut env: JNIEnv<'l>,
    _c: JClass<'l>,
    id: jlong,
    op: JString<'l>,
    args: JString<'l>,
) -> jstring {
    entry(&mut env, std::ptr::null_mut(), |env| {
        let call = client(id)?.handle.prepare(
            &string(env, &op, "operation")?,
            &string(env, &args, "arguments")?,
        )?;
        let out = block(call_work(call))??;
        jstr(env, &out)
    })
}

/// One operation, its reply queued under `future` (synchronous failures throw now).
#[no_mangle]
pub extern "system" fn Java_dev_cycles_internal_Native_clientCallAsync<'l>(
    mut env: JNIEnv<'l>,
    _c: JClass<'l>,
    id: jlong,
    op: JString<'l>,
    args: JString<'l>,
    future: jlong,
) {
    entry(&mut env, (), |env| {
        let call = client(id)?.handle.prepare(
            &string(env, &op, "operation")?,
            &string(env, &args, "arguments")?,
        )?;
        completions::submit(future, call_work(call))
    })
}

/// The client's lifecycle as its own id (the Java event thread polls it and frees it when
/// `lifeNextEvents` returns null); creates it on first use.
#[no_mangle]
pub extern "system" fn Java_dev_cycles_internal_Native_clientLifecycle<'l>(
    mut env: JNIEnv<'l>,
    _c: JClass<'l>,
    id: jlong,
) -> jlong {
    entry(&mut env, 0, |_| Ok(handles::put(client(id)?.life()?)))
}

/// The events delivered so far as a JSON array (waiting up to `timeout_ms` for the first);
/// null once the lifecycle is closed and nothing is left.
#[no_mangle]
pub extern "system" fn Java_dev_cycles_internal_Native_lifeNextEvents<'l>(
    mut env: JNIEnv<'l>,
    _c: JClass<'l>,
    life: jlong,
    timeout_ms: jlong,
) -> jstring {
    entry(&mut env, std::ptr::null_mut(), |env| {
        let Ok(l) = handles::get::<Arc<Lifecycle>>(life, "lifecycle") else {
            return Ok(std::ptr::null_mut());
        };
        let wait = Duration::from_millis(u64::try_from(timeout_ms).unwrap_or(0));
        match l.next_events(wait) {
            Some(batch) => jstr(env, &format!("[{}]", batch.join(","))),
            None => Ok(std::ptr::null_mut()),
        }
    })
}

/// The least level of the events the Java side looks at (0 debug, 1 info, 2 warning, 3 error;
/// anything else: none). Core builds no event below it.
#[no_mangle]
pub extern "system" fn Java_dev_cycles_internal_Native_lifeSetEventFloor<'l>(
    mut env: JNIEnv<'l>,
    _c: JClass<'l>,
    life: jlong,
    floor: jint,
) {
    entry(&mut env, (), |_env| {
        if let Ok(l) = handles::get::<Arc<Lifecycle>>(life, "lifecycle") {
            let floor = usize::try_from(floor).ok().and_then(|i| Level::ALL.get(i));
            l.set_event_floor(floor.copied());
        }
        Ok(())
    })
}

/// Replays every pending settlement once (blocking): the drain report JSON.
#[no_mangle]
pub extern "system" fn Java_dev_cycles_internal_Native_clientFlush<'l>(
    mut env: JNIEnv<'l>,
    _c: JClass<'l>,
    id: jlong,
) -> jstring {
    entry(&mut env, std::ptr::null_mut(), |env| {
        let out = block(client(id)?.life()?.flush())?;
        jstr(env, &out)
    })
}

/// Replays until nothing is pending or `timeout_ms` passed (blocking): the drain report.
#[no_mangle]
pub extern "system" fn Java_dev_cycles_internal_Native_clientDrain<'l>(
    mut env: JNIEnv<'l>,
    _c: JClass<'l>,
    id: jlong,
    timeout_ms: jlong,
) -> jstring {
    entry(&mut env, std::ptr::null_mut(), |env| {
        let t = Duration::from_millis(u64::try_from(timeout_ms).unwrap_or(0));
        let out = block(client(id)?.life()?.drain(t))?;
        jstr(env, &out)
    })
}

/// Closes the client (blocking, idempotent): the lifecycle's close drain within
/// `timeout_ms` (its report JSON; null when the lifecycle was never used), then the handle.
/// Later calls fail with the closed error. The id stays registered until `free`.
#[no_mangle]
pub extern "system" fn Java_dev_cycles_internal_Native_clientClose<'l>(
    mut env: JNIEnv<'l>,
    _c: JClass<'l>,
    id: jlong,
    timeout_ms: jlong,
) -> jstring {
    entry(&mut env, std::ptr::null_mut(), |env| {
        let Ok(c) = client(id) else {
            return Ok(std::ptr::null_mut());
        };
        let life = c.life.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let report = match life {
            Some(l) => {
                let t = Duration::from_millis(u64::try_from(timeout_ms).unwrap_or(0));
                Some(block(l.close(t))?)
            }
            None => None,
        };
        c.handle.close();
        match report {
            Some(r) => jstr(env, &r),
            None => Ok(std::ptr::null_mut()),
        }
    })
}

/// Whether the client was closed.
#[no_mangle]
pub extern "system" fn Java_dev_cycles_internal_Native_clientIsClosed<'l>(
    mut env: JNIEnv<'l>,
    _c: JClass<'l>,
    id: jlong,
) -> jboolean {
    entry(&mut env, JNI_TRUE, |_| {
        Ok(match client(id) {
            Ok(c) if !c.handle.is_closed() => JNI_FALSE,
            _ => JNI_TRUE,
        })
    })
}

fn begin_work(id: jlong, spec: &str) -> Result<Work<Result<Active, ErrorFields>>, ErrorFields> {
    let c = client(id)?;
    if c.handle.is_closed() {
        return Err(ErrorFields::closed());
    }
    c.life()?.begin(spec)
}

/// Phase one of a guarded action (blocking): reserve and start the heartbeat; the action's id.
#[no_mangle]
pub extern "system" fn Java_dev_cycles_internal_Native_guardBegin<'l>(
    mut env: JNIEnv<'l>,
    _c: JClass<'l>,
    id: jlong,
    spec: JString<'l>,
) -> jlong {
    entry(&mut env, 0, |env| {
        let work = begin_work(id, &string(env, &spec, "spec")?)?;
        Ok(handles::put(block(work)??))
    })
}

/// Phase one, queued: the value is the action's id.
#[no_mangle]
pub extern "system" fn Java_dev_cycles_internal_Native_guardBeginAsync<'l>(
    mut env: JNIEnv<'l>,
    _c: JClass<'l>,
    id: jlong,
    spec: JString<'l>,
    future: jlong,
) {
    entry(&mut env, (), |env| {
        let work = begin_work(id, &string(env, &spec, "spec")?)?;
        completions::submit(
            future,
            Box::pin(async move { work.await.map(|a| handles::put(a).to_string()) }),
        )
    })
}

/// The reservation id of a guarded action.
#[no_mangle]
pub extern "system" fn Java_dev_cycles_internal_Native_activeReservationId<'l>(
    mut env: JNIEnv<'l>,
    _c: JClass<'l>,
    a: jlong,
) -> jstring {
    entry(&mut env, std::ptr::null_mut(), |env| {
        let a = active(a)?;
        jstr(env, a.reservation_id())
    })
}

/// The handle's facts: `{"reservation_id", "decision", "caps"}` (bridge `Active::info_json`).
#[no_mangle]
pub extern "system" fn Java_dev_cycles_internal_Native_activeInfo<'l>(
    mut env: JNIEnv<'l>,
    _c: JClass<'l>,
    a: jlong,
) -> jstring {
    entry(&mut env, std::ptr::null_mut(), |env| {
        let info = active(a)?.info_json();
        jstr(env, &info)
    })
}

/// Ends the action early (blocking): releases the reservation, the finished JSON (outcome
/// `released`). INVALID_ARGUMENT, the action left running, once usage is known.
#[no_mangle]
pub extern "system" fn Java_dev_cycles_internal_Native_activeRelease<'l>(
    mut env: JNIEnv<'l>,
    _c: JClass<'l>,
    a: jlong,
    reason: JString<'l>,
) -> jstring {
    entry(&mut env, std::ptr::null_mut(), |env| {
        let reason = opt_string(env, &reason)?;
        let work = active(a)?.release(reason)?;
        let out = block(work)?;
        jstr(env, &out)
    })
}

/// The caps rewrite of a provider request (bridge `Active::plan_caps`): `api` a wire name,
/// `request` its JSON body; the plan's JSON. A rewrite is reported as the `caps_applied`
/// event. INVALID_ARGUMENT for a bad API name, request or bound, or once finished.
#[no_mangle]
pub extern "system" fn Java_dev_cycles_internal_Native_activePlanCaps<'l>(
    mut env: JNIEnv<'l>,
    _c: JClass<'l>,
    a: jlong,
    api: JString<'l>,
    request: JString<'l>,
) -> jstring {
    entry(&mut env, std::ptr::null_mut(), |env| {
        let api = string(env, &api, "api")?;
        let request = string(env, &request, "request")?;
        let plan = active(a)?.plan_caps(&api, &request)?;
        jstr(env, &plan)
    })
}

/// Sets the actual amount (replaces what was reported).
#[no_mangle]
pub extern "system" fn Java_dev_cycles_internal_Native_activeSetActual<'l>(
    mut env: JNIEnv<'l>,
    _c: JClass<'l>,
    a: jlong,
    amount: jlong,
) {
    entry(&mut env, (), |_| {
        Ok(active(a)?.usage().set_actual(amount)?)
    })
}

/// Adds to the actual amount (streaming usage).
#[no_mangle]
pub extern "system" fn Java_dev_cycles_internal_Native_activeAdd<'l>(
    mut env: JNIEnv<'l>,
    _c: JClass<'l>,
    a: jlong,
    amount: jlong,
) {
    entry(&mut env, (), |_| Ok(active(a)?.usage().add(amount)?))
}

/// The actual reported so far as a decimal string, or null when none was.
#[no_mangle]
pub extern "system" fn Java_dev_cycles_internal_Native_activeActual<'l>(
    mut env: JNIEnv<'l>,
    _c: JClass<'l>,
    a: jlong,
) -> jstring {
    entry(&mut env, std::ptr::null_mut(), |env| {
        match active(a)?.usage().actual() {
            Some(v) => jstr(env, &v.to_string()),
            None => Ok(std::ptr::null_mut()),
        }
    })
}

/// Sets the commit's metrics (`StandardMetrics` JSON) or metadata (a JSON object, exact).
#[no_mangle]
pub extern "system" fn Java_dev_cycles_internal_Native_activeSetJson<'l>(
    mut env: JNIEnv<'l>,
    _c: JClass<'l>,
    a: jlong,
    metadata: jboolean,
    value: JString<'l>,
) {
    entry(&mut env, (), |env| {
        let text = string(env, &value, "json")?;
        let a = active(a)?;
        if metadata == JNI_TRUE {
            a.usage().set_metadata_json(&text)?;
        } else {
            a.usage().set_metrics_json(&text)?;
        }
        Ok(())
    })
}

/// Whether the heartbeat cancelled the work (policy `cancel`).
#[no_mangle]
pub extern "system" fn Java_dev_cycles_internal_Native_activeCancelled<'l>(
    mut env: JNIEnv<'l>,
    _c: JClass<'l>,
    a: jlong,
) -> jboolean {
    entry(&mut env, JNI_FALSE, |_| {
        Ok(if active(a)?.usage().cancellation().is_cancelled() {
            JNI_TRUE
        } else {
            JNI_FALSE
        })
    })
}

/// Phase two (blocking): settle (work succeeded) or release; the finished JSON.
#[no_mangle]
pub extern "system" fn Java_dev_cycles_internal_Native_activeFinish<'l>(
    mut env: JNIEnv<'l>,
    _c: JClass<'l>,
    a: jlong,
    succeeded: jboolean,
) -> jstring {
    entry(&mut env, std::ptr::null_mut(), |env| {
        let work = active(a)?.finish(succeeded == JNI_TRUE)?;
        let out = block(work)?;
        jstr(env, &out)
    })
}

/// Phase two, queued: the value is the finished JSON.
#[no_mangle]
pub extern "system" fn Java_dev_cycles_internal_Native_activeFinishAsync<'l>(
    mut env: JNIEnv<'l>,
    _c: JClass<'l>,
    a: jlong,
    succeeded: jboolean,
    future: jlong,
) {
    entry(&mut env, (), |_| {
        let work = active(a)?.finish(succeeded == JNI_TRUE)?;
        completions::submit(future, Box::pin(async move { Ok(work.await) }))
    })
}

/// Frees any id (idempotent). An unfinished guarded action freed here is finished by core's
/// drop (its known usage settled, journal first; otherwise released); a client freed here is
/// dropped without a drain (its journal keeps what is pending).
#[no_mangle]
pub extern "system" fn Java_dev_cycles_internal_Native_free<'l>(
    mut env: JNIEnv<'l>,
    _c: JClass<'l>,
    id: jlong,
) {
    entry(&mut env, (), |_| {
        handles::free(id);
        Ok(())
    })
}

/// How many native objects Java still holds (debug counter for the Cleaner tests).
#[no_mangle]
pub extern "system" fn Java_dev_cycles_internal_Native_liveHandles<'l>(
    mut env: JNIEnv<'l>,
    _c: JClass<'l>,
) -> jlong {
    entry(&mut env, 0, |_| Ok(handles::live() as jlong))
}

/// The next completion line (`"<id> v <value>"` / `"<id> e <error JSON>"`), waiting up to
/// `timeout_ms`; null when none came.
#[no_mangle]
pub extern "system" fn Java_dev_cycles_internal_Native_poll<'l>(
    mut env: JNIEnv<'l>,
    _c: JClass<'l>,
    timeout_ms: jlong,
) -> jstring {
    entry(&mut env, std::ptr::null_mut(), |env| {
        let t = Duration::from_millis(u64::try_from(timeout_ms).unwrap_or(0));
        match completions::poll(t) {
            Some(l) => jstr(env, &l),
            None => Ok(std::ptr::null_mut()),
        }
    })
}

/// Panics on purpose (tests: a panic must surface as INTERNAL). `future` 0: here, now;
/// otherwise inside work on the runtime, completing that future.
#[no_mangle]
pub extern "system" fn Java_dev_cycles_internal_Native_debugPanic<'l>(
    mut env: JNIEnv<'l>,
    _c: JClass<'l>,
    message: JString<'l>,
    future: jlong,
) {
    entry(&mut env, (), |env| {
        let m = opt_string(env, &message)?.unwrap_or_else(|| "debug panic".into());
        if future == 0 {
            panic!("{m}");
        }
        completions::submit(
            future,
            Box::pin(async move {
                if !m.is_empty() {
                    panic!("{m}");
                }
                Ok(String::new())
            }),
        )
    })
}
