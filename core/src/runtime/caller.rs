//! Calls driven on the calling thread: the blocking hosts' fast path.
//!
//! A blocking host (Python's sync API, C, the JVM) waits for every call on its own thread.
//! Handed to core's shared runtime, one request costs two cross-thread wake-ups: the worker is
//! woken to send it, and the waiting thread is woken with the result. [`drive`] instead runs
//! the call on a small current-thread runtime that belongs to the calling thread, so the
//! request, its connection and the wait for the response all happen on that thread, as in a
//! hand-written blocking HTTP client.
//!
//! What that requires of core, and where it is done:
//! - connections made here are driven only while their thread waits in [`drive`], so a driven
//!   call uses a connection pool of its own thread, never the client's shared one (the
//!   transport asks [`is_driving`]);
//! - work that must outlive the call (a heartbeat, an abandoned guard's settlement, the
//!   background replay) goes to core's shared runtime, never to this one
//!   (`super::spawn_target`);
//! - journal file work runs inline: the thread is a blocking host thread already.
//!
//! The thread's runtime and connections are dropped when the thread ends (in a forked child,
//! leaked instead, so the parent's sockets stay registered).

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use tokio::runtime::{Handle, Runtime};

use crate::error::Error;

/// Environment variable: `0` keeps every blocking host's call on core's shared runtime (the
/// behaviour before calls were driven on their caller's thread); `1` (the default) lets a
/// binding drive them here. Any other value is a CONFIG error on the first blocking call.
pub const ENV: &str = "CYCLES_DRIVE_ON_CALLER";

/// Whether [`ENV`] lets bindings drive calls on their caller's thread (read once).
pub fn enabled() -> Result<bool, Error> {
    static READ: std::sync::OnceLock<Result<bool, String>> = std::sync::OnceLock::new();
    READ.get_or_init(|| match std::env::var_os(ENV) {
        None => Ok(true),
        Some(v) => match v.to_str().map(str::trim) {
            Some("1") => Ok(true),
            Some("0") => Ok(false),
            _ => Err(format!("{ENV} must be 0 or 1, got {v:?}")),
        },
    })
    .clone()
    .map_err(Error::config)
}

/// A thread's runtime and the process that built it.
struct ThreadRuntime {
    rt: std::mem::ManuallyDrop<Runtime>,
    pid: u32,
}

impl Drop for ThreadRuntime {
    /// In a forked child (the thread that forked exits there through `exit()`), the copy is
    /// leaked: dropping it would unregister its sockets from the epoll instance the child
    /// shares with the parent, and the parent's next response on them would never arrive.
    fn drop(&mut self) {
        if self.pid == super::pid::current() {
            // SAFETY: dropped once, here; the field is never used again.
            unsafe { std::mem::ManuallyDrop::drop(&mut self.rt) }
        }
    }
}

thread_local! {
    /// This thread's runtime, built on its first driven call.
    static RUNTIME: RefCell<Option<ThreadRuntime>> = const { RefCell::new(None) };
    /// True while this thread is inside [`drive`] (its call and every task it spawned run here).
    static DRIVING: Cell<bool> = const { Cell::new(false) };
}

/// True when the code asking runs on a thread inside [`drive`]: its HTTP must use the
/// thread's own connections, and lasting work must go to core's runtime.
pub fn is_driving() -> bool {
    DRIVING.with(Cell::get)
}

/// Resets the driving flag however `drive` ends (a panic included).
struct Driving;

impl Driving {
    fn enter() -> Driving {
        DRIVING.with(|d| d.set(true));
        Driving
    }
}

impl Drop for Driving {
    fn drop(&mut self) {
        DRIVING.with(|d| d.set(false));
    }
}

/// Polls `fut` on this thread's own runtime for at most `slice` (`None`: until it is done):
/// `Ok(Some(output))` when it finished, `Ok(None)` when the slice ran out (call again with the
/// same future to go on).
///
/// Errors (RUNTIME, `fut` not polled): core's runtime is shut down or this is a forked child
/// (as for every call, see [`super::handle`]), this thread is inside a tokio runtime already
/// (a worker cannot block; spawn the call instead), or the thread's runtime cannot be built.
///
/// A panic while polling `fut` propagates to the caller; the thread's runtime stays usable.
pub fn drive<F: Future + ?Sized>(
    fut: Pin<&mut F>,
    slice: Option<Duration>,
) -> Result<Option<F::Output>, Error> {
    // The process-wide checks every call makes: shut down, or used after fork().
    super::handle()?;
    if Handle::try_current().is_ok() {
        return Err(Error::runtime(
            "a call cannot be driven on a thread that is already inside a tokio runtime",
        ));
    }
    RUNTIME.with(|slot| {
        let mut slot = slot
            .try_borrow_mut()
            .map_err(|_| Error::runtime("a driven call re-entered its own thread's runtime"))?;
        if slot.is_none() {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| Error::runtime(format!("cannot build this thread's runtime: {e}")))?;
            *slot = Some(ThreadRuntime {
                rt: std::mem::ManuallyDrop::new(rt),
                pid: super::pid::current(),
            });
        }
        let rt = &slot.as_ref().expect("built above").rt;
        let _driving = Driving::enter();
        Ok(match slice {
            None => Some(rt.block_on(fut)),
            Some(slice) => rt.block_on(async { tokio::time::timeout(slice, fut).await.ok() }),
        })
    })
}

/// Drops `value` (an unfinished call) inside this thread's runtime, so whatever it holds that
/// needs a runtime to be dropped (timers, connections) finds one.
pub fn drop_here<T>(value: T) {
    RUNTIME.with(
        |slot| match slot.try_borrow().ok().as_ref().and_then(|s| s.as_ref()) {
            Some(t) => {
                let _entered = t.rt.enter();
                let _driving = Driving::enter();
                drop(value);
            }
            None => drop(value),
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::pin::pin;

    #[test]
    fn drives_to_completion_and_in_slices() {
        let mut ready = pin!(async { 40 + 2 });
        assert_eq!(drive(ready.as_mut(), None).unwrap(), Some(42));
        let mut slow = pin!(async {
            tokio::time::sleep(Duration::from_millis(30)).await;
            7
        });
        assert_eq!(
            drive(slow.as_mut(), Some(Duration::from_millis(1))).unwrap(),
            None
        );
        let mut got = None;
        while got.is_none() {
            got = drive(slow.as_mut(), Some(Duration::from_millis(50))).unwrap();
        }
        assert_eq!(got, Some(7));
    }

    #[test]
    fn flag_is_set_only_inside() {
        assert!(!is_driving());
        let mut f = pin!(async { is_driving() });
        assert_eq!(drive(f.as_mut(), None).unwrap(), Some(true));
        assert!(!is_driving());
    }

    #[test]
    fn refused_inside_a_runtime() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let e = rt.block_on(async {
            let mut f = pin!(async { 1 });
            drive(f.as_mut(), None).unwrap_err()
        });
        assert_eq!(*e.kind(), crate::ErrorKind::Runtime);
    }

    #[test]
    fn a_panic_propagates_and_the_runtime_stays_usable() {
        let r = std::panic::catch_unwind(|| {
            let mut f = pin!(async {
                if true {
                    panic!("driven panic");
                }
            });
            let _ = drive(f.as_mut(), None);
        });
        assert!(r.is_err());
        assert!(!is_driving());
        let mut f = pin!(async { 5 });
        assert_eq!(drive(f.as_mut(), None).unwrap(), Some(5));
    }

    #[test]
    fn a_thread_ends_cleanly_with_its_runtime() {
        std::thread::spawn(|| {
            let mut f = pin!(async {
                // A task left behind on the thread's runtime, like an idle connection's.
                tokio::spawn(std::future::pending::<()>());
                1
            });
            assert_eq!(drive(f.as_mut(), None).unwrap(), Some(1));
        })
        .join()
        .unwrap();
    }
}
