//! `cycles-uniffi`: the uniffi binding of the bridge (`libcycles_uniffi`), from which Kotlin
//! and Swift bindings are generated (docs/kotlin.md, docs/swift.md). Translation only, like
//! `bindings/jvm` and `bindings/node`: every export converts host values to the bridge's
//! strings and structs and back; behaviour stays in core, shapes in the bridge.
//!
//! - [`error`]: the one error type (the bridge's `ErrorFields`), core's error table, the
//!   panic boundary of every synchronous export.
//! - [`work`]: how an async export runs the bridge's work on core's runtime.
//! - [`client`]: `Client`: options, every runtime operation, the guarded lifecycle's client
//!   half (begin, flush, drain, close) and the event queue.
//! - [`guard`]: `Guard`: a running guarded action (usage, caps, decision, release, finish).
//! - [`server`]: `LocalServer` for tests.
//! - [`pure`]: core's pure functions: timing (and both planners), journal helpers, pricing,
//!   the captured-response decoder.
//! - [`process`]: the process-exit drain and the debug panics the tests use.
//!
//! Operations, guard specs and results cross as the bridge's JSON (docs/bindings.md), not as
//! uniffi records: the records would be a hand-written copy of core's models, which the
//! generator (`bindings/codegen`) exists to avoid (docs/kotlin.md, "Why JSON").
//!
//! Async exports map to Kotlin `suspend` and Swift `async`. Their work is a task on core's
//! runtime ([`work::run`]); uniffi's future only waits for it, so a host that stops waiting (a
//! cancelled coroutine) never cancels a settlement.

// ErrorFields travels on the cold error path only.
#![allow(clippy::result_large_err)]

uniffi::setup_scaffolding!();

pub mod client;
pub mod error;
pub mod guard;
pub mod process;
pub mod pure;
pub mod server;
pub mod work;
