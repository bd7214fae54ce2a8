// cycles-sdk/langchain with the real LangChain.js (`@langchain/core` 1.4, `@langchain/openai`
// 1.5, `@langchain/anthropic` 1.5 and `@langchain/langgraph` 1.7, pinned in this folder): a
// guarded ChatOpenAI against the fake provider (Chat Completions, and Responses for the caps'
// minimum), a guarded ChatAnthropic (Messages), and the local Cycles server's ledger. One token per word: "say hello to me" is 4 input tokens, the reply 9;
// core's estimate of that prompt as one message is 4 + ceil(15 / 4) = 8, plus the model's
// maxTokens (50).
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";

import { ChatAnthropic } from "@langchain/anthropic";
import { tool } from "@langchain/core/tools";
import { END, MessagesAnnotation, START, StateGraph } from "@langchain/langgraph";
import { ChatOpenAI } from "@langchain/openai";
import { BudgetExceededError, InvalidArgumentError } from "cycles-sdk";
import { CallNotSentError, CyclesChatModel, guardChatModel } from "cycles-sdk/langchain";
import { FakeProvider, LocalServer } from "cycles-sdk/testing";

import { eventsOf } from "./events.mjs";

const PROMPT = "say hello to me";
const REPLY = "This is a deterministic reply from the fake provider.";
const RESERVED = 8 + 50;
const COMMITTED = 4 + 9;

const chat = (provider, fields = {}) => new ChatOpenAI({ model: "gpt-fake", apiKey: "sk-fake", maxRetries: 0, maxTokens: 50, configuration: { baseURL: provider.openaiBaseUrl }, ...fields });

/** A fresh provider, Cycles server (TOKENS budget, optional caps) and guarded ChatOpenAI; all closed after `body`. */
async function withSetup({ allocated = 1_000_000, caps, fields } = {}, body) {
  const provider = new FakeProvider();
  const server = new LocalServer({ budgets: [{ scope: "tenant:acme", unit: "TOKENS", allocated, ...(caps ? { caps } : {}) }] });
  const cycles = server.client({ journalEnabled: false });
  const events = [];
  cycles.on("event", (e) => events.push(e));
  const llm = guardChatModel(chat(provider, fields), { client: cycles });
  try {
    await body({ provider, server, cycles, llm, events });
  } finally {
    await cycles.close();
    server.stop();
    provider.stop();
  }
}

const ledger = (server) => server.ledger().map((e) => [e.kind, e.amount]);
const entries = (server, kind) => server.ledger().filter((e) => e.kind === kind);
const text = (chunks) => chunks.map((c) => c.content).join("");
/** A stream's settlement runs in its generator's finally, after the consumer's last read: wait for it. */
async function settled(server, n) {
  for (let i = 0; i < 200 && entries(server, "commit").length + entries(server, "release").length < n; i++) await new Promise((r) => setTimeout(r, 5));
}

test("langchain: invoke, stream and batch: the estimate reserved, the usage committed", async () => {
  await withSetup({}, async ({ provider, server, cycles, llm }) => {
    assert.ok(llm instanceof CyclesChatModel);
    const reply = await llm.invoke(PROMPT);
    assert.equal(reply.content, REPLY);
    assert.equal(reply.usage_metadata.output_tokens, 9);
    const chunks = [];
    for await (const c of await llm.stream(PROMPT)) {
      if (chunks.length === 0) assert.equal(entries(server, "commit").length, 1, "held while the stream runs");
      chunks.push(c);
    }
    assert.equal(text(chunks), REPLY);
    await settled(server, 2);
    assert.deepEqual(ledger(server), Array(2).fill([["reserve", RESERVED], ["commit", COMMITTED]]).flat());
    // batch: its calls run at once, each its own reservation.
    const batch = await llm.batch([PROMPT, PROMPT]);
    assert.deepEqual(batch.map((m) => m.content), [REPLY, REPLY]);
    assert.deepEqual(entries(server, "reserve").map((e) => e.amount), Array(4).fill(RESERVED));
    assert.deepEqual(entries(server, "commit").map((e) => e.amount), Array(4).fill(COMMITTED));
    const sent = JSON.parse(server.requests().find((q) => q.operation === "createReservation").body);
    assert.deepEqual(sent.action, { kind: "llm.completion", name: "gpt-fake" });
    assert.deepEqual(provider.requests().map((q) => q.outputBound), [50, 50, 50, 50]);
    // Per call: the cycles option overrides the action and is not passed on.
    await llm.invoke(PROMPT, { cycles: { actionName: "greeting", estimate: 70 } });
    const last = JSON.parse(server.requests().filter((q) => q.operation === "createReservation").at(-1).body);
    assert.deepEqual([last.action.name, last.estimate.amount], ["greeting", 70]);
    await assert.rejects(llm.invoke(PROMPT, { cycles: { nmae: "x" } }), (e) => e instanceof InvalidArgumentError && /unknown cycles request option nmae/.test(e.message));
    assert.throws(() => guardChatModel(chat(provider).withRetry(), { client: cycles }), (e) => e instanceof InvalidArgumentError && /guard the model, then bindTools/.test(e.message));
    assert.throws(() => guardChatModel(chat(provider), {}), (e) => e instanceof InvalidArgumentError && /config.client must be a cycles-sdk Client/.test(e.message));
  });
});

test("langchain: a provider 500 released; a cut stream releases without usage and commits the usage it reported (ChatAnthropic's message_start)", async () => {
  await withSetup({}, async ({ provider, server, cycles, llm }) => {
    provider.addFault({ call: 0, fault: { kind: "server_error" } });
    await assert.rejects(llm.invoke(PROMPT), /500/);
    assert.deepEqual(ledger(server), [["reserve", RESERVED], ["release", RESERVED]]);
    // ChatOpenAI yields a Chat Completions stream's usage only after its end: a cut one has none, released.
    provider.addFault({ call: 1, fault: { kind: "cut_stream", afterChunks: 3 } });
    await assert.rejects(async () => {
      for await (const _ of await llm.stream(PROMPT));
    }, /terminated/);
    await settled(server, 2);
    assert.deepEqual(entries(server, "release").map((e) => e.amount), [RESERVED, RESERVED]);
    // Any chat model: ChatAnthropic (Messages) reports the input tokens in its first chunk (message_start).
    const claude = guardChatModel(new ChatAnthropic({ model: "claude-fake", apiKey: "sk-ant-fake", maxRetries: 0, maxTokens: 50, anthropicApiUrl: provider.baseUrl }), { client: cycles });
    assert.equal((await claude.invoke(PROMPT)).content, REPLY);
    provider.addFault({ call: 3, fault: { kind: "cut_stream", afterChunks: 3 } });
    const chunks = [];
    await assert.rejects(async () => {
      for await (const c of await claude.stream(PROMPT)) chunks.push(c);
    }, /terminated/);
    assert.equal(chunks[0].usage_metadata.input_tokens, 4);
    await settled(server, 4);
    assert.deepEqual(entries(server, "commit").map((e) => e.amount), [COMMITTED, 4], "the cut stream's reported input committed");
    assert.equal(provider.requests()[3].endpoint, "messages");
  });
});

test("langchain: a consumer's break or abort ends the stream early as a succeeded call: its usage, else the estimate", async () => {
  await withSetup({}, async ({ provider, server, llm }) => {
    for await (const _ of await llm.stream(PROMPT)) break;
    await settled(server, 1);
    assert.deepEqual(ledger(server), [["reserve", RESERVED], ["commit", RESERVED]], "a break before any usage commits the estimate");
    provider.addFault({ fault: { kind: "slow_chunks", ms: 30 } });
    const abort = new AbortController();
    await assert.rejects(async () => {
      for await (const _ of await llm.stream(PROMPT, { signal: abort.signal })) abort.abort();
    }, /abort/i);
    await settled(server, 2);
    assert.deepEqual(entries(server, "commit").map((e) => e.amount), [RESERVED, RESERVED], "an abort before any usage commits the estimate");
    assert.equal(entries(server, "release").length, 0);
  });
});

const shell = tool((input) => input.command, { name: "shell", description: "Runs a shell command.", schema: { type: "object", properties: { command: { type: "string" } } } });
const calc = tool((input) => input.expression, { name: "calc", description: "Evaluates an expression.", schema: { type: "object", properties: { expression: { type: "string" } } } });

test("langchain: caps lower the model's bound (the provider saw it, caps_applied said so) and filter the bound tools; a cap of 0 sends nothing", async () => {
  await withSetup({ caps: { maxTokens: 3, toolDenylist: ["shell"] } }, async ({ provider, server, cycles, llm, events }) => {
    const reply = await llm.bindTools([shell, calc], { tool_choice: "shell" }).invoke(PROMPT);
    assert.equal(reply.content, "This is a");
    assert.equal(reply.response_metadata.finish_reason, "length");
    const chunks = [];
    for await (const c of await llm.stream(PROMPT)) chunks.push(c);
    assert.equal(text(chunks), "This is a");
    await settled(server, 2);
    assert.deepEqual(ledger(server), Array(2).fill([["reserve", RESERVED], ["commit", 4 + 3]]).flat());
    const [first, second] = provider.requests();
    assert.deepEqual([first.outputBound, second.outputBound], [3, 3]);
    assert.deepEqual(first.body.tools.map((t) => t.function.name), ["calc"]);
    assert.equal("tool_choice" in first.body, false, "a choice naming a removed tool is removed");
    // Events are delivered asynchronously: wait (bounded) for both.
    const applied = await eventsOf(events, "caps_applied", 2, 1);
    assert.equal(applied.length, 2);
    assert.deepEqual([applied[0].api, applied[0].boundFrom, applied[0].boundTo, applied[0].removedTools, applied[0].send], ["chat_completions", 50, 3, ["shell"], true]);
    // The guarded model itself is left as it was.
    assert.equal(llm.inner.maxTokens, 50);
    assert.equal(llm.inner.completions.maxTokens, 50);
    // ChatAnthropic's own maxTokens field carries the cap too.
    const claude = guardChatModel(new ChatAnthropic({ model: "claude-fake", apiKey: "sk-ant-fake", maxRetries: 0, maxTokens: 50, anthropicApiUrl: provider.baseUrl }), { client: cycles });
    assert.equal((await claude.invoke(PROMPT)).content, "This is a");
    assert.deepEqual([provider.requests()[2].endpoint, provider.requests()[2].outputBound], ["messages", 3]);
    assert.equal(claude.inner.maxTokens, 50);
  });
  await withSetup({ caps: { maxTokens: 10 }, fields: { useResponsesApi: true } }, async ({ provider, server, llm }) => {
    // Responses refuses a bound below 16: not sent (core's minimum for that API).
    await assert.rejects(llm.invoke(PROMPT), (e) => e instanceof CallNotSentError && e instanceof BudgetExceededError && /responses does not accept/.test(e.message));
    assert.equal(provider.requests().length, 0);
    assert.deepEqual(ledger(server), [["reserve", RESERVED], ["release", RESERVED]]);
  });
  await withSetup({ caps: { maxTokens: 0 } }, async ({ provider, server, llm }) => {
    await assert.rejects(llm.invoke(PROMPT), (e) => e instanceof CallNotSentError && e.released === true && e.plan.send === false);
    assert.equal(provider.requests().length, 0);
    assert.deepEqual(ledger(server), [["reserve", RESERVED], ["release", RESERVED]]);
  });
});

test("langchain: a denial throws BudgetExceededError and the provider gets no request", async () => {
  await withSetup({ allocated: RESERVED - 1 }, async ({ provider, server, llm }) => {
    await assert.rejects(llm.invoke(PROMPT), BudgetExceededError);
    await assert.rejects(async () => {
      for await (const _ of await llm.stream(PROMPT));
    }, BudgetExceededError);
    assert.equal(provider.requests().length, 0);
    assert.deepEqual(ledger(server), []);
  });
});

test("langchain: 50 concurrent calls, invoke and stream: each reserved and settled exactly once", async () => {
  await withSetup({}, async ({ provider, server, llm }) => {
    await Promise.all(
      Array.from({ length: 50 }, async (_, i) => {
        if (i % 2 === 0) return llm.invoke(PROMPT);
        for await (const _ of await llm.stream(PROMPT));
      }),
    );
    await settled(server, 50);
    const reserves = entries(server, "reserve");
    const commits = entries(server, "commit");
    assert.equal(reserves.length, 50);
    assert.equal(commits.length, 50);
    assert.deepEqual(new Set(commits.map((c) => c.reservation_id)), new Set(reserves.map((r) => r.reservation_id)));
    assert.ok(commits.every((c) => c.amount === COMMITTED));
    assert.equal(provider.requests().length, 50);
  });
});

test("langchain: inside a LangGraph.js graph, invoke and streamMode messages", async () => {
  await withSetup({}, async ({ server, llm }) => {
    const graph = new StateGraph(MessagesAnnotation)
      .addNode("model", async (state) => ({ messages: [await llm.invoke(state.messages)] }))
      .addEdge(START, "model")
      .addEdge("model", END)
      .compile();
    const out = await graph.invoke({ messages: [{ role: "user", content: PROMPT }] });
    assert.equal(out.messages.at(-1).content, REPLY);
    const streamed = [];
    for await (const [chunk] of await graph.stream({ messages: [{ role: "user", content: PROMPT }] }, { streamMode: "messages" })) streamed.push(chunk.content);
    assert.ok(streamed.length > 1, `the graph streamed the model's tokens: ${JSON.stringify(streamed)}`);
    assert.equal(streamed.join(""), REPLY);
    await settled(server, 2);
    assert.deepEqual(ledger(server), Array(2).fill([["reserve", RESERVED], ["commit", COMMITTED]]).flat());
  });
});

test("langchain: without @langchain/core the import fails naming what to install", () => {
  // The package's own require of @langchain/core made to fail as it does when it is not installed.
  const hide = `const M = require("node:module"); const r = M._resolveFilename; M._resolveFilename = function (id, ...a) { if (id.startsWith("@langchain/core")) { const e = new Error("Cannot find module '" + id + "'"); e.code = "MODULE_NOT_FOUND"; throw e; } return r.call(this, id, ...a); };`;
  const code = `await import("cycles-sdk/langchain").then(() => console.log("loaded"), (e) => console.log(e.code, e.message)); await new Promise((r) => setTimeout(r, 50));`;
  const preload = join(mkdtempSync(join(tmpdir(), "cycles-lc-")), "hide.cjs");
  writeFileSync(preload, hide);
  const r = spawnSync(process.execPath, ["--require", preload, "--input-type=module", "-e", code], { encoding: "utf8", cwd: import.meta.dirname, timeout: 30_000 });
  assert.match(r.stdout, /^MODULE_NOT_FOUND cycles-sdk\/langchain needs @langchain\/core \(an optional peer dependency\): npm install @langchain\/core$/m, r.stderr);
  // A caught failed import leaves the process running (Node 20 kills it for a throwing CommonJS module imported from ESM).
  assert.equal(r.status, 0, r.stderr);
});
