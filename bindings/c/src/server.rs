//! `cycles_local_server`: `cycles-local-server` in-process on core's runtime, for users' own
//! tests (as Python's `cycles.testing.LocalServer`). Loopback only; not for production.

use cycles_bridge::server::Server;
use cycles_bridge::ErrorFields;
use std::ffi::{c_char, CString};

use crate::error::cycles_error;
use crate::handle::{free_with, try_out, try_ref, with_ref};
use crate::panic::guard;
use crate::status::cycles_status;
use crate::strings::{arg, c_string, into_raw, opt_arg};

/// A running local Cycles server (opaque). Thread-safe. Free with `cycles_local_server_free`.
pub struct cycles_local_server {
    inner: Server,
    url: CString,
    api_key: CString,
    tenant: CString,
}

/// Starts a local server on 127.0.0.1 (blocking; an ephemeral port unless `config_json`
/// sets `bind`). `config_json` (NULL: defaults: tenant `acme`, key `cycles-local-key`, a
/// `tenant:acme` budget of 10 000 000 000 USD_MICROCENTS) is the server's `ServerConfig`
/// (conformance/server/README.md); omitted fields keep their defaults, an unknown key is
/// `CYCLES_INVALID_ARGUMENT` naming it (the bridge's `server::Server`). `*out` is owned by the
/// caller.
#[no_mangle]
pub unsafe extern "C" fn cycles_local_server_start(
    config_json: *const c_char,
    out: *mut *mut cycles_local_server,
    err: *mut *mut cycles_error,
) -> cycles_status {
    guard(err, || {
        let out = try_out(out, "out")?;
        let start = Server::start(opt_arg(config_json, "config_json")?)?;
        // On core's runtime, where the server's tasks live: a call driven on a busy caller
        // thread (the bridge's blocking path) would leave them without a driver.
        crate::panic::may_block()?;
        let server = cycles_core::runtime::handle()?.block_on(start)?;
        *out = Box::into_raw(Box::new(cycles_local_server {
            url: c_string(server.url()),
            api_key: c_string(server.api_key()),
            tenant: c_string(server.tenant()),
            inner: server,
        }));
        Ok(())
    })
}

/// `http://127.0.0.1:PORT` (no trailing slash); owned by the server. NULL for NULL.
#[no_mangle]
pub unsafe extern "C" fn cycles_local_server_url(s: *const cycles_local_server) -> *const c_char {
    with_ref(s, |s| s.url.as_ptr())
}

/// The API key of the first configured tenant; owned by the server.
#[no_mangle]
pub unsafe extern "C" fn cycles_local_server_api_key(
    s: *const cycles_local_server,
) -> *const c_char {
    with_ref(s, |s| s.api_key.as_ptr())
}

/// The first configured tenant; owned by the server.
#[no_mangle]
pub unsafe extern "C" fn cycles_local_server_tenant(
    s: *const cycles_local_server,
) -> *const c_char {
    with_ref(s, |s| s.tenant.as_ptr())
}

unsafe fn with<T>(
    s: *const cycles_local_server,
    f: impl FnOnce(&Server) -> Result<T, ErrorFields>,
) -> Result<T, ErrorFields> {
    f(&try_ref(s)?.inner)
}

/// The server's ledger (every applied mutation, `LedgerEntry[]`) as JSON; `*out_json` is
/// freed with `cycles_string_free`.
#[no_mangle]
pub unsafe extern "C" fn cycles_local_server_ledger(
    s: *const cycles_local_server,
    out_json: *mut *mut c_char,
    err: *mut *mut cycles_error,
) -> cycles_status {
    guard(err, || {
        let out_json = try_out(out_json, "out_json")?;
        let text = with(s, Server::ledger_json)?;
        *out_json = into_raw(&text);
        Ok(())
    })
}

/// The requests the server received (`RequestRecord[]`) as JSON; freed by the caller.
#[no_mangle]
pub unsafe extern "C" fn cycles_local_server_requests(
    s: *const cycles_local_server,
    out_json: *mut *mut c_char,
    err: *mut *mut cycles_error,
) -> cycles_status {
    guard(err, || {
        let out_json = try_out(out_json, "out_json")?;
        let text = with(s, Server::requests_json)?;
        *out_json = into_raw(&text);
        Ok(())
    })
}

/// Adds a scripted fault (a `FaultRule` as JSON, conformance/server/README.md).
#[no_mangle]
pub unsafe extern "C" fn cycles_local_server_add_fault(
    s: *const cycles_local_server,
    rule_json: *const c_char,
    err: *mut *mut cycles_error,
) -> cycles_status {
    guard(err, || {
        let rule = arg(rule_json, "rule_json")?;
        with(s, |s| s.add_fault(rule))
    })
}

/// Removes every fault rule.
#[no_mangle]
pub unsafe extern "C" fn cycles_local_server_clear_faults(
    s: *const cycles_local_server,
    err: *mut *mut cycles_error,
) -> cycles_status {
    guard(err, || with(s, Server::clear_faults))
}

/// Moves the server's clock forward by `ms` (lease expiry without waiting).
#[no_mangle]
pub unsafe extern "C" fn cycles_local_server_advance_clock(
    s: *const cycles_local_server,
    ms: u64,
    err: *mut *mut cycles_error,
) -> cycles_status {
    guard(err, || with(s, |s| s.advance_clock(ms)))
}

fn stop(s: &cycles_local_server, wait: bool) -> Result<(), ErrorFields> {
    // Not waiting (no runtime, or after fork): the shutdown is dropped unrun, and the server
    // with it, as before the bridge's wrapper.
    if let Some(work) = s.inner.stop() {
        if wait {
            crate::panic::may_block()?;
            cycles_core::runtime::handle()?.block_on(work);
        }
    }
    Ok(())
}

/// Stops the server (blocking; idempotent): it closes its connections and stops accepting.
#[no_mangle]
pub unsafe extern "C" fn cycles_local_server_stop(
    s: *const cycles_local_server,
    err: *mut *mut cycles_error,
) -> cycles_status {
    guard(err, || stop(try_ref(s)?, true))
}

/// Frees the server (NULL: no-op), stopping it first when it still runs.
#[no_mangle]
pub unsafe extern "C" fn cycles_local_server_free(s: *mut cycles_local_server) {
    free_with(s, |s| {
        let b = Box::from_raw(s);
        let wait = crate::panic::may_block().is_ok() && cycles_core::runtime::handle().is_ok();
        let _ = stop(&b, wait);
    });
}
