//! `cycles_shutdown` (core's terminal runtime shutdown through the bridge) and the debug
//! export that proves panics become `CYCLES_INTERNAL`.

use std::ffi::c_char;
use std::time::Duration;

use cycles_bridge::process;

use crate::error::cycles_error;
use crate::handle::{clear_opt, set_opt};
use crate::panic::{block, guard};
use crate::status::cycles_status;
use crate::strings::into_raw;

/// Ends cycles-core for the rest of the process (blocking, terminal): every heartbeat and
/// background replay stops, pending settlements are drained for at most `timeout_ms` (what
/// is left stays journaled for the next process), the runtime's threads are joined. Every
/// later call fails with `CYCLES_RUNTIME`. Close (and free) your clients first when their
/// drain reports matter. `*out_json` (NULL: not wanted) is
/// `{"already_shut_down", "settled", "remaining", "unjournaled"}` (`unjournaled`: settlements
/// the journal could not take, logged as lost); a second call reports
/// `already_shut_down: true`. Call it last, from your own thread (`CYCLES_RUNTIME` from a
/// callback or a runtime thread, or in a forked child).
#[no_mangle]
pub unsafe extern "C" fn cycles_shutdown(
    timeout_ms: u64,
    out_json: *mut *mut c_char,
    err: *mut *mut cycles_error,
) -> cycles_status {
    clear_opt(out_json);
    guard(err, || {
        crate::panic::may_block()?;
        let report = process::shutdown(Duration::from_millis(timeout_ms))?;
        // After the runtime: abandoned async work has queued its RUNTIME completions.
        crate::completion::stop();
        set_opt(out_json, || into_raw(&report));
        Ok(())
    })
}

/// For tests: panics deliberately, inside the export (`on_runtime` false) or in work on
/// core's runtime that the export waits for (`on_runtime` true). Returns `CYCLES_INTERNAL`
/// with the panic's message in `*err`; never unwinds into C.
#[no_mangle]
pub unsafe extern "C" fn cycles_debug_panic(
    on_runtime: bool,
    err: *mut *mut cycles_error,
) -> cycles_status {
    guard(err, || {
        if on_runtime {
            block(async {
                if true {
                    panic!("deliberate test panic on the runtime");
                }
            })?;
            Ok(())
        } else {
            panic!("deliberate test panic")
        }
    })
}
