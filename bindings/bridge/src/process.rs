//! The process-exit call: core's terminal runtime shutdown, as a binding's exit path (C's
//! `cycles_shutdown`, a shutdown hook) makes it.
//!
//! Python does not call it: its exit courtesy is the lifecycle's bounded `close` drain
//! (docs/bindings.md, process lifetime). (It once could not: pyo3-async-runtimes pinned
//! core's runtime; the asyncio completion queue does not need that.)

use std::time::Duration;

use cycles_core::runtime;
use serde_json::json;

use crate::error::ErrorFields;
use crate::guard::pending_json;

/// Shuts core down for the rest of the process (`cycles_core::runtime::shutdown`): stops
/// every heartbeat and background replay, drains pending settlements for at most `timeout`,
/// joins the runtime's threads. Returns
/// `{"already_shut_down": bool, "settled": n, "remaining": [pending record, ...],
/// "unjournaled": [reservation id, ...]}` (settlements the journal could not take, logged as
/// lost: the next process cannot replay them); a second
/// call reports `already_shut_down: true`. Every later call fails with RUNTIME. Call it from a
/// host thread with the host's lock released, never from a runtime worker (RUNTIME error).
pub fn shutdown(timeout: Duration) -> Result<String, ErrorFields> {
    let r = runtime::shutdown(timeout)?;
    Ok(json!({
        "already_shut_down": r.already_shut_down,
        "settled": r.settled,
        "remaining": r.remaining.iter().map(pending_json).collect::<Vec<_>>(),
        "unjournaled": r.unjournaled,
    })
    .to_string())
}
