//! Heartbeat timing: PURE functions, no clock and no I/O.
//!
//! - [`millis`]: overflow-safe millisecond arithmetic (overflow is infinity).
//! - [`primary`]: the NORMATIVE schedule when responses carry `remaining_ttl_ms`.
//! - [`retry`]: extend failure handling: lead estimate, retry window, Retry-After.
//! - [`timeout`]: the enforced per-extend timeout derived from the lease.
//! - [`planner`]: the state machine that strings the rules together for one lease.
//! - [`fallback`]: the NON-NORMATIVE planner for servers without `remaining_ttl_ms`.
//!
//! Every language binding exposes these same functions, and `conformance/vectors/heartbeat.json`
//! pins their results.

pub mod backoff;
pub mod fallback;
pub mod millis;
pub mod planner;
pub mod primary;
pub mod retry;
pub mod timeout;

pub use fallback::{FallbackPlanner, FallbackRegime};
pub use millis::{Millis, SignedMillis};
pub use planner::{Decision, ExtendFailure, FailureMath, KeyUse, PrimaryPlanner, StopReason};
pub use primary::Schedule;
pub use retry::RetryAfter;
pub use timeout::{ExtendTimeout, TimeoutSource};
