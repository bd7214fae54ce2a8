//! `cycles-bridge`: everything a cycles binding needs that is not host syntax.
//!
//! Every binding (Python today; C, Node and the JVM next) is a thin layer of host translation
//! over this crate, which is itself a thin layer over `cycles-core`: behaviour stays in core,
//! the bridge fixes the boundary's shapes once (docs/bindings.md).
//!
//! - [`args`]: JSON arguments read member by member from their exact text.
//! - [`error`]: the error fields every host exception is built from (core's stable kinds).
//! - [`ops`]: the operation table, request JSON in, response JSON plus transport facts out.
//! - [`guard`]: guard specs in, finished / settlement / drain JSON out.
//! - [`lifecycle`]: the guarded lifecycle handle and the event pump (the host-callback channel).
//! - [`process`]: the process-exit call (core's terminal runtime shutdown).
//! - [`server`]: the local Cycles server every host's `LocalServer` wraps (config checked).
//! - [`fake_provider`]: the fake model provider every host's `FakeProvider` wraps.
//! - [`task`]: running work on core's runtime and waiting for it from a host thread.
//! - [`timing`]: the boundary names of core's pure timing types (regimes, failures, keys).
//! - [`timing_json`]: core's pure heartbeat math as JSON in, JSON out (the vectors' encoding).
//! - [`journal_json`]: journal records and the pending scan as JSON.
//! - [`pricing_json`]: core's pure pricing (estimate, price table, caps, actual) as JSON.
//! - [`provider_call`]: one guarded provider call metered (core's `Meter`) and settled.
//!
//! Threading rule: a host is never called from a tokio worker or under a core lock. Core's
//! event callback only pushes JSON into a channel; the host drains it on its own thread.

// ErrorFields is large (a dozen host-facing fields) but only travels on the cold error path,
// once per failed call, straight to the host: boxing it would only add an allocation.
#![allow(clippy::result_large_err, clippy::large_enum_variant)]

pub mod args;
pub mod error;
pub mod fake_provider;
pub mod guard;
pub mod journal_json;
pub mod lifecycle;
pub mod ops;
pub mod options;
pub mod pricing_json;
pub mod process;
pub mod provider_call;
pub mod server;
pub mod task;
pub mod timing;
pub mod timing_json;

pub use error::{
    catch, catch_panic, error_codes, error_variants, panic_message, ErrorFields, INTERNAL_CODE,
    INTERNAL_NAME,
};
pub use guard::SpecDefaults;
pub use lifecycle::{Active, EventPump, LazyLifecycle, Lifecycle, SettleOverrides};
pub use ops::{
    client_of_options, decode_captured, headers_from_json, ClientHandle, ClientOptions, Connection,
    Op, Reply,
};
