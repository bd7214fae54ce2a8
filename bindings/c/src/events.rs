//! Events to a C callback. Core's event sink only queues JSON (the bridge's `EventPump`); one
//! thread per client (`cycles-events`, started with the client's lifecycle) drains the queue
//! and calls the callback there: never on a tokio worker, never under a core lock. The thread
//! enters the runtime's context so a blocking `cycles_*` call made from the callback is
//! refused with `CYCLES_RUNTIME` (it would otherwise hold up every later event). It ends when
//! the client is closed and the queue is empty; `cycles_client_close` / `_free` join it.

use std::ffi::{c_char, c_void};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle, ThreadId};
use std::time::Duration;

use cycles_bridge::{catch_panic, ErrorFields, Lifecycle};
use cycles_core::runtime;

use crate::strings::c_string;

/// An event callback: `event_json` is one event (docs/events.md), `len` its length in bytes
/// without the terminating NUL. The string is valid only during the call. Called on the
/// client's event thread, one event at a time, in order. It must not unwind (a C++
/// exception escaping it aborts the process) and should return quickly.
pub type cycles_event_cb =
    Option<unsafe extern "C" fn(user_data: *mut c_void, event_json: *const c_char, len: usize)>;

/// A registered callback and its user data.
#[derive(Clone, Copy)]
pub struct Callback {
    f: cycles_event_cb,
    user_data: *mut c_void,
}

// The user data is the caller's; the contract (header) says the callback is called on the
// client's event thread, so the caller makes it safe to use there.
unsafe impl Send for Callback {}

impl Callback {
    /// A callback (None: unregistered).
    pub fn new(f: cycles_event_cb, user_data: *mut c_void) -> Callback {
        Callback { f, user_data }
    }

    /// Whether a function is registered.
    pub fn is_registered(&self) -> bool {
        self.f.is_some()
    }

    fn call(self, event: &str) {
        if let Some(f) = self.f {
            let text = c_string(event);
            let len = text.as_bytes().len();
            // SAFETY: the callback's contract; `text` lives across the call.
            let _ = catch_panic(|| unsafe { f(self.user_data, text.as_ptr(), len) });
        }
    }
}

/// The callback slot shared by the client and its event thread.
pub type Slot = Arc<Mutex<Callback>>;

/// An empty slot.
pub fn slot() -> Slot {
    Arc::new(Mutex::new(Callback::new(None, std::ptr::null_mut())))
}

/// The event thread of one lifecycle.
pub struct Pump {
    thread: Mutex<Option<JoinHandle<()>>>,
    id: ThreadId,
}

impl Pump {
    /// Starts the thread draining `lifecycle`'s events into `slot`'s callback.
    pub fn start(lifecycle: Arc<Lifecycle>, slot: Slot) -> Result<Pump, ErrorFields> {
        let rt = runtime::handle()?;
        let t = thread::Builder::new()
            .name("cycles-events".into())
            .spawn(move || {
                // Inside the runtime's context: blocking exports refuse (panic::may_block).
                let _ctx = rt.enter();
                while let Some(batch) = lifecycle.next_events(Duration::from_millis(50)) {
                    for e in batch {
                        let cb = *slot.lock().unwrap_or_else(|p| p.into_inner());
                        cb.call(&e);
                    }
                }
            })
            .map_err(|e| ErrorFields::internal(format!("cannot start the event thread: {e}")))?;
        Ok(Pump {
            id: t.thread().id(),
            thread: Mutex::new(Some(t)),
        })
    }

    /// Waits for the thread to end (after the lifecycle's close). From the event thread itself
    /// (a callback freeing its client) it is left to end by itself.
    pub fn join(&self) {
        if thread::current().id() == self.id {
            return;
        }
        let t = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(t) = t {
            let _ = t.join();
        }
    }
}
