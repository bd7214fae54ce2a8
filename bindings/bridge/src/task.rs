//! Running a host's call on core and waiting for it.
//!
//! A blocking host call starts the work ([`start`]) and waits in short slices
//! ([`Blocking::wait`]) with its interpreter lock released, so it can check for signals between
//! slices and abort; or waits to the end ([`Blocking::finish`]). A thread that keeps calling
//! has its calls driven on itself (core's [`caller::drive`]: no cross-thread wake-ups); a
//! thread's first calls, and any call when that is off, run as a task on core's runtime. An
//! async host awaits [`joined`] from its own event-loop glue, or hands [`spawn_then`] a
//! delivery that queues the result for its event loop. Either way a panic in the work becomes
//! an INTERNAL error, never an unwinding host frame.

use std::cell::Cell;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::{pin, Pin};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::task::Poll;
use std::thread::ThreadId;
use std::time::Duration;

use cycles_core::runtime::{self, caller};
use tokio::task::JoinHandle;

use crate::error::{catch_panic, panic_message, ErrorFields};

/// Work the bridge hands a host, boxed. Hosts wrap it in their own async glue (event-loop
/// adapters, [`joined`]), and an `async` block that awaits a captured future keeps room for it
/// twice, so every unboxed layer doubled the state machine: with 2,000 concurrent Python
/// guards that cost about 240 MB of peak RSS (docs/benchmarks.md). Boxed, each layer holds a
/// pointer and the work is allocated once.
pub type Work<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// The blocking call on a thread from which its calls are driven on the thread itself. The
/// first ones go to core's runtime: a thread that calls once or twice (a thread per request)
/// would pay for a runtime and a connection of its own and never use them again.
pub const DRIVE_FROM_CALL: u32 = 3;

thread_local! {
    /// Blocking calls started on this thread, up to [`DRIVE_FROM_CALL`].
    static CALLS: Cell<u32> = const { Cell::new(0) };
}

/// What one wait slice saw.
#[derive(Debug)]
pub enum Wait<T> {
    /// The work finished with this value.
    Ready(T),
    /// Still running after the slice.
    Pending,
    /// The work ended without a value (it panicked, or it could not be driven): INTERNAL or
    /// RUNTIME.
    Failed(ErrorFields),
}

/// A blocking host's call: driven on the thread that started it, or running on core's runtime.
pub struct Blocking<T> {
    how: How<T>,
}

enum How<T> {
    /// Polled only while its thread waits; `None` once done, failed or aborted.
    Here {
        work: Option<Work<T>>,
        thread: ThreadId,
    },
    /// A task on core's runtime, its result delivered through a channel.
    Spawned {
        task: JoinHandle<()>,
        rx: Receiver<T>,
    },
}

/// Starts a blocking host's call. From the [`DRIVE_FROM_CALL`]th call on a thread it is driven
/// on that thread (so wait for it on the same thread); before, or when core's `caller::ENV`
/// turns that off, or on a thread inside a tokio runtime, it runs as a task on core's runtime.
/// Fails with RUNTIME when the runtime is unusable, CONFIG when `caller::ENV` is invalid.
pub fn start<T: Send + 'static>(
    fut: impl Future<Output = T> + Send + 'static,
) -> Result<Blocking<T>, ErrorFields> {
    let rt = runtime::handle()?;
    let may_drive = caller::enabled()?;
    let calls = CALLS.with(|c| {
        let n = c.get().saturating_add(1).min(DRIVE_FROM_CALL);
        c.set(n);
        n
    });
    if may_drive && calls >= DRIVE_FROM_CALL && tokio::runtime::Handle::try_current().is_err() {
        return Ok(Blocking {
            how: How::Here {
                work: Some(Box::pin(fut)),
                thread: std::thread::current().id(),
            },
        });
    }
    let (tx, rx) = mpsc::channel();
    let task = rt.spawn(async move {
        let _ = tx.send(fut.await);
    });
    Ok(Blocking {
        how: How::Spawned { task, rx },
    })
}

impl<T> Blocking<T> {
    /// Waits at most `slice` for the result. Call it with the host's lock released, on the
    /// thread that started the call; never from a runtime worker.
    pub fn wait(&mut self, slice: Duration) -> Wait<T> {
        self.step(Some(slice))
    }

    /// Waits for the result however long it takes (the call's own timeouts bound it).
    pub fn finish(mut self) -> Result<T, ErrorFields> {
        loop {
            match self.step(None) {
                Wait::Ready(v) => return Ok(v),
                Wait::Pending => {}
                Wait::Failed(f) => return Err(f),
            }
        }
    }

    fn step(&mut self, slice: Option<Duration>) -> Wait<T> {
        match &mut self.how {
            How::Here { work, thread } => {
                if *thread != std::thread::current().id() {
                    return Wait::Failed(ErrorFields::internal(
                        "a call driven on its caller's thread was waited for on another thread",
                    ));
                }
                let Some(w) = work.as_mut() else {
                    return Wait::Failed(ErrorFields::internal(
                        "the operation ended without a result",
                    ));
                };
                match catch_panic(|| caller::drive(w.as_mut(), slice)) {
                    Ok(Ok(Some(v))) => {
                        caller::drop_here(work.take());
                        Wait::Ready(v)
                    }
                    Ok(Ok(None)) => Wait::Pending,
                    Ok(Err(e)) => {
                        caller::drop_here(work.take());
                        Wait::Failed(ErrorFields::from(e))
                    }
                    Err(internal) => {
                        // Never polled again; dropping it may panic too, which is ignored.
                        let w = work.take();
                        let _ = catch_panic(|| caller::drop_here(w));
                        Wait::Failed(internal)
                    }
                }
            }
            How::Spawned { task, rx } => {
                let got = match slice {
                    Some(slice) => rx.recv_timeout(slice),
                    None => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
                };
                match got {
                    Ok(v) => Wait::Ready(v),
                    Err(RecvTimeoutError::Timeout) => Wait::Pending,
                    // The task ended without sending: it panicked (or was aborted).
                    Err(RecvTimeoutError::Disconnected) => Wait::Failed(match runtime::handle() {
                        Ok(rt) => match rt.block_on(task) {
                            Err(join) if join.is_panic() => {
                                ErrorFields::internal(panic_message(join.into_panic().as_ref()))
                            }
                            _ => ErrorFields::internal("the operation ended without a result"),
                        },
                        Err(e) => ErrorFields::from(e),
                    }),
                }
            }
        }
    }

    /// True when the call is driven on its caller's thread (not a task on core's runtime).
    pub fn driven_here(&self) -> bool {
        matches!(self.how, How::Here { .. })
    }

    /// Aborts the work (a host interrupt): its outcome is unknown, like a timeout's.
    pub fn abort(&mut self) {
        match &mut self.how {
            How::Here { work, .. } => caller::drop_here(work.take()),
            How::Spawned { task, .. } => task.abort(),
        }
    }
}

impl<T> Drop for Blocking<T> {
    /// A driven call dropped unfinished (a host that stopped waiting) ends like an aborted
    /// one; hosts wait settling calls to the end.
    fn drop(&mut self) {
        if let How::Here { work, .. } = &mut self.how {
            if work.is_some() {
                caller::drop_here(work.take());
            }
        }
    }
}

/// Runs `fut` as its own task on core's runtime and awaits it: a panic becomes INTERNAL.
/// Async hosts await this from their event-loop glue.
pub async fn joined<T: Send + 'static>(
    fut: impl Future<Output = Result<T, ErrorFields>> + Send + 'static,
) -> Result<T, ErrorFields> {
    let rt = runtime::handle()?;
    match rt.spawn(fut).await {
        Ok(r) => r,
        Err(join) if join.is_panic() => Err(ErrorFields::internal(panic_message(
            join.into_panic().as_ref(),
        ))),
        Err(_) => Err(ErrorFields::internal("the operation was cancelled")),
    }
}

/// Runs `fut` as ONE task on core's runtime and hands its result to `deliver` on the worker
/// that finished it: a panic becomes INTERNAL, and work dropped unfinished (the runtime shut
/// down under it) is delivered as RUNTIME, so `deliver` runs exactly once. `deliver` must be
/// quick and must not block (it runs on a runtime worker): queue the result for the host.
/// Unlike awaiting [`joined`] from another task, nothing waits on a join handle, so one
/// completion costs one task. Errs (RUNTIME) only when the runtime is unusable; then
/// `deliver` never runs.
pub fn spawn_then<T: Send + 'static>(
    fut: impl Future<Output = Result<T, ErrorFields>> + Send + 'static,
    deliver: impl FnOnce(Result<T, ErrorFields>) + Send + 'static,
) -> Result<(), ErrorFields> {
    let rt = runtime::handle()?;
    let mut once = Deliver(Some(deliver), PhantomData);
    rt.spawn(async move {
        let mut fut = pin!(fut);
        // Polled inside the panic boundary, in this task: a panic ends the work with INTERNAL
        // and the future is never polled again.
        let r = std::future::poll_fn(|cx| {
            catch_panic(|| fut.as_mut().poll(cx))
                .unwrap_or_else(|internal| Poll::Ready(Err(internal)))
        })
        .await;
        once.send(r);
    });
    Ok(())
}

/// Delivers exactly once: the work's result, or (dropped unfinished) RUNTIME.
struct Deliver<T, F: FnOnce(Result<T, ErrorFields>)>(Option<F>, PhantomData<fn(T)>);

impl<T, F: FnOnce(Result<T, ErrorFields>)> Deliver<T, F> {
    fn send(&mut self, r: Result<T, ErrorFields>) {
        if let Some(d) = self.0.take() {
            d(r);
        }
    }
}

impl<T, F: FnOnce(Result<T, ErrorFields>)> Drop for Deliver<T, F> {
    fn drop(&mut self) {
        self.send(Err(ErrorFields::from(cycles_core::Error::runtime(
            "the operation was abandoned: the cycles runtime shut down before it finished",
        ))));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn until_done<T>(s: &mut Blocking<T>) -> Result<T, ErrorFields> {
        loop {
            match s.wait(Duration::from_millis(20)) {
                Wait::Ready(v) => return Ok(v),
                Wait::Pending => {}
                Wait::Failed(f) => return Err(f),
            }
        }
    }

    /// Runs `check` on a fresh thread for each of its first [`DRIVE_FROM_CALL`] calls: the
    /// early ones spawned on core's runtime, the last driven on the thread itself.
    fn both_ways(check: impl Fn(bool) + Send + Sync + 'static) {
        let check = std::sync::Arc::new(check);
        std::thread::spawn(move || {
            for call in 1..=DRIVE_FROM_CALL {
                check(call == DRIVE_FROM_CALL);
            }
        })
        .join()
        .unwrap();
    }

    #[test]
    fn a_value_arrives_either_way() {
        both_ways(|here| {
            let mut s = start(async { 41 + 1 }).unwrap();
            assert_eq!(s.driven_here(), here);
            assert_eq!(until_done(&mut s).unwrap(), 42);
        });
        both_ways(|_| assert_eq!(start(async { 6 }).unwrap().finish().unwrap(), 6));
    }

    #[test]
    fn a_panic_is_internal_either_way() {
        both_ways(|_| {
            let mut s = start(async {
                tokio::task::yield_now().await;
                if true {
                    panic!("worker panic");
                }
                0
            })
            .unwrap();
            let f = until_done(&mut s).unwrap_err();
            assert_eq!(f.name, "INTERNAL");
            assert!(f.message.ends_with(": worker panic"), "{}", f.message);
        });
    }

    #[test]
    fn pending_then_abort_either_way() {
        both_ways(|_| {
            let mut s = start(std::future::pending::<()>()).unwrap();
            assert!(matches!(s.wait(Duration::from_millis(5)), Wait::Pending));
            s.abort();
            let f = until_done(&mut s).unwrap_err();
            assert_eq!(f.message, "the operation ended without a result");
        });
    }

    #[test]
    fn a_driven_call_is_waited_for_on_its_own_thread() {
        let mut s = std::thread::spawn(|| {
            for _ in 1..DRIVE_FROM_CALL {
                start(async {}).unwrap().finish().unwrap();
            }
            start(async { 1 }).unwrap()
        })
        .join()
        .unwrap();
        assert!(s.driven_here());
        match s.wait(Duration::from_millis(5)) {
            Wait::Failed(f) => assert!(f.message.contains("another thread"), "{}", f.message),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn inside_a_runtime_calls_are_spawned() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let _entered = rt.enter();
        for _ in 0..DRIVE_FROM_CALL {
            let s = start(async { 3 }).unwrap();
            assert!(!s.driven_here());
            assert_eq!(s.finish().unwrap(), 3);
        }
    }

    #[test]
    fn joined_maps_panics() {
        let rt = runtime::handle().unwrap();
        let ok = rt.block_on(joined(async { Ok::<_, ErrorFields>(7) }));
        assert_eq!(ok.unwrap(), 7);
        let bad = rt.block_on(joined(async {
            if true {
                panic!("async panic");
            }
            Ok::<u8, ErrorFields>(0)
        }));
        assert!(bad.unwrap_err().message.ends_with(": async panic"));
    }

    /// What `spawn_then` delivered, waited for from this (non-runtime) thread.
    fn delivered<T: Send + 'static>(
        fut: impl Future<Output = Result<T, ErrorFields>> + Send + 'static,
    ) -> Result<T, ErrorFields> {
        let (tx, rx) = mpsc::channel();
        spawn_then(fut, move |r| tx.send(r).unwrap()).unwrap();
        let r = rx.recv_timeout(Duration::from_secs(10)).unwrap();
        assert!(
            rx.recv_timeout(Duration::from_millis(20)).is_err(),
            "delivered twice"
        );
        r
    }

    #[test]
    fn spawn_then_delivers_once() {
        assert_eq!(delivered(async { Ok::<_, ErrorFields>(9) }).unwrap(), 9);
        let e = delivered(async { Err::<u8, _>(ErrorFields::internal("typed")) }).unwrap_err();
        assert_eq!(e.message, "typed");
    }

    #[test]
    fn spawn_then_maps_a_panic_after_a_pending_poll() {
        let f = delivered(async {
            tokio::task::yield_now().await;
            if true {
                panic!("late panic");
            }
            Ok::<u8, ErrorFields>(0)
        })
        .unwrap_err();
        assert_eq!(f.name, "INTERNAL");
        assert!(f.message.ends_with(": late panic"), "{}", f.message);
    }

    #[test]
    fn an_undelivered_result_is_runtime() {
        let (tx, rx) = mpsc::channel();
        let d = Deliver(
            Some(move |r: Result<u8, ErrorFields>| tx.send(r).unwrap()),
            PhantomData,
        );
        drop(d); // the runtime dropped the task before the work finished
        assert_eq!(rx.try_recv().unwrap().unwrap_err().name, "RUNTIME");
        assert!(rx.try_recv().is_err());
    }
}
