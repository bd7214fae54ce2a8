//! Running work on core's one runtime and waiting for it from a host thread.
//!
//! A blocking host call spawns the work ([`Spawned`]) and waits in short slices
//! ([`Spawned::wait`]) with its interpreter lock released, so it can check for signals between
//! slices and abort. An async host awaits [`joined`] from its own event-loop glue, or hands
//! [`spawn_then`] a delivery that queues the result for its event loop. Either way a panic in
//! the work becomes an INTERNAL error, never an unwinding host frame.

use std::future::Future;
use std::marker::PhantomData;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::{pin, Pin};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::task::Poll;
use std::time::Duration;

use cycles_core::runtime;
use tokio::task::JoinHandle;

use crate::error::{panic_message, ErrorFields};

/// Work the bridge hands a host, boxed. Hosts wrap it in their own async glue (event-loop
/// adapters, [`joined`]), and an `async` block that awaits a captured future keeps room for it
/// twice, so every unboxed layer doubled the state machine: with 2,000 concurrent Python
/// guards that cost about 240 MB of peak RSS (docs/benchmarks.md). Boxed, each layer holds a
/// pointer and the work is allocated once.
pub type Work<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// What one wait slice saw.
#[derive(Debug)]
pub enum Wait<T> {
    /// The work finished with this value.
    Ready(T),
    /// Still running after the slice.
    Pending,
    /// The work ended without a value (it panicked): an INTERNAL error.
    Failed(ErrorFields),
}

/// Work running on core's runtime, its result delivered through a channel.
pub struct Spawned<T> {
    task: JoinHandle<()>,
    rx: Receiver<T>,
}

/// Spawns `fut` on core's runtime (fails with RUNTIME when the runtime is unusable).
pub fn spawn<T: Send + 'static>(
    fut: impl Future<Output = T> + Send + 'static,
) -> Result<Spawned<T>, ErrorFields> {
    let rt = runtime::handle()?;
    let (tx, rx) = mpsc::channel();
    let task = rt.spawn(async move {
        let _ = tx.send(fut.await);
    });
    Ok(Spawned { task, rx })
}

impl<T> Spawned<T> {
    /// Waits at most `slice` for the result. Call it with the host's lock released; never from
    /// a runtime worker.
    pub fn wait(&mut self, slice: Duration) -> Wait<T> {
        match self.rx.recv_timeout(slice) {
            Ok(v) => Wait::Ready(v),
            Err(RecvTimeoutError::Timeout) => Wait::Pending,
            // The task ended without sending: it panicked (or was aborted).
            Err(RecvTimeoutError::Disconnected) => Wait::Failed(match runtime::handle() {
                Ok(rt) => match rt.block_on(&mut self.task) {
                    Err(join) if join.is_panic() => {
                        ErrorFields::internal(panic_message(join.into_panic().as_ref()))
                    }
                    _ => ErrorFields::internal("the operation ended without a result"),
                },
                Err(e) => ErrorFields::from(e),
            }),
        }
    }

    /// Aborts the work (a host interrupt): its outcome is unknown, like a timeout's.
    pub fn abort(&self) {
        self.task.abort();
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
        // Polled under catch_unwind, in this task: a panic ends the work with INTERNAL and
        // the future is never polled again.
        let r = std::future::poll_fn(|cx| {
            match catch_unwind(AssertUnwindSafe(|| fut.as_mut().poll(cx))) {
                Ok(p) => p,
                Err(panic) => {
                    Poll::Ready(Err(ErrorFields::internal(panic_message(panic.as_ref()))))
                }
            }
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

    fn until_done<T>(s: &mut Spawned<T>) -> Result<T, ErrorFields> {
        loop {
            match s.wait(Duration::from_millis(20)) {
                Wait::Ready(v) => return Ok(v),
                Wait::Pending => {}
                Wait::Failed(f) => return Err(f),
            }
        }
    }

    #[test]
    fn spawned_value_arrives() {
        let mut s = spawn(async { 41 + 1 }).unwrap();
        assert_eq!(until_done(&mut s).unwrap(), 42);
    }

    #[test]
    fn spawned_panic_is_internal() {
        let mut s = spawn(async {
            if true {
                panic!("worker panic");
            }
            0
        })
        .unwrap();
        let f = until_done(&mut s).unwrap_err();
        assert_eq!(f.name, "INTERNAL");
        assert!(f.message.ends_with(": worker panic"), "{}", f.message);
    }

    #[test]
    fn pending_then_abort() {
        let mut s = spawn(std::future::pending::<()>()).unwrap();
        assert!(matches!(s.wait(Duration::from_millis(5)), Wait::Pending));
        s.abort();
        let f = until_done(&mut s).unwrap_err();
        assert_eq!(f.message, "the operation ended without a result");
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
