// cycles-sdk/openai with the real `openai` package (pinned in this folder) against the fake
// provider and the local Cycles server over real HTTP, asserting the server's ledger. The fake
// provider counts one token per word: "say hello to me" is 4 prompt tokens, its reply
// ("This is a deterministic reply from the fake provider.") 9 completion tokens. Core's
// estimate of USER is 4 + ceil(15 / 4) = 8 prompt tokens plus the output bound.
import assert from "node:assert/strict";
import { test } from "node:test";

import OpenAI from "openai";
import { BudgetExceededError, InvalidArgumentError } from "cycles-sdk";
import { CallNotSentError, guardOpenAI, withCycles } from "cycles-sdk/openai";
import { FakeProvider, LocalServer } from "cycles-sdk/testing";

import { eventsOf } from "./events.mjs";

const USER = [{ role: "user", content: "say hello to me" }];
const REPLY = "This is a deterministic reply from the fake provider.";

/** A fresh provider, Cycles server (TOKENS budget, optional caps) and guarded client; all closed after `body`. */
async function withSetup({ allocated = 1_000_000, caps, pricing } = {}, body) {
  const provider = new FakeProvider();
  const server = new LocalServer({ budgets: [{ scope: "tenant:acme", unit: pricing?.unit ?? "TOKENS", allocated, ...(caps ? { caps } : {}) }] });
  const cycles = server.client({ journalEnabled: false });
  const events = [];
  cycles.on("event", (e) => events.push(e));
  const openai = guardOpenAI(new OpenAI({ baseURL: provider.openaiBaseUrl, apiKey: "sk-fake", maxRetries: 0 }), { client: cycles, ...(pricing ? { pricing } : {}) });
  try {
    await body({ provider, server, cycles, openai, events });
  } finally {
    await cycles.close();
    server.stop();
    provider.stop();
  }
}

const entries = (server, kind) => server.ledger().filter((e) => e.kind === kind);
const only = (server, kind) => {
  const all = entries(server, kind);
  assert.equal(all.length, 1, `one ${kind}: ${JSON.stringify(server.ledger())}`);
  return all[0];
};
const reserveBody = (server) => JSON.parse(server.requests().find((r) => r.operation === "createReservation").body);

test("chat completions: the estimate reserved, the reported usage committed", async () => {
  await withSetup({}, async ({ provider, server, openai }) => {
    const r = await openai.chat.completions.create({ model: "gpt-fake", max_tokens: 64, messages: USER });
    assert.equal(r.choices[0].message.content, REPLY);
    assert.equal(only(server, "reserve").amount, 8 + 64);
    const commit = only(server, "commit");
    assert.equal(commit.amount, 4 + 9);
    assert.equal(commit.reservation_id, only(server, "reserve").reservation_id);
    assert.deepEqual(reserveBody(server).action, { kind: "llm.completion", name: "gpt-fake" });
    assert.equal(provider.requests().length, 1);
    // withResponse() as the library's APIPromise has it.
    const { data, response } = await openai.chat.completions.create({ model: "gpt-fake", max_tokens: 64, messages: USER }).withResponse();
    assert.equal(data.usage.completion_tokens, 9);
    assert.equal(response.status, 200);
    assert.equal(entries(server, "commit").length, 2);
  });
});

test("chat completions streamed: include_usage added, the final empty-choices chunk's usage committed", async () => {
  await withSetup({}, async ({ provider, server, openai }) => {
    const stream = await openai.chat.completions.create({ model: "gpt-fake", max_tokens: 64, messages: USER, stream: true });
    assert.ok(stream instanceof (await import("openai/streaming")).Stream, "the library's own Stream class");
    const chunks = [];
    for await (const c of stream) {
      if (chunks.length === 0) assert.equal(entries(server, "commit").length, 0, "held while the stream runs");
      chunks.push(c);
    }
    assert.equal(chunks.map((c) => c.choices[0]?.delta.content ?? "").join(""), REPLY);
    assert.deepEqual(chunks.at(-1).choices, [], "the usage chunk the wrapper asked for");
    assert.deepEqual(provider.requests()[0].body.stream_options, { include_usage: true });
    assert.equal(only(server, "commit").amount, 13);
    // The caller's own include_usage: false is kept: no usage, so the estimate is committed.
    for await (const _ of await openai.chat.completions.create({ model: "gpt-fake", max_tokens: 64, messages: USER, stream: true, stream_options: { include_usage: false } }));
    assert.deepEqual(provider.requests()[1].body.stream_options, { include_usage: false });
    assert.equal(entries(server, "commit")[1].amount, 72);
  });
});

test("responses whole and streamed: response.completed's usage committed", async () => {
  await withSetup({}, async ({ server, openai }) => {
    const body = { model: "gpt-fake", instructions: "Be terse.", input: "say hello", max_output_tokens: 50 };
    const r = await openai.responses.create(body);
    assert.equal(r.output_text, REPLY);
    // Estimate: (4 + ceil(9/4)) + (4 + ceil(9/4)) = 14 prompt, 50 bound; actual 4 words + 9.
    assert.equal(entries(server, "reserve")[0].amount, 64);
    assert.equal(entries(server, "commit")[0].amount, 13);
    const types = [];
    for await (const e of await openai.responses.create({ ...body, stream: true })) types.push(e.type);
    assert.equal(types.at(-1), "response.completed");
    assert.equal(entries(server, "commit")[1].amount, 13);
  });
});

test("provider 500: the library's error, the reservation released", async () => {
  await withSetup({}, async ({ provider, server, openai }) => {
    provider.addFault({ fault: { kind: "server_error" } });
    await assert.rejects(openai.chat.completions.create({ model: "gpt-fake", max_tokens: 64, messages: USER }), (e) => e instanceof OpenAI.InternalServerError);
    assert.equal(only(server, "release").reservation_id, only(server, "reserve").reservation_id);
    assert.equal(entries(server, "commit").length, 0);
  });
});

test("a cut stream is a failed call (released without usage); a consumer's break or an abort ended it early: usage, else the estimate", async () => {
  await withSetup({}, async ({ provider, server, openai }) => {
    provider.addFault({ call: 0, fault: { kind: "cut_stream", afterChunks: 3 } });
    await assert.rejects(async () => {
      for await (const _ of await openai.chat.completions.create({ model: "gpt-fake", max_tokens: 64, messages: USER, stream: true }));
    });
    assert.equal(entries(server, "release").length, 1);
    for await (const c of await openai.responses.create({ model: "gpt-fake", input: "say hello", max_output_tokens: 20, stream: true })) {
      if (c.type === "response.output_text.delta") break;
    }
    // The provider may have billed what nobody saw: the bound the caller accepted is committed.
    assert.equal(entries(server, "commit").length, 1, "a break before any usage commits the estimate");
    assert.equal(entries(server, "commit")[0].amount, entries(server, "reserve")[1].amount);
    provider.addFault({ fault: { kind: "slow_chunks", ms: 30 } });
    const abort = new AbortController();
    for await (const _ of await openai.chat.completions.create({ model: "gpt-fake", max_tokens: 64, messages: USER, stream: true }, { signal: abort.signal })) abort.abort();
    assert.equal(entries(server, "commit").length, 2, "an abort before any usage commits the estimate");
    assert.equal(entries(server, "commit")[1].amount, entries(server, "reserve")[2].amount);
    assert.equal(entries(server, "release").length, 1);
  });
});

test("a Responses error event settles the call as failed (released without usage); a cap below 16 is not sent", async () => {
  await withSetup({}, async ({ provider, server, openai }) => {
    provider.addFault({ fault: { kind: "stream_error", afterChunks: 2 } });
    const types = [];
    for await (const e of await openai.responses.create({ model: "gpt-fake", input: "x", max_output_tokens: 16, stream: true })) types.push(e.type);
    assert.equal(types.at(-1), "error");
    assert.equal(entries(server, "release").length, 1);
    assert.equal(entries(server, "commit").length, 0);
  });
  await withSetup({ caps: { maxTokens: 10 } }, async ({ provider, server, openai }) => {
    await assert.rejects(openai.responses.create({ model: "gpt-fake", input: "x", max_output_tokens: 100 }), (e) => e instanceof CallNotSentError && /not sent/.test(e.message));
    assert.equal(entries(server, "release").length, 1);
    assert.deepEqual(provider.requests(), []);
  });
});

test("caps lower the output bound (the provider saw it, caps_applied said so) and filter the tools", async () => {
  await withSetup({ caps: { maxTokens: 3, toolDenylist: ["shell"] } }, async ({ provider, server, openai, events }) => {
    const r = await openai.chat.completions.create({ model: "gpt-fake", max_tokens: 64, messages: USER });
    assert.equal(r.choices[0].message.content, "This is a");
    assert.equal(provider.requests()[0].outputBound, 3);
    assert.equal(only(server, "commit").amount, 4 + 3);
    const applied = await eventsOf(events, "caps_applied");
    assert.equal(applied.length, 1);
    assert.deepEqual([applied[0].api, applied[0].boundFrom, applied[0].boundTo, applied[0].send], ["chat_completions", 64, 3, true]);
    const tools = [
      { type: "function", function: { name: "shell", parameters: {} } },
      { type: "function", function: { name: "calc", parameters: {} } },
    ];
    // No bound of its own (so the estimate is given per call): the cap becomes its bound.
    const unbounded = { model: "gpt-fake", messages: USER, tools, tool_choice: { type: "function", function: { name: "shell" } }, stream: true };
    for await (const _ of await openai.chat.completions.create(unbounded, { cycles: { estimate: 100 } }));
    const sent = provider.requests()[1].body;
    assert.deepEqual(sent.tools.map((t) => t.function.name), ["calc"]);
    assert.equal("tool_choice" in sent, false, "a choice naming a removed tool is removed");
    assert.equal(sent.max_completion_tokens, 3, "no bound: the cap set on the API's first field");
    assert.deepEqual((await eventsOf(events, "caps_applied", 2))[1].removedTools, ["shell"]);
  });
});

test("a cap of 0: nothing sent, released, CallNotSentError (a BudgetExceededError)", async () => {
  await withSetup({ caps: { maxTokens: 0 } }, async ({ provider, server, openai }) => {
    await assert.rejects(openai.responses.create({ model: "gpt-fake", input: "hi", max_output_tokens: 10 }), (e) => {
      assert.ok(e instanceof CallNotSentError && e instanceof BudgetExceededError, String(e));
      assert.equal(e.plan.send, false);
      assert.equal(e.released, true);
      return true;
    });
    assert.equal(provider.requests().length, 0);
    assert.equal(only(server, "release").reservation_id, only(server, "reserve").reservation_id);
  });
});

test("a denial: BudgetExceededError, and the provider got no request", async () => {
  await withSetup({ allocated: 50 }, async ({ provider, server, openai }) => {
    await assert.rejects(openai.chat.completions.create({ model: "gpt-fake", max_tokens: 64, messages: USER }), BudgetExceededError);
    await assert.rejects(async () => {
      for await (const _ of await openai.chat.completions.create({ model: "gpt-fake", max_tokens: 64, messages: USER, stream: true }));
    }, BudgetExceededError);
    assert.equal(provider.requests().length, 0);
    assert.equal(server.ledger().length, 0);
  });
});

test("per-call overrides through the cycles request option, stripped before the provider", async () => {
  await withSetup({ pricing: { unit: "USD_MICROCENTS", models: { "gpt-fake": { inputPerMtok: 1_000_000, outputPerMtok: 2_000_000 } } } }, async ({ provider, server, openai }) => {
    let reservation;
    await openai.chat.completions.create(
      { model: "gpt-fake", max_tokens: 64, messages: USER },
      withCycles({ actionName: "summary", actionTags: ["t"], estimate: 500, idempotencyKey: "call-1", onReservation: (r) => (reservation = r) }, { timeout: 10_000 }),
    );
    const sent = reserveBody(server);
    assert.deepEqual([sent.action, sent.idempotency_key, sent.estimate], [{ kind: "llm.completion", name: "summary", tags: ["t"] }, "call-1", { unit: "USD_MICROCENTS", amount: 500 }]);
    // Priced: 4 x 1 + 9 x 2 per token.
    assert.equal(only(server, "commit").amount, 22);
    assert.equal(reservation.settlement.status, "committed");
    assert.equal(Object.keys(provider.requests()[0].headers).some((h) => h.includes("cycles")), false);
    await assert.rejects(openai.chat.completions.create({ model: "gpt-fake", max_tokens: 1, messages: USER }, { cycles: { nmae: "x" } }), (e) => e instanceof InvalidArgumentError && /unknown cycles request option nmae/.test(e.message));
    await assert.rejects(openai.chat.completions.create({ model: "gpt-fake", messages: USER }), (e) => e instanceof InvalidArgumentError && /no output bound/.test(e.message));
    await assert.rejects(openai.chat.completions.create({ model: "unpriced", max_tokens: 1, messages: USER }), (e) => e instanceof InvalidArgumentError && /no price for model "unpriced"/.test(e.message));
    const boom = new Error("boom");
    await assert.rejects(openai.chat.completions.create({ model: "gpt-fake", max_tokens: 1, messages: USER }, { cycles: { onReservation: () => { throw boom; } } }), (e) => e === boom);
    assert.equal(entries(server, "release").length, 1, "a throwing onReservation releases");
    assert.equal(provider.requests().length, 1);
    assert.throws(() => guardOpenAI({}, { client: server.client() }), (e) => e instanceof InvalidArgumentError && /npm install openai/.test(e.message));
  });
});

test("50 concurrent calls, streamed and not: each reserved and settled exactly once", async () => {
  await withSetup({}, async ({ provider, server, openai }) => {
    const calls = Array.from({ length: 50 }, async (_, i) => {
      if (i % 2 === 0) return openai.chat.completions.create({ model: "gpt-fake", max_tokens: 64, messages: USER });
      for await (const _ of await openai.chat.completions.create({ model: "gpt-fake", max_tokens: 64, messages: USER, stream: true }));
    });
    await Promise.all(calls);
    const reserves = entries(server, "reserve");
    const commits = entries(server, "commit");
    assert.equal(reserves.length, 50);
    assert.equal(commits.length, 50);
    assert.deepEqual(new Set(commits.map((c) => c.reservation_id)), new Set(reserves.map((r) => r.reservation_id)));
    assert.ok(commits.every((c) => c.amount === 13));
    assert.equal(provider.requests().length, 50);
  });
});

test("a stream holds its reservation: a short lease is extended while it runs", async () => {
  const provider = new FakeProvider({ faults: [{ fault: { kind: "slow_chunks", ms: 400 } }] });
  const server = new LocalServer({ budgets: [{ scope: "tenant:acme", unit: "TOKENS", allocated: 1000 }] });
  const cycles = server.client({ journalEnabled: false, requestTimeoutMs: 500 });
  const openai = guardOpenAI(new OpenAI({ baseURL: provider.openaiBaseUrl, apiKey: "sk-fake", maxRetries: 0 }), { client: cycles, ttlMs: 3500 });
  try {
    let r;
    for await (const _ of await openai.chat.completions.create({ model: "gpt-fake", max_tokens: 64, messages: USER, stream: true }, { cycles: { onReservation: (x) => (r = x) } }));
    assert.ok(r.lease.extensions >= 1, JSON.stringify(r.lease));
    assert.equal(r.settlement.status, "committed");
    assert.ok(server.requests().some((q) => q.operation === "extendReservation"));
    assert.equal(only(server, "commit").amount, 13);
  } finally {
    await cycles.close();
    server.stop();
    provider.stop();
  }
});
