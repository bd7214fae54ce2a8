//! The process-exit drain and the debug panics the boundary tests use.

use std::time::Duration;

use crate::error::{ffi, Result};
use crate::work::run;

/// Core's terminal shutdown: drain pending settlements for at most `timeout_ms`, stop the
/// runtime's threads; the report JSON. Every later call fails with RUNTIME. Call it last,
/// from a host thread (Swift apps and processes that must not wait on the JVM's exit).
#[uniffi::export]
pub fn shutdown(timeout_ms: u64) -> Result<String> {
    ffi(|| cycles_bridge::process::shutdown(Duration::from_millis(timeout_ms)))
}

/// Panics on purpose, here: the tests check it surfaces as INTERNAL.
#[uniffi::export]
pub fn debug_panic(message: String) -> Result<()> {
    ffi(|| panic!("{message}"))
}

/// Panics on purpose inside work on core's runtime: INTERNAL too.
#[uniffi::export]
pub async fn debug_panic_async(message: String) -> Result<()> {
    run(Box::pin(async move { panic!("{message}") })).await
}
