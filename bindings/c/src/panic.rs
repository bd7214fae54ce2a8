//! The panic boundary: every export runs its body through one of these, so a panic never
//! unwinds into C (that would be undefined behaviour). Each is a thin adapter of the bridge's
//! `catch_panic` (the bindings' one `catch_unwind`) to a C return shape: a fallible export
//! returns `CYCLES_INTERNAL` with the panic's message in its error; an accessor returns its
//! default (NULL, 0, false); a free returns nothing.

use cycles_bridge::{catch, catch_panic, ErrorFields};

use cycles_bridge::task;

use crate::error::{cycles_error, report};
use crate::status::cycles_status;

/// Runs a fallible export body: `Ok` is `CYCLES_OK`; an error or a panic is written to `err`
/// (when not NULL) and its status returned.
///
/// # Safety
/// `err` is NULL or valid for a write.
pub unsafe fn guard(
    err: *mut *mut cycles_error,
    f: impl FnOnce() -> Result<(), ErrorFields>,
) -> cycles_status {
    crate::handle::clear_opt(err);
    match catch(f) {
        Ok(()) => cycles_status::CYCLES_OK,
        Err(fields) => report(err, fields),
    }
}

/// Runs an infallible export body; a panic gives `T::default()`.
pub fn or_default<T: Default>(f: impl FnOnce() -> T) -> T {
    catch_panic(f).unwrap_or_default()
}

/// Runs a free: a panic in a destructor is swallowed (the memory may leak, the process lives).
pub fn abort_free(f: impl FnOnce()) {
    let _ = catch_panic(f);
}

/// RUNTIME unless the caller may block: a blocking export called on a runtime thread or in an
/// event callback (whose thread is inside the runtime's context) would wait for work that
/// needs the very thread it holds.
pub fn may_block() -> Result<(), ErrorFields> {
    if tokio::runtime::Handle::try_current().is_ok() {
        return Err(ErrorFields::from(cycles_core::Error::runtime(
            "a blocking cycles call was made from an event callback or a runtime thread; \
             call it from your own thread",
        )));
    }
    Ok(())
}

/// Runs `work` on core and waits for it on this thread (RUNTIME when this thread may not
/// block, see [`may_block`]; INTERNAL when the work panicked). A thread that keeps calling has
/// its calls driven on itself (`task::start`). Request timeouts are core's (the client's
/// configured ones), so the wait itself needs no bound.
pub fn block<T: Send + 'static>(
    work: impl std::future::Future<Output = T> + Send + 'static,
) -> Result<T, ErrorFields> {
    may_block()?;
    task::start(work)?.finish()
}
