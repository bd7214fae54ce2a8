// cycles-sdk/testing's FakeProvider with the real `openai` and `@anthropic-ai/sdk` packages
// (pinned in this folder's package.json, installed by node/scripts/test.sh) over real HTTP:
// Chat Completions whole and streamed with include_usage, Responses whole and streamed,
// Messages create and stream, 500 and 429 as each library's error types, a cut stream seen
// as an error, the recorder, reset, and unknown config keys refused by name.
import assert from "node:assert/strict";
import { test } from "node:test";

import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import { InvalidArgumentError } from "cycles-sdk";
import { FakeProvider } from "cycles-sdk/testing";

const REPLY = "This is a deterministic reply from the fake provider.";
const REPLY_TOKENS = 9;
const USER = [{ role: "user", content: "say hello to me" }];

const oai = (p) => new OpenAI({ baseURL: p.openaiBaseUrl, apiKey: "sk-fake", maxRetries: 0 });
const ant = (p) => new Anthropic({ baseURL: p.baseUrl, apiKey: "sk-ant-fake", maxRetries: 0 });
/** Runs `body` with a fresh provider, disposed as `await using` would (Node 20 has no `using` syntax). */
async function withProvider(config, body) {
  const p = new FakeProvider(config);
  try {
    await body(p);
  } finally {
    await p[Symbol.asyncDispose]();
    assert.equal(p.running, false);
  }
}
const header = (headers, name) => (typeof headers?.get === "function" ? headers.get(name) : headers?.[name]);

test("chat completions whole, bounded by max_tokens and max_completion_tokens", async () => {
  await withProvider(undefined, async (p) => {
    const client = oai(p);
    let r = await client.chat.completions.create({ model: "gpt-fake", messages: USER });
    assert.equal(r.choices[0].message.content, REPLY);
    assert.equal(r.choices[0].finish_reason, "stop");
    assert.deepEqual([r.usage.prompt_tokens, r.usage.completion_tokens], [4, REPLY_TOKENS]);
    r = await client.chat.completions.create({ model: "gpt-fake", messages: USER, max_tokens: 3 });
    assert.deepEqual([r.choices[0].message.content, r.choices[0].finish_reason], ["This is a", "length"]);
    r = await client.chat.completions.create({ model: "gpt-fake", messages: USER, max_completion_tokens: 2 });
    assert.equal(r.usage.completion_tokens, 2);
    const seen = p.requests();
    assert.deepEqual(seen.map((q) => q.outputBound), [null, 3, 2]);
    assert.equal(seen[0].headers.authorization, "Bearer sk-fake");
    assert.deepEqual([seen[0].path, seen[0].endpoint, seen[0].call], ["/v1/chat/completions", "chat_completions", 0]);
  });
});

test("chat completions streamed, the usage chunk only with include_usage", async () => {
  await withProvider(undefined, async (p) => {
    const client = oai(p);
    const chunks = [];
    for await (const c of await client.chat.completions.create({ model: "gpt-fake", messages: USER, stream: true, stream_options: { include_usage: true } })) {
      chunks.push(c);
    }
    assert.equal(chunks.map((c) => c.choices[0]?.delta.content ?? "").join(""), REPLY);
    assert.ok(chunks.slice(0, -1).every((c) => c.usage === null));
    const last = chunks.at(-1);
    assert.deepEqual(last.choices, []);
    assert.deepEqual([last.usage.prompt_tokens, last.usage.completion_tokens], [4, REPLY_TOKENS]);
    const plain = [];
    for await (const c of await client.chat.completions.create({ model: "gpt-fake", messages: USER, stream: true })) plain.push(c);
    assert.ok(plain.every((c) => c.usage === undefined || c.usage === null), "no usage without include_usage");
    assert.equal(plain.at(-1).choices[0].finish_reason, "stop");
  });
});

test("responses whole and streamed, response.completed carrying usage", async () => {
  await withProvider(undefined, async (p) => {
    const client = oai(p);
    const r = await client.responses.create({ model: "gpt-fake", instructions: "Be terse.", input: "say hello" });
    assert.deepEqual([r.output_text, r.status], [REPLY, "completed"]);
    assert.deepEqual([r.usage.input_tokens, r.usage.output_tokens], [4, REPLY_TOKENS]);
    const events = [];
    for await (const e of await client.responses.create({ model: "gpt-fake", input: "say hello", stream: true })) events.push(e);
    assert.equal(events[0].type, "response.created");
    assert.equal(events.at(-1).type, "response.completed");
    assert.equal(events.at(-1).response.usage.output_tokens, REPLY_TOKENS);
    assert.equal(events.filter((e) => e.type === "response.output_text.delta").map((e) => e.delta).join(""), REPLY);
    const stream = client.responses.stream({ model: "gpt-fake", input: "say hello", max_output_tokens: 16 });
    for await (const _ of stream) {
      // drain
    }
    const final = await stream.finalResponse();
    assert.equal(final.output_text, REPLY);
    assert.equal(p.requests().at(-1).outputBound, 16);
  });
});

test("anthropic messages create and stream", async () => {
  await withProvider(undefined, async (p) => {
    const client = ant(p);
    let m = await client.messages.create({ model: "claude-fake", max_tokens: 100, messages: USER });
    assert.deepEqual(m.content, [{ type: "text", text: REPLY }]);
    assert.equal(m.stop_reason, "end_turn");
    assert.deepEqual([m.usage.input_tokens, m.usage.output_tokens], [4, REPLY_TOKENS]);
    m = await client.messages.create({ model: "claude-fake", max_tokens: 2, messages: USER });
    assert.deepEqual([m.stop_reason, m.usage.output_tokens], ["max_tokens", 2]);
    const stream = client.messages.stream({ model: "claude-fake", max_tokens: 100, messages: USER });
    let text = "";
    stream.on("text", (t) => {
      text += t;
    });
    const final = await stream.finalMessage();
    assert.equal(text, REPLY);
    assert.deepEqual([final.usage.input_tokens, final.usage.output_tokens], [4, REPLY_TOKENS]);
    const seen = p.requests();
    assert.deepEqual(seen.map((q) => q.outputBound), [100, 2, 100]);
    assert.ok([seen[0].headers["x-api-key"], seen[0].headers.authorization].some((v) => v === "sk-ant-fake" || v === "Bearer sk-ant-fake"));
    assert.ok("anthropic-version" in seen[0].headers);
    assert.equal(seen[2].stream, true);
  });
});

test("reply per model and per request", async () => {
  await withProvider({ reply: "plain words", replies: { special: "a special reply" } }, async (p) => {
    let r = await oai(p).chat.completions.create({ model: "x", messages: USER });
    assert.equal(r.choices[0].message.content, "plain words");
    r = await oai(p).chat.completions.create({ model: "special", messages: USER });
    assert.equal(r.choices[0].message.content, "a special reply");
    const m = await ant(p).messages.create({ model: "special", max_tokens: 10, messages: USER }, { headers: { "x-fake-reply": "one two" } });
    assert.equal(m.content[0].text, "one two");
  });
});

test("500 and 429 are each library's error types", async () => {
  await withProvider(undefined, async (p) => {
    p.addFault({ endpoint: "chat_completions", fault: { kind: "server_error" } });
    await assert.rejects(oai(p).chat.completions.create({ model: "gpt-fake", messages: USER }), (e) => e instanceof OpenAI.InternalServerError && e.status === 500);
    p.addFault({ endpoint: "responses", fault: { kind: "rate_limited", retryAfter: "7" } });
    await assert.rejects(oai(p).responses.create({ model: "gpt-fake", input: "hi" }), (e) => e instanceof OpenAI.RateLimitError && header(e.headers, "retry-after") === "7");
    p.addFault({ endpoint: "messages", fault: { kind: "server_error" } });
    await assert.rejects(ant(p).messages.create({ model: "c", max_tokens: 5, messages: USER }), (e) => e instanceof Anthropic.InternalServerError);
    p.addFault({ model: "c", fault: { kind: "rate_limited", retryAfter: "2" } });
    await assert.rejects(ant(p).messages.create({ model: "c", max_tokens: 5, messages: USER }), (e) => {
      assert.ok(e instanceof Anthropic.RateLimitError, String(e));
      assert.equal(header(e.headers, "retry-after"), "2");
      assert.equal(e.error.error.type, "rate_limit_error");
      return true;
    });
    assert.deepEqual(
      p.requests().map((q) => [q.status, q.fault]),
      [
        [500, "server_error"],
        [429, "rate_limited"],
        [500, "server_error"],
        [429, "rate_limited"],
      ],
    );
    const m = await ant(p).messages.create({ model: "c", max_tokens: 5, messages: USER });
    assert.equal(m.usage.output_tokens, 5, "each rule fired once");
  });
});

test("a cut stream and a stream error event are errors after the first chunks", async () => {
  await withProvider(undefined, async (p) => {
    p.addFault({ call: 0, fault: { kind: "cut_stream", afterChunks: 3 } });
    const got = [];
    await assert.rejects(async () => {
      for await (const c of await oai(p).chat.completions.create({ model: "gpt-fake", messages: USER, stream: true, stream_options: { include_usage: true } })) {
        assert.equal(c.usage, null);
        got.push(c.choices[0].delta.content ?? "");
      }
    });
    assert.equal(got.join(""), "This is", "the role chunk and two pieces, then the cut");
    p.addFault({ endpoint: "messages", fault: { kind: "cut_stream", afterChunks: 5 } });
    let text = "";
    const stream = ant(p).messages.stream({ model: "c", max_tokens: 50, messages: USER });
    stream.on("text", (t) => {
      text += t;
    });
    stream.on("error", () => {});
    await assert.rejects(stream.finalMessage());
    assert.equal(text, "This is");
    assert.deepEqual(p.requests().map((q) => q.fault), ["cut_stream", "cut_stream"]);
    // The provider's in-stream error event: an APIError from Chat Completions and Messages,
    // an event of its own in the Responses stream.
    p.reset();
    p.addFault({ times: 0, fault: { kind: "stream_error", afterChunks: 2 } });
    await assert.rejects(async () => {
      for await (const _ of await oai(p).chat.completions.create({ model: "m", messages: USER, stream: true }));
    }, (e) => e instanceof OpenAI.APIError && /scripted error mid-stream/.test(e.message));
    const types = [];
    for await (const e of await oai(p).responses.create({ model: "m", input: "x", stream: true })) types.push(e.type);
    assert.deepEqual(types, ["response.created", "response.in_progress", "error"]);
    const s = ant(p).messages.stream({ model: "c", max_tokens: 9, messages: USER });
    s.on("error", () => {});
    await assert.rejects(s.finalMessage(), (e) => e instanceof Anthropic.APIError && /overloaded_error/.test(e.message));
  });
});

test("a slow first byte, slow chunks", async () => {
  await withProvider({ faults: [{ fault: { kind: "slow_first_byte", ms: 300 } }] }, async (p) => {
    let start = performance.now();
    const m = await ant(p).messages.create({ model: "c", max_tokens: 5, messages: USER });
    assert.ok(performance.now() - start >= 295, "the delay (timer granularity aside)");
    assert.equal(m.usage.output_tokens, 5);
    p.addFault({ fault: { kind: "slow_chunks", ms: 40 } });
    start = performance.now();
    const chunks = [];
    for await (const c of await oai(p).chat.completions.create({ model: "m", messages: USER, max_tokens: 2, stream: true })) chunks.push(c);
    // Five events (role, two pieces, finish, [DONE]), 40 ms before each.
    assert.ok(performance.now() - start >= 5 * 40 - 5, String(performance.now() - start));
    assert.equal(chunks.map((c) => c.choices[0].delta.content ?? "").join(""), "This is");
    assert.deepEqual(p.requests().map((q) => q.fault), ["slow_first_byte", "slow_chunks"]);
  });
});

test("reset, stop, and unknown config keys refused by name", async () => {
  const p = new FakeProvider({ faults: [{ call: 1, fault: { kind: "server_error", status: 503 } }] });
  const client = oai(p);
  await client.chat.completions.create({ model: "m", messages: USER });
  await assert.rejects(client.chat.completions.create({ model: "m", messages: USER }), OpenAI.InternalServerError);
  p.reset();
  assert.deepEqual(p.requests(), []);
  await client.chat.completions.create({ model: "m", messages: USER });
  await assert.rejects(client.chat.completions.create({ model: "m", messages: USER }), OpenAI.InternalServerError);
  p.clearFaults();
  await client.chat.completions.create({ model: "m", messages: USER });
  assert.deepEqual(p.requests().map((q) => q.call), [0, 1, 2]);
  p.stop();
  p.stop();
  assert.equal(p.running, false);
  assert.throws(() => p.requests(), (e) => e instanceof InvalidArgumentError && e.message === "the fake provider is stopped");

  assert.throws(() => new FakeProvider({ replys: {} }), (e) => e instanceof InvalidArgumentError && /unknown FakeProvider config key replys/.test(e.message));
  assert.throws(
    () => new FakeProvider({ faults: [{ fault: { kind: "cut_stream", after_chunks: 1 } }] }),
    (e) => e instanceof InvalidArgumentError && e.message.startsWith("unknown FakeProvider config key faults[0].fault.after_chunks"),
  );
  assert.throws(
    () => new FakeProvider({ faults: [{ fault: { kind: "explode" } }] }),
    (e) => e instanceof InvalidArgumentError && /unknown variant `explode`/.test(e.message) && !/ line \d+/.test(e.message),
  );
  const q = new FakeProvider();
  assert.throws(() => q.addFault({ fault: { kind: "slow_first_byte" } }), (e) => e instanceof InvalidArgumentError && /missing field `ms`/.test(e.message));
  q[Symbol.dispose]();
  assert.equal(q.running, false);
});
