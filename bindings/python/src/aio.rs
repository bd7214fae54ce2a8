//! asyncio awaitables completed on the event-loop thread.
//!
//! An `*_async` call creates its `asyncio.Future` on the running loop and spawns its work once
//! on core's runtime (`task::spawn_then`). The worker that finishes it pushes the future and
//! the Rust result, not yet converted to Python objects, onto the loop's completion queue, and
//! writes one byte to the loop's wake-up socket only when the queue was empty: no GIL on a
//! runtime worker, one wake-up per batch. The loop watches that socket (`loop.add_reader`);
//! its callback, on the loop thread, takes the whole batch, converts each result and completes
//! each future that is still pending (a cancelled one is skipped: its work ran to the end
//! anyway, so a settlement is never abandoned half-way).
//!
//! One queue per event loop, found through a small registry keyed by the loop (weakly held, so
//! the registry keeps no loop alive). When a new loop registers, entries of loops that are
//! closed or gone are removed and their queues shut: later completions for them are dropped.
//! A loop without `add_reader` gets a RUNTIME error instead of a future that never completes.

use std::io::{Read, Write};
use std::os::unix::io::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use cycles_bridge::{task, ErrorFields};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyWeakrefReference;
use pyo3::{intern, IntoPyObjectExt};

use crate::errors::to_pyerr;

/// A finished result, converted to a Python object on the loop thread.
type Convert = Box<dyn FnOnce(Python<'_>) -> PyResult<Py<PyAny>> + Send>;

/// One completion waiting for its loop.
struct Done {
    future: Py<PyAny>,
    result: Convert,
}

/// What a loop's workers and its drain share.
struct Shared {
    queue: Mutex<Vec<Done>>,
    /// Both ends of the wake-up socket live as long as the queue, so a write never meets a
    /// closed peer.
    wake_tx: UnixStream,
    wake_rx: UnixStream,
    /// False once the loop is closed or gone: completions are dropped, not queued.
    open: AtomicBool,
}

impl Shared {
    fn new() -> std::io::Result<Shared> {
        let (wake_tx, wake_rx) = UnixStream::pair()?;
        wake_tx.set_nonblocking(true)?;
        wake_rx.set_nonblocking(true)?;
        Ok(Shared {
            queue: Mutex::new(Vec::new()),
            wake_tx,
            wake_rx,
            open: AtomicBool::new(true),
        })
    }

    fn queue(&self) -> MutexGuard<'_, Vec<Done>> {
        // Nothing panics while holding it; a poisoned queue is still a valid Vec.
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// On a runtime worker, without the GIL.
    fn push(&self, done: Done) {
        if !self.open.load(Ordering::Acquire) {
            return; // dropped here: pyo3 defers the future's decref to the next GIL holder
        }
        let was_empty = {
            let mut q = self.queue();
            let empty = q.is_empty();
            q.push(done);
            empty
        };
        if was_empty {
            // WouldBlock means unread bytes are pending: the loop wakes anyway.
            let _ = (&self.wake_tx).write(&[1]);
        }
    }

    /// Drops everything queued (call it with the GIL) and every later completion.
    fn shut(&self) {
        self.open.store(false, Ordering::Release);
        let queued = std::mem::take(&mut *self.queue());
        drop(queued); // after the lock: a future's finalizer may run Python code
    }
}

/// One event loop's completion queue; the loop calls it when the wake-up socket is readable.
#[pyclass(module = "cycles._native", name = "_LoopCompletions", frozen)]
pub struct LoopCompletions {
    shared: Arc<Shared>,
}

#[pymethods]
impl LoopCompletions {
    /// The `add_reader` callback, on the loop thread: completes every queued future.
    fn __call__(&self, py: Python<'_>) {
        // Read the wake-up bytes BEFORE taking the batch: a byte written after this read
        // belongs to a push this drain may miss, and it wakes the loop again.
        let mut buf = [0u8; 64];
        while let Ok(n) = (&self.shared.wake_rx).read(&mut buf) {
            if n < buf.len() {
                break;
            }
        }
        let batch = std::mem::take(&mut *self.shared.queue());
        for done in batch {
            if let Err(e) = complete(py, done) {
                // Only if asyncio itself refused: say so, and complete the rest.
                e.write_unraisable(py, None);
            }
        }
    }
}

/// Sets one future's result or exception, unless it is already done (cancelled).
fn complete(py: Python<'_>, done: Done) -> PyResult<()> {
    let future = done.future.bind(py);
    if future.call_method0(intern!(py, "done"))?.is_truthy()? {
        return Ok(());
    }
    match (done.result)(py) {
        Ok(value) => future.call_method1(intern!(py, "set_result"), (value,))?,
        Err(err) => future.call_method1(intern!(py, "set_exception"), (err.into_value(py),))?,
    };
    Ok(())
}

/// A registered loop: weakly held when it allows weak references (asyncio's loops and
/// uvloop's do), else strongly until it is closed; and its raw address for a quick match.
struct Entry {
    addr: usize,
    event_loop: Held,
    completions: Py<LoopCompletions>,
}

enum Held {
    Weak(Py<PyWeakrefReference>),
    Strong(Py<PyAny>),
}

impl Held {
    fn new(event_loop: &Bound<'_, PyAny>) -> Held {
        match PyWeakrefReference::new(event_loop) {
            Ok(w) => Held::Weak(w.unbind()),
            Err(_) => Held::Strong(event_loop.clone().unbind()),
        }
    }

    /// The loop, if it still exists (runs no Python code).
    fn get<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyAny>> {
        match self {
            Held::Weak(w) => w.bind(py).upgrade(),
            Held::Strong(l) => Some(l.bind(py).clone()),
        }
    }
}

/// Every loop that has awaited native work. Held only briefly, never while running Python
/// code (that may switch threads, and the next thread may want the lock).
static LOOPS: Mutex<Vec<Entry>> = Mutex::new(Vec::new());

fn loops() -> MutexGuard<'static, Vec<Entry>> {
    LOOPS.lock().unwrap_or_else(|p| p.into_inner())
}

/// The running loop's queue, registering the loop on first use.
fn completions_of(py: Python<'_>, event_loop: &Bound<'_, PyAny>) -> PyResult<Arc<Shared>> {
    let addr = event_loop.as_ptr() as usize;
    let found = loops()
        .iter()
        .find(|e| e.addr == addr && e.event_loop.get(py).is_some_and(|l| l.is(event_loop)))
        .map(|e| e.completions.get().shared.clone());
    match found {
        Some(shared) => Ok(shared),
        None => register(py, event_loop),
    }
}

#[cold]
fn register(py: Python<'_>, event_loop: &Bound<'_, PyAny>) -> PyResult<Arc<Shared>> {
    sweep(py);
    let shared = Shared::new().map_err(|e| {
        runtime_err(format!(
            "cannot create the event loop's wake-up socket: {e}"
        ))
    })?;
    let shared = Arc::new(shared);
    let completions = Py::new(
        py,
        LoopCompletions {
            shared: shared.clone(),
        },
    )?;
    // Every Unix asyncio loop (uvloop too) can watch a descriptor; one that cannot gets a
    // typed error rather than a future that never completes.
    event_loop
        .call_method1(
            intern!(py, "add_reader"),
            (shared.wake_rx.as_raw_fd(), completions.clone_ref(py)),
        )
        .map_err(|e| {
            runtime_err(format!(
                "the running event loop cannot watch a file descriptor (loop.add_reader), \
                 which cycles' async calls need: {e}"
            ))
        })?;
    let entry = Entry {
        addr: event_loop.as_ptr() as usize,
        event_loop: Held::new(event_loop),
        completions,
    };
    loops().push(entry);
    Ok(shared)
}

/// `CyclesRuntimeError` (core's RUNTIME kind) with `message`.
fn runtime_err(message: String) -> PyErr {
    to_pyerr(ErrorFields::from(cycles_core::Error::runtime(message)))
}

/// Forgets loops that are gone or closed (a closed loop never drains again) and shuts their
/// queues.
fn sweep(py: Python<'_>) {
    let all = std::mem::take(&mut *loops());
    let (dead, live): (Vec<Entry>, Vec<Entry>) = all.into_iter().partition(|e| {
        e.event_loop.get(py).map_or(true, |l| {
            l.call_method0(intern!(py, "is_closed"))
                .and_then(|c| c.is_truthy())
                .unwrap_or(true)
        })
    });
    loops().extend(live);
    for e in dead {
        e.completions.get().shared.shut();
    }
}

/// `asyncio.get_running_loop`, imported once.
fn running_loop(py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
    static GET: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    GET.import(py, "asyncio", "get_running_loop")?.call0()
}

/// `work` as an `asyncio.Future` of the running loop (RuntimeError without one), completed on
/// the loop thread with `work`'s result converted there, or its typed `cycles.errors`
/// exception. Cancelling the future does not stop the work: it runs to the end on core's
/// runtime and its result is dropped.
pub fn awaitable<'py, T>(
    py: Python<'py>,
    work: impl std::future::Future<Output = Result<T, ErrorFields>> + Send + 'static,
) -> PyResult<Bound<'py, PyAny>>
where
    T: for<'a> IntoPyObject<'a> + Send + 'static,
{
    let event_loop = running_loop(py)?;
    let shared = completions_of(py, &event_loop)?;
    let future = event_loop.call_method0(intern!(py, "create_future"))?;
    let handle = future.clone().unbind();
    task::spawn_then(work, move |r| {
        let result: Convert = Box::new(move |py| match r {
            Ok(v) => v.into_py_any(py),
            Err(f) => Err(to_pyerr(f)),
        });
        shared.push(Done {
            future: handle,
            result,
        });
    })
    .map_err(to_pyerr)?;
    Ok(future)
}
