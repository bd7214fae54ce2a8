//! Completion callbacks for event-loop applications: the `*_async` exports start their work on
//! core's runtime and return at once; the result reaches a C callback with user data.
//!
//! Callbacks run on ONE process-wide thread, `cycles-completions`, one at a time in completion
//! order: never on a tokio worker, never under a core lock (docs/bindings.md). The thread is
//! inside the runtime's context, so a blocking `cycles_*` call made from a callback is refused
//! with `CYCLES_RUNTIME` (it would hold up every later completion); chain the next `*_async`
//! call instead. Every accepted call gets exactly one callback: if its work is dropped unfinished
//! (the runtime shut down under it), the callback still comes, with `CYCLES_RUNTIME`.
//! `cycles_shutdown` delivers what is left and joins the thread.

use std::future::Future;
use std::sync::mpsc::{self, Sender};
use std::sync::{Mutex, OnceLock};
use std::thread::{self, JoinHandle};

use cycles_bridge::{task, ErrorFields};
use cycles_core::runtime;

use crate::error::cycles_error;
use crate::status::cycles_status;

/// One delivery, run on the completion thread.
type Job = Box<dyn FnOnce() + Send>;

struct Thread {
    tx: Sender<Job>,
    handle: JoinHandle<()>,
}

fn slot() -> &'static Mutex<Option<Thread>> {
    static SLOT: OnceLock<Mutex<Option<Thread>>> = OnceLock::new();
    SLOT.get_or_init(|| Mutex::new(None))
}

/// The completion thread's queue, starting the thread on first use.
fn sender() -> Result<Sender<Job>, ErrorFields> {
    let mut slot = slot().lock().unwrap_or_else(|p| p.into_inner());
    if let Some(t) = slot.as_ref() {
        return Ok(t.tx.clone());
    }
    let rt = runtime::handle()?;
    let (tx, rx) = mpsc::channel::<Job>();
    let handle = thread::Builder::new()
        .name("cycles-completions".into())
        .spawn(move || {
            // Inside the runtime's context: blocking exports refuse (panic::may_block).
            let _ctx = rt.enter();
            for job in rx {
                // A callback must not unwind; if it does, the next one still runs.
                let _ = cycles_bridge::catch_panic(job);
            }
        })
        .map_err(|e| ErrorFields::internal(format!("cannot start the completion thread: {e}")))?;
    *slot = Some(Thread {
        tx: tx.clone(),
        handle,
    });
    Ok(tx)
}

/// What receives a result on the completion thread.
type Deliver<T> = Box<dyn FnOnce(Result<T, ErrorFields>) + Send>;

/// Delivers exactly once: with the work's result, or (dropped unfinished) with RUNTIME.
struct Once<T: Send + 'static> {
    tx: Sender<Job>,
    deliver: Option<Deliver<T>>,
}

impl<T: Send + 'static> Once<T> {
    fn send(&mut self, r: Result<T, ErrorFields>) {
        if let Some(d) = self.deliver.take() {
            let _ = self.tx.send(Box::new(move || d(r)));
        }
    }
}

impl<T: Send + 'static> Drop for Once<T> {
    fn drop(&mut self) {
        self.send(Err(ErrorFields::from(cycles_core::Error::runtime(
            "the operation was abandoned: the cycles runtime shut down before it finished",
        ))));
    }
}

/// Runs `work` on core's runtime and hands its result to `deliver` on the completion thread.
/// An error here (the runtime is unusable) means `deliver` will never run.
pub fn submit<T: Send + 'static>(
    work: impl Future<Output = Result<T, ErrorFields>> + Send + 'static,
    deliver: impl FnOnce(Result<T, ErrorFields>) + Send + 'static,
) -> Result<(), ErrorFields> {
    let tx = sender()?;
    let rt = runtime::handle()?;
    let mut once = Once {
        tx,
        deliver: Some(Box::new(deliver)),
    };
    rt.spawn(async move {
        let r = task::joined(work).await;
        once.send(r);
    });
    Ok(())
}

/// Stops the completion thread after it has delivered everything queued (called by
/// `cycles_shutdown` once core's runtime has ended, so abandoned work has queued its RUNTIME
/// callbacks). Idempotent; a later `*_async` call starts the thread again only if the runtime
/// is usable (after shutdown it is not).
pub fn stop() {
    let t = slot().lock().unwrap_or_else(|p| p.into_inner()).take();
    if let Some(Thread { tx, handle }) = t {
        drop(tx);
        // From a completion callback the thread cannot join itself (cycles_shutdown refuses
        // there anyway: it is inside the runtime's context).
        if handle.thread().id() != thread::current().id() {
            let _ = handle.join();
        }
    }
}

/// The status of a delivered result, and its error (valid only during the callback).
pub fn status_and_error<T>(r: &Result<T, ErrorFields>) -> (cycles_status, Option<cycles_error>) {
    match r {
        Ok(_) => (cycles_status::CYCLES_OK, None),
        Err(f) => (
            crate::status::of_code(f.code),
            Some(cycles_error::new(f.clone())),
        ),
    }
}

/// The error pointer handed to a callback (NULL on success).
pub fn error_ptr(e: &Option<cycles_error>) -> *const cycles_error {
    e.as_ref()
        .map_or(std::ptr::null(), |e| e as *const cycles_error)
}

/// A caller's user data, carried to the completion thread (the header's contract: the
/// callback runs there, so the caller makes the data safe to use there).
#[derive(Clone, Copy)]
pub struct UserData(pub *mut std::ffi::c_void);

// See the type's docs: the pointer is only handed back to the caller's own callback.
unsafe impl Send for UserData {}
