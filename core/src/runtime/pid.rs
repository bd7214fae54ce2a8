//! This process's id without a system call per use.
//!
//! Core compares it on every call with the id of the process that built its runtime, its
//! lease timer and each thread's driven runtime (a forked child must not use the parent's),
//! which took six `getpid` calls per guarded lifecycle. The id is read once and forgotten in a
//! forked child by a `pthread_atfork` handler, so the child's next read is its own id.
//! Children made by `posix_spawn`, `vfork` or a raw `clone` run no handler, but they run no
//! code of this process either (they `exec`, or share the parent's memory until they do).

use std::sync::atomic::{AtomicU32, Ordering};

/// The id read last in this process; 0 when not read yet (or forgotten by a fork).
static PID: AtomicU32 = AtomicU32::new(0);

/// This process's id (`std::process::id()`), read once per process.
pub fn current() -> u32 {
    match PID.load(Ordering::Relaxed) {
        0 => read(),
        pid => pid,
    }
}

#[cfg(unix)]
fn read() -> u32 {
    use std::sync::atomic::AtomicBool;
    use std::sync::Once;

    static HANDLER: Once = Once::new();
    static REGISTERED: AtomicBool = AtomicBool::new(false);

    /// Runs in the child of `fork()`, before `fork` returns there: only an atomic store, which
    /// is async-signal-safe.
    extern "C" fn forget() {
        PID.store(0, Ordering::Relaxed);
    }

    HANDLER.call_once(|| {
        // SAFETY: `forget` stays valid for the life of the process and only stores an atomic.
        let rc = unsafe { libc::pthread_atfork(None, None, Some(forget)) };
        REGISTERED.store(rc == 0, Ordering::Relaxed);
    });
    let pid = std::process::id();
    // Stored only once the handler is registered (it runs before any later fork returns in
    // the child; a fork between the read and the store leaves the child's copy at 0). When
    // registering failed, every call reads the id again.
    if REGISTERED.load(Ordering::Relaxed) {
        PID.store(pid, Ordering::Relaxed);
    }
    pid
}

#[cfg(not(unix))]
fn read() -> u32 {
    // No fork here: the id never changes under a running process.
    let pid = std::process::id();
    PID.store(pid, Ordering::Relaxed);
    pid
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_is_the_process_id() {
        assert_eq!(current(), std::process::id());
        assert_eq!(current(), std::process::id(), "read again from the cache");
    }

    /// A forked child reads its own id, not the parent's cached one.
    #[cfg(unix)]
    #[test]
    fn a_forked_child_reads_its_own_id() {
        let parent = current();
        // SAFETY: the child calls only async-signal-safe functions (an atomic load and store,
        // getpid) and leaves through `_exit`.
        let child = unsafe { libc::fork() };
        assert!(child >= 0, "fork failed");
        if child == 0 {
            let ok = current() == unsafe { libc::getpid() } as u32 && current() != parent;
            unsafe { libc::_exit(if ok { 0 } else { 1 }) };
        }
        let mut status = 0;
        // SAFETY: waits for the child forked above.
        let waited = unsafe { libc::waitpid(child, &mut status, 0) };
        assert_eq!(waited, child);
        assert!(libc::WIFEXITED(status), "the child did not exit: {status}");
        assert_eq!(
            libc::WEXITSTATUS(status),
            0,
            "the child read another process's id"
        );
        assert_eq!(current(), parent);
    }
}
