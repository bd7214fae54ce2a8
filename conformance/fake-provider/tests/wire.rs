//! The fake provider over real HTTP (reqwest on loopback): each wire format whole and
//! streamed, the token rule, the output bounds, every fault, the recorder and its admin
//! routes, and the config's refusal of unknown keys.

use std::time::{Duration, Instant};

use cycles_fake_provider::{Endpoint, FakeConfig, FakeProvider, Fault, FaultRule, DEFAULT_REPLY};
use serde_json::{json, Value};

async fn start(config: Value) -> FakeProvider {
    let config: FakeConfig = serde_json::from_value(config).expect("valid config");
    FakeProvider::start(config).await.expect("bind")
}

async fn post(p: &FakeProvider, path: &str, body: Value) -> reqwest::Response {
    reqwest::Client::new()
        .post(format!("{}{path}", p.url()))
        .json(&body)
        .send()
        .await
        .expect("request")
}

/// The SSE events of a body: (event name, data), in order.
fn sse(text: &str) -> Vec<(Option<String>, String)> {
    text.split("\n\n")
        .filter(|e| !e.trim().is_empty())
        .map(|e| {
            let mut name = None;
            let mut data = String::new();
            for line in e.lines() {
                if let Some(n) = line.strip_prefix("event: ") {
                    name = Some(n.to_string());
                } else if let Some(d) = line.strip_prefix("data: ") {
                    data.push_str(d);
                }
            }
            (name, data)
        })
        .collect()
}

fn data(events: &[(Option<String>, String)]) -> Vec<Value> {
    events
        .iter()
        .filter(|(_, d)| d != "[DONE]")
        .map(|(_, d)| serde_json::from_str(d).expect("JSON data"))
        .collect()
}

const REPLY_WORDS: u64 = 9; // DEFAULT_REPLY by the token rule

fn chat(extra: Value) -> Value {
    let mut body = json!({"model": "gpt-fake", "messages": [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": [{"type": "text", "text": "say hello to me"}]}
    ]});
    body.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    body
}

#[tokio::test]
async fn chat_completions_whole_with_usage_and_bounds() {
    assert_eq!(
        cycles_fake_provider::tokens::count(DEFAULT_REPLY),
        REPLY_WORDS
    );
    let p = start(json!({})).await;
    let r = post(&p, "/v1/chat/completions", chat(json!({}))).await;
    assert_eq!(r.status(), 200);
    assert!(r.headers()["x-request-id"]
        .to_str()
        .unwrap()
        .starts_with("req_"));
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["object"], "chat.completion");
    assert_eq!(v["model"], "gpt-fake");
    assert_eq!(v["choices"][0]["message"]["content"], DEFAULT_REPLY);
    assert_eq!(v["choices"][0]["message"]["role"], "assistant");
    assert_eq!(v["choices"][0]["finish_reason"], "stop");
    assert_eq!(v["usage"]["prompt_tokens"], 7);
    assert_eq!(v["usage"]["completion_tokens"], REPLY_WORDS);
    assert_eq!(v["usage"]["total_tokens"], 7 + REPLY_WORDS);

    let v: Value = post(&p, "/v1/chat/completions", chat(json!({"max_tokens": 3})))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(v["choices"][0]["message"]["content"], "This is a");
    assert_eq!(v["choices"][0]["finish_reason"], "length");
    assert_eq!(v["usage"]["completion_tokens"], 3);
    let v: Value = post(
        &p,
        "/v1/chat/completions",
        chat(json!({"max_completion_tokens": 2})),
    )
    .await
    .json()
    .await
    .unwrap();
    assert_eq!(v["usage"]["completion_tokens"], 2);
    let v: Value = post(
        &p,
        "/v1/chat/completions",
        chat(json!({"max_completion_tokens": 5, "max_tokens": 4})),
    )
    .await
    .json()
    .await
    .unwrap();
    assert_eq!(v["usage"]["completion_tokens"], 4, "the smaller bound");
    // The bound equal to the reply's length is not a cut.
    let v: Value = post(
        &p,
        "/v1/chat/completions",
        chat(json!({"max_tokens": REPLY_WORDS})),
    )
    .await
    .json()
    .await
    .unwrap();
    assert_eq!(v["choices"][0]["finish_reason"], "stop");
    // Served without the /v1 prefix too (base URLs differ).
    assert_eq!(
        post(&p, "/chat/completions", chat(json!({})))
            .await
            .status(),
        200
    );
    let bounds: Vec<_> = p.requests().iter().map(|r| r.output_bound).collect();
    assert_eq!(
        bounds,
        [None, Some(3), Some(2), Some(4), Some(REPLY_WORDS), None]
    );
}

#[tokio::test]
async fn chat_completions_stream_with_and_without_usage() {
    let p = start(json!({"reply": "one two three"})).await;
    let r = post(&p, "/v1/chat/completions", chat(json!({"stream": true}))).await;
    assert!(r.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/event-stream"));
    let events = sse(&r.text().await.unwrap());
    assert!(
        events.iter().all(|(name, _)| name.is_none()),
        "chat SSE has data lines only"
    );
    assert_eq!(events.last().unwrap().1, "[DONE]");
    let chunks = data(&events);
    assert_eq!(chunks.len(), 5, "role, three pieces, finish");
    assert!(chunks
        .iter()
        .all(|c| c["object"] == "chat.completion.chunk" && c.get("usage").is_none()));
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    let text: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(text, "one two three");
    assert_eq!(chunks[4]["choices"][0]["finish_reason"], "stop");

    let body =
        chat(json!({"stream": true, "stream_options": {"include_usage": true}, "max_tokens": 2}));
    let events = sse(&post(&p, "/v1/chat/completions", body)
        .await
        .text()
        .await
        .unwrap());
    let chunks = data(&events);
    assert_eq!(chunks.len(), 5, "role, two pieces, finish, usage");
    assert!(chunks[..4]
        .iter()
        .all(|c| c["usage"].is_null() && c.get("usage").is_some()));
    assert_eq!(chunks[3]["choices"][0]["finish_reason"], "length");
    let last = &chunks[4];
    assert_eq!(last["choices"], json!([]));
    assert_eq!(last["usage"]["prompt_tokens"], 7);
    assert_eq!(last["usage"]["completion_tokens"], 2);
    assert_eq!(events.last().unwrap().1, "[DONE]");
}

fn responses(extra: Value) -> Value {
    let mut body = json!({"model": "gpt-fake", "instructions": "Be terse.", "input": "Say hello"});
    body.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    body
}

#[tokio::test]
async fn responses_whole_and_streamed() {
    let twenty = (1..=20)
        .map(|i| format!("w{i}"))
        .collect::<Vec<_>>()
        .join(" ");
    let p = start(json!({"replies": {"long": twenty}})).await;
    let v: Value = post(&p, "/v1/responses", responses(json!({})))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        (v["object"].clone(), v["status"].clone()),
        (json!("response"), json!("completed"))
    );
    assert_eq!(v["output"][0]["type"], "message");
    assert_eq!(v["output"][0]["content"][0]["type"], "output_text");
    assert_eq!(v["output"][0]["content"][0]["text"], DEFAULT_REPLY);
    assert_eq!(v["usage"]["input_tokens"], 4);
    assert_eq!(v["usage"]["output_tokens"], REPLY_WORDS);
    assert_eq!(v["usage"]["total_tokens"], 4 + REPLY_WORDS);

    // max_output_tokens below OpenAI's minimum of 16 is refused as OpenAI refuses it.
    let r = post(
        &p,
        "/v1/responses",
        responses(json!({"max_output_tokens": 5})),
    )
    .await;
    assert_eq!(r.status(), 400);
    let e: Value = r.json().await.unwrap();
    assert_eq!(e["error"]["type"], "invalid_request_error");
    assert_eq!(e["error"]["param"], "max_output_tokens");
    let v: Value = post(
        &p,
        "/v1/responses",
        responses(json!({"model": "long", "max_output_tokens": 16})),
    )
    .await
    .json()
    .await
    .unwrap();
    assert_eq!(v["status"], "incomplete");
    assert_eq!(v["incomplete_details"]["reason"], "max_output_tokens");
    assert_eq!(v["usage"]["output_tokens"], 16);
    assert_eq!(v["max_output_tokens"], 16);

    let text = post(&p, "/v1/responses", responses(json!({"stream": true})))
        .await
        .text()
        .await
        .unwrap();
    let events = sse(&text);
    let names: Vec<_> = events.iter().map(|(n, _)| n.clone().unwrap()).collect();
    let mut expected = vec![
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
    ];
    expected.extend(std::iter::repeat("response.output_text.delta").take(REPLY_WORDS as usize));
    expected.extend([
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]);
    assert_eq!(names, expected);
    let payloads = data(&events);
    for (i, (name, v)) in names.iter().zip(&payloads).enumerate() {
        assert_eq!(
            (
                v["type"].as_str().unwrap(),
                v["sequence_number"].as_u64().unwrap()
            ),
            (name.as_str(), i as u64)
        );
    }
    assert!(payloads[0]["response"]["usage"].is_null());
    let done = &payloads.last().unwrap()["response"];
    assert_eq!(done["usage"]["output_tokens"], REPLY_WORDS);
    assert_eq!(done["output"][0]["content"][0]["text"], DEFAULT_REPLY);
    let deltas: String = payloads
        .iter()
        .filter_map(|v| v["delta"].as_str())
        .collect();
    assert_eq!(deltas, DEFAULT_REPLY);
    assert!(
        !text.contains("[DONE]"),
        "the Responses stream has no [DONE]"
    );

    let text = post(
        &p,
        "/v1/responses",
        responses(json!({"stream": true, "model": "long", "max_output_tokens": 16})),
    )
    .await
    .text()
    .await
    .unwrap();
    let last = sse(&text).pop().unwrap();
    assert_eq!(last.0.as_deref(), Some("response.incomplete"));
}

fn messages(extra: Value) -> Value {
    let mut body = json!({"model": "claude-fake", "max_tokens": 100, "system": "Be terse.",
        "messages": [{"role": "user", "content": "Say hello"}]});
    body.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    body
}

#[tokio::test]
async fn anthropic_messages_whole_and_streamed() {
    let p = start(json!({})).await;
    let r = post(&p, "/v1/messages", messages(json!({}))).await;
    assert!(r.headers().contains_key("request-id"));
    let v: Value = r.json().await.unwrap();
    assert_eq!(
        (v["type"].clone(), v["role"].clone()),
        (json!("message"), json!("assistant"))
    );
    assert_eq!(
        v["content"],
        json!([{"type": "text", "text": DEFAULT_REPLY}])
    );
    assert_eq!(v["stop_reason"], "end_turn");
    assert_eq!(v["usage"]["input_tokens"], 4);
    assert_eq!(v["usage"]["output_tokens"], REPLY_WORDS);

    let v: Value = post(&p, "/v1/messages", messages(json!({"max_tokens": 2})))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        (
            v["stop_reason"].clone(),
            v["usage"]["output_tokens"].clone()
        ),
        (json!("max_tokens"), json!(2))
    );

    let mut no_bound = messages(json!({}));
    no_bound.as_object_mut().unwrap().remove("max_tokens");
    let r = post(&p, "/v1/messages", no_bound).await;
    assert_eq!(r.status(), 400);
    let e: Value = r.json().await.unwrap();
    assert_eq!(
        e,
        json!({"type": "error", "error": {"type": "invalid_request_error", "message": "max_tokens: Field required"}})
    );

    let text = post(
        &p,
        "/v1/messages",
        messages(json!({"stream": true, "max_tokens": 3})),
    )
    .await
    .text()
    .await
    .unwrap();
    let events = sse(&text);
    let names: Vec<_> = events.iter().map(|(n, _)| n.clone().unwrap()).collect();
    assert_eq!(
        names,
        [
            "message_start",
            "content_block_start",
            "ping",
            "content_block_delta",
            "content_block_delta",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop"
        ]
    );
    let payloads = data(&events);
    for (name, v) in names.iter().zip(&payloads) {
        assert_eq!(v["type"].as_str(), Some(name.as_str()));
    }
    assert_eq!(payloads[0]["message"]["usage"]["input_tokens"], 4);
    assert_eq!(payloads[0]["message"]["usage"]["output_tokens"], 0);
    let deltas: String = payloads
        .iter()
        .filter_map(|v| v["delta"]["text"].as_str())
        .collect();
    assert_eq!(deltas, "This is a");
    assert_eq!(payloads[7]["usage"]["output_tokens"], 3);
    assert_eq!(payloads[7]["delta"]["stop_reason"], "max_tokens");
}

#[tokio::test]
async fn reply_per_model_and_per_request() {
    let p =
        start(json!({"reply": "default words", "replies": {"special": "a special reply"}})).await;
    let v: Value = post(&p, "/v1/chat/completions", chat(json!({})))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(v["choices"][0]["message"]["content"], "default words");
    let v: Value = post(
        &p,
        "/v1/chat/completions",
        chat(json!({"model": "special"})),
    )
    .await
    .json()
    .await
    .unwrap();
    assert_eq!(v["choices"][0]["message"]["content"], "a special reply");
    let v: Value = reqwest::Client::new()
        .post(format!("{}/v1/messages", p.url()))
        .header("x-fake-reply", "from the header")
        .json(&messages(json!({"model": "special"})))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(v["content"][0]["text"], "from the header");
    assert_eq!(v["usage"]["output_tokens"], 3);
}

#[tokio::test]
async fn errors_take_each_providers_shape() {
    let p = start(json!({"faults": [
        {"endpoint": "chat_completions", "fault": {"kind": "server_error"}},
        {"endpoint": "messages", "fault": {"kind": "server_error", "status": 529}}
    ]}))
    .await;
    let r = post(&p, "/v1/chat/completions", chat(json!({}))).await;
    assert_eq!(r.status(), 500);
    let e: Value = r.json().await.unwrap();
    assert_eq!(e["error"]["type"], "server_error");
    assert!(e["error"]["message"].is_string());
    assert_eq!(
        post(&p, "/v1/chat/completions", chat(json!({})))
            .await
            .status(),
        200,
        "times defaults to 1"
    );
    let r = post(&p, "/v1/messages", messages(json!({}))).await;
    assert_eq!(r.status(), 529);
    let e: Value = r.json().await.unwrap();
    assert_eq!(e["type"], "error");
    assert_eq!(e["error"]["type"], "overloaded_error");
    // Unknown routes and bad requests.
    let r = post(&p, "/v1/embeddings", json!({})).await;
    assert_eq!(r.status(), 404);
    let r = post(&p, "/v1/chat/completions", json!({"model": "m"})).await;
    assert_eq!(r.status(), 400);
    let e: Value = r.json().await.unwrap();
    assert_eq!(e["error"]["param"], "messages");
    let r = post(&p, "/v1/chat/completions", chat(json!({"n": 2}))).await;
    assert_eq!(r.status(), 400);
    let faults: Vec<_> = p
        .requests()
        .iter()
        .map(|r| (r.status, r.fault.clone()))
        .collect();
    assert_eq!(
        faults,
        [
            (500, Some("server_error".into())),
            (200, None),
            (529, Some("server_error".into())),
            (404, None),
            (400, None),
            (400, None)
        ]
    );
}

#[tokio::test]
async fn rate_limited_with_retry_after() {
    let p = start(json!({})).await;
    p.add_fault(FaultRule {
        endpoint: None,
        model: Some("gpt-fake".into()),
        call: None,
        skip: 1,
        times: 2,
        fault: Fault::RateLimited {
            retry_after: Some("7".into()),
        },
    });
    let statuses = {
        let mut out = Vec::new();
        for _ in 0..4 {
            let r = post(&p, "/v1/chat/completions", chat(json!({}))).await;
            let retry = r
                .headers()
                .get("retry-after")
                .map(|v| v.to_str().unwrap().to_string());
            let status = r.status().as_u16();
            if status == 429 {
                let e: Value = r.json().await.unwrap();
                assert_eq!(e["error"]["code"], "rate_limit_exceeded");
            }
            out.push((status, retry));
        }
        out
    };
    let seven = Some("7".to_string());
    assert_eq!(
        statuses,
        [(200, None), (429, seven.clone()), (429, seven), (200, None)]
    );
    // Another model does not match the rule.
    p.add_fault(FaultRule {
        endpoint: Some(Endpoint::Messages),
        model: None,
        call: None,
        skip: 0,
        times: 0,
        fault: Fault::RateLimited { retry_after: None },
    });
    let r = post(&p, "/v1/messages", messages(json!({}))).await;
    assert_eq!(r.status(), 429);
    assert!(r.headers().get("retry-after").is_none());
    let e: Value = r.json().await.unwrap();
    assert_eq!(e["error"]["type"], "rate_limit_error");
    assert_eq!(
        post(&p, "/v1/messages", messages(json!({}))).await.status(),
        429,
        "times 0: every later one"
    );
}

/// Reads the body chunk by chunk until it ends or fails: (bytes read, whether it failed).
async fn read_all(mut r: reqwest::Response) -> (String, bool) {
    let mut out = Vec::new();
    loop {
        match r.chunk().await {
            Ok(Some(c)) => out.extend_from_slice(&c),
            Ok(None) => return (String::from_utf8(out).unwrap(), false),
            Err(_) => return (String::from_utf8(out).unwrap(), true),
        }
    }
}

#[tokio::test]
async fn cut_stream_closes_the_connection_after_n_events() {
    let p =
        start(json!({"faults": [{"call": 0, "fault": {"kind": "cut_stream", "after_chunks": 3}}]}))
            .await;
    let body = chat(json!({"stream": true, "stream_options": {"include_usage": true}}));
    let r = post(&p, "/v1/chat/completions", body.clone()).await;
    assert_eq!(r.status(), 200);
    let (text, failed) = read_all(r).await;
    assert!(failed, "the body ends in an error, not a clean end");
    let events = sse(&text);
    assert_eq!(events.len(), 3, "{text}");
    assert!(!text.contains("[DONE]") && !text.contains("\"usage\":{"));
    // The call index matched only the first call.
    let (text, failed) = read_all(post(&p, "/v1/chat/completions", body).await).await;
    assert!(!failed && text.ends_with("data: [DONE]\n\n"));

    // Anthropic: message_start (input usage) and one delta, no message_delta.
    p.add_fault(FaultRule {
        endpoint: Some(Endpoint::Messages),
        model: None,
        call: None,
        skip: 0,
        times: 1,
        fault: Fault::CutStream { after_chunks: 4 },
    });
    let (text, failed) =
        read_all(post(&p, "/v1/messages", messages(json!({"stream": true}))).await).await;
    assert!(failed);
    let names: Vec<_> = sse(&text).into_iter().map(|(n, _)| n.unwrap()).collect();
    assert_eq!(
        names,
        [
            "message_start",
            "content_block_start",
            "ping",
            "content_block_delta"
        ]
    );
    // A whole (non-streaming) response cut: headers, then no body.
    p.add_fault(FaultRule {
        endpoint: Some(Endpoint::Responses),
        model: None,
        call: None,
        skip: 0,
        times: 1,
        fault: Fault::CutStream { after_chunks: 2 },
    });
    let r = post(&p, "/v1/responses", responses(json!({}))).await;
    assert_eq!(r.status(), 200);
    let (text, failed) = read_all(r).await;
    assert!(failed && text.is_empty(), "{text}");
    let cut: Vec<_> = p.requests().iter().map(|r| r.fault.clone()).collect();
    assert_eq!(
        cut,
        [
            Some("cut_stream".into()),
            None,
            Some("cut_stream".into()),
            Some("cut_stream".into())
        ]
    );
}

#[tokio::test]
async fn slow_first_byte_delays_the_headers() {
    let p = start(json!({"faults": [{"fault": {"kind": "slow_first_byte", "ms": 300}}]})).await;
    let t = Instant::now();
    let r = post(&p, "/v1/chat/completions", chat(json!({"stream": true}))).await;
    assert!(
        t.elapsed() >= Duration::from_millis(300),
        "{:?}",
        t.elapsed()
    );
    assert_eq!(r.status(), 200);
    assert!(r.text().await.unwrap().ends_with("data: [DONE]\n\n"));
    let t = Instant::now();
    post(&p, "/v1/chat/completions", chat(json!({}))).await;
    assert!(t.elapsed() < Duration::from_millis(300), "once only");
}

#[tokio::test]
async fn recorder_and_admin_routes() {
    let p = start(json!({})).await;
    let client = reqwest::Client::new();
    let r = client
        .post(format!("{}/v1/messages", p.url()))
        .header("x-api-key", "sk-ant-fake")
        .header("anthropic-version", "2023-06-01")
        .json(&messages(json!({"max_tokens": 42})))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    client
        .post(format!("{}/v1/chat/completions", p.url()))
        .body("not json")
        .send()
        .await
        .unwrap();
    let got: Vec<Value> = client
        .get(format!("{}/_fake/requests", p.url()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(got.len(), 2, "admin routes are not recorded");
    assert_eq!(serde_json::to_value(p.requests()).unwrap(), json!(got));
    let first = &p.requests()[0];
    assert_eq!(
        (
            first.seq,
            first.call,
            first.method.as_str(),
            first.path.as_str()
        ),
        (0, Some(0), "POST", "/v1/messages")
    );
    assert_eq!(first.endpoint, Some(Endpoint::Messages));
    assert_eq!(first.headers["x-api-key"], "sk-ant-fake");
    assert_eq!(first.headers["anthropic-version"], "2023-06-01");
    assert_eq!(first.body["max_tokens"], 42);
    assert_eq!(
        (first.output_bound, first.model.as_deref(), first.stream),
        (Some(42), Some("claude-fake"), false)
    );
    assert_eq!(
        (first.prompt_tokens, first.completion_tokens, first.status),
        (Some(4), Some(REPLY_WORDS), 200)
    );
    let second = &p.requests()[1];
    assert_eq!(
        (
            second.body.clone(),
            second.body_text.as_deref(),
            second.status
        ),
        (Value::Null, Some("not json"), 400)
    );

    // Fault rules over the admin route; a bad one is refused naming the key.
    let r = client
        .post(format!("{}/_fake/faults", p.url()))
        .body(r#"{"fault": {"kind": "server_error"}, "tims": 2}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    assert!(r.text().await.unwrap().contains("unknown field `tims`"));
    let r = client
        .post(format!("{}/_fake/faults", p.url()))
        .body(r#"{"fault": {"kind": "server_error", "status": 503}}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(
        post(&p, "/v1/chat/completions", chat(json!({})))
            .await
            .status(),
        503
    );

    let r = client
        .post(format!("{}/_fake/reset", p.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(p.requests().is_empty());
    assert_eq!(
        post(&p, "/v1/chat/completions", chat(json!({})))
            .await
            .status(),
        200,
        "runtime rules gone"
    );
    assert_eq!(p.requests()[0].call, Some(0), "numbering restarts");
    p.add_fault(serde_json::from_value(json!({"fault": {"kind": "server_error"}})).unwrap());
    let r = client
        .delete(format!("{}/_fake/faults", p.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(
        post(&p, "/v1/chat/completions", chat(json!({})))
            .await
            .status(),
        200
    );
    p.reset();
    assert!(p.requests().is_empty());
    p.shutdown().await;
}

#[tokio::test]
async fn shutdown_refuses_new_connections() {
    let p = start(json!({})).await;
    let url = p.url();
    p.shutdown().await;
    let r = reqwest::Client::new()
        .post(format!("{url}/v1/messages"))
        .json(&messages(json!({})))
        .send()
        .await;
    assert!(r.is_err());
}

#[test]
fn unknown_config_keys_are_refused_by_name() {
    let e = serde_json::from_value::<FakeConfig>(json!({"reply": "x", "replys": {}})).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("unknown field `replys`, expected one of"),
        "{e}"
    );
    let e = serde_json::from_value::<FakeConfig>(
        json!({"faults": [{"fault": {"kind": "cut_stream", "after": 2}}]}),
    )
    .unwrap_err();
    assert!(e.to_string().contains("unknown field `after`"), "{e}");
    let e = serde_json::from_value::<FaultRule>(
        json!({"path": "/v1/messages", "fault": {"kind": "server_error"}}),
    )
    .unwrap_err();
    assert!(e.to_string().contains("unknown field `path`"), "{e}");
    let e = serde_json::from_value::<FaultRule>(json!({"fault": {"kind": "explode"}})).unwrap_err();
    assert!(e.to_string().contains("unknown variant `explode`"), "{e}");
    let e = serde_json::from_value::<FaultRule>(
        json!({"endpoint": "embeddings", "fault": {"kind": "server_error"}}),
    )
    .unwrap_err();
    assert!(
        e.to_string().contains("unknown variant `embeddings`"),
        "{e}"
    );
    let rule: FaultRule =
        serde_json::from_value(json!({"fault": {"kind": "rate_limited"}})).unwrap();
    assert_eq!(
        (rule.times, rule.fault),
        (
            1,
            Fault::RateLimited {
                retry_after: Some("1".into())
            }
        )
    );
}

#[tokio::test]
async fn fifty_calls_at_once_are_each_answered_and_recorded_once() {
    let p = start(json!({})).await;
    let client = reqwest::Client::new();
    let calls = (0..50).map(|i| {
        let client = client.clone();
        let url = format!("{}/v1/chat/completions", p.url());
        async move {
            let body = chat(json!({"stream": i % 2 == 0, "max_tokens": 1 + i % 5}));
            let r = client.post(url).json(&body).send().await.unwrap();
            (r.status().as_u16(), r.text().await.unwrap())
        }
    });
    let answers = futures_join_all(calls).await;
    assert!(answers
        .iter()
        .all(|(s, body)| *s == 200 && !body.is_empty()));
    let mut seen: Vec<u64> = p.requests().iter().map(|r| r.call.unwrap()).collect();
    seen.sort_unstable();
    assert_eq!(seen, (0..50).collect::<Vec<_>>());
}

/// Runs the futures concurrently on the test's runtime (spawned tasks, results in order).
async fn futures_join_all<F>(futures: impl Iterator<Item = F>) -> Vec<F::Output>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    let handles: Vec<_> = futures.map(tokio::spawn).collect();
    let mut out = Vec::new();
    for h in handles {
        out.push(h.await.expect("task"));
    }
    out
}

#[tokio::test]
async fn slow_chunks_keep_a_stream_in_flight() {
    let p =
        start(json!({"reply": "a b c", "faults": [{"fault": {"kind": "slow_chunks", "ms": 60}}]}))
            .await;
    let t = Instant::now();
    let mut r = post(&p, "/v1/messages", messages(json!({"stream": true}))).await;
    assert!(
        t.elapsed() < Duration::from_millis(60),
        "headers first: {:?}",
        t.elapsed()
    );
    let first = r.chunk().await.unwrap().unwrap();
    assert!(String::from_utf8_lossy(&first).starts_with("event: message_start"));
    let (rest, failed) = read_all(r).await;
    assert!(
        !failed && rest.ends_with("{\"type\":\"message_stop\"}\n\n"),
        "{rest}"
    );
    // 9 events, 60 ms before each.
    assert!(
        t.elapsed() >= Duration::from_millis(9 * 60),
        "{:?}",
        t.elapsed()
    );
    assert_eq!(p.requests()[0].fault.as_deref(), Some("slow_chunks"));
}

#[tokio::test]
async fn stream_error_sends_the_providers_error_event() {
    let p = start(
        json!({"faults": [{"times": 0, "fault": {"kind": "stream_error", "after_chunks": 2}}]}),
    )
    .await;
    let body = chat(json!({"stream": true, "stream_options": {"include_usage": true}}));
    let (text, failed) = read_all(post(&p, "/v1/chat/completions", body).await).await;
    assert!(!failed, "the stream ends cleanly");
    let events = sse(&text);
    assert_eq!(events.len(), 3);
    let last: Value = serde_json::from_str(&events[2].1).unwrap();
    assert_eq!(last["error"]["type"], "server_error");
    assert!(!text.contains("[DONE]"));
    let (text, _) =
        read_all(post(&p, "/v1/responses", responses(json!({"stream": true}))).await).await;
    let events = sse(&text);
    assert_eq!(events.len(), 3);
    assert_eq!(events[2].0.as_deref(), Some("error"));
    let e: Value = serde_json::from_str(&events[2].1).unwrap();
    assert_eq!(
        (e["type"].clone(), e["sequence_number"].clone()),
        (json!("error"), json!(2))
    );
    let (text, _) =
        read_all(post(&p, "/v1/messages", messages(json!({"stream": true}))).await).await;
    let events = sse(&text);
    assert_eq!(
        events
            .iter()
            .map(|e| e.0.clone().unwrap())
            .collect::<Vec<_>>(),
        ["message_start", "content_block_start", "error"]
    );
    assert!(events[2].1.contains("overloaded_error"));
    // A whole response: the provider's 500.
    assert_eq!(
        post(&p, "/v1/messages", messages(json!({}))).await.status(),
        500
    );
    let statuses: Vec<_> = p
        .requests()
        .iter()
        .map(|r| (r.status, r.fault.clone().unwrap()))
        .collect();
    assert_eq!(
        statuses.iter().map(|s| s.0).collect::<Vec<_>>(),
        [200, 200, 200, 500]
    );
    assert!(statuses.iter().all(|s| s.1 == "stream_error"));
}
