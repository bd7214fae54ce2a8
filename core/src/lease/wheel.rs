//! The lease wheel: heartbeats whose first beat is not due yet wait here instead of as tasks.
//!
//! Most guarded calls end long before their first beat (a 60 s lease is first extended after
//! about 20 s). Spawning a task per lease and cancelling it at the end costs two cross-thread
//! wake-ups per call for nothing; parking the prepared heartbeat in an ordered map costs a
//! lock and an insert. One timer thread (`cycles-lease-timer`, started on first use) sleeps
//! until the earliest first beat and only then spawns that lease's task on the runtime that
//! started it. Finishing a parked lease takes it out again: no task ever ran.
//!
//! The thread is woken only when a lease with an earlier first beat than every parked one
//! arrives, or [`SPAWN_AHEAD`] before the earliest beat; it then hands over every lease due in
//! the next two [`SPAWN_AHEAD`]s at once. A task sleeps on the runtime's timer until its
//! planned beat, so an early hand-over changes no beat's timing, and one wake-up (of this
//! thread and of a worker) serves a batch: handing leases over one by one made a first beat
//! cost far more CPU than a later one (lease-scale, docs/benchmarks.md). [`shutdown`] (from
//! [`crate::runtime::shutdown`]) stops and joins it; leases started afterwards run as tasks at
//! once. It keeps real time: a runtime with paused tokio time does not advance it.

use std::collections::BTreeMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use tokio::runtime::Handle;
use tokio::task::JoinHandle;

use super::driver::Beating;

/// How long before its first beat a lease is handed to its runtime (see the module docs).
pub(super) const SPAWN_AHEAD: Duration = Duration::from_millis(50);

/// Where a parked lease is: its first beat and a sequence number (unique per lease).
pub(super) type Key = (Instant, u64);

/// The slot a lease's task handle is put in when the wheel spawns it.
pub(super) type TaskSlot = Arc<Mutex<Option<JoinHandle<()>>>>;

struct Parked {
    beating: Box<Beating>,
    runtime: Handle,
    task: TaskSlot,
}

#[derive(Default)]
struct State {
    due: BTreeMap<Key, Parked>,
    seq: u64,
    /// The instant the thread sleeps until (`None`: until notified).
    target: Option<Instant>,
    thread: Option<std::thread::JoinHandle<()>>,
    stopped: bool,
    /// The process the timer thread belongs to: a forked child has the map but not the thread.
    pid: u32,
}

#[derive(Default)]
struct Wheel {
    state: Mutex<State>,
    wake: Condvar,
}

fn wheel() -> &'static Wheel {
    static WHEEL: OnceLock<Wheel> = OnceLock::new();
    WHEEL.get_or_init(Wheel::default)
}

fn lock() -> MutexGuard<'static, State> {
    // Every critical section leaves the map consistent; a panic elsewhere cannot poison it.
    wheel().state.lock().unwrap_or_else(|p| p.into_inner())
}

/// Parks `beating` until shortly before `at` ([`SPAWN_AHEAD`]), when the timer thread spawns
/// [`Beating::run`] on `runtime` and puts its handle in `task`. Gives it back when the wheel is
/// stopped (after shutdown) or its thread cannot start: the caller then runs it as a task
/// itself.
pub(super) fn park(
    at: Instant,
    beating: Box<Beating>,
    runtime: Handle,
    task: TaskSlot,
) -> Result<Key, Box<Beating>> {
    let mut st = lock();
    if st.stopped {
        return Err(beating);
    }
    let pid = crate::runtime::pid::current();
    if st.pid != pid {
        // First use, or a forked child: the parent's leases and thread are not ours (leaked).
        std::mem::forget(std::mem::take(&mut st.due));
        std::mem::forget(st.thread.take());
        st.target = None;
        st.pid = pid;
    }
    if st.thread.is_none() {
        match std::thread::Builder::new()
            .name("cycles-lease-timer".into())
            .spawn(timer)
        {
            Ok(t) => st.thread = Some(t),
            Err(_) => return Err(beating),
        }
    }
    st.seq += 1;
    let key = (at, st.seq);
    st.due.insert(
        key,
        Parked {
            beating,
            runtime,
            task,
        },
    );
    if st.target.map_or(true, |t| at < t) {
        st.target = Some(at);
        wheel().wake.notify_one();
    }
    Ok(key)
}

/// Takes a lease out of the wheel before its first beat; `None` when it was already spawned
/// (its task handle is in its slot then) or ended by [`shutdown`].
pub(super) fn unpark(key: Key) -> Option<Box<Beating>> {
    lock().due.remove(&key).map(|p| p.beating)
}

/// The timer thread: spawns every lease whose first beat is due, sleeps until the next one.
fn timer() {
    let mut st = lock();
    loop {
        if st.stopped {
            return;
        }
        let now = Instant::now();
        // Woken SPAWN_AHEAD before the earliest beat: take every beat of the next two
        // SPAWN_AHEADs, so the next wake-up is at least one SPAWN_AHEAD away.
        let horizon = now + 2 * SPAWN_AHEAD;
        while let Some(entry) = st.due.first_entry() {
            if entry.key().0 > horizon {
                break;
            }
            let p = entry.remove();
            // Spawned under the lock, so an owner that finds the lease gone from the map also
            // finds the handle in its slot. A lease stopped meanwhile ends at once in its task.
            let handle = p.runtime.spawn(p.beating.run());
            *p.task.lock().unwrap_or_else(|e| e.into_inner()) = Some(handle);
        }
        st.target = st.due.first_key_value().map(|(k, _)| k.0);
        st = match st.target {
            Some(t) => {
                let wait = t.saturating_duration_since(now + SPAWN_AHEAD);
                wheel()
                    .wake
                    .wait_timeout(st, wait)
                    .unwrap_or_else(|p| p.into_inner())
                    .0
            }
            None => wheel().wake.wait(st).unwrap_or_else(|p| p.into_inner()),
        };
    }
}

/// Stops the timer thread and joins it; later leases run as tasks at once. Called by
/// [`crate::runtime::shutdown`] after every stop token is cancelled: a lease still parked then
/// is ended by its owner's finish or drop (it never runs), as a stopped task would end.
pub(crate) fn shutdown() {
    let thread = {
        let mut st = lock();
        st.stopped = true;
        wheel().wake.notify_all();
        st.thread.take()
    };
    if let Some(t) = thread {
        let _ = t.join();
    }
}
