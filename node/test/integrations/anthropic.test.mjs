// cycles-sdk/anthropic with the real `@anthropic-ai/sdk` package (pinned in this folder) against
// the fake provider and the local Cycles server over real HTTP, asserting the server's ledger.
// One token per word: "say hello to me" is 4 input tokens, the reply 9 output tokens; core's
// estimate of USER is 4 + ceil(15 / 4) = 8 plus max_tokens.
import assert from "node:assert/strict";
import { test } from "node:test";

import Anthropic from "@anthropic-ai/sdk";
import { BudgetExceededError } from "cycles-sdk";
import { CallNotSentError, guardAnthropic } from "cycles-sdk/anthropic";
import { FakeProvider, LocalServer } from "cycles-sdk/testing";

import { eventsOf } from "./events.mjs";

const USER = [{ role: "user", content: "say hello to me" }];
const REPLY = "This is a deterministic reply from the fake provider.";

async function withSetup({ allocated = 1_000_000, caps } = {}, body) {
  const provider = new FakeProvider();
  const server = new LocalServer({ budgets: [{ scope: "tenant:acme", unit: "TOKENS", allocated, ...(caps ? { caps } : {}) }] });
  const cycles = server.client({ journalEnabled: false });
  const events = [];
  cycles.on("event", (e) => events.push(e));
  const anthropic = guardAnthropic(new Anthropic({ baseURL: provider.baseUrl, apiKey: "sk-ant-fake", maxRetries: 0 }), { client: cycles });
  try {
    await body({ provider, server, anthropic, events });
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

test("messages.create whole and streamed: the estimate reserved, the usage committed", async () => {
  await withSetup({}, async ({ server, anthropic }) => {
    const m = await anthropic.messages.create({ model: "claude-fake", max_tokens: 100, messages: USER });
    assert.equal(m.content[0].text, REPLY);
    assert.equal(entries(server, "reserve")[0].amount, 108);
    assert.equal(entries(server, "commit")[0].amount, 13);
    const types = [];
    for await (const e of await anthropic.messages.create({ model: "claude-fake", max_tokens: 100, messages: USER, stream: true })) types.push(e.type);
    assert.deepEqual([types[0], types.at(-1)], ["message_start", "message_stop"]);
    assert.equal(entries(server, "commit")[1].amount, 13);
  });
});

test("messages.stream: the library's MessageStream, one reservation, the usage committed", async () => {
  await withSetup({}, async ({ provider, server, anthropic }) => {
    const stream = anthropic.messages.stream({ model: "claude-fake", max_tokens: 100, messages: USER }, { cycles: { actionName: "streamed", idempotencyKey: "s-1" } });
    let text = "";
    stream.on("text", (t) => (text += t));
    const final = await stream.finalMessage();
    assert.equal(text, REPLY);
    assert.equal(final.usage.output_tokens, 9);
    assert.equal(only(server, "reserve").amount, 108);
    const sent = JSON.parse(server.requests().find((q) => q.operation === "createReservation").body);
    assert.deepEqual([sent.action.name, sent.idempotency_key], ["streamed", "s-1"], "the cycles option reaches the guard through the MessageStream");
    // The stream settles as its last event is read, before finalMessage resolves.
    assert.equal(only(server, "commit").amount, 13);
    assert.equal(provider.requests()[0].headers["x-stainless-helper-method"], "stream", "the library's own stream helper made the request");
    assert.equal(JSON.stringify(provider.requests()[0].body).includes("cycles"), false);
  });
});

test("provider 500 released; a cut stream commits the input message_start reported", async () => {
  await withSetup({}, async ({ provider, server, anthropic }) => {
    provider.addFault({ call: 0, fault: { kind: "server_error" } });
    await assert.rejects(anthropic.messages.create({ model: "claude-fake", max_tokens: 100, messages: USER }), Anthropic.InternalServerError);
    assert.equal(only(server, "release").reservation_id, entries(server, "reserve")[0].reservation_id);
    provider.addFault({ call: 1, fault: { kind: "cut_stream", afterChunks: 5 } });
    await assert.rejects(async () => {
      for await (const _ of await anthropic.messages.create({ model: "claude-fake", max_tokens: 100, messages: USER, stream: true }));
    });
    const start = provider.requests()[1];
    assert.equal(start.fault, "cut_stream");
    const commit = only(server, "commit");
    assert.equal(commit.reservation_id, entries(server, "reserve")[1].reservation_id);
    assert.equal(commit.amount, 4, "message_start's 4 input tokens (and 0 output); no message_delta came");
  });
});

test("caps lower max_tokens (the provider saw it, caps_applied said so) and filter the tools", async () => {
  await withSetup({ caps: { maxTokens: 2, toolAllowlist: ["calc"] } }, async ({ provider, server, anthropic, events }) => {
    const tools = [
      { name: "shell", input_schema: { type: "object" } },
      { name: "calc", input_schema: { type: "object" } },
    ];
    const m = await anthropic.messages.create({ model: "claude-fake", max_tokens: 100, messages: USER, tools });
    assert.deepEqual([m.stop_reason, m.usage.output_tokens], ["max_tokens", 2]);
    const seen = provider.requests()[0];
    assert.equal(seen.outputBound, 2);
    assert.deepEqual(seen.body.tools.map((t) => t.name), ["calc"]);
    assert.equal(only(server, "commit").amount, 4 + 2);
    const [applied] = await eventsOf(events, "caps_applied");
    assert.deepEqual([applied.api, applied.boundFrom, applied.boundTo, applied.removedTools], ["messages", 100, 2, ["shell"]]);
  });
});

test("a denial: BudgetExceededError (messages.stream: as the AnthropicError's cause); the provider got no request", async () => {
  await withSetup({ allocated: 50 }, async ({ provider, server, anthropic }) => {
    await assert.rejects(anthropic.messages.create({ model: "claude-fake", max_tokens: 100, messages: USER }), BudgetExceededError);
    const stream = anthropic.messages.stream({ model: "claude-fake", max_tokens: 100, messages: USER });
    await assert.rejects(stream.finalMessage(), (e) => e instanceof Anthropic.AnthropicError && e.cause instanceof BudgetExceededError);
    assert.equal(provider.requests().length, 0);
    assert.equal(server.ledger().length, 0);
  });
  await withSetup({ caps: { maxTokens: 0 } }, async ({ provider, server, anthropic }) => {
    await assert.rejects(anthropic.messages.create({ model: "claude-fake", max_tokens: 100, messages: USER }), CallNotSentError);
    assert.equal(provider.requests().length, 0);
    assert.equal(only(server, "release").reservation_id, only(server, "reserve").reservation_id);
  });
});

test("50 concurrent calls (create and stream): each settled exactly once", async () => {
  await withSetup({}, async ({ provider, server, anthropic }) => {
    await Promise.all(
      Array.from({ length: 50 }, (_, i) =>
        i % 2 === 0
          ? anthropic.messages.create({ model: "claude-fake", max_tokens: 100, messages: USER })
          : anthropic.messages.stream({ model: "claude-fake", max_tokens: 100, messages: USER }).finalMessage(),
      ),
    );
    const reserves = entries(server, "reserve");
    const commits = entries(server, "commit");
    assert.equal(reserves.length, 50);
    assert.equal(commits.length, 50);
    assert.deepEqual(new Set(commits.map((c) => c.reservation_id)), new Set(reserves.map((r) => r.reservation_id)));
    assert.ok(commits.every((c) => c.amount === 13));
    assert.equal(provider.requests().length, 50);
  });
});

test("an aborted stream commits the usage seen so far (message_start's input)", async () => {
  await withSetup({}, async ({ provider, server, anthropic }) => {
    provider.addFault({ fault: { kind: "slow_chunks", ms: 30 } });
    const abort = new AbortController();
    let r;
    // The library ends an aborted stream's loop quietly.
    for await (const e of await anthropic.messages.create({ model: "claude-fake", max_tokens: 100, messages: USER, stream: true }, { signal: abort.signal, cycles: { onReservation: (x) => (r = x) } })) {
      if (e.type === "content_block_delta") abort.abort();
    }
    assert.equal(only(server, "commit").amount, 4);
    assert.equal(r.outcome, "settled", "a consumer's abort ends the call early: its usage committed as a success");
  });
});
