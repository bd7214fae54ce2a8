//! The fake provider's configuration and its scripted faults. Every struct refuses unknown
//! keys (`deny_unknown_fields`), so a misspelt setting is an error naming it instead of a
//! provider silently started without it.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::net::SocketAddr;

/// The reply every model gives unless configured otherwise (9 tokens by the token rule).
pub const DEFAULT_REPLY: &str = "This is a deterministic reply from the fake provider.";

/// Full configuration of a [`crate::FakeProvider`]; every field is optional.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(default, deny_unknown_fields)]
pub struct FakeConfig {
    /// Address to bind; port 0 picks a free port.
    pub bind: SocketAddr,
    /// The reply text of every model without an entry in `replies`.
    pub reply: String,
    /// Reply text per model name (exact match).
    pub replies: BTreeMap<String, String>,
    /// Fault rules, matched in order (more can be added at run time).
    pub faults: Vec<FaultRule>,
}

impl Default for FakeConfig {
    fn default() -> Self {
        FakeConfig {
            bind: SocketAddr::from(([127, 0, 0, 1], 0)),
            reply: DEFAULT_REPLY.to_string(),
            replies: BTreeMap::new(),
            faults: Vec::new(),
        }
    }
}

/// One of the three endpoints the fake provider speaks. Serde: `"chat_completions"`,
/// `"responses"`, `"messages"`.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq, Hash)]
#[serde(rename_all = "snake_case")]
pub enum Endpoint {
    /// OpenAI Chat Completions, `POST /v1/chat/completions`.
    ChatCompletions,
    /// OpenAI Responses, `POST /v1/responses`.
    Responses,
    /// Anthropic Messages, `POST /v1/messages`.
    Messages,
}

impl Endpoint {
    /// The request path.
    pub fn path(self) -> &'static str {
        match self {
            Endpoint::ChatCompletions => "/v1/chat/completions",
            Endpoint::Responses => "/v1/responses",
            Endpoint::Messages => "/v1/messages",
        }
    }

    /// The endpoint of a request path (the `/v1` prefix optional, as base URLs differ).
    pub fn of_path(path: &str) -> Option<Endpoint> {
        let path = path.trim_end_matches('/');
        let path = path.strip_prefix("/v1").unwrap_or(path);
        match path {
            "/chat/completions" => Some(Endpoint::ChatCompletions),
            "/responses" => Some(Endpoint::Responses),
            "/messages" => Some(Endpoint::Messages),
            _ => None,
        }
    }

    /// Whether errors take Anthropic's shape (otherwise OpenAI's).
    pub fn is_anthropic(self) -> bool {
        self == Endpoint::Messages
    }
}

/// When and how to inject a fault. A rule matches a provider request when every given
/// filter matches; of the matching requests it lets `skip` pass, then faults `times` of them
/// (0: every later one). Rules are tried in order and the first that fires wins.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct FaultRule {
    /// Only requests to this endpoint.
    #[serde(default)]
    pub endpoint: Option<Endpoint>,
    /// Only requests for this model (the body's `model`, exact match).
    #[serde(default)]
    pub model: Option<String>,
    /// Only this provider call (0-based index over every provider request received).
    #[serde(default)]
    pub call: Option<u64>,
    /// Let this many matching requests pass first.
    #[serde(default)]
    pub skip: u32,
    /// How many matching requests to fault; 0 = every later one.
    #[serde(default = "one")]
    pub times: u32,
    /// What to do.
    pub fault: Fault,
}

fn one() -> u32 {
    1
}

/// The injected behaviour. Serde: `{"kind": "server_error"}`, `{"kind": "rate_limited",
/// "retry_after": "2"}`, `{"kind": "cut_stream", "after_chunks": 3}`, `{"kind":
/// "slow_first_byte", "ms": 500}`, `{"kind": "slow_chunks", "ms": 50}`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Fault {
    /// An error response in the provider's shape (default HTTP 500), nothing generated.
    ServerError {
        /// HTTP status (500 unless given; 529 is Anthropic's "overloaded").
        #[serde(default = "status_500")]
        status: u16,
    },
    /// HTTP 429 in the provider's shape with this `Retry-After` value (seconds).
    RateLimited {
        /// Raw `Retry-After` header value; `None` sends no header.
        #[serde(default = "retry_after_1")]
        retry_after: Option<String>,
    },
    /// Send the status line, the headers and this many SSE events (or none of a
    /// non-streaming body), then close the connection mid-body: no final usage, no
    /// terminating chunk, so the client sees an incomplete body.
    CutStream {
        /// SSE events sent before the cut.
        after_chunks: u32,
    },
    /// Send this many SSE events, then the provider's in-stream error event, and end the
    /// stream cleanly (no final usage); a whole response is a 500 instead.
    StreamError {
        /// SSE events sent before the error event.
        after_chunks: u32,
    },
    /// Wait this long before sending anything, then answer normally.
    SlowFirstByte {
        /// Milliseconds before the first byte.
        ms: u64,
    },
    /// Answer normally, but wait this long before each SSE event (before the body of a
    /// whole response): a stream that stays in flight, for tests of what happens meanwhile.
    SlowChunks {
        /// Milliseconds before each event.
        ms: u64,
    },
}

fn status_500() -> u16 {
    500
}

fn retry_after_1() -> Option<String> {
    Some("1".to_string())
}

impl Fault {
    /// The serde `kind`, as the request log names it.
    pub fn kind(&self) -> &'static str {
        match self {
            Fault::ServerError { .. } => "server_error",
            Fault::RateLimited { .. } => "rate_limited",
            Fault::CutStream { .. } => "cut_stream",
            Fault::StreamError { .. } => "stream_error",
            Fault::SlowFirstByte { .. } => "slow_first_byte",
            Fault::SlowChunks { .. } => "slow_chunks",
        }
    }
}

/// The rules and how often each has matched.
#[derive(Default)]
pub(crate) struct FaultTable {
    rules: Vec<(FaultRule, u32)>,
}

impl FaultTable {
    pub fn add(&mut self, rule: FaultRule) {
        self.rules.push((rule, 0));
    }

    pub fn clear(&mut self) {
        self.rules.clear();
    }

    /// The fault for this request, counting it against every rule it matches.
    pub fn fire(&mut self, endpoint: Endpoint, model: Option<&str>, call: u64) -> Option<Fault> {
        let mut fired = None;
        for (rule, seen) in &mut self.rules {
            let matches = rule.endpoint.map_or(true, |e| e == endpoint)
                && rule.model.as_deref().map_or(true, |m| Some(m) == model)
                && rule.call.map_or(true, |c| c == call);
            if !matches {
                continue;
            }
            let index = *seen;
            *seen = seen.saturating_add(1);
            let live = index >= rule.skip && (rule.times == 0 || index - rule.skip < rule.times);
            if live && fired.is_none() {
                fired = Some(rule.fault.clone());
            }
        }
        fired
    }
}
