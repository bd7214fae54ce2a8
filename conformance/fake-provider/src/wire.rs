//! The three wire formats: request checks, whole responses, SSE event sequences and error
//! bodies, in the shapes the providers document (and their client libraries parse).

use serde_json::{json, Map, Value};

use crate::config::Endpoint;

/// A request that passed the checks, with everything the answer needs.
pub(crate) struct Call {
    pub endpoint: Endpoint,
    /// 1-based number of this provider call (ids are made of it).
    pub n: u64,
    pub model: String,
    pub stream: bool,
    /// Chat Completions: `stream_options.include_usage`.
    pub include_usage: bool,
    pub prompt_tokens: u64,
    /// The output bound the request carried (`max_tokens`, `max_completion_tokens`,
    /// `max_output_tokens`).
    pub bound: Option<u64>,
    pub pieces: Vec<String>,
    pub capped: bool,
    pub created: u64,
}

/// A refused request: HTTP status, message, the offending parameter.
pub(crate) struct Refusal {
    pub status: u16,
    pub message: String,
    pub param: Option<&'static str>,
}

fn refuse(message: impl Into<String>, param: Option<&'static str>) -> Refusal {
    Refusal {
        status: 400,
        message: message.into(),
        param,
    }
}

/// The output bound a request carries, `None` when it has none. Chat Completions takes the
/// smaller of `max_tokens` and `max_completion_tokens` when both are given.
pub(crate) fn output_bound(endpoint: Endpoint, body: &Value) -> Result<Option<u64>, Refusal> {
    let keys: &[&'static str] = match endpoint {
        Endpoint::ChatCompletions => &["max_tokens", "max_completion_tokens"],
        Endpoint::Responses => &["max_output_tokens"],
        Endpoint::Messages => &["max_tokens"],
    };
    let mut bound: Option<u64> = None;
    for key in keys {
        match body.get(*key) {
            None | Some(Value::Null) => {}
            Some(v) => {
                let n = v.as_u64().ok_or_else(|| {
                    refuse(
                        format!("Invalid '{key}': expected an integer of 0 or more, got {v}"),
                        Some(key),
                    )
                })?;
                let minimum = if endpoint == Endpoint::Responses {
                    16
                } else {
                    1
                };
                if n < minimum {
                    return Err(refuse(
                        format!(
                            "Invalid '{key}': integer below minimum value. Expected a value >= {minimum}, but got {n} instead."
                        ),
                        Some(key),
                    ));
                }
                bound = Some(bound.map_or(n, |b| b.min(n)));
            }
        }
    }
    Ok(bound)
}

/// Checks a provider request the way the provider would (the parts this fake implements).
pub(crate) fn check(endpoint: Endpoint, body: &Value) -> Result<(String, bool, bool), Refusal> {
    if !body.is_object() {
        return Err(refuse("the request body must be a JSON object", None));
    }
    let model = match body.get("model") {
        Some(Value::String(m)) if !m.is_empty() => m.clone(),
        _ => {
            return Err(refuse(
                match endpoint {
                    Endpoint::Messages => "model: Field required",
                    _ => "you must provide a model parameter",
                },
                Some("model"),
            ))
        }
    };
    let stream = match body.get("stream") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => {
            return Err(refuse(
                "Invalid 'stream': expected a boolean",
                Some("stream"),
            ))
        }
    };
    let (items, items_name): (Option<&Value>, &'static str) = match endpoint {
        Endpoint::Responses => (body.get("input"), "input"),
        _ => (body.get("messages"), "messages"),
    };
    let items_ok = match items {
        Some(Value::Array(a)) => !a.is_empty(),
        Some(Value::String(_)) => endpoint == Endpoint::Responses,
        _ => false,
    };
    if !items_ok {
        let msg = match endpoint {
            Endpoint::Messages => "messages: Field required".to_string(),
            _ => format!("Missing required parameter: '{items_name}'."),
        };
        return Err(refuse(msg, Some(items_name)));
    }
    if endpoint == Endpoint::Messages && body.get("max_tokens").is_none() {
        return Err(refuse("max_tokens: Field required", Some("max_tokens")));
    }
    if endpoint == Endpoint::ChatCompletions {
        if let Some(n) = body.get("n").filter(|n| !n.is_null()) {
            if n.as_u64() != Some(1) {
                return Err(refuse(
                    "the fake provider answers with one choice only (n must be 1)",
                    Some("n"),
                ));
            }
        }
    }
    let include_usage = endpoint == Endpoint::ChatCompletions
        && body
            .pointer("/stream_options/include_usage")
            .and_then(Value::as_bool)
            .unwrap_or(false);
    Ok((model, stream, include_usage))
}

impl Call {
    fn completion_tokens(&self) -> u64 {
        self.pieces.len() as u64
    }

    fn text(&self) -> String {
        self.pieces.concat()
    }

    fn id(&self) -> String {
        match self.endpoint {
            Endpoint::ChatCompletions => format!("chatcmpl-fake{:06}", self.n),
            Endpoint::Responses => format!("resp_fake{:06}", self.n),
            Endpoint::Messages => format!("msg_fake{:06}", self.n),
        }
    }

    /// The non-streaming response body.
    pub fn response(&self) -> Value {
        match self.endpoint {
            Endpoint::ChatCompletions => self.chat_completion(),
            Endpoint::Responses => self.responses_object(true),
            Endpoint::Messages => self.message(true),
        }
    }

    /// The SSE events of the streaming response, each complete with its blank line.
    pub fn events(&self) -> Vec<String> {
        match self.endpoint {
            Endpoint::ChatCompletions => self.chat_events(),
            Endpoint::Responses => self.responses_events(),
            Endpoint::Messages => self.message_events(),
        }
    }

    fn chat_usage(&self) -> Value {
        let (p, c) = (self.prompt_tokens, self.completion_tokens());
        json!({
            "prompt_tokens": p,
            "completion_tokens": c,
            "total_tokens": p + c,
            "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0,
                "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0}
        })
    }

    fn finish_reason(&self) -> &'static str {
        if self.capped {
            "length"
        } else {
            "stop"
        }
    }

    fn chat_completion(&self) -> Value {
        json!({
            "id": self.id(),
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "choices": [{
                "index": 0,
                "message": {"role": "assistant", "content": self.text(), "refusal": null, "annotations": []},
                "logprobs": null,
                "finish_reason": self.finish_reason()
            }],
            "usage": self.chat_usage(),
            "service_tier": "default",
            "system_fingerprint": "fp_fake"
        })
    }

    fn chat_chunk(&self, delta: Value, finish: Option<&str>) -> Value {
        let mut chunk = json!({
            "id": self.id(),
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "service_tier": "default",
            "system_fingerprint": "fp_fake",
            "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}]
        });
        if self.include_usage {
            // With include_usage every chunk carries `usage: null` but the last one.
            chunk["usage"] = Value::Null;
        }
        chunk
    }

    fn chat_events(&self) -> Vec<String> {
        let mut out = vec![data(&self.chat_chunk(
            json!({"role": "assistant", "content": "", "refusal": null}),
            None,
        ))];
        for piece in &self.pieces {
            out.push(data(&self.chat_chunk(json!({"content": piece}), None)));
        }
        out.push(data(
            &self.chat_chunk(json!({}), Some(self.finish_reason())),
        ));
        if self.include_usage {
            let mut last = self.chat_chunk(json!({}), None);
            last["choices"] = json!([]);
            last["usage"] = self.chat_usage();
            out.push(data(&last));
        }
        out.push("data: [DONE]\n\n".to_string());
        out
    }

    fn responses_message(&self, done: bool) -> Value {
        let status = match (done, self.capped) {
            (false, _) => "in_progress",
            (true, false) => "completed",
            (true, true) => "incomplete",
        };
        let content = if done {
            json!([{"type": "output_text", "text": self.text(), "annotations": [], "logprobs": []}])
        } else {
            json!([])
        };
        json!({
            "id": format!("msg_fake{:06}", self.n),
            "type": "message",
            "status": status,
            "role": "assistant",
            "content": content
        })
    }

    fn responses_object(&self, done: bool) -> Value {
        let (p, c) = (self.prompt_tokens, self.completion_tokens());
        let (status, incomplete, output, usage) = if done {
            let status = if self.capped {
                "incomplete"
            } else {
                "completed"
            };
            let incomplete = if self.capped {
                json!({"reason": "max_output_tokens"})
            } else {
                Value::Null
            };
            let usage = json!({
                "input_tokens": p,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": c,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": p + c
            });
            (
                status,
                incomplete,
                json!([self.responses_message(true)]),
                usage,
            )
        } else {
            ("in_progress", Value::Null, json!([]), Value::Null)
        };
        json!({
            "id": self.id(),
            "object": "response",
            "created_at": self.created,
            "status": status,
            "background": false,
            "error": null,
            "incomplete_details": incomplete,
            "instructions": null,
            "max_output_tokens": self.bound,
            "model": self.model,
            "output": output,
            "parallel_tool_calls": true,
            "previous_response_id": null,
            "reasoning": {"effort": null, "summary": null},
            "service_tier": "default",
            "store": false,
            "temperature": 1.0,
            "text": {"format": {"type": "text"}},
            "tool_choice": "auto",
            "tools": [],
            "top_p": 1.0,
            "truncation": "disabled",
            "usage": usage,
            "user": null,
            "metadata": {}
        })
    }

    fn responses_events(&self) -> Vec<String> {
        let mut seq = 0u64;
        let mut ev = |kind: &str, mut payload: Value| {
            let obj = payload.as_object_mut().expect("event payloads are objects");
            let mut full = Map::new();
            full.insert("type".into(), json!(kind));
            full.insert("sequence_number".into(), json!(seq));
            full.append(obj);
            seq += 1;
            event(kind, &Value::Object(full))
        };
        let item_id = format!("msg_fake{:06}", self.n);
        let text = self.text();
        let part_done =
            json!({"type": "output_text", "text": text, "annotations": [], "logprobs": []});
        let mut out = vec![
            ev(
                "response.created",
                json!({"response": self.responses_object(false)}),
            ),
            ev(
                "response.in_progress",
                json!({"response": self.responses_object(false)}),
            ),
            ev(
                "response.output_item.added",
                json!({"output_index": 0, "item": self.responses_message(false)}),
            ),
            ev(
                "response.content_part.added",
                json!({"item_id": item_id, "output_index": 0, "content_index": 0,
                       "part": {"type": "output_text", "text": "", "annotations": [], "logprobs": []}}),
            ),
        ];
        for piece in &self.pieces {
            out.push(ev(
                "response.output_text.delta",
                json!({"item_id": item_id, "output_index": 0, "content_index": 0, "delta": piece, "logprobs": []}),
            ));
        }
        out.push(ev(
            "response.output_text.done",
            json!({"item_id": item_id, "output_index": 0, "content_index": 0, "text": text, "logprobs": []}),
        ));
        out.push(ev(
            "response.content_part.done",
            json!({"item_id": item_id, "output_index": 0, "content_index": 0, "part": part_done}),
        ));
        out.push(ev(
            "response.output_item.done",
            json!({"output_index": 0, "item": self.responses_message(true)}),
        ));
        // OpenAI ends a response cut by max_output_tokens with `response.incomplete`.
        let last = if self.capped {
            "response.incomplete"
        } else {
            "response.completed"
        };
        out.push(ev(last, json!({"response": self.responses_object(true)})));
        out
    }

    fn stop_reason(&self) -> &'static str {
        if self.capped {
            "max_tokens"
        } else {
            "end_turn"
        }
    }

    fn message(&self, done: bool) -> Value {
        let (content, stop, output) = if done {
            (
                json!([{"type": "text", "text": self.text()}]),
                json!(self.stop_reason()),
                self.completion_tokens(),
            )
        } else {
            (json!([]), Value::Null, 0)
        };
        json!({
            "id": self.id(),
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": content,
            "stop_reason": stop,
            "stop_sequence": null,
            "usage": {
                "input_tokens": self.prompt_tokens,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
                "output_tokens": output,
                "service_tier": "standard"
            }
        })
    }

    fn message_events(&self) -> Vec<String> {
        let mut out = vec![
            event(
                "message_start",
                &json!({"type": "message_start", "message": self.message(false)}),
            ),
            event(
                "content_block_start",
                &json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            ),
            event("ping", &json!({"type": "ping"})),
        ];
        for piece in &self.pieces {
            out.push(event(
                "content_block_delta",
                &json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": piece}}),
            ));
        }
        out.push(event(
            "content_block_stop",
            &json!({"type": "content_block_stop", "index": 0}),
        ));
        out.push(event(
            "message_delta",
            &json!({"type": "message_delta",
                    "delta": {"stop_reason": self.stop_reason(), "stop_sequence": null},
                    "usage": {"output_tokens": self.completion_tokens()}}),
        ));
        out.push(event("message_stop", &json!({"type": "message_stop"})));
        out
    }
}

/// The provider's in-stream error event (sequence number `seq` for Responses).
pub(crate) fn stream_error_event(endpoint: Endpoint, seq: usize) -> String {
    let message = "The fake provider had a scripted error mid-stream.";
    match endpoint {
        Endpoint::ChatCompletions => data(&error_body(false, 500, message, None)),
        Endpoint::Responses => event(
            "error",
            &json!({"type": "error", "code": "server_error", "message": message, "param": null, "sequence_number": seq}),
        ),
        Endpoint::Messages => event(
            "error",
            &json!({"type": "error", "error": {"type": "overloaded_error", "message": message}}),
        ),
    }
}

/// An SSE event with only a data line (OpenAI Chat Completions).
fn data(v: &Value) -> String {
    format!("data: {v}\n\n")
}

/// An SSE event with an event name (OpenAI Responses, Anthropic Messages).
fn event(name: &str, v: &Value) -> String {
    format!("event: {name}\ndata: {v}\n\n")
}

/// An error body in the provider's shape for this status.
pub(crate) fn error_body(
    anthropic: bool,
    status: u16,
    message: &str,
    param: Option<&str>,
) -> Value {
    if anthropic {
        let kind = match status {
            400 => "invalid_request_error",
            401 => "authentication_error",
            403 => "permission_error",
            404 => "not_found_error",
            413 => "request_too_large",
            429 => "rate_limit_error",
            529 => "overloaded_error",
            _ => "api_error",
        };
        json!({"type": "error", "error": {"type": kind, "message": message}})
    } else {
        let (kind, code) = match status {
            429 => ("requests", json!("rate_limit_exceeded")),
            s if s >= 500 => ("server_error", Value::Null),
            _ => ("invalid_request_error", Value::Null),
        };
        json!({"error": {"message": message, "type": kind, "param": param, "code": code}})
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tokens;

    fn call(endpoint: Endpoint, reply: &str, bound: Option<u64>) -> Call {
        let (pieces, capped) = tokens::reply_pieces(reply, bound);
        Call {
            endpoint,
            n: 1,
            model: "m".into(),
            stream: true,
            include_usage: true,
            prompt_tokens: 2,
            bound,
            pieces,
            capped,
            created: 0,
        }
    }

    #[test]
    fn chat_stream_ends_with_usage_then_done() {
        let events = call(Endpoint::ChatCompletions, "a b c", Some(2)).events();
        assert_eq!(events.len(), 6, "role, 2 pieces, finish, usage, [DONE]");
        assert!(events[3].contains("\"finish_reason\":\"length\""));
        assert!(
            events[4].contains("\"choices\":[]") && events[4].contains("\"completion_tokens\":2")
        );
        assert_eq!(events[5], "data: [DONE]\n\n");
    }

    #[test]
    fn responses_sequence_numbers_count_up() {
        let events = call(Endpoint::Responses, "a b", None).events();
        for (i, e) in events.iter().enumerate() {
            assert!(e.contains(&format!("\"sequence_number\":{i}")), "{e}");
        }
        assert!(events
            .last()
            .unwrap()
            .starts_with("event: response.completed\n"));
    }
}
