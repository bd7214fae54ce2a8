//! One threadsafe function per JavaScript environment that carries every promise settlement
//! from core's runtime to the JS thread.
//!
//! napi-rs's `JsDeferred` creates, references, closes and finalizes a threadsafe function (and
//! an env cleanup hook) per promise; at many calls in flight that was about 8 µs of JS-thread
//! CPU per guarded lifecycle (docs/benchmarks.md). Here the environment's one threadsafe
//! function is referenced only while promises are pending, so an idle addon never keeps Node
//! alive and a pending promise always does, as before.
//!
//! Teardown (a terminated worker, the main environment exiting) is the delicate part: a task on
//! core's runtime may settle after its environment is gone. An env cleanup hook, registered
//! after the threadsafe function so it runs before Node's own teardown of it, takes the handle
//! out of the shared slot under its lock and aborts it; a settle takes the same lock around its
//! call, so no thread calls into a threadsafe function being (or already) torn down. A settle
//! that finds the slot empty drops its value: there is no promise left to settle. Items still
//! queued at teardown come back with a null env and are freed the same way.

use std::cell::{Cell, RefCell};
use std::ffi::c_void;
use std::ptr;
use std::rc::Rc;
use std::sync::{Arc, Mutex};

use napi::bindgen_prelude::{Object, ToNapiValue};
use napi::{check_status, sys, Env};

/// What a settlement delivers: the resolved value made on the JS thread, or the rejection.
type Outcome =
    Result<Box<dyn FnOnce(sys::napi_env) -> napi::Result<sys::napi_value> + Send>, napi::Error>;

/// One queued settlement: the promise's deferred and its outcome.
struct Item {
    deferred: sys::napi_deferred,
    outcome: Outcome,
}

/// The environment's threadsafe function, shared with every thread that settles; `None` once
/// the environment's teardown has aborted it.
struct Slot(Mutex<Option<sys::napi_threadsafe_function>>);

// The raw handle is neither Send nor Sync, but calling a threadsafe function from any thread is
// its purpose, and the mutex orders every call before the teardown's abort.
unsafe impl Send for Slot {}
unsafe impl Sync for Slot {}

/// A pending promise's way back to its JS thread (sendable to any thread).
pub struct Pending {
    deferred: sys::napi_deferred,
    slot: Arc<Slot>,
}

// The deferred is only ever used on the JS thread, by `deliver`, after the threadsafe function
// carried it there.
unsafe impl Send for Pending {}

/// The JS-thread side of an environment's channel.
struct Local {
    env: sys::napi_env,
    tsfn: sys::napi_threadsafe_function,
    slot: Arc<Slot>,
    /// Promises created and not yet delivered; the threadsafe function is referenced while > 0.
    pending: Cell<usize>,
}

thread_local! {
    // One JS environment runs on a thread at a time (the main thread or a worker's); the
    // cleanup hook clears this before its environment is freed.
    static LOCAL: RefCell<Option<Rc<Local>>> = const { RefCell::new(None) };
}

/// A new promise and the [`Pending`] that settles it (JS thread only).
pub fn create<'e>(env: &'e Env) -> napi::Result<(Pending, Object<'e>)> {
    let local = local(env)?;
    let mut deferred = ptr::null_mut();
    let mut promise = ptr::null_mut();
    check_status!(
        unsafe { sys::napi_create_promise(env.raw(), &mut deferred, &mut promise) },
        "create a promise"
    )?;
    let n = local.pending.get();
    if n == 0 {
        check_status!(
            unsafe { sys::napi_ref_threadsafe_function(env.raw(), local.tsfn) },
            "reference the settle channel"
        )?;
    }
    local.pending.set(n + 1);
    Ok((
        Pending {
            deferred,
            slot: local.slot.clone(),
        },
        Object::from_raw(env.raw(), promise),
    ))
}

impl Pending {
    /// Resolves the promise with `value` (converted on the JS thread).
    pub fn resolve<T: ToNapiValue + Send + 'static>(self, value: T) {
        self.send(Ok(Box::new(move |env| unsafe {
            T::to_napi_value(env, value)
        })));
    }

    /// Rejects the promise with `error`.
    pub fn reject(self, error: napi::Error) {
        self.send(Err(error));
    }

    fn send(self, outcome: Outcome) {
        let item = Box::into_raw(Box::new(Item {
            deferred: self.deferred,
            outcome,
        }));
        let guard = self.slot.0.lock().unwrap_or_else(|p| p.into_inner());
        let queued = guard.is_some_and(|tsfn| {
            let status = unsafe {
                sys::napi_call_threadsafe_function(
                    tsfn,
                    item.cast(),
                    sys::ThreadsafeFunctionCallMode::nonblocking,
                )
            };
            status == sys::Status::napi_ok
        });
        drop(guard);
        if !queued {
            // The environment is gone (or going): nothing is left to settle.
            drop(unsafe { Box::from_raw(item) });
        }
    }
}

/// This thread's channel for `env`, created on first use.
fn local(env: &Env) -> napi::Result<Rc<Local>> {
    if let Some(l) = LOCAL.with(|l| l.borrow().clone()) {
        if l.env == env.raw() {
            return Ok(l);
        }
    }
    let l = Rc::new(open(env)?);
    LOCAL.with(|slot| *slot.borrow_mut() = Some(l.clone()));
    Ok(l)
}

/// Creates the environment's threadsafe function (unreferenced) and its teardown hook.
fn open(env: &Env) -> napi::Result<Local> {
    let raw = env.raw();
    let mut name = ptr::null_mut();
    check_status!(
        unsafe { sys::napi_create_string_utf8(raw, c"cycles_settle".as_ptr(), 13, &mut name) },
        "name the settle channel"
    )?;
    let mut tsfn = ptr::null_mut();
    check_status!(
        unsafe {
            sys::napi_create_threadsafe_function(
                raw,
                ptr::null_mut(),
                ptr::null_mut(),
                name,
                0,
                1,
                ptr::null_mut(),
                None,
                ptr::null_mut(),
                Some(deliver),
                &mut tsfn,
            )
        },
        "create the settle channel"
    )?;
    let abort = || unsafe {
        sys::napi_release_threadsafe_function(tsfn, sys::ThreadsafeFunctionReleaseMode::abort);
    };
    if let Err(e) = check_status!(
        unsafe { sys::napi_unref_threadsafe_function(raw, tsfn) },
        "unreference the settle channel"
    ) {
        abort();
        return Err(e);
    }
    let slot = Arc::new(Slot(Mutex::new(Some(tsfn))));
    let hook = Box::into_raw(Box::new(slot.clone()));
    if let Err(e) = check_status!(
        unsafe { sys::napi_add_env_cleanup_hook(raw, Some(teardown), hook.cast()) },
        "register the settle channel's teardown"
    ) {
        drop(unsafe { Box::from_raw(hook) });
        abort();
        return Err(e);
    }
    Ok(Local {
        env: raw,
        tsfn,
        slot,
        pending: Cell::new(0),
    })
}

/// Env cleanup hook: no settle may call the threadsafe function from here on.
unsafe extern "C" fn teardown(arg: *mut c_void) {
    let slot = unsafe { Box::from_raw(arg.cast::<Arc<Slot>>()) };
    let taken = slot.0.lock().unwrap_or_else(|p| p.into_inner()).take();
    if let Some(tsfn) = taken {
        unsafe {
            sys::napi_release_threadsafe_function(tsfn, sys::ThreadsafeFunctionReleaseMode::abort)
        };
    }
    LOCAL.with(|l| {
        let mut l = l.borrow_mut();
        if l.as_ref().is_some_and(|l| Arc::ptr_eq(&l.slot, &slot)) {
            *l = None;
        }
    });
}

/// The threadsafe function's callback, on the JS thread (or with a null env when teardown frees
/// what is still queued): settles one promise.
unsafe extern "C" fn deliver(
    env: sys::napi_env,
    _js_callback: sys::napi_value,
    _context: *mut c_void,
    data: *mut c_void,
) {
    let item = unsafe { Box::from_raw(data.cast::<Item>()) };
    if env.is_null() {
        return;
    }
    let Item { deferred, outcome } = *item;
    let value = outcome.and_then(|make| make(env));
    match value {
        Ok(v) => unsafe { sys::napi_resolve_deferred(env, deferred, v) },
        Err(e) => match unsafe { ToNapiValue::to_napi_value(env, e) } {
            Ok(v) => unsafe { sys::napi_reject_deferred(env, deferred, v) },
            Err(_) => unsafe { reject_plain(env, deferred) },
        },
    };
    LOCAL.with(|l| {
        if let Some(l) = l.borrow().as_ref().filter(|l| l.env == env) {
            let n = l.pending.get().saturating_sub(1);
            l.pending.set(n);
            if n == 0 {
                unsafe { sys::napi_unref_threadsafe_function(env, l.tsfn) };
            }
        }
    });
}

/// Last resort when even the rejection value cannot be made: a plain `Error`, so the promise
/// never stays pending.
unsafe fn reject_plain(env: sys::napi_env, deferred: sys::napi_deferred) -> sys::napi_status {
    let mut msg = ptr::null_mut();
    let mut err = ptr::null_mut();
    unsafe {
        sys::napi_create_string_utf8(env, c"settling the promise failed".as_ptr(), 27, &mut msg);
        sys::napi_create_error(env, ptr::null_mut(), msg, &mut err);
        sys::napi_reject_deferred(env, deferred, err)
    }
}
