//! The lease driver: keeps a reservation alive while guarded work runs, by feeding the pure
//! planners in [`crate::timing`] with real measurements from the transport.
//!
//! Until its first beat is due a lease is not a task at all: it waits in the lease wheel
//! (`wheel`: one ordered map and one timer thread for the process), so a guarded call that
//! ends before its first beat costs no task, timer or cross-thread wake-up. From its first
//! beat on, a lease is one lightweight task on the runtime that started it (bindings use the
//! shared [`crate::runtime`]), sleeping on timers between beats; there is no thread per lease,
//! and the HTTP future is boxed only while an attempt is in flight, so an idle lease costs
//! little. One extension is in flight per lease at a time.
//!
//! Failure policies (the SDK recovery profile's "Heartbeat failure policy"):
//! - [`FailurePolicy::Warn`] (default): every failure is reported as an event; the heartbeat
//!   keeps retrying per the spec while it can; the guarded work continues and settlement
//!   still runs.
//! - [`FailurePolicy::FailOnFinalize`]: as `Warn`, and [`LeaseReport::check`] returns the
//!   heartbeat's terminal failure, so the settle step reports the lapse to the caller.
//! - [`FailurePolicy::Cancel`]: as `Warn`, and when the heartbeat stops abnormally the
//!   lease's [`CancellationToken`] is cancelled so the guarded work can stop.
//!
//! No policy swallows a failure: each is an [`Event`](crate::events::Event) and a `tracing` record.

mod classify;
pub mod clock;
mod driver;
pub(crate) mod wheel;

use std::sync::{Arc, Mutex};

pub use classify::classify;
pub use tokio_util::sync::CancellationToken;

use crate::events::{EventSink, HeartbeatEnd, HeartbeatPath};
use crate::model::ReservationCreateResponse;
use crate::timing::StopReason;
use crate::transport::{CyclesClient, Response};

/// How a heartbeat failure affects the guarded work.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FailurePolicy {
    /// Report and keep going; settlement still runs.
    #[default]
    Warn,
    /// Report, and make the settle step return the heartbeat's failure.
    FailOnFinalize,
    /// Report, and cancel the guarded work's token when the heartbeat stops abnormally.
    Cancel,
}

/// Settings of one heartbeat.
#[derive(Clone, Debug)]
pub struct HeartbeatConfig {
    /// `extend_by_ms` of every extension: the requested ttl_ms (the spec's rule).
    pub extend_by_ms: i64,
    /// What a failure does to the guarded work.
    pub policy: FailurePolicy,
    /// Fallback path only: fire the first extension immediately (see
    /// [`crate::timing::FallbackPlanner::first_beat`]). Default true: it minimises the lapse
    /// risk of an unknown small initial lease at the cost of one extension.
    pub prime_fallback: bool,
    /// Derive the enforced per-extend timeout from the lease whenever the client's request
    /// timeout leaves no positive cadence (default true; see
    /// [`crate::timing::timeout::extend_timeout`] and docs/heartbeat.md). When false, every
    /// extend uses the configured timeout and a lease it cannot keep alive is only warned
    /// about, naming a timeout that would work.
    pub derive_timeout: bool,
    /// Where events go.
    pub events: EventSink,
}

impl HeartbeatConfig {
    /// Defaults for a reservation created with `ttl_ms`: warn policy, primed fallback, derived
    /// extend timeouts, events to `tracing`.
    pub fn new(ttl_ms: i64) -> HeartbeatConfig {
        HeartbeatConfig {
            extend_by_ms: ttl_ms,
            policy: FailurePolicy::Warn,
            prime_fallback: true,
            derive_timeout: true,
            events: EventSink::tracing_only(),
        }
    }
}

/// What a finished heartbeat did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseReport {
    /// The reservation.
    pub reservation_id: String,
    /// Successful extensions.
    pub extensions: u32,
    /// Failed or ambiguous extend attempts.
    pub failures: u32,
    /// Which algorithm scheduled the last beat.
    pub path: HeartbeatPath,
    /// How it ended.
    pub end: HeartbeatEnd,
    /// The last failure's error name and message, if any.
    pub last_error: Option<(String, String)>,
    /// The policy it ran under.
    pub policy: FailurePolicy,
}

/// The heartbeat's terminal failure, returned by [`LeaseReport::check`] under
/// [`FailurePolicy::FailOnFinalize`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "the heartbeat of reservation {reservation_id} stopped before the work finished: {} (last error: {})",
    reason.name(),
    last_error.as_ref().map_or_else(|| "none".to_string(), |(k, m)| format!("{k}: {m}"))
)]
pub struct HeartbeatLapse {
    /// The reservation.
    pub reservation_id: String,
    /// Why the planner stopped.
    pub reason: StopReason,
    /// The last failure's error name and message.
    pub last_error: Option<(String, String)>,
}

impl LeaseReport {
    /// True when the heartbeat stopped on its own before the work finished.
    pub fn stopped_early(&self) -> bool {
        matches!(self.end, HeartbeatEnd::Stopped(_))
    }

    /// Under `FailOnFinalize`, the early stop as an error; otherwise `Ok`.
    pub fn check(&self) -> Result<(), Box<HeartbeatLapse>> {
        match (&self.end, self.policy) {
            (HeartbeatEnd::Stopped(reason), FailurePolicy::FailOnFinalize) => {
                Err(Box::new(HeartbeatLapse {
                    reservation_id: self.reservation_id.clone(),
                    reason: reason.clone(),
                    last_error: self.last_error.clone(),
                }))
            }
            _ => Ok(()),
        }
    }
}

/// A running heartbeat for one reservation. Stop it with [`Heartbeat::finish`] when the
/// guarded work ends; dropping it also stops it (without a report), and so does
/// [`crate::runtime::shutdown`].
#[derive(Debug)]
pub struct Heartbeat {
    reservation_id: String,
    stop: CancellationToken,
    cancel_work: CancellationToken,
    report: Arc<Mutex<Option<LeaseReport>>>,
    /// Where it waits in the wheel while its first beat is not due.
    parked: Option<wheel::Key>,
    /// Its task, once one runs (spawned here or by the wheel).
    task: wheel::TaskSlot,
}

impl Heartbeat {
    /// Starts heartbeating `reservation_id` on the current tokio runtime (core's own when the
    /// call is driven on a blocking host's thread, see [`crate::runtime::caller`]), scheduling
    /// the first beat from the CREATE response (`created`), as the spec requires.
    ///
    /// # Panics
    /// Outside a tokio runtime (like `tokio::spawn`) when core's runtime is unusable too.
    pub fn start(
        client: Arc<CyclesClient>,
        reservation_id: impl Into<String>,
        created: &Response<ReservationCreateResponse>,
        config: HeartbeatConfig,
    ) -> Heartbeat {
        let reservation_id = reservation_id.into();
        let runtime = crate::runtime::spawn_target()
            .unwrap_or_else(|| panic!("Heartbeat::start needs a tokio runtime"));
        // Also cancelled when core's runtime shuts down: a lease never outlives core.
        let stop = crate::runtime::stop_token();
        let cancel_work = CancellationToken::new();
        let report = Arc::new(Mutex::new(None));
        let task: wheel::TaskSlot = Arc::default();
        let beating = Box::new(driver::prepare(driver::Lease {
            client,
            reservation_id: reservation_id.clone(),
            created_received_us: clock::micros(created.timing.received),
            created_rtt: created.timing.rtt(),
            created_remaining_ttl_ms: created.body.remaining_ttl_ms,
            created_expires_at_ms: created.body.expires_at_ms,
            config,
            stop: stop.clone(),
            cancel_work: cancel_work.clone(),
            report: report.clone(),
        }));
        let run_now = |beating: Box<driver::Beating>| {
            let handle = runtime.spawn(beating.run());
            *task.lock().unwrap_or_else(|p| p.into_inner()) = Some(handle);
        };
        let parked = match beating.first_beat() {
            driver::FirstBeat::Stop => {
                // The planner stopped at once: end it here, as its task would have.
                let done = beating.conclude_unrun();
                if let Ok(mut slot) = report.lock() {
                    *slot = Some(done);
                }
                None
            }
            // Due within the wheel's hand-over horizon anyway: a task right away, spawned from
            // this thread, costs less than a trip through the timer thread.
            driver::FirstBeat::At(at) if at <= std::time::Instant::now() + wheel::SPAWN_AHEAD => {
                run_now(beating);
                None
            }
            driver::FirstBeat::At(at) => {
                match wheel::park(at, beating, runtime.clone(), task.clone()) {
                    Ok(key) => Some(key),
                    Err(beating) => {
                        run_now(beating);
                        None
                    }
                }
            }
            driver::FirstBeat::Never => {
                run_now(beating);
                None
            }
        };
        Heartbeat {
            reservation_id,
            stop,
            cancel_work,
            report,
            parked,
            task,
        }
    }

    /// The reservation this heartbeat keeps alive.
    pub fn reservation_id(&self) -> &str {
        &self.reservation_id
    }

    /// Cancelled when the heartbeat stops abnormally under [`FailurePolicy::Cancel`]; the
    /// guarded work should `select!` on `token.cancelled()`.
    pub fn cancellation(&self) -> CancellationToken {
        self.cancel_work.clone()
    }

    /// Stops the heartbeat (an in-flight extension is abandoned; the settlement that follows
    /// decides the reservation's fate) and returns what it did.
    pub async fn finish(mut self) -> LeaseReport {
        self.stop.cancel();
        // Still parked: it never ran, so there is no task to wait for.
        if let Some(beating) = self.parked.take().and_then(wheel::unpark) {
            return beating.conclude_unrun();
        }
        let task = self.task.lock().map(|mut t| t.take()).unwrap_or(None);
        if let Some(task) = task {
            let _ = task.await;
        }
        let taken = self.report.lock().map(|mut r| r.take()).unwrap_or(None);
        taken.unwrap_or_else(|| LeaseReport {
            reservation_id: self.reservation_id.clone(),
            extensions: 0,
            failures: 0,
            path: HeartbeatPath::Primary,
            end: HeartbeatEnd::Finished,
            last_error: Some((
                "INTERNAL".into(),
                "the heartbeat task ended without a report".into(),
            )),
            policy: FailurePolicy::Warn,
        })
    }
}

impl Drop for Heartbeat {
    fn drop(&mut self) {
        self.stop.cancel();
        if let Some(beating) = self.parked.take().and_then(wheel::unpark) {
            beating.conclude_unrun();
        }
    }
}
