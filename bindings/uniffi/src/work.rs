//! Async exports: the bridge's work runs as its own task on core's runtime and uniffi's
//! future only waits for its result (the bridge's `task::joined`). A host that drops the wait
//! (a cancelled Kotlin coroutine, a cancelled Swift task) leaves the task running, so a
//! settlement or release that started always completes; a panic in the work is INTERNAL.
//! The host is resumed by the waker of the task's join handle, outside every core lock.

use cycles_bridge::task::{self, Work};
use cycles_bridge::ErrorFields;

use crate::error::Result;

/// Waits for `work` run on core's runtime.
pub async fn run<T: Send + 'static>(work: Work<std::result::Result<T, ErrorFields>>) -> Result<T> {
    Ok(task::joined(work).await?)
}

/// Waits for infallible `work` run on core's runtime.
pub async fn run_ok<T: Send + 'static>(work: Work<T>) -> Result<T> {
    run(Box::pin(async move { Ok(work.await) })).await
}
