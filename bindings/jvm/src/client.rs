//! `CyclesClient`'s native half: a bridge `ClientHandle`, its guarded lifecycle (created on
//! first use), operations (blocking or queued for the completion thread), guarded actions,
//! events, and the process-wide exports (error table, poll, live handles, debug panic).

use std::sync::Arc;
use std::time::Duration;

use cycles_bridge::ops::Call;
use cycles_bridge::options::{host_client, JVM};
use cycles_bridge::task::Work;
use cycles_bridge::{
    error_codes, error_variants, Active, ClientHandle, Connection, ErrorFields, LazyLifecycle,
    Lifecycle, SettleOverrides,
};
use cycles_core::events::Level;
use jni::sys::{jlong, JNI_FALSE, JNI_TRUE};
use serde_json::json;

use crate::completions;
use crate::entry::{block, jstr, opt_string, string};
use crate::handles;

/// One Java client.
pub struct Client {
    handle: ClientHandle,
    settle: SettleOverrides,
    close_timeout_ms: u64,
    life: LazyLifecycle,
}

impl Client {
    /// The lifecycle, created on first use (the closed error once closed).
    fn life(&self) -> Result<Arc<Lifecycle>, ErrorFields> {
        self.life.get(&self.handle, self.settle)
    }
}

fn call_work(call: Call) -> Work<Result<String, ErrorFields>> {
    Box::pin(async move { call.run().await.map(|r| r.to_json()) })
}

fn client_of(id: jlong) -> Result<Arc<Client>, ErrorFields> {
    handles::get::<Client>(id, "client")
}

fn active_of(id: jlong) -> Result<Arc<Active>, ErrorFields> {
    handles::get::<Active>(id, "guarded action")
}

fn begin_work(id: jlong, spec: &str) -> Result<Work<Result<Active, ErrorFields>>, ErrorFields> {
    let c = client_of(id)?;
    if c.handle.is_closed() {
        return Err(ErrorFields::closed());
    }
    c.life()?.begin(spec)
}

natives! {
    /// Core's error table as `[[name, code], ...]`.
    fn errorCodes(env) -> jstring {
        jstr(env, &json!(error_codes()).to_string())
    }

    /// The bridge's refinements of a kind as `[[variant, name, code], ...]`.
    fn errorVariants(env) -> jstring {
        jstr(env, &json!(error_variants()).to_string())
    }

    /// A client from options JSON (the bridge's one options table, `options::host_client`:
    /// `base_url`, `api_key`, `tenant`, `default_unit`, timeouts, journal,
    /// `max_concurrent_requests`, `max_response_bytes`, settle overrides, `close_timeout_ms`; an
    /// unknown member is
    /// INVALID_ARGUMENT); `from_env`: the `CYCLES_*` environment, the options overriding it.
    fn clientNew(env, options_json: JString, from_env: jboolean) -> jlong {
        let options = string(env, &options_json, "options")?;
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
            life: LazyLifecycle::default(),
        }))
    }

    /// The client's settings as JSON (`base_url`, `tenant`, timeouts, the default drain bound),
    /// never the key.
    fn clientInfo(env, client: jlong) -> jstring {
        let c = client_of(client)?;
        let cfg = c.handle.config();
        let info = json!({
            "base_url": cfg.base_url,
            "tenant": cfg.tenant,
            "request_timeout_ms": c.handle.request_timeout_ms(),
            "connect_timeout_ms": c.handle.connect_timeout_ms(),
            "close_timeout_ms": c.close_timeout_ms,
        });
        jstr(env, &info.to_string())
    }

    /// One operation, blocking: the reply JSON.
    fn clientCall(env, client: jlong, op: JString, args_json: JString) -> jstring {
        let call = client_of(client)?.handle.prepare(
            &string(env, &op, "operation")?,
            &string(env, &args_json, "arguments")?,
        )?;
        let out = block(call_work(call))??;
        jstr(env, &out)
    }

    /// One operation, its reply queued under `future` (synchronous failures throw now).
    fn clientCallAsync(env, client: jlong, op: JString, args_json: JString, future: jlong) {
        let call = client_of(client)?.handle.prepare(
            &string(env, &op, "operation")?,
            &string(env, &args_json, "arguments")?,
        )?;
        completions::submit(future, call_work(call))
    }

    /// The client's lifecycle as its own id (the Java event thread polls it and frees it when
    /// `lifeNextEvents` returns null); creates it on first use.
    fn clientLifecycle(_env, client: jlong) -> jlong {
        Ok(handles::put(client_of(client)?.life()?))
    }

    /// The events delivered so far as a JSON array (waiting up to `timeout_ms` for the first);
    /// null once the lifecycle is closed and nothing is left.
    fn lifeNextEvents(env, life: jlong, timeout_ms: jlong) -> jstring {
        let Ok(l) = handles::get::<Arc<Lifecycle>>(life, "lifecycle") else {
            return Ok(std::ptr::null_mut());
        };
        let wait = Duration::from_millis(u64::try_from(timeout_ms).unwrap_or(0));
        match l.next_events(wait) {
            Some(batch) => jstr(env, &format!("[{}]", batch.join(","))),
            None => Ok(std::ptr::null_mut()),
        }
    }

    /// The least level of the events the Java side looks at (0 debug, 1 info, 2 warning, 3 error;
    /// anything else: none). Core builds no event below it.
    fn lifeSetEventFloor(_env, life: jlong, floor: jint) {
        if let Ok(l) = handles::get::<Arc<Lifecycle>>(life, "lifecycle") {
            let floor = usize::try_from(floor).ok().and_then(|i| Level::ALL.get(i));
            l.set_event_floor(floor.copied());
        }
        Ok(())
    }

    /// Replays every pending settlement once (blocking): the drain report JSON.
    fn clientFlush(env, client: jlong) -> jstring {
        let out = block(client_of(client)?.life()?.flush())?;
        jstr(env, &out)
    }

    /// Replays until nothing is pending or `timeout_ms` passed (blocking): the drain report.
    fn clientDrain(env, client: jlong, timeout_ms: jlong) -> jstring {
        let t = Duration::from_millis(u64::try_from(timeout_ms).unwrap_or(0));
        let out = block(client_of(client)?.life()?.drain(t))?;
        jstr(env, &out)
    }

    /// Closes the client (blocking, idempotent): the lifecycle's close drain within
    /// `timeout_ms` (its report JSON; null when the lifecycle was never used), then the handle.
    /// Later calls fail with the closed error. The id stays registered until `free`.
    fn clientClose(env, client: jlong, timeout_ms: jlong) -> jstring {
        let Ok(c) = client_of(client) else {
            return Ok(std::ptr::null_mut());
        };
        let life = c.life.existing();
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
    }

    /// Whether the client was closed.
    fn clientIsClosed(_env, client: jlong) -> jboolean {
        Ok(match client_of(client) {
            Ok(c) if !c.handle.is_closed() => JNI_FALSE,
            _ => JNI_TRUE,
        })
    }

    /// Phase one of a guarded action (blocking): reserve and start the heartbeat; the action's id.
    fn guardBegin(env, client: jlong, spec_json: JString) -> jlong {
        let work = begin_work(client, &string(env, &spec_json, "spec")?)?;
        Ok(handles::put(block(work)??))
    }

    /// Phase one, queued: the value is the action's id.
    fn guardBeginAsync(env, client: jlong, spec_json: JString, future: jlong) {
        let work = begin_work(client, &string(env, &spec_json, "spec")?)?;
        completions::submit(
            future,
            Box::pin(async move { work.await.map(|a| handles::put(a).to_string()) }),
        )
    }

    /// The reservation id of a guarded action.
    fn activeReservationId(env, active: jlong) -> jstring {
        let a = active_of(active)?;
        jstr(env, a.reservation_id())
    }

    /// The handle's facts: `{"reservation_id", "decision", "caps"}` (bridge `Active::info_json`).
    fn activeInfo(env, active: jlong) -> jstring {
        let info = active_of(active)?.info_json();
        jstr(env, &info)
    }

    /// Ends the action early (blocking): releases the reservation, the finished JSON (outcome
    /// `released`). INVALID_ARGUMENT, the action left running, once usage is known.
    fn activeRelease(env, active: jlong, reason: JString) -> jstring {
        let reason = opt_string(env, &reason)?;
        let work = active_of(active)?.release(reason)?;
        let out = block(work)?;
        jstr(env, &out)
    }

    /// An integration's refusal to send a provider call (bridge `Active::refuse_call`:
    /// releases, blocking): the finished JSON with the `error` to throw. `why` null: the
    /// latest caps plan's reason.
    fn activeRefuseCall(env, active: jlong, why: JString) -> jstring {
        let why = opt_string(env, &why)?;
        let work = active_of(active)?.refuse_call(why)?;
        let out = block(work)?;
        jstr(env, &out)
    }

    /// The caps rewrite of a provider request (bridge `Active::plan_caps`): `api` a wire name,
    /// `request` its JSON body; the plan's JSON. A rewrite is reported as the `caps_applied`
    /// event. INVALID_ARGUMENT for a bad API name, request or bound, or once finished.
    fn activePlanCaps(env, active: jlong, api: JString, request_json: JString) -> jstring {
        let api = string(env, &api, "api")?;
        let request = string(env, &request_json, "request")?;
        let plan = active_of(active)?.plan_caps(&api, &request)?;
        jstr(env, &plan)
    }

    /// Sets the actual amount (replaces what was reported).
    fn activeSetActual(_env, active: jlong, amount: jlong) {
        Ok(active_of(active)?.usage().set_actual(amount)?)
    }

    /// Adds to the actual amount (streaming usage).
    fn activeAdd(_env, active: jlong, amount: jlong) {
        Ok(active_of(active)?.usage().add(amount)?)
    }

    /// The actual reported so far as a decimal string, or null when none was.
    fn activeActual(env, active: jlong) -> jstring {
        match active_of(active)?.usage().actual() {
            Some(v) => jstr(env, &v.to_string()),
            None => Ok(std::ptr::null_mut()),
        }
    }

    /// Sets the commit's metrics (`StandardMetrics` JSON) or metadata (a JSON object, exact).
    fn activeSetJson(env, active: jlong, metadata: jboolean, json: JString) {
        let text = string(env, &json, "json")?;
        let a = active_of(active)?;
        if metadata == JNI_TRUE {
            a.usage().set_metadata_json(&text)?;
        } else {
            a.usage().set_metrics_json(&text)?;
        }
        Ok(())
    }

    /// Whether the heartbeat cancelled the work (policy `cancel`).
    fn activeCancelled(_env, active: jlong) -> jboolean {
        Ok(if active_of(active)?.usage().cancellation().is_cancelled() {
            JNI_TRUE
        } else {
            JNI_FALSE
        })
    }

    /// Phase two (blocking): settle (work succeeded) or release; the finished JSON.
    fn activeFinish(env, active: jlong, succeeded: jboolean) -> jstring {
        let work = active_of(active)?.finish(succeeded == JNI_TRUE)?;
        let out = block(work)?;
        jstr(env, &out)
    }

    /// Phase two, queued: the value is the finished JSON.
    fn activeFinishAsync(_env, active: jlong, succeeded: jboolean, future: jlong) {
        let work = active_of(active)?.finish(succeeded == JNI_TRUE)?;
        completions::submit(future, Box::pin(async move { Ok(work.await) }))
    }

    /// Frees any id (idempotent). An unfinished guarded action freed here is finished by core's
    /// drop (its known usage settled, journal first; otherwise released); a client freed here is
    /// dropped without a drain (its journal keeps what is pending).
    fn free(_env, id: jlong) {
        handles::free(id);
        Ok(())
    }

    /// How many native objects Java still holds (debug counter for the Cleaner tests).
    fn liveHandles(_env) -> jlong {
        Ok(handles::live() as jlong)
    }

    /// The next completion line (`"<id> v <value>"` / `"<id> e <error JSON>"`), waiting up to
    /// `timeout_ms`; null when none came.
    fn poll(env, timeout_ms: jlong) -> jstring {
        let t = Duration::from_millis(u64::try_from(timeout_ms).unwrap_or(0));
        match completions::poll(t) {
            Some(l) => jstr(env, &l),
            None => Ok(std::ptr::null_mut()),
        }
    }

    /// Panics on purpose (tests: a panic must surface as INTERNAL). `future` 0: here, now;
    /// otherwise inside work on the runtime, completing that future.
    fn debugPanic(env, message: JString, future: jlong) {
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
    }
}
