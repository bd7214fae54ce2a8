//! What a model call costs: PURE functions (no clock, no I/O) every integration calls, so
//! every language charges the same amount for the same call.
//!
//! The rules, in the order an integration applies them:
//! 1. [`tokens`]: the prompt-token estimate of a provider request
//!    (`Σ per message: 4 + Σ ceil(chars / 4)`) and its output bound (the smallest of
//!    `max_tokens` / `max_completion_tokens` / `max_output_tokens`, or a configured default).
//! 2. [`caps`]: under `ALLOW_WITH_CAPS`, the output bound lowered to `caps.max_tokens`, and
//!    the tools the caps allow (the spec's precedence: a non-empty allowlist wins).
//! 3. [`table`]: the price of input and output tokens in the budget's unit, integers per
//!    million tokens, one rounding up per call; unit `TOKENS` needs no table.
//! 4. [`charge`]: estimate = price(prompt estimate, output bound); actual = price(the usage
//!    the provider reported, and only that); commit, or release when nothing was reported.
//!
//! 5. [`wire`]: where each provider API keeps its bound and tools, and reports usage: the
//!    caps rewrite of a request and the usage of a response or stream event.
//!    [`reading`] is what a body or event says (its kind, failure and usage counts), read
//!    from a parsed document or straight from the JSON text.
//! 6. [`meter`]: one call from its estimate to its settlement, steps 4 and 5 with the usage
//!    between them kept (what an integration holds per call).
//!
//! `conformance/vectors/pricing.json` pins every rule; the bridge's `pricing_json` exposes
//! the same functions as JSON for hosts.

pub mod caps;
pub mod charge;
pub mod meter;
pub mod reading;
pub mod table;
pub mod tokens;
pub mod wire;

pub use caps::{CappedBound, ToolFilter};
pub use charge::{Settlement, Usage};
pub use meter::Meter;
pub use reading::Reading;
pub use table::{Price, PriceTable, Pricing};
pub use wire::{Api, CapsPlan};
