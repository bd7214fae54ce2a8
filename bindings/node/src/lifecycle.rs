//! The guarded lifecycle: the bridge's `Lifecycle` (core's two-phase guard, the durable
//! settler with flush, drain and background replay, the event pump) and `Active`.
//!
//! Events: core's callback only queues event JSON (the bridge's `EventPump`). One Rust thread
//! per lifecycle drains the queue with `next_events` and hands each batch to a *weak*
//! threadsafe function, so a listener never keeps Node alive; after the close drain it sends
//! `null` (the end marker the TypeScript `close()` waits for) and ends.

use std::sync::Arc;
use std::time::Duration;

use cycles_bridge::{Active, Lifecycle};
use cycles_core::events::Level;
use cycles_core::{Config, CyclesClient};
use napi::bindgen_prelude::{Either, Function, Object};
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi::{Env, Status};
use napi_derive::napi;

use crate::errors::{core, guard, to_js};
use crate::promise;

/// How long the event thread waits per slice (it notices the end of a close within this).
const EVENT_SLICE: Duration = Duration::from_millis(50);

type Listener = ThreadsafeFunction<Option<String>, (), Option<String>, Status, false, true>;

/// The native half of a client's guarded lifecycle.
#[napi]
pub struct NativeLifecycle {
    inner: Arc<Lifecycle>,
}

impl NativeLifecycle {
    /// Builds the lifecycle and starts its event thread.
    pub fn new(
        client: Arc<CyclesClient>,
        config: &Config,
        max_attempts: Option<u32>,
        replay_interval_ms: Option<u64>,
        listener: Function<'_, Option<String>, ()>,
    ) -> napi::Result<NativeLifecycle> {
        let tsfn: Listener = listener
            .build_threadsafe_function::<Option<String>>()
            .weak::<true>()
            .callee_handled::<false>()
            .build()?;
        let inner = Arc::new(
            Lifecycle::new(client, config, max_attempts, replay_interval_ms).map_err(to_js)?,
        );
        let pump = inner.clone();
        std::thread::Builder::new()
            .name("cycles-node-events".into())
            .spawn(move || forward(&pump, &tsfn))
            .map_err(|e| crate::errors::invalid(format!("cannot start the event thread: {e}")))?;
        Ok(NativeLifecycle { inner })
    }
}

/// The event thread: batches to the listener until the lifecycle is closed and drained.
fn forward(lifecycle: &Lifecycle, tsfn: &Listener) {
    loop {
        match lifecycle.next_events(EVENT_SLICE) {
            Some(batch) if batch.is_empty() => {}
            Some(batch) => {
                let text = format!("[{}]", batch.join(","));
                tsfn.call(Some(text), ThreadsafeFunctionCallMode::NonBlocking);
            }
            None => {
                tsfn.call(None, ThreadsafeFunctionCallMode::NonBlocking);
                return;
            }
        }
    }
}

#[napi]
impl NativeLifecycle {
    /// Whether any listener wants events. Without one, core's events are not even serialised
    /// and nothing crosses to JavaScript. Until first called, every event is delivered.
    #[napi]
    pub fn set_events_wanted(&self, wanted: bool) {
        self.inner.set_event_floor(wanted.then_some(Level::Debug));
    }

    /// Phase one: reserve and start the heartbeat; resolves with the running action.
    #[napi(ts_return_type = "Promise<NativeActive>")]
    pub fn begin<'e>(&self, env: &'e Env, spec_json: String) -> napi::Result<Object<'e>> {
        guard(|| {
            let work = self.inner.begin(&spec_json).map_err(to_js)?;
            promise::spawn(env, work, |inner| NativeActive { inner })
        })
    }

    /// Replays every pending settlement once; resolves with the drain report JSON.
    #[napi(ts_return_type = "Promise<string>")]
    pub fn flush<'e>(&self, env: &'e Env) -> napi::Result<Object<'e>> {
        guard(|| {
            let work = self.inner.flush();
            promise::spawn(env, async move { Ok(work.await) }, |s| s)
        })
    }

    /// Replays until the journal is empty or `timeout_ms` passed; the drain report JSON.
    #[napi(ts_return_type = "Promise<string>")]
    pub fn drain<'e>(&self, env: &'e Env, timeout_ms: u32) -> napi::Result<Object<'e>> {
        guard(|| {
            let work = self.inner.drain(Duration::from_millis(timeout_ms.into()));
            promise::spawn(env, async move { Ok(work.await) }, |s| s)
        })
    }

    /// Closes now (later `begin` calls fail with the closed error), stops the background
    /// replay, then drains for at most `timeout_ms` (0: no drain). Idempotent.
    #[napi(ts_return_type = "Promise<string>")]
    pub fn close<'e>(&self, env: &'e Env, timeout_ms: u32) -> napi::Result<Object<'e>> {
        guard(|| {
            let work = self.inner.close(Duration::from_millis(timeout_ms.into()));
            promise::spawn(env, async move { Ok(work.await) }, |s| s)
        })
    }

    /// Whether `close` was called.
    #[napi(getter)]
    pub fn closed(&self) -> bool {
        self.inner.is_closed()
    }
}

/// A running guarded action (core's `ActiveGuard`) and its `Usage`.
#[napi]
pub struct NativeActive {
    inner: Active,
}

#[napi]
impl NativeActive {
    /// The reservation.
    #[napi(getter)]
    pub fn reservation_id(&self) -> String {
        self.inner.reservation_id().to_string()
    }

    /// The server's decision: `ALLOW` or `ALLOW_WITH_CAPS`.
    #[napi(getter)]
    pub fn decision(&self) -> String {
        self.inner.decision().to_string()
    }

    /// The caps under `ALLOW_WITH_CAPS` as the spec's `Caps` JSON, `null` otherwise.
    #[napi(getter)]
    pub fn caps_json(&self) -> Option<String> {
        self.inner.caps_json().map(str::to_string)
    }

    /// Ends the action early and gives the estimate back; the finished JSON (outcome
    /// `released`). INVALID_ARGUMENT, the action left running, once usage was reported.
    #[napi(ts_return_type = "Promise<string>")]
    pub fn release<'e>(&self, env: &'e Env, reason: Option<String>) -> napi::Result<Object<'e>> {
        guard(|| {
            let work = self.inner.release(reason).map_err(to_js)?;
            promise::spawn(env, async move { Ok(work.await) }, |s| s)
        })
    }

    /// An integration's refusal to send a provider call (the bridge's `Active::refuse_call`:
    /// releases): the finished JSON with the `error` to throw.
    #[napi(ts_return_type = "Promise<string>")]
    pub fn refuse_call<'e>(&self, env: &'e Env, why: Option<String>) -> napi::Result<Object<'e>> {
        guard(|| {
            let work = self.inner.refuse_call(why).map_err(to_js)?;
            promise::spawn(env, async move { Ok(work.await) }, |s| s)
        })
    }

    /// The caps rewrite of a provider request (the bridge's `Active::plan_caps`): `api`
    /// `chat_completions`, `responses` or `messages`; the plan as JSON text.
    #[napi]
    pub fn plan_caps(&self, api: String, request_json: String) -> napi::Result<String> {
        guard(|| self.inner.plan_caps(&api, &request_json).map_err(to_js))
    }

    /// Sets the actual amount (INVALID_ARGUMENT once the action has finished: the report
    /// would not be settled).
    #[napi]
    pub fn set_actual(&self, amount: Either<i64, String>) -> napi::Result<()> {
        guard(|| {
            let amount = exact(amount)?;
            self.inner.usage().set_actual(amount).map_err(core)
        })
    }

    /// Adds to the actual amount (INVALID_ARGUMENT once the action has finished).
    #[napi]
    pub fn add(&self, amount: Either<i64, String>) -> napi::Result<()> {
        guard(|| {
            let amount = exact(amount)?;
            self.inner.usage().add(amount).map_err(core)
        })
    }

    /// The actual amount so far, if any.
    #[napi]
    pub fn actual(&self) -> Option<i64> {
        self.inner.usage().actual()
    }

    /// Commit metrics as JSON text (kept exactly as written).
    #[napi]
    pub fn set_metrics(&self, json: String) -> napi::Result<()> {
        guard(|| self.inner.usage().set_metrics_json(&json).map_err(core))
    }

    /// Commit metadata as JSON text (kept exactly as written).
    #[napi]
    pub fn set_metadata(&self, json: String) -> napi::Result<()> {
        guard(|| self.inner.usage().set_metadata_json(&json).map_err(core))
    }

    /// True once the heartbeat cancelled the work (`cancel` policy).
    #[napi(getter)]
    pub fn cancelled(&self) -> bool {
        self.inner.usage().cancellation().is_cancelled()
    }

    /// Whether `finish` was called.
    #[napi(getter)]
    pub fn finished(&self) -> bool {
        self.inner.is_finished()
    }

    /// Phase two: settle (or release when the work failed); the finished JSON.
    #[napi(ts_return_type = "Promise<string>")]
    pub fn finish<'e>(&self, env: &'e Env, work_succeeded: bool) -> napi::Result<Object<'e>> {
        guard(|| {
            let work = self.inner.finish(work_succeeded).map_err(to_js)?;
            promise::spawn(env, async move { Ok(work.await) }, |s| s)
        })
    }
}

/// An amount the host passed exactly: a JS number (a safe integer, checked by
/// `node/src/lifecycle.ts`) or, beyond 2^53 - 1, a bigint's decimal text, which a JS number
/// cannot carry without rounding.
fn exact(amount: Either<i64, String>) -> napi::Result<i64> {
    match amount {
        Either::A(n) => Ok(n),
        Either::B(text) => text.parse::<i64>().map_err(|_| {
            to_js(cycles_bridge::ErrorFields::invalid(format!(
                "an amount must be an integer from -2^63 to 2^63 - 1, not {text}"
            )))
        }),
    }
}
