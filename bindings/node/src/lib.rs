//! `cycles-node`: the napi addon behind the `cycles-sdk` npm package.
//!
//! Rules (docs/bindings.md): every behaviour lives in `cycles-core`, every host-neutral shape
//! in `cycles-bridge`; this crate translates only. Futures run on core's one runtime and
//! settle promises through one threadsafe function per environment (`settle_channel`; napi's
//! tokio runtime is not compiled in); a dropped future rejects its promise
//! (`promise::Settle`); every export catches panics (`errors::guard`); listeners are weak
//! threadsafe functions.

pub mod client;
mod errors;
pub mod fake_provider;
pub mod journal;
pub mod lifecycle;
pub mod pricing;
mod promise;
pub mod server;
mod settle_channel;
pub mod timing;

use cycles_core::runtime;
use napi::bindgen_prelude::Object;
use napi::Env;
use napi_derive::napi;

pub use client::NativeClient;
pub use lifecycle::{NativeActive, NativeLifecycle};
pub use server::NativeLocalServer;

/// Pins this addon's image before core's process-global runtime can exist: an addon loaded
/// only in a `worker_threads` worker would otherwise be unmapped while runtime threads still
/// run its code.
#[napi_derive::module_init]
fn init() {
    napi::bindgen_prelude::retain_current_module_for_unload_safety();
}

/// The addon's version (the crate's).
#[napi]
pub fn version() -> String {
    env!("CARGO_PKG_VERSION").to_string()
}

/// The `cycles` command (bindings/cli) on `args` (program name first), for the package's
/// `cycles-sdk` bin only: blocks the calling thread until the command ends and returns its
/// exit code. SIGINT gets its default action first, as in the `cycles` binary: Node's own
/// handler re-raises the signal expecting a one-shot disposition, which under the handler
/// `cycles serve` installs would re-enter forever; `serve` then returns on SIGINT.
#[napi]
pub fn run_cli(args: Vec<String>) -> napi::Result<u32> {
    errors::guard(|| {
        // SAFETY: signal(2) with SIG_DFL has no preconditions; this process is the bin's.
        #[cfg(unix)]
        unsafe {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
        }
        Ok(u32::from(cycles_cli::run(args)))
    })
}

/// Core's stable error table as JSON `[[name, code], ...]`: the TypeScript `CyclesError`
/// hierarchy is built from it.
#[napi]
pub fn error_codes_json() -> napi::Result<String> {
    errors::guard(|| {
        serde_json::to_string(&cycles_bridge::error_codes())
            .map_err(|e| errors::invalid(e.to_string()))
    })
}

/// The bridge's refinements of a kind as JSON `[[variant, name, code], ...]`: a subclass
/// each (`ClientClosedError`, `CallNotSentError`).
#[napi]
pub fn error_variants_json() -> napi::Result<String> {
    errors::guard(|| {
        serde_json::to_string(&cycles_bridge::error_variants())
            .map_err(|e| errors::invalid(e.to_string()))
    })
}

/// The message prefix of every error this addon throws or rejects with.
#[napi]
pub fn error_marker() -> String {
    errors::MARKER.to_string()
}

/// A deliberate panic in a sync export (`sync`) or in a task on core's runtime, so tests can
/// prove a panic surfaces as an INTERNAL `CyclesError` and never aborts the process.
#[napi(ts_return_type = "Promise<void> | void")]
pub fn debug_panic(env: &Env, sync: bool) -> napi::Result<Option<Object<'_>>> {
    errors::guard(|| {
        if sync {
            panic!("deliberate test panic");
        }
        promise::spawn(
            env,
            async {
                if true {
                    panic!("deliberate async test panic");
                }
                Ok(())
            },
            |()| (),
        )
        .map(Some)
    })
}

/// A promise whose task is aborted before it settles, so tests can prove the drop guard
/// rejects it instead of leaving Node waiting for ever.
#[napi(ts_return_type = "Promise<void>")]
pub fn debug_dropped_promise(env: &Env) -> napi::Result<Object<'_>> {
    errors::guard(|| {
        let (settle, promise, rt) = promise::deferred::<()>(env)?;
        let task = rt.spawn(async move {
            let _held = settle;
            std::future::pending::<()>().await;
        });
        task.abort();
        Ok(promise)
    })
}

/// Whether core's runtime is usable in this process.
#[napi]
pub fn runtime_ok() -> bool {
    runtime::handle().is_ok()
}
