//! `cycles-jvm`: the JNI library behind `dev.cycles:cycles-sdk` (libcycles_jvm). Translation
//! of the bridge only (docs/bindings.md, docs/jvm.md): every export of
//! `dev.cycles.internal.Native` is written once in a `natives!` block (`native`): the macro
//! emits the JNI symbol and runs the body inside `entry::entry`, which turns an error or a
//! panic (the bridge's `catch`) into the Java exception built by `CyclesException.fromNative`;
//! `Native.java` is generated from the same blocks.
//!
//! Threads: no native thread is ever attached to the JVM. Asynchronous work runs on core's
//! runtime and its result is queued (`completions`); a Java daemon thread polls the queue
//! and completes the `CompletableFuture`s, so nothing of ours can keep the JVM alive.
//! Objects cross as registry ids (`handles`), so a stale or closed id is an error
//! (IllegalStateException in Java), never a dangling pointer.

// Every export has the JNI signature its Java declaration fixes; ErrorFields travels on the
// cold path only.
#![allow(clippy::result_large_err, clippy::too_many_arguments)]

#[macro_use]
mod native;

mod client;
mod completions;
mod decode;
mod entry;
mod handles;
mod journal;
mod pricing;
mod server;
mod timing;
