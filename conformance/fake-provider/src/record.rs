//! The request recorder: one record per request that reached a provider route (the
//! `/_fake/` admin routes excluded), in arrival order.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

use crate::config::Endpoint;

/// One request the fake provider received.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RequestRecord {
    /// 0-based position in the log (since the last reset).
    pub seq: u64,
    /// 0-based index among provider calls (POSTs to one of the three endpoints), the index a
    /// fault rule's `call` matches; `None` for any other request.
    pub call: Option<u64>,
    /// HTTP method.
    pub method: String,
    /// Request path (without the query).
    pub path: String,
    /// The endpoint the path names, if any.
    pub endpoint: Option<Endpoint>,
    /// Every request header, names in lower case (repeated headers joined with ", ").
    pub headers: BTreeMap<String, String>,
    /// The body parsed as JSON; `null` when empty or not JSON (then see `body_text`).
    pub body: Value,
    /// The body as text when it is not JSON.
    pub body_text: Option<String>,
    /// The body's `model`.
    pub model: Option<String>,
    /// The body's `stream`.
    pub stream: bool,
    /// The output bound the provider saw (`max_tokens`, `max_completion_tokens`, the
    /// smaller of the two when both; `max_output_tokens`).
    pub output_bound: Option<u64>,
    /// The HTTP status answered (200 for a cut stream too).
    pub status: u16,
    /// The kind of the fault injected, if one was.
    pub fault: Option<String>,
    /// Prompt tokens by the token rule (answered requests only).
    pub prompt_tokens: Option<u64>,
    /// Completion tokens generated (answered requests only; a cut stream's are its full
    /// reply's, of which only part was sent).
    pub completion_tokens: Option<u64>,
}
