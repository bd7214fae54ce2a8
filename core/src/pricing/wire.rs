//! The provider wire formats an integration guards: where a request keeps its output bound
//! and tools, and where a response or stream event reports usage. Hosts hand over JSON and
//! apply the result, so no host knows a provider's field names by itself.
//!
//! Rules, per [`Api`]:
//! - Output bound fields: `chat_completions` `max_completion_tokens` and `max_tokens`;
//!   `responses` `max_output_tokens`; `messages` `max_tokens`.
//! - Caps ([`plan_caps`]): when [`caps::lower_bound`] changes the bound, every bound field the
//!   request has is set to the lowered bound; a request with none gets the API's first field.
//!   A bound of 0 means "do not send" (`send = false`), and so does a bound the caps lowered
//!   below the API's smallest accepted bound ([`Api::min_output_bound`]: Responses refuses
//!   `max_output_tokens` below 16): sending more than the cap would overspend it. Tools are filtered by
//!   [`caps::tool_allowed`]; a tool's name is `name`, else `function.name` (Chat
//!   Completions), else its `type` (built-in tools such as Responses' `web_search`).
//!   Removing every tool unsets `tools` (providers refuse an empty list) and `tool_choice`
//!   (and `parallel_tool_calls` for Chat Completions); a `tool_choice` naming a removed tool
//!   is unset too, so the provider never sees a choice it cannot honour.
//! - Streams ([`stream_request`]): a Chat Completions stream reports usage only when asked,
//!   so a streaming request (`stream: true`) gets `stream_options.include_usage: true` unless the caller set
//!   `include_usage` (either way: `false` is the caller's choice, and the estimate is then
//!   committed). The other APIs always report usage.
//! - Failure ([`call_failed`]): a body or stream event that says the call failed although
//!   the HTTP exchange succeeded: Responses `error` and `response.failed`, Messages `error`, a
//!   Chat Completions chunk carrying `error`. Usage it reported is still committed.
//! - Usage ([`usage_update`]), applied to a whole response body or to each stream event in
//!   order; a value present replaces the one before (providers report cumulative counts):
//!   - `chat_completions`: `usage.prompt_tokens`, `usage.completion_tokens` (the body, or the
//!     final chunk under `stream_options.include_usage`).
//!   - `responses`: `usage.input_tokens`, `usage.output_tokens` of the body, or of
//!     `response` in the `response.completed`, `response.incomplete` and `response.failed`
//!     events.
//!   - `messages`: `usage` of the body, of `message` in `message_start`, or of
//!     `message_delta`; input = `input_tokens + cache_creation_input_tokens +
//!     cache_read_input_tokens` (Anthropic counts cached prompt tokens apart; all three are
//!     prompt the caller sent), output = `output_tokens`.
//!   - A count that is not a non-negative integer is ignored (never guessed, never an error:
//!     the call already happened and its known usage must still be committed).

use serde_json::{Map, Value};

use super::caps;
use super::charge::Usage;
use super::reading::{Counts, Reading};
use super::tokens;
use crate::error::Error;
use crate::model::Caps;

/// A provider API an integration guards.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Api {
    /// OpenAI Chat Completions (`/v1/chat/completions`).
    ChatCompletions,
    /// OpenAI Responses (`/v1/responses`).
    Responses,
    /// Anthropic Messages (`/v1/messages`).
    Messages,
}

impl Api {
    /// Every API, by its wire name.
    pub const ALL: [Api; 3] = [Api::ChatCompletions, Api::Responses, Api::Messages];

    /// `chat_completions`, `responses` or `messages`.
    pub fn as_str(self) -> &'static str {
        match self {
            Api::ChatCompletions => "chat_completions",
            Api::Responses => "responses",
            Api::Messages => "messages",
        }
    }

    /// The API of a wire name; INVALID_ARGUMENT names the known ones.
    pub fn parse(name: &str) -> Result<Api, Error> {
        Api::ALL
            .into_iter()
            .find(|a| a.as_str() == name)
            .ok_or_else(|| {
                Error::invalid_argument(format!(
                    "unknown provider API {name:?} (known: chat_completions, responses, messages)"
                ))
            })
    }

    /// The smallest output bound the API accepts: a request the caps would lower below it is
    /// not sent (16 for Responses, 1 otherwise).
    pub fn min_output_bound(self) -> u64 {
        match self {
            Api::Responses => 16,
            Api::ChatCompletions | Api::Messages => 1,
        }
    }

    /// The request fields that bound the output, the one a request without a bound gets first.
    pub fn bound_fields(self) -> &'static [&'static str] {
        match self {
            Api::ChatCompletions => &["max_completion_tokens", "max_tokens"],
            Api::Responses => &["max_output_tokens"],
            Api::Messages => &["max_tokens"],
        }
    }
}

/// How to rewrite a request under `ALLOW_WITH_CAPS`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CapsPlan {
    /// The request's own output bound.
    pub bound_from: Option<u64>,
    /// The bound after the caps.
    pub bound_to: Option<u64>,
    /// Fields to set, with their new values (bound fields, and `tools` when some remain).
    pub set: Map<String, Value>,
    /// Fields to remove from the request.
    pub unset: Vec<String>,
    /// Names of the tools the caps removed, in the request's order.
    pub removed_tools: Vec<String>,
    /// `false` when the caps lowered the bound to 0: no provider accepts that, do not call.
    pub send: bool,
}

impl CapsPlan {
    /// Whether the request must be rewritten (the integration then reports it in an event).
    pub fn changed(&self) -> bool {
        !self.set.is_empty() || !self.unset.is_empty()
    }

    /// Why the call must not be sent (`send` false), in the words every language's
    /// `CallNotSent` error and release reason use; `None` when it may be sent.
    pub fn refusal(&self, api: Api) -> Option<String> {
        if self.send {
            return None;
        }
        let to = self.bound_to.unwrap_or(0);
        let api = api.as_str();
        Some(if self.bound_from == self.bound_to {
            format!("the request's output bound is {to}, which {api} does not accept")
        } else {
            format!("caps lower the output bound to {to}, which {api} does not accept")
        })
    }
}

/// A tool's name: `name`, else `function.name`, else `type`.
fn tool_name(tool: &Value) -> Option<&str> {
    tool.get("name")
        .and_then(Value::as_str)
        .or_else(|| tool.pointer("/function/name").and_then(Value::as_str))
        .or_else(|| tool.get("type").and_then(Value::as_str))
}

/// The tool a `tool_choice` names, if it names one (`{"type": "function", "function":
/// {"name"}}`, `{"type": "function", "name"}`, `{"type": "tool", "name"}`).
fn chosen_tool(choice: &Value) -> Option<&str> {
    choice
        .get("name")
        .and_then(Value::as_str)
        .or_else(|| choice.pointer("/function/name").and_then(Value::as_str))
}

/// The rewrite the caps ask of `request` (a provider request body) for `api`.
pub fn plan_caps(api: Api, request: &Value, caps: &Caps) -> Result<CapsPlan, Error> {
    let bound_from = tokens::request_output_bound(request)?;
    let lowered = caps::lower_bound(bound_from, caps)?;
    let mut plan = CapsPlan {
        bound_from,
        bound_to: lowered.bound,
        send: match lowered.bound {
            Some(0) => false,
            Some(b) if lowered.changed => b >= api.min_output_bound(),
            _ => true,
        },
        ..CapsPlan::default()
    };
    if lowered.changed {
        let to = Value::from(lowered.bound);
        let present: Vec<&str> = api
            .bound_fields()
            .iter()
            .copied()
            .filter(|f| !matches!(request.get(*f), None | Some(Value::Null)))
            .collect();
        let fields = if present.is_empty() {
            &api.bound_fields()[..1]
        } else {
            &present[..]
        };
        for f in fields {
            plan.set.insert((*f).to_string(), to.clone());
        }
    }
    let Some(tools) = request.get("tools").and_then(Value::as_array) else {
        return Ok(plan);
    };
    let (kept, removed): (Vec<&Value>, Vec<&Value>) = tools
        .iter()
        .partition(|t| tool_name(t).map_or(true, |n| caps::tool_allowed(n, caps)));
    if removed.is_empty() {
        return Ok(plan);
    }
    plan.removed_tools = removed
        .iter()
        .filter_map(|t| tool_name(t).map(str::to_string))
        .collect();
    let choice_removed = request
        .get("tool_choice")
        .and_then(chosen_tool)
        .is_some_and(|n| plan.removed_tools.iter().any(|r| r == n));
    if kept.is_empty() {
        plan.unset.push("tools".to_string());
        if request.get("tool_choice").is_some() {
            plan.unset.push("tool_choice".to_string());
        }
        if api == Api::ChatCompletions && request.get("parallel_tool_calls").is_some() {
            plan.unset.push("parallel_tool_calls".to_string());
        }
    } else {
        plan.set.insert(
            "tools".to_string(),
            Value::Array(kept.into_iter().cloned().collect()),
        );
        if choice_removed {
            plan.unset.push("tool_choice".to_string());
        }
    }
    Ok(plan)
}

/// The members to set on a request of `api` so that, when it streams, it reports its usage
/// (the module doc); empty when nothing needs to change (not a stream, or already decided).
pub fn stream_request(api: Api, request: &Value) -> Map<String, Value> {
    let mut set = Map::new();
    if api != Api::ChatCompletions || request.get("stream") != Some(&Value::Bool(true)) {
        return set;
    }
    let options = request.get("stream_options");
    if options
        .and_then(Value::as_object)
        .is_some_and(|o| o.contains_key("include_usage"))
    {
        return set;
    }
    let mut merged = options
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    merged.insert("include_usage".to_string(), Value::Bool(true));
    set.insert("stream_options".to_string(), Value::Object(merged));
    set
}

/// Whether a response body or stream event of `api` says the call failed (the module doc).
pub fn call_failed(api: Api, body_or_event: &Value) -> bool {
    failed_in(api, &Reading::of_value(body_or_event))
}

/// [`call_failed`] of what a body or event says (however it was read).
pub fn failed_in(api: Api, r: &Reading) -> bool {
    let kind = r.kind.as_deref();
    match api {
        Api::Responses => matches!(kind, Some("error" | "response.failed")),
        Api::Messages => kind == Some("error"),
        Api::ChatCompletions => r.error,
    }
}

/// `usage` merged into `acc`: present counts replace earlier ones.
fn merge(acc: Usage, input: Option<u64>, output: Option<u64>) -> Usage {
    Usage {
        input_tokens: input.or(acc.input_tokens),
        output_tokens: output.or(acc.output_tokens),
    }
}

/// Anthropic's prompt: uncached plus cache-creation plus cache-read input tokens; `None` when
/// none of them is reported.
fn messages_input(u: &Counts) -> Option<u64> {
    let parts = [
        u.input_tokens,
        u.cache_creation_input_tokens,
        u.cache_read_input_tokens,
    ];
    parts.iter().any(Option::is_some).then(|| {
        parts
            .iter()
            .flatten()
            .fold(0u64, |a, b| a.saturating_add(*b))
    })
}

/// The usage after one response body or stream event of `api`, starting from `acc`.
pub fn usage_update(api: Api, acc: Usage, body_or_event: &Value) -> Usage {
    usage_in(api, acc, &Reading::of_value(body_or_event))
}

/// [`usage_update`] of what a body or event says (however it was read).
pub fn usage_in(api: Api, acc: Usage, r: &Reading) -> Usage {
    let kind = r.kind.as_deref();
    match api {
        Api::ChatCompletions => merge(acc, r.usage.prompt_tokens, r.usage.completion_tokens),
        Api::Responses => {
            let u = match kind {
                Some("response.completed" | "response.incomplete" | "response.failed") => {
                    &r.response_usage
                }
                Some("response") | None => &r.usage,
                Some(_) => return acc,
            };
            merge(acc, u.input_tokens, u.output_tokens)
        }
        Api::Messages => {
            let u = match kind {
                Some("message_start") => &r.message_usage,
                Some("message_delta" | "message") | None => &r.usage,
                Some(_) => return acc,
            };
            merge(acc, messages_input(u), u.output_tokens)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn caps(v: Value) -> Caps {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn api_names_round_trip_and_unknown_is_typed() {
        for a in Api::ALL {
            assert_eq!(Api::parse(a.as_str()).unwrap(), a);
        }
        let e = Api::parse("completions").unwrap_err();
        assert!(e.message().contains("chat_completions"), "{}", e.message());
    }

    #[test]
    fn caps_lower_every_present_bound_field_or_add_the_first() {
        let c = caps(json!({"max_tokens": 50}));
        let p = plan_caps(
            Api::ChatCompletions,
            &json!({"max_tokens": 200, "max_completion_tokens": 100}),
            &c,
        )
        .unwrap();
        assert_eq!(
            (p.bound_from, p.bound_to, p.send),
            (Some(100), Some(50), true)
        );
        assert_eq!(
            Value::Object(p.set.clone()),
            json!({"max_tokens": 50, "max_completion_tokens": 50})
        );
        let p = plan_caps(Api::ChatCompletions, &json!({}), &c).unwrap();
        assert_eq!(Value::Object(p.set), json!({"max_completion_tokens": 50}));
        let p = plan_caps(Api::Responses, &json!({"max_output_tokens": 20}), &c).unwrap();
        assert!(!p.changed());
        assert_eq!(p.refusal(Api::Responses), None);
        let p = plan_caps(Api::Messages, &json!({"max_tokens": 0}), &c).unwrap();
        assert!(!p.send && !p.changed());
        assert_eq!(
            p.refusal(Api::Messages).unwrap(),
            "the request's output bound is 0, which messages does not accept"
        );
        let p = plan_caps(
            Api::Messages,
            &json!({"max_tokens": 9}),
            &caps(json!({"max_tokens": 0})),
        )
        .unwrap();
        assert!(!p.send && p.changed());
        assert_eq!(
            p.refusal(Api::Messages).unwrap(),
            "caps lower the output bound to 0, which messages does not accept"
        );
    }

    #[test]
    fn caps_filter_tools_by_each_formats_name() {
        let c = caps(json!({"tool_denylist": ["shell", "web_search"]}));
        let req = json!({"tools": [
            {"type": "function", "function": {"name": "shell"}},
            {"type": "function", "function": {"name": "calc"}},
            {"type": "web_search"}
        ], "tool_choice": {"type": "function", "function": {"name": "shell"}}});
        let p = plan_caps(Api::ChatCompletions, &req, &c).unwrap();
        assert_eq!(p.removed_tools, ["shell", "web_search"]);
        assert_eq!(
            p.set["tools"],
            json!([{"type": "function", "function": {"name": "calc"}}])
        );
        assert_eq!(p.unset, ["tool_choice"]);
        let all = caps(json!({"tool_allowlist": ["none_of_them"]}));
        let req = json!({"tools": [{"name": "shell", "input_schema": {}}], "tool_choice": {"type": "auto"}, "parallel_tool_calls": true});
        let p = plan_caps(Api::ChatCompletions, &req, &all).unwrap();
        assert_eq!(p.unset, ["tools", "tool_choice", "parallel_tool_calls"]);
        assert!(!p.set.contains_key("tools"));
        let p = plan_caps(Api::Messages, &req, &all).unwrap();
        assert_eq!(p.unset, ["tools", "tool_choice"]);
    }

    #[test]
    fn caps_below_the_apis_minimum_are_not_sent() {
        let c = caps(json!({"max_tokens": 10}));
        let p = plan_caps(Api::Responses, &json!({"max_output_tokens": 100}), &c).unwrap();
        assert!(!p.send && p.changed());
        assert_eq!(
            p.refusal(Api::Responses).unwrap(),
            "caps lower the output bound to 10, which responses does not accept"
        );
        // The caller's own small bound is the caller's: sent as given.
        let p = plan_caps(Api::Responses, &json!({"max_output_tokens": 8}), &c).unwrap();
        assert!(p.send && !p.changed());
        let p = plan_caps(Api::ChatCompletions, &json!({"max_tokens": 100}), &c).unwrap();
        assert!(p.send);
    }

    #[test]
    fn streams_ask_for_usage_and_failures_are_seen() {
        let set = stream_request(Api::ChatCompletions, &json!({"stream": true}));
        assert_eq!(
            Value::Object(set),
            json!({"stream_options": {"include_usage": true}})
        );
        let kept = json!({"stream_options": {"include_usage": false}});
        assert!(stream_request(Api::ChatCompletions, &kept).is_empty());
        let merged = stream_request(
            Api::ChatCompletions,
            &json!({"stream": true, "stream_options": {"include_obfuscation": false}}),
        );
        assert_eq!(
            merged["stream_options"],
            json!({"include_obfuscation": false, "include_usage": true})
        );
        assert!(stream_request(Api::Messages, &json!({"stream": true})).is_empty());
        assert!(stream_request(Api::ChatCompletions, &json!({"stream": false})).is_empty());
        assert!(call_failed(Api::Responses, &json!({"type": "error"})));
        assert!(call_failed(
            Api::Responses,
            &json!({"type": "response.failed"})
        ));
        assert!(!call_failed(
            Api::Responses,
            &json!({"type": "response.completed"})
        ));
        assert!(call_failed(
            Api::Messages,
            &json!({"type": "error", "error": {}})
        ));
        assert!(call_failed(
            Api::ChatCompletions,
            &json!({"error": {"message": "x"}})
        ));
        assert!(!call_failed(Api::ChatCompletions, &json!({"error": null})));
    }

    #[test]
    fn usage_from_bodies_and_streams() {
        let u = usage_update(
            Api::ChatCompletions,
            Usage::default(),
            &json!({"usage": {"prompt_tokens": 7, "completion_tokens": 3}}),
        );
        assert_eq!((u.input_tokens, u.output_tokens), (Some(7), Some(3)));
        let chunk = json!({"choices": [{"delta": {"content": "x"}}], "usage": null});
        assert_eq!(usage_update(Api::ChatCompletions, u, &chunk), u);

        let done = json!({"type": "response.completed", "response": {"usage": {"input_tokens": 4, "output_tokens": 2}}});
        let u = usage_update(Api::Responses, Usage::default(), &done);
        assert_eq!((u.input_tokens, u.output_tokens), (Some(4), Some(2)));
        let delta = json!({"type": "response.output_text.delta", "delta": "x"});
        assert_eq!(
            usage_update(Api::Responses, Usage::default(), &delta),
            Usage::default()
        );

        let start = json!({"type": "message_start", "message": {"usage": {"input_tokens": 10, "cache_read_input_tokens": 5, "output_tokens": 1}}});
        let u = usage_update(Api::Messages, Usage::default(), &start);
        assert_eq!((u.input_tokens, u.output_tokens), (Some(15), Some(1)));
        let u = usage_update(
            Api::Messages,
            u,
            &json!({"type": "message_delta", "usage": {"output_tokens": 12}}),
        );
        assert_eq!((u.input_tokens, u.output_tokens), (Some(15), Some(12)));
        let bad = json!({"usage": {"input_tokens": -1, "output_tokens": "x"}});
        assert_eq!(
            usage_update(Api::Messages, Usage::default(), &bad),
            Usage::default()
        );
    }
}
