//! The one process-wide tokio runtime that bindings run core on (binding rule 2), and its
//! terminal [`shutdown`].
//!
//! It is created lazily on first use; callers get a [`Handle`] ([`handle`]), never the
//! runtime itself, so [`shutdown`] can take it out, drain, and join its threads. A forked
//! child inherits the parent's memory but not its worker threads, so using the inherited
//! runtime would hang forever; the creating pid is recorded and any use from another pid
//! fails with a clear [`ErrorKind::Runtime`] error.
//!
//! A host integration that needs a `&'static Runtime` (an async adapter such as
//! pyo3-async-runtimes; no binding here uses one any more) gets one from
//! [`pinned`]: the runtime then lives until the process exits and [`shutdown`] refuses with a
//! clear error (such a host drains with its lifecycle's `close(timeout)` instead).
//!
//! Blocking hosts may instead drive a call on their own thread ([`caller::drive`]); what such
//! a call starts that outlives it still lands here (`spawn_target`).
//!
//! [`ErrorKind::Runtime`]: crate::ErrorKind::Runtime

use std::sync::{OnceLock, RwLock, RwLockWriteGuard};
use std::time::{Duration, Instant};

use tokio::runtime::{Handle, Runtime};
use tokio_util::sync::CancellationToken;

use crate::error::Error;
use crate::settle::{registered_settlers, PendingRecord, Settler};

pub mod caller;
pub(crate) mod pid;

/// Upper bound of the runtime's blocking pool.
const BLOCKING_THREADS: usize = 32;

/// How long [`shutdown`] waits for the runtime's threads once the drain is over. Workers end
/// at their next await; only a blocking journal operation already in flight can take longer,
/// and that one finishes on its own (its thread is then left to the process exit).
pub const JOIN_TIMEOUT: Duration = Duration::from_secs(2);

/// The stable message of every call after [`shutdown`] (kind [`ErrorKind::Runtime`]).
///
/// [`ErrorKind::Runtime`]: crate::ErrorKind::Runtime
pub const SHUT_DOWN_MESSAGE: &str =
    "the cycles-core runtime has been shut down; no further calls are possible in this process";

enum State {
    /// Not created yet.
    Unstarted,
    /// Running; owned here, or leaked for a host that needs it `'static`.
    Running {
        pid: u32,
        owned: Option<Runtime>,
        pinned: Option<&'static Runtime>,
    },
    /// It could not be built.
    Failed(String),
    /// [`shutdown`] ran (or is running): terminal.
    ShutDown,
}

// Read-locked on every call (the fast path), write-locked to create, pin or shut down.
static STATE: RwLock<State> = RwLock::new(State::Unstarted);

/// Cancelled by [`shutdown`]: every heartbeat and background replay in the process holds a
/// child of it, so one cancel stops them all (and any started later stops at once).
fn stop_root() -> &'static CancellationToken {
    static ROOT: OnceLock<CancellationToken> = OnceLock::new();
    ROOT.get_or_init(CancellationToken::new)
}

/// A token cancelled when [`shutdown`] begins (heartbeats and replay derive their stop
/// tokens from it).
pub(crate) fn stop_token() -> CancellationToken {
    stop_root().child_token()
}

fn state() -> RwLockWriteGuard<'static, State> {
    // The state is always left consistent; a panic elsewhere cannot poison its meaning.
    STATE.write().unwrap_or_else(|p| p.into_inner())
}

/// Environment variable: the number of worker threads of core's runtime (a positive
/// integer). Unset: one worker ([`DEFAULT_WORKERS`]), unless tokio's own
/// `TOKIO_WORKER_THREADS` is set, which is then honoured.
///
/// One worker is the default because every caller of this runtime is a binding whose host
/// waits on it from its own threads (a host is never called on a worker: events go through
/// the bridge's pump, completions through channels and the hosts' own threads). With more
/// workers the request and connection tasks of one call bounce between them, and each bounce
/// wakes a parked thread: one worker cuts a sequential guarded lifecycle's CPU by about a
/// third, in core and in every binding (docs/benchmarks.md). Set more for a process that
/// drives many thousands of concurrent calls and wants core's side on several cores.
pub const WORKERS_ENV: &str = "CYCLES_RUNTIME_WORKERS";

/// Worker threads of core's runtime when neither [`WORKERS_ENV`] nor `TOKIO_WORKER_THREADS`
/// is set.
pub const DEFAULT_WORKERS: usize = 1;

/// The worker count asked for by [`WORKERS_ENV`]: `Ok(None)` when unset.
fn workers_from_env() -> Result<Option<usize>, String> {
    let Some(v) = std::env::var_os(WORKERS_ENV) else {
        return Ok(None);
    };
    v.to_str()
        .and_then(|s| s.trim().parse::<usize>().ok())
        .filter(|&n| n > 0)
        .map(Some)
        .ok_or_else(|| format!("{WORKERS_ENV} must be a positive integer, got {v:?}"))
}

fn build() -> State {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    match workers_from_env() {
        Ok(Some(n)) => {
            builder.worker_threads(n);
        }
        // tokio reads its own variable only when no count is set here.
        Ok(None) if std::env::var_os("TOKIO_WORKER_THREADS").is_some() => {}
        Ok(None) => {
            builder.worker_threads(DEFAULT_WORKERS);
        }
        Err(e) => return State::Failed(e),
    }
    let built = builder
        .enable_all()
        .thread_name("cycles-core")
        // Blocking work here is short journal file I/O: tokio's default of 512 threads only
        // buys memory (when Python's awaitables were handed back under the GIL on this pool,
        // a burst of 10,000 asyncio completions grew it to hundreds of waiting threads).
        .max_blocking_threads(BLOCKING_THREADS)
        .build();
    match built {
        Ok(rt) => State::Running {
            pid: pid::current(),
            owned: Some(rt),
            pinned: None,
        },
        Err(e) => State::Failed(e.to_string()),
    }
}

/// Runs `f` on the running runtime (created if needed), or fails with the RUNTIME error of
/// the state it is in.
fn with_running<T>(
    f: impl FnOnce(&mut Option<Runtime>, &mut Option<&'static Runtime>) -> T,
) -> Result<T, Error> {
    let mut st = state();
    if matches!(*st, State::Unstarted) {
        *st = build();
    }
    match &mut *st {
        State::Running { pid, owned, pinned } => {
            check_pid(*pid, pid::current())?;
            Ok(f(owned, pinned))
        }
        State::Failed(e) => Err(Error::runtime(format!(
            "cannot start the cycles-core runtime: {e}"
        ))),
        State::ShutDown => Err(Error::runtime(SHUT_DOWN_MESSAGE)),
        State::Unstarted => unreachable!("built above"),
    }
}

/// A handle to the shared multi-thread runtime, created on first call.
///
/// Fails if the runtime could not be built, after [`shutdown`], or if called in a process
/// other than the one that created it (i.e. after `fork()`); a child process must not use
/// core at all once the parent has (the journal and leases belong to the parent), so there is
/// no re-creation.
pub fn handle() -> Result<Handle, Error> {
    {
        let st = STATE.read().unwrap_or_else(|p| p.into_inner());
        if let State::Running { pid, owned, pinned } = &*st {
            check_pid(*pid, pid::current())?;
            if let Some(rt) = owned.as_ref().or(pinned.as_ref().copied()) {
                return Ok(rt.handle().clone());
            }
        }
    }
    with_running(|owned, pinned| match (owned.as_ref(), pinned) {
        (Some(rt), _) => rt.handle().clone(),
        (None, Some(rt)) => rt.handle().clone(),
        (None, None) => unreachable!("a running state holds its runtime"),
    })
}

/// The runtime that work outliving the current call is spawned on (a heartbeat, an abandoned
/// guard's settlement, the background replay): core's own when this thread is driving a
/// blocking host's call ([`caller::drive`], whose runtime runs only while its caller waits),
/// else the current one, else core's. `None` only when there is no current runtime and core's
/// is unusable (shut down, or a forked child).
pub(crate) fn spawn_target() -> Option<Handle> {
    if caller::is_driving() {
        // Shut down: the work is cancelled by its stop token anyway; the driving runtime
        // drops it at worst.
        return handle().ok().or_else(|| Handle::try_current().ok());
    }
    Handle::try_current().ok().or_else(|| handle().ok())
}

/// The shared runtime as a `&'static Runtime`, for host integrations that require one
/// (e.g. pyo3-async-runtimes' `init_with_runtime`). The runtime then lives until the process exits:
/// [`shutdown`] refuses with a RUNTIME error. Prefer [`handle`] everywhere else.
pub fn pinned() -> Result<&'static Runtime, Error> {
    with_running(|owned, pinned| {
        if let Some(rt) = owned.take() {
            *pinned = Some(Box::leak(Box::new(rt)));
        }
        pinned.expect("a running state holds its runtime")
    })
}

/// What [`shutdown`] did.
#[derive(Clone, Debug, Default)]
pub struct ShutdownReport {
    /// True when an earlier call had already shut the runtime down (this one did nothing).
    pub already_shut_down: bool,
    /// Settlements the drain applied (commit or event fallback).
    pub settled: usize,
    /// Journal records still pending afterwards, left in place for the next process.
    pub remaining: Vec<PendingRecord>,
    /// Pending settlements the journal could not take, given up now: each was logged at error
    /// ("settlement LOST", with its body); the next process cannot replay them.
    pub unjournaled: Vec<String>,
}

/// Shuts core down for the rest of the process: terminal.
///
/// In order: later [`handle`] calls (and so every binding call) fail with the RUNTIME error
/// [`SHUT_DOWN_MESSAGE`]; every heartbeat and background replay stops (a lease is no longer
/// extended; the server expires it, and its settlement, journaled, is not lost); every live
/// [`Settler`] drains its journal for at most `timeout` (zero: no drain), leaving whatever is
/// not settled in the journal for the next process; then the runtime shuts down and its
/// threads are joined (at most [`JOIN_TIMEOUT`]). Work still running on the runtime is
/// dropped at its next await.
///
/// A second call is a no-op ([`ShutdownReport::already_shut_down`]). Errors (kind RUNTIME,
/// nothing done): called from inside any tokio runtime (it blocks until the runtime's
/// threads end; call it from a plain thread), after `fork()` in the child, or when the
/// runtime was [`pinned`].
pub fn shutdown(timeout: Duration) -> Result<ShutdownReport, Error> {
    if Handle::try_current().is_ok() {
        return Err(Error::runtime(
            "cycles_core::runtime::shutdown cannot run inside a tokio runtime (it blocks until \
             the runtime's threads have ended); call it from a plain thread",
        ));
    }
    let owned = {
        let mut st = state();
        match &mut *st {
            State::ShutDown => {
                return Ok(ShutdownReport {
                    already_shut_down: true,
                    ..ShutdownReport::default()
                })
            }
            State::Running { pid, .. } => check_pid(*pid, pid::current())?,
            State::Unstarted | State::Failed(_) => {}
        }
        if let State::Running {
            pinned: Some(_),
            owned: None,
            ..
        } = &*st
        {
            return Err(Error::runtime(
                "the cycles-core runtime is pinned for the process's lifetime by a host \
                 integration and cannot be shut down; drain with the lifecycle's close instead",
            ));
        }
        match std::mem::replace(&mut *st, State::ShutDown) {
            State::Running { owned, .. } => owned,
            _ => None,
        }
    };
    stop_root().cancel();
    crate::lease::wheel::shutdown();
    let settlers = registered_settlers();
    // Never started (core ran only on the caller's runtimes): drain on a temporary one.
    let temp;
    let rt = match &owned {
        Some(rt) => rt,
        None if settlers.is_empty() || timeout.is_zero() => {
            // Nothing to drain on; what only memory holds is given up (and logged) all the same.
            return Ok(ShutdownReport {
                unjournaled: settlers
                    .iter()
                    .flat_map(Settler::give_up_unjournaled)
                    .collect(),
                ..ShutdownReport::default()
            });
        }
        None => {
            temp = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| Error::runtime(format!("cannot build a runtime to drain: {e}")))?;
            &temp
        }
    };
    let report = rt.block_on(drain_all(settlers, timeout));
    if let Some(rt) = owned {
        rt.shutdown_timeout(JOIN_TIMEOUT);
    }
    Ok(report)
}

/// Drains every settler concurrently against one deadline; a zero timeout only lists what
/// remains.
async fn drain_all(settlers: Vec<Settler>, timeout: Duration) -> ShutdownReport {
    let deadline = Instant::now() + timeout;
    let mut report = ShutdownReport::default();
    let mut tasks = tokio::task::JoinSet::new();
    for s in settlers {
        tasks.spawn(async move {
            let (settled, remaining) = if timeout.is_zero() {
                (0, s.pending().await)
            } else {
                let left = deadline.saturating_duration_since(Instant::now());
                let d = s.drain(left).await;
                (d.settled(), d.remaining)
            };
            (settled, remaining, s.give_up_unjournaled())
        });
    }
    while let Some(r) = tasks.join_next().await {
        if let Ok((settled, remaining, unjournaled)) = r {
            report.settled += settled;
            report.unjournaled.extend(unjournaled);
            // Settlers sharing a journal partition list the same records once.
            for rec in remaining {
                if !report.remaining.iter().any(|r| r.file == rec.file) {
                    report.remaining.push(rec);
                }
            }
        }
    }
    report
}

/// The fork check, separated so it can be tested without forking.
fn check_pid(owner: u32, current: u32) -> Result<(), Error> {
    if owner == current {
        Ok(())
    } else {
        Err(Error::runtime(format!(
            "the cycles-core runtime was created in process {owner} and cannot be used in \
             process {current} (after fork()); create clients only in the child, before any \
             use of cycles in the parent, or use spawn instead of fork"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    #[test]
    fn runtime_is_shared_and_works() {
        assert_eq!(handle().unwrap().block_on(async { 1 + 1 }), 2);
        // The same runtime: a task spawned through one handle is awaited through another.
        let task = handle().unwrap().spawn(async { 7 });
        assert_eq!(handle().unwrap().block_on(task).unwrap(), 7);
    }

    #[test]
    fn shutdown_inside_a_runtime_is_a_clear_error() {
        let e = handle()
            .unwrap()
            .block_on(async { shutdown(Duration::ZERO) })
            .unwrap_err();
        assert_eq!(e.kind(), &ErrorKind::Runtime);
        assert!(e.message().contains("plain thread"), "{}", e.message());
        assert!(handle().is_ok(), "the refused shutdown changed nothing");
    }

    #[test]
    fn pid_mismatch_is_a_clear_error() {
        assert!(check_pid(5, 5).is_ok());
        let e = check_pid(5, 6).unwrap_err();
        assert_eq!(e.kind(), &ErrorKind::Runtime);
        assert!(e.message().contains("fork"));
    }
}
