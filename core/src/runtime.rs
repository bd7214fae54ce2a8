//! The one process-wide tokio runtime that bindings run core on (binding rule 2).
//!
//! It is created lazily on first use. A forked child inherits the parent's memory but not
//! its worker threads, so using the inherited runtime would hang forever; the creating pid
//! is recorded and any use from another pid fails with a clear [`ErrorKind::Runtime`] error.
//!
//! [`ErrorKind::Runtime`]: crate::ErrorKind::Runtime

use std::sync::OnceLock;

use tokio::runtime::Runtime;

use crate::error::Error;

struct Shared {
    pid: u32,
    runtime: Runtime,
}

static SHARED: OnceLock<Result<Shared, String>> = OnceLock::new();

/// Upper bound of the runtime's blocking pool.
const BLOCKING_THREADS: usize = 32;

/// The shared multi-thread runtime, created on first call.
///
/// Fails if the runtime could not be built, or if called in a process other than the one
/// that created it (i.e. after `fork()`); a child process must not use core at all once the
/// parent has (the journal and leases belong to the parent), so there is no re-creation.
pub fn runtime() -> Result<&'static Runtime, Error> {
    let shared = SHARED.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .thread_name("cycles-core")
            // Blocking work here is short journal file I/O, plus (in the Python binding)
            // handing each finished awaitable back under the GIL, which serialises anyway:
            // tokio's default of 512 threads only buys memory (a burst of 10,000 asyncio
            // completions grew the pool to hundreds of threads waiting for the GIL).
            .max_blocking_threads(BLOCKING_THREADS)
            .build()
            .map(|runtime| Shared {
                pid: std::process::id(),
                runtime,
            })
            .map_err(|e| e.to_string())
    });
    match shared {
        Ok(s) => {
            check_pid(s.pid, std::process::id())?;
            Ok(&s.runtime)
        }
        Err(e) => Err(Error::runtime(format!(
            "cannot start the cycles-core runtime: {e}"
        ))),
    }
}

/// The fork check, separated so it can be tested without forking.
fn check_pid(owner: u32, current: u32) -> Result<(), Error> {
    if owner == current {
        Ok(())
    } else {
        Err(Error::runtime(format!(
            "the cycles-core runtime was created in process {owner} and cannot be used in \
             process {current} (after fork()); create clients only in the child, before any \
             use of cycles in the parent, or use spawn instead of fork"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    #[test]
    fn runtime_is_shared_and_works() {
        let a = runtime().unwrap() as *const Runtime;
        let b = runtime().unwrap() as *const Runtime;
        assert_eq!(a, b);
        assert_eq!(runtime().unwrap().block_on(async { 1 + 1 }), 2);
    }

    #[test]
    fn pid_mismatch_is_a_clear_error() {
        assert!(check_pid(5, 5).is_ok());
        let e = check_pid(5, 6).unwrap_err();
        assert_eq!(e.kind(), &ErrorKind::Runtime);
        assert!(e.message().contains("fork"));
    }
}
