//! The guarded lifecycle of one client (core's `Guard`, the durable `Settler` and its
//! background replay) and the event pump.
//!
//! Events: core calls the `EventSink` callback on a runtime worker, sometimes under its own
//! locks; the callback only pushes the event (as JSON) into a channel. A host thread of the
//! binding's own drains it with [`Lifecycle::next_events`] (its interpreter lock released) and
//! calls the host's listeners there: a host is never called from a tokio worker.

use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cycles_core::events::{EventSink, Level};
use cycles_core::guard::{ActiveGuard, Finished, Guard, Usage};
use cycles_core::runtime;
use cycles_core::settle::{DrainReport, ReplayHandle, SettleConfig, Settler};
use cycles_core::{Config, CyclesClient};

use crate::error::ErrorFields;
use crate::guard::{drain_json, event_json, finished_text, parse_spec_with, SpecDefaults};
use crate::task::Work;

/// A finishing action's work with its report as the finished JSON (what most hosts read).
pub(crate) fn as_text(work: Work<Finished>) -> Work<String> {
    Box::pin(async move { finished_text(&work.await) })
}

/// The host-callback channel: an `EventSink` whose callback only queues event JSON, and the
/// queue a host thread drains. Events below the host's floor ([`EventPump::set_floor`]) are
/// neither serialised nor queued: nobody would see them.
pub struct EventPump {
    rx: Mutex<Receiver<(Level, String)>>,
    floor: Arc<AtomicU8>,
}

/// The floor's encoding: a level's rank, or [`NO_EVENTS`].
const NO_EVENTS: u8 = u8::MAX;

/// A level's position in [`Level::ALL`] (least severe first).
fn rank(level: Level) -> u8 {
    level as u8
}

impl EventPump {
    /// A pump (every event wanted until [`EventPump::set_floor`] says otherwise) and the sink
    /// that feeds it.
    pub fn new() -> (EventPump, EventSink) {
        let (tx, rx) = mpsc::channel::<(Level, String)>();
        let floor = Arc::new(AtomicU8::new(rank(Level::Debug)));
        let wanted = floor.clone();
        // Runs on a runtime worker: only a channel send, never the host.
        let sink = EventSink::with_callback(move |e| {
            let level = e.level();
            if rank(level) >= wanted.load(Ordering::Relaxed) {
                let _ = tx.send((level, event_json(e)));
            }
        });
        (
            EventPump {
                rx: Mutex::new(rx),
                floor,
            },
            sink,
        )
    }

    /// The least level the host will look at (its listeners, its logger's level); `None`:
    /// no event at all. Takes effect for events emitted from now on.
    pub fn set_floor(&self, floor: Option<Level>) {
        self.floor
            .store(floor.map_or(NO_EVENTS, rank), Ordering::Relaxed);
    }

    /// Events queued so far with their levels, waiting up to `timeout` for the first
    /// (blocking: call it with the host's lock released). When `finished` (no event can
    /// follow), hands over what is queued without waiting and `None` once nothing is left;
    /// `None` too when every sink is gone.
    pub fn next(&self, timeout: Duration, finished: bool) -> Option<Vec<(Level, String)>> {
        let rx = self.rx.lock().unwrap_or_else(|p| p.into_inner());
        let mut out = Vec::new();
        if finished {
            out.extend(rx.try_iter());
            return (!out.is_empty()).then_some(out);
        }
        match rx.recv_timeout(timeout) {
            Ok(e) => out.push(e),
            Err(RecvTimeoutError::Timeout) => return Some(out),
            Err(RecvTimeoutError::Disconnected) => return None,
        }
        out.extend(rx.try_iter());
        Some(out)
    }
}

/// The guarded lifecycle of one client: guard, settler, background replay, event pump.
pub struct Lifecycle {
    guard: Guard,
    defaults: SpecDefaults,
    replay: Mutex<Option<ReplayHandle>>,
    events: EventPump,
    closed: AtomicBool,
    /// Set when `close` has finished draining: no event can follow, so the host's forwarding
    /// thread may stop once the queue is empty (`closed` alone is set before the drain's events).
    drained: Arc<AtomicBool>,
}

/// Sets the flag when dropped: when the close future completes, panics or is dropped.
struct SetOnDrop(Arc<AtomicBool>);

impl Drop for SetOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// The settle overrides a host passes by name in a client's options JSON
/// (`settle_max_attempts`, `replay_interval_ms`), checked where the client is built so a bad
/// one fails there, not at the first guarded call that creates the [`Lifecycle`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SettleOverrides {
    /// Settle attempts before a settlement stays pending (at least 1).
    pub max_attempts: Option<u32>,
    /// How often the background replay runs, in milliseconds (at least 1).
    pub replay_interval_ms: Option<u64>,
}

impl SettleOverrides {
    /// `settings` with the overrides that are set applied (core's `SettleConfig::validate`
    /// judges the result).
    pub fn apply_to(self, mut settings: SettleConfig) -> SettleConfig {
        if let Some(n) = self.max_attempts {
            settings.max_attempts = n;
        }
        if let Some(ms) = self.replay_interval_ms {
            settings.replay_interval = Duration::from_millis(ms);
        }
        settings
    }
}

/// A client's [`Lifecycle`], created on its first use: a client that only calls operations
/// never starts the settlement engine. For the bindings that keep one per client object (the
/// JVM, uniffi).
#[derive(Default)]
pub struct LazyLifecycle(Mutex<Option<Arc<Lifecycle>>>);

impl LazyLifecycle {
    /// The lifecycle of `handle`'s client with `settle`, created now if it is not yet (the
    /// closed error once the client is closed).
    pub fn get(
        &self,
        handle: &crate::ops::ClientHandle,
        settle: SettleOverrides,
    ) -> Result<Arc<Lifecycle>, ErrorFields> {
        let mut slot = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(l) = slot.as_ref() {
            return Ok(l.clone());
        }
        let l = Arc::new(Lifecycle::new(
            handle.live()?,
            handle.config(),
            settle.max_attempts,
            settle.replay_interval_ms,
        )?);
        *slot = Some(l.clone());
        Ok(l)
    }

    /// The lifecycle if one was created.
    pub fn existing(&self) -> Option<Arc<Lifecycle>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

impl Lifecycle {
    /// The lifecycle of `client` with `config`'s journal; starts the background replay on
    /// core's runtime. `max_attempts` and `replay_interval_ms` override core's settle
    /// defaults (CONFIG when core's `SettleConfig::validate` refuses them: 0).
    pub fn new(
        client: Arc<CyclesClient>,
        config: &Config,
        max_attempts: Option<u32>,
        replay_interval_ms: Option<u64>,
    ) -> Result<Lifecycle, ErrorFields> {
        let (events, sink) = EventPump::new();
        let settings = SettleOverrides {
            max_attempts,
            replay_interval_ms,
        }
        .apply_to(SettleConfig {
            events: sink.clone(),
            ..SettleConfig::default()
        });
        let settler = Settler::new(config, settings)?;
        let rt = runtime::handle()?;
        let replay = {
            let _entered = rt.enter();
            settler.start_replay()
        };
        Ok(Lifecycle {
            guard: Guard::new(client, settler, sink),
            defaults: SpecDefaults::of(config),
            replay: Mutex::new(Some(replay)),
            events,
            closed: AtomicBool::new(false),
            drained: Arc::new(AtomicBool::new(false)),
        })
    }

    /// Phase one: checks the lifecycle is open and parses the spec now (members left out
    /// take the client's defaults: [`crate::guard::parse_spec_with`]), then returns the
    /// reserve-and-heartbeat work to run on core's runtime.
    pub fn begin(&self, spec_json: &str) -> Result<Work<Result<Active, ErrorFields>>, ErrorFields> {
        if self.is_closed() {
            return Err(ErrorFields::closed());
        }
        let spec = parse_spec_with(spec_json, &self.defaults)?;
        let g = self.guard.clone();
        Ok(Box::pin(
            async move { Ok(Active::new(g.begin(spec).await?)) },
        ))
    }

    /// Replays every pending settlement once; the drain report JSON.
    pub fn flush(&self) -> Work<String> {
        let s = self.guard.settler().clone();
        Box::pin(async move { drain_json(&s.flush().await) })
    }

    /// Replays until the journal is empty or `timeout` passed; the drain report JSON.
    pub fn drain(&self, timeout: Duration) -> Work<String> {
        let s = self.guard.settler().clone();
        Box::pin(async move { drain_json(&s.drain(timeout).await) })
    }

    /// Closes now (later `begin` calls fail with the closed error) and returns the rest: stop
    /// the background replay, then drain for at most `timeout` (zero: no drain, the report
    /// lists what remains). Idempotent. When the returned work ends (or is dropped),
    /// [`Lifecycle::next_events`] stops waiting once the queue is empty.
    pub fn close(&self, timeout: Duration) -> Work<String> {
        self.closed.store(true, Ordering::SeqCst);
        let replay = self.replay.lock().unwrap_or_else(|p| p.into_inner()).take();
        let s = self.guard.settler().clone();
        let done = SetOnDrop(self.drained.clone());
        Box::pin(async move {
            let _done = done;
            if let Some(r) = replay {
                r.stop().await;
            }
            if timeout.is_zero() {
                drain_json(&DrainReport {
                    remaining: s.pending().await,
                    ..DrainReport::default()
                })
            } else {
                drain_json(&s.drain(timeout).await)
            }
        })
    }

    /// Whether `close` was called.
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// Events delivered so far (waits up to `timeout` for the first; blocking, call it with
    /// the host's lock released); `None` once the lifecycle is closed and nothing is left.
    pub fn next_events(&self, timeout: Duration) -> Option<Vec<String>> {
        self.next_leveled_events(timeout)
            .map(|batch| batch.into_iter().map(|(_, json)| json).collect())
    }

    /// [`Lifecycle::next_events`] with each event's level (for hosts that filter by it).
    pub fn next_leveled_events(&self, timeout: Duration) -> Option<Vec<(Level, String)>> {
        let finished = self.drained.load(Ordering::SeqCst);
        self.events.next(timeout, finished)
    }

    /// The least level the host will look at; `None`: no event at all (no listener, logging
    /// off). Events below it are not even serialised. Until a host sets it, every event is
    /// delivered.
    pub fn set_event_floor(&self, floor: Option<Level>) {
        self.events.set_floor(floor);
    }
}

const ALREADY_FINISHED: &str = "this guarded action has already finished";

/// A running guarded action (core's `ActiveGuard`) and its `Usage`.
pub struct Active {
    reservation_id: String,
    unit: String,
    decision: String,
    caps: Option<String>,
    usage: Usage,
    active: Mutex<Option<ActiveGuard>>,
    /// Why the latest caps plan said not to send (core's `CapsPlan::refusal`), for
    /// [`Active::refuse_call`].
    refusal: Mutex<Option<String>>,
}

impl Active {
    fn new(a: ActiveGuard) -> Active {
        Active {
            reservation_id: a.reservation_id().to_string(),
            unit: a.unit().as_str().to_string(),
            decision: a.decision().as_str().to_string(),
            caps: a.caps().and_then(|c| serde_json::to_string(c).ok()),
            usage: a.usage().clone(),
            active: Mutex::new(Some(a)),
            refusal: Mutex::new(None),
        }
    }

    /// The reservation.
    pub fn reservation_id(&self) -> &str {
        &self.reservation_id
    }

    /// The estimate's unit (after the spec's defaults: the client's default unit for a bare
    /// estimate), the unit of every actual; hosts show it rather than work it out again.
    pub fn unit(&self) -> &str {
        &self.unit
    }

    /// The server's decision, by its wire name: `ALLOW` or `ALLOW_WITH_CAPS`.
    pub fn decision(&self) -> &str {
        &self.decision
    }

    /// The caps under `ALLOW_WITH_CAPS` as the spec's `Caps` JSON (members absent when
    /// unset), `None` otherwise.
    pub fn caps_json(&self) -> Option<&str> {
        self.caps.as_deref()
    }

    /// `{"reservation_id", "decision", "caps"}` (caps `null` when none): the handle's facts
    /// in one text, for hosts that read JSON.
    pub fn info_json(&self) -> String {
        format!(
            r#"{{"reservation_id":{},"decision":{},"caps":{}}}"#,
            serde_json::Value::from(self.reservation_id.as_str()),
            serde_json::Value::from(self.decision.as_str()),
            self.caps.as_deref().unwrap_or("null")
        )
    }

    /// Ends the action early and gives the estimate back (the `released` outcome). Refused
    /// with INVALID_ARGUMENT, the action left running, once usage was reported: a release
    /// would drop a known actual (end the action normally to commit it). Refused like
    /// [`Active::finish`] when already finished.
    pub fn release(&self, reason: Option<String>) -> Result<Work<String>, ErrorFields> {
        self.release_report(reason).map(as_text)
    }

    /// [`Active::release`] with core's `Finished` as the output (see
    /// [`Active::finish_report`]).
    pub fn release_report(&self, reason: Option<String>) -> Result<Work<Finished>, ErrorFields> {
        let a = self.take_for_release()?;
        Ok(Box::pin(async move { a.release(reason).await }))
    }

    /// The action, taken for a release: refused (and left running) once usage was reported.
    fn take_for_release(&self) -> Result<ActiveGuard, ErrorFields> {
        let mut slot = self.active.lock().unwrap_or_else(|p| p.into_inner());
        match slot.as_ref() {
            None => return Err(ErrorFields::invalid(ALREADY_FINISHED)),
            Some(a) => a.check_release()?,
        }
        slot.take()
            .ok_or_else(|| ErrorFields::invalid(ALREADY_FINISHED))
    }

    /// The rewrite this action's caps ask of a provider request: `api` a wire name
    /// (`chat_completions`, `responses`, `messages`), `request_json` the request body (at
    /// least its bound fields and `tools`). Returns [`crate::pricing_json::plan_json`]; a
    /// rewrite is reported as the `caps_applied` event (core's `ActiveGuard::plan_caps`).
    /// INVALID_ARGUMENT for a bad API name, request or bound, or once finished.
    pub fn plan_caps(&self, api: &str, request_json: &str) -> Result<String, ErrorFields> {
        let api = cycles_core::pricing::Api::parse(api)?;
        let request: serde_json::Value = serde_json::from_str(request_json).map_err(|e| {
            cycles_core::Error::invalid_argument(format!(
                "the request is not JSON: {}",
                cycles_core::error::json_reason(&e)
            ))
        })?;
        let slot = self.active.lock().unwrap_or_else(|p| p.into_inner());
        let a = slot
            .as_ref()
            .ok_or_else(|| ErrorFields::invalid(ALREADY_FINISHED))?;
        let plan = a.plan_caps(api, &request)?;
        *self.refusal.lock().unwrap_or_else(|p| p.into_inner()) = plan.refusal(api);
        Ok(crate::pricing_json::plan_json(&plan).to_string())
    }

    /// An integration's refusal to send a provider call: releases the reservation (as
    /// [`Active::release`], with core's `not_sent_reason`) and returns the finished JSON (the
    /// `released` outcome) with one more member, `error`: the `call_not_sent` error to raise
    /// (BUDGET_EXCEEDED; its message core's `not_sent_text`, whether or not the release
    /// succeeded). `why` is the host library's own reason; `None` takes the latest caps plan's
    /// (`send` false), and INVALID_ARGUMENT when there is none. Refused like
    /// [`Active::release`] once usage was reported or finished.
    pub fn refuse_call(&self, why: Option<String>) -> Result<Work<String>, ErrorFields> {
        let why = match why {
            Some(w) => w,
            None => self
                .refusal
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone()
                .ok_or_else(|| {
                    ErrorFields::invalid("no caps plan of this action says not to send the call")
                })?,
        };
        let id = self.reservation_id.clone();
        let a = self.take_for_release()?;
        Ok(Box::pin(async move {
            let ended = a
                .release(Some(cycles_core::guard::not_sent_reason(&why)))
                .await;
            let mut out = crate::guard::finished_json(&ended);
            let message = cycles_core::guard::not_sent_text(&why, &id, &ended);
            out["error"] = ErrorFields::call_not_sent(message).to_json();
            out.to_string()
        }))
    }

    /// What the work reports (actual, metrics, metadata) and its cancellation.
    pub fn usage(&self) -> &Usage {
        &self.usage
    }

    /// Whether `finish` was called.
    pub fn is_finished(&self) -> bool {
        self.active
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_none()
    }

    /// Phase two: takes the action (INVALID_ARGUMENT when already finished) and returns the
    /// settle-or-release work, whose output is the finished JSON.
    pub fn finish(&self, work_succeeded: bool) -> Result<Work<String>, ErrorFields> {
        self.finish_report(work_succeeded).map(as_text)
    }

    /// [`Active::finish`] with core's `Finished` as the output, for a host that reads the
    /// report in two parts: [`crate::guard::finished_head_text`] at once and
    /// [`crate::guard::settlement_body_text`] only when asked (the same JSON in all).
    pub fn finish_report(&self, work_succeeded: bool) -> Result<Work<Finished>, ErrorFields> {
        let a = self
            .active
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
            .ok_or_else(|| ErrorFields::invalid(ALREADY_FINISHED))?;
        Ok(Box::pin(async move { a.finish(work_succeeded).await }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cycles_core::events::Event;

    fn migrated() -> Event {
        Event::JournalMigrated {
            reservation_id: "r1".into(),
        }
    }

    #[test]
    fn pump_queues_and_ends() {
        let (pump, sink) = EventPump::new();
        assert_eq!(pump.next(Duration::from_millis(1), false), Some(vec![]));
        sink.emit(migrated());
        sink.emit(migrated());
        let got = pump.next(Duration::from_millis(100), false).unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].0, Level::Info);
        let v: serde_json::Value = serde_json::from_str(&got[0].1).unwrap();
        assert_eq!(v, migrated().to_json());
        // Finished: what is queued, then the end without waiting.
        sink.emit(migrated());
        assert_eq!(
            pump.next(Duration::from_secs(60), true).map(|v| v.len()),
            Some(1)
        );
        assert_eq!(pump.next(Duration::from_secs(60), true), None);
        drop(sink);
        assert_eq!(pump.next(Duration::from_secs(60), false), None);
    }

    #[test]
    fn a_rank_is_the_position_in_level_all() {
        for (i, level) in Level::ALL.into_iter().enumerate() {
            assert_eq!(usize::from(rank(level)), i);
        }
    }

    #[test]
    fn events_below_the_floor_are_not_queued() {
        let (pump, sink) = EventPump::new();
        let quarantined = || Event::JournalQuarantined {
            reservation_id: None,
            file: "f".into(),
            quarantined_as: "f.corrupt".into(),
            reason: "corrupt".into(),
        };
        pump.set_floor(Some(Level::Warning));
        sink.emit(migrated()); // info: below
        sink.emit(quarantined()); // error: kept
        let got = pump.next(Duration::from_millis(100), false).unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].0, Level::Error);
        pump.set_floor(None);
        sink.emit(quarantined());
        assert_eq!(pump.next(Duration::from_millis(1), false), Some(vec![]));
        pump.set_floor(Some(Level::Debug));
        sink.emit(migrated());
        assert_eq!(
            pump.next(Duration::from_millis(100), false)
                .map(|v| v.len()),
            Some(1)
        );
    }
}
