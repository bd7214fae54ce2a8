//! `cycles_client`: one bridge `ClientHandle` (core's `CyclesClient`), its guarded lifecycle
//! (created on first use: guard, settler, background replay) and its event thread.
//! Operations go through the bridge's table as JSON in, JSON out.

use std::ffi::{c_char, c_void};
use std::ptr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cycles_bridge::args::Args;
use cycles_bridge::{
    client_of_options, ClientHandle, Connection, ErrorFields, Lifecycle, SettleOverrides,
};
use cycles_core::events::Level;

use crate::completion;
use crate::error::cycles_error;
use crate::events::{self, cycles_event_cb, Callback, Pump, Slot};
use crate::handle::{clear_opt, free_with, set_opt, try_callback, try_out, try_ref, with_ref};
use crate::panic::{block, guard};
use crate::status::cycles_status;
use crate::strings::{arg, into_raw, opt_arg};

/// A client of one Cycles server (opaque). Thread-safe: every function taking a
/// `cycles_client *` may be called from any thread concurrently, except `cycles_client_free`.
pub struct cycles_client {
    handle: ClientHandle,
    settle: SettleOverrides,
    life: Mutex<Option<Arc<Life>>>,
    callback: Slot,
}

/// The lifecycle and its event thread.
pub struct Life {
    /// The bridge lifecycle.
    pub lifecycle: Arc<Lifecycle>,
    pump: Pump,
}

fn options(json: Option<&str>) -> Result<Args, ErrorFields> {
    Ok(Args::parse(json.unwrap_or("{}"), "options")?)
}

impl cycles_client {
    fn new((handle, settle): (ClientHandle, SettleOverrides)) -> cycles_client {
        cycles_client {
            handle,
            settle,
            life: Mutex::new(None),
            callback: events::slot(),
        }
    }

    /// The bridge handle.
    pub fn handle(&self) -> &ClientHandle {
        &self.handle
    }

    /// The lifecycle, created on first use (the closed error once the client is closed).
    pub fn life(&self) -> Result<Arc<Life>, ErrorFields> {
        let mut slot = self.life.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(l) = slot.as_ref() {
            return Ok(l.clone());
        }
        let client = self.handle.live()?;
        let lifecycle = Arc::new(Lifecycle::new(
            client,
            self.handle.config(),
            self.settle.max_attempts,
            self.settle.replay_interval_ms,
        )?);
        let pump = Pump::start(lifecycle.clone(), self.callback.clone())?;
        let l = Arc::new(Life { lifecycle, pump });
        self.sync_event_floor(&l);
        *slot = Some(l.clone());
        Ok(l)
    }

    /// Events are serialised and queued only while a callback is registered: without one
    /// nobody sees them (the bridge skips them at the source). Stored under the callback's
    /// lock, so racing registrations leave the floor of the last.
    fn sync_event_floor(&self, life: &Life) {
        let callback = self.callback.lock().unwrap_or_else(|p| p.into_inner());
        life.lifecycle
            .set_event_floor(callback.is_registered().then_some(Level::Debug));
    }

    fn existing_life(&self) -> Option<Arc<Life>> {
        self.life.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

unsafe fn out_client(
    out: *mut *mut cycles_client,
    make: impl FnOnce() -> Result<cycles_client, ErrorFields>,
) -> Result<(), ErrorFields> {
    let out = try_out(out, "out")?;
    *out = Box::into_raw(Box::new(make()?));
    Ok(())
}

/// Creates a client of `base_url` with `api_key`; `tenant` (NULL: none) is the default
/// subject tenant. `options_json` (NULL: none) is a JSON object of optional settings:
/// `default_unit` (the unit of estimates given as bare numbers), `request_timeout_ms`,
/// `connect_timeout_ms`, `journal_dir`, `journal_enabled`, `journal_url` (a Redis journal,
/// `redis://host:6379/0`, instead of `journal_dir`: docs/journal.md, "Stores"; connected and
/// checked when the settlement engine starts), `max_concurrent_requests`,
/// `max_response_bytes` (default 1 MiB; a longer response body fails the call as a response
/// that is not the operation's), `settle_max_attempts`, `replay_interval_ms`; any other
/// member (a typo) is
/// `CYCLES_INVALID_ARGUMENT` naming it.
/// On success `*out` is a new client owned by the caller (free with `cycles_client_free`).
/// Does not block (no request is sent).
#[no_mangle]
pub unsafe extern "C" fn cycles_client_new(
    base_url: *const c_char,
    api_key: *const c_char,
    tenant: *const c_char,
    options_json: *const c_char,
    out: *mut *mut cycles_client,
    err: *mut *mut cycles_error,
) -> cycles_status {
    guard(err, || {
        out_client(out, || {
            let a = options(opt_arg(options_json, "options_json")?)?;
            let connection = Connection::Given {
                base_url: arg(base_url, "base_url")?,
                api_key: arg(api_key, "api_key")?,
                tenant: opt_arg(tenant, "tenant")?,
            };
            Ok(cycles_client::new(client_of_options(&a, connection)?))
        })
    })
}

/// Creates a client from the `CYCLES_*` environment variables (core's `Config::from_env`:
/// `CYCLES_BASE_URL`, `CYCLES_API_KEY`, `CYCLES_TENANT`, timeouts, `CYCLES_JOURNAL_DIR`,
/// `CYCLES_JOURNAL_ENABLED`, `CYCLES_UNIT`). `options_json` (NULL: none) may override any of
/// them but the base URL and key (`tenant` and the options of `cycles_client_new`); an
/// unknown member is `CYCLES_INVALID_ARGUMENT`. A missing or bad variable is
/// `CYCLES_CONFIG`. `*out` is owned by the caller.
#[no_mangle]
pub unsafe extern "C" fn cycles_client_from_env(
    options_json: *const c_char,
    out: *mut *mut cycles_client,
    err: *mut *mut cycles_error,
) -> cycles_status {
    guard(err, || {
        out_client(out, || {
            let a = options(opt_arg(options_json, "options_json")?)?;
            Ok(cycles_client::new(client_of_options(&a, Connection::Env)?))
        })
    })
}

unsafe fn out_string(out: *mut *mut c_char, s: &str) {
    set_opt(out, || into_raw(s));
}

/// Runs one operation of the runtime plane (blocking): `op` is its name
/// (`decide`, `create_reservation`, `list_reservations`, `get_reservation`, `commit_reservation`,
/// `release_reservation`, `extend_reservation`, `create_event`, `get_balances`, `get_evidence`,
/// `get_evidence_jwks`, `list_reservations_all`) and `args_json` its arguments
/// (docs/bindings.md, "Operations"). On success `*out_json` (NULL: not wanted) is
/// `{"status", "request_id", "trace_id", "rtt_us", "body"}` with the response body as a JSON
/// value; the caller frees it with `cycles_string_free`. Honours the client's timeouts.
/// Any thread; `CYCLES_RUNTIME` from an event callback or a runtime thread.
#[no_mangle]
pub unsafe extern "C" fn cycles_client_call(
    c: *const cycles_client,
    op: *const c_char,
    args_json: *const c_char,
    out_json: *mut *mut c_char,
    err: *mut *mut cycles_error,
) -> cycles_status {
    clear_opt(out_json);
    guard(err, || {
        let c = try_ref(c)?;
        let call = c
            .handle
            .prepare(arg(op, "op")?, arg(args_json, "args_json")?)?;
        let reply = block(call.run())??;
        // The body is spliced in as the exact text core produced (big integers kept).
        out_string(out_json, &reply.to_json());
        Ok(())
    })
}

/// The completion of `cycles_client_call_async`: `status` is `CYCLES_OK` with `out_json` (as
/// `cycles_client_call`'s, `len` bytes without the NUL) or an error status with `err` (the
/// other NULL). Both pointers are valid only during the call. Runs on the completion thread
/// (see `cycles_client_call_async`); it must not unwind and should return quickly.
pub type cycles_call_cb = Option<
    unsafe extern "C" fn(
        user_data: *mut c_void,
        status: cycles_status,
        out_json: *const c_char,
        len: usize,
        err: *const cycles_error,
    ),
>;

/// `cycles_client_call` without blocking, for event-loop applications: checks the arguments
/// (errors are returned here, and then `cb` is never called), starts the operation on core's
/// runtime and returns; `cb` is called exactly once with the result and `user_data`, on
/// libcycles' completion thread (`cycles-completions`, one for the process, callbacks one at a
/// time in completion order; a blocking `cycles_*` call there is refused with
/// `CYCLES_RUNTIME`: chain another `*_async` call instead). Work abandoned by
/// `cycles_shutdown` completes with `CYCLES_RUNTIME`. `user_data` must stay valid until the
/// callback. Any thread, including callbacks.
#[no_mangle]
pub unsafe extern "C" fn cycles_client_call_async(
    c: *const cycles_client,
    op: *const c_char,
    args_json: *const c_char,
    cb: cycles_call_cb,
    user_data: *mut c_void,
    err: *mut *mut cycles_error,
) -> cycles_status {
    guard(err, || {
        let c = try_ref(c)?;
        let f = try_callback(cb, "cb")?;
        let call = c
            .handle
            .prepare(arg(op, "op")?, arg(args_json, "args_json")?)?;
        let ud = completion::UserData(user_data);
        completion::submit(call.run(), move |r| {
            let ud = ud;
            let (status, e) = completion::status_and_error(&r);
            let text = r
                .ok()
                .map(|reply| crate::strings::c_string(&reply.to_json()));
            let (ptr, len) = text
                .as_ref()
                .map_or((ptr::null(), 0), |t| (t.as_ptr(), t.as_bytes().len()));
            // SAFETY: the callback's contract; `text` and `e` live across the call.
            unsafe { f(ud.0, status, ptr, len, completion::error_ptr(&e)) };
        })
    })
}

/// Registers the event callback of this client (NULL `cb`: none), replacing any earlier
/// one. `user_data` is passed back unchanged; it must stay valid until another callback is
/// registered or the client is freed. Events (docs/events.md) arrive on the client's event
/// thread (see `cycles_event_cb`); starts the client's lifecycle if it has not started.
/// While no callback is registered, events are not kept (none is built at all).
/// Any thread.
#[no_mangle]
pub unsafe extern "C" fn cycles_client_set_event_callback(
    c: *const cycles_client,
    cb: cycles_event_cb,
    user_data: *mut c_void,
    err: *mut *mut cycles_error,
) -> cycles_status {
    guard(err, || {
        let c = try_ref(c)?;
        *c.callback.lock().unwrap_or_else(|p| p.into_inner()) = Callback::new(cb, user_data);
        let life = c.life()?;
        c.sync_event_floor(&life);
        Ok(())
    })
}

/// Replays every pending settlement of this client's journal once (blocking). `*out_json`
/// (NULL: not wanted) is the drain report (docs/bindings.md); free it with
/// `cycles_string_free`.
#[no_mangle]
pub unsafe extern "C" fn cycles_client_flush(
    c: *const cycles_client,
    out_json: *mut *mut c_char,
    err: *mut *mut cycles_error,
) -> cycles_status {
    clear_opt(out_json);
    guard(err, || {
        let l = try_ref(c)?.life()?;
        let report = block(l.lifecycle.flush())?;
        out_string(out_json, &report);
        Ok(())
    })
}

/// Replays pending settlements until none is left or `timeout_ms` passed (blocking);
/// `*out_json` as `cycles_client_flush`.
#[no_mangle]
pub unsafe extern "C" fn cycles_client_drain(
    c: *const cycles_client,
    timeout_ms: u64,
    out_json: *mut *mut c_char,
    err: *mut *mut cycles_error,
) -> cycles_status {
    clear_opt(out_json);
    guard(err, || {
        let l = try_ref(c)?.life()?;
        let report = block(l.lifecycle.drain(Duration::from_millis(timeout_ms)))?;
        out_string(out_json, &report);
        Ok(())
    })
}

fn close_now(c: &cycles_client, timeout: Duration, wait: bool) -> Result<String, ErrorFields> {
    let report = match c.existing_life() {
        Some(l) => {
            let work = l.lifecycle.close(timeout);
            let report = if wait {
                block(work)
            } else {
                // Dropping the work marks the lifecycle drained: the event thread ends.
                drop(work);
                Ok(String::new())
            };
            l.pump.join();
            report?
        }
        None => cycles_bridge::guard::empty_drain_json(),
    };
    c.handle.close();
    Ok(report)
}

/// Closes the client (blocking, idempotent): later calls fail with `CYCLES_RUNTIME`
/// (variant `"closed"`); the background replay stops, pending settlements are drained for
/// at most `timeout_ms` (0: none; they stay journaled for the next process), the event thread
/// delivers what is queued and ends. `*out_json` (NULL: not wanted) is the drain report.
/// Call from your own thread (not from the event callback). The client must still be freed.
#[no_mangle]
pub unsafe extern "C" fn cycles_client_close(
    c: *const cycles_client,
    timeout_ms: u64,
    out_json: *mut *mut c_char,
    err: *mut *mut cycles_error,
) -> cycles_status {
    clear_opt(out_json);
    guard(err, || {
        let c = try_ref(c)?;
        crate::panic::may_block()?;
        let report = close_now(c, Duration::from_millis(timeout_ms), true)?;
        out_string(out_json, &report);
        Ok(())
    })
}

/// Whether the client is closed; false for NULL.
#[no_mangle]
pub unsafe extern "C" fn cycles_client_is_closed(c: *const cycles_client) -> bool {
    with_ref(c, |c| c.handle.is_closed())
}

/// Frees a client (NULL: no-op). Closes it first without a drain when it is open (pending
/// settlements stay journaled) and joins its event thread. Guards begun on it stay valid and
/// must be freed on their own. Not concurrently with other calls on the same client.
#[no_mangle]
pub unsafe extern "C" fn cycles_client_free(c: *mut cycles_client) {
    free_with(c, |c| {
        let b = Box::from_raw(c);
        let wait = crate::panic::may_block().is_ok() && cycles_core::runtime::handle().is_ok();
        let _ = close_now(&b, Duration::ZERO, wait);
        drop(b);
    });
}
