// cycles-sdk/ai with the real Vercel AI SDK (`ai` 6 and `@ai-sdk/openai` 3, pinned in this
// folder): generateText and streamText of a wrapLanguageModel model against the fake provider
// (Chat Completions and Responses) and the local Cycles server's ledger. One token per word:
// "say hello to me" is 4 input tokens, the reply 9; core's estimate of that prompt is
// 4 + ceil(15 / 4) = 8 plus maxOutputTokens.
import assert from "node:assert/strict";
import { test } from "node:test";

import { createOpenAI } from "@ai-sdk/openai";
import { generateText, jsonSchema, streamText, tool, wrapLanguageModel } from "ai";
import { BudgetExceededError } from "cycles-sdk";
import { CallNotSentError, apiOf, cyclesMiddleware } from "cycles-sdk/ai";
import { FakeProvider, LocalServer } from "cycles-sdk/testing";

import { eventsOf } from "./events.mjs";

const REPLY = "This is a deterministic reply from the fake provider.";

async function withSetup({ allocated = 1_000_000, caps } = {}, body) {
  const provider = new FakeProvider();
  const server = new LocalServer({ budgets: [{ scope: "tenant:acme", unit: "TOKENS", allocated, ...(caps ? { caps } : {}) }] });
  const cycles = server.client({ journalEnabled: false });
  const events = [];
  cycles.on("event", (e) => events.push(e));
  const openai = createOpenAI({ baseURL: provider.openaiBaseUrl, apiKey: "sk-fake" });
  const middleware = cyclesMiddleware({ client: cycles });
  const chat = wrapLanguageModel({ model: openai.chat("gpt-fake"), middleware });
  const responses = wrapLanguageModel({ model: openai.responses("gpt-fake"), middleware });
  try {
    await body({ provider, server, chat, responses, events });
  } finally {
    await cycles.close();
    server.stop();
    provider.stop();
  }
}

const entries = (server, kind) => server.ledger().filter((e) => e.kind === kind);

test("ai: generateText and streamText, Chat Completions and Responses: the estimate reserved, the usage committed", async () => {
  await withSetup({}, async ({ provider, server, chat, responses }) => {
    const { text } = await generateText({ model: chat, prompt: "say hello to me", maxOutputTokens: 64, maxRetries: 0 });
    assert.equal(text, REPLY);
    assert.equal(entries(server, "reserve")[0].amount, 72);
    assert.equal(entries(server, "commit")[0].amount, 13);
    const sent = JSON.parse(server.requests().find((q) => q.operation === "createReservation").body);
    assert.deepEqual(sent.action, { kind: "llm.completion", name: "gpt-fake" });
    const s = streamText({ model: chat, prompt: "say hello to me", maxOutputTokens: 64, maxRetries: 0 });
    assert.equal(await s.text, REPLY);
    await s.usage;
    assert.equal(entries(server, "commit")[1].amount, 13);
    const r = await generateText({ model: responses, prompt: "say hello to me", maxOutputTokens: 64, maxRetries: 0 });
    assert.equal(r.text, REPLY);
    assert.equal(entries(server, "commit")[2].amount, 13);
    const rs = streamText({ model: responses, prompt: "say hello to me", maxOutputTokens: 64, maxRetries: 0, providerOptions: { cycles: { actionName: "answer" } } });
    assert.equal(await rs.text, REPLY);
    await rs.usage;
    assert.equal(entries(server, "commit")[3].amount, 13);
    assert.equal(JSON.parse(server.requests().filter((q) => q.operation === "createReservation")[3].body).action.name, "answer");
    assert.equal(provider.requests().length, 4);
  });
});

test("ai: a provider 500 and a cut stream released; caps lower maxOutputTokens and filter tools; a cap of 0 and a denial send nothing", async () => {
  await withSetup({ caps: { maxTokens: 3 } }, async ({ provider, server, chat }) => {
    provider.addFault({ call: 0, fault: { kind: "server_error" } });
    await assert.rejects(generateText({ model: chat, prompt: "say hello to me", maxOutputTokens: 64, maxRetries: 0 }));
    assert.equal(entries(server, "release").length, 1);
    const { text } = await generateText({ model: chat, prompt: "say hello to me", maxOutputTokens: 64, maxRetries: 0 });
    assert.equal(text, "This is a");
    assert.equal(provider.requests()[1].outputBound, 3);
    assert.equal(entries(server, "commit")[0].amount, 4 + 3);
  });
  await withSetup({ caps: { toolDenylist: ["shell"] } }, async ({ provider, server, chat }) => {
    const tools = { shell: tool({ inputSchema: jsonSchema({ type: "object" }) }), calc: tool({ inputSchema: jsonSchema({ type: "object" }) }) };
    await generateText({ model: chat, prompt: "say hello to me", maxOutputTokens: 64, maxRetries: 0, tools });
    assert.deepEqual(provider.requests()[0].body.tools.map((t) => t.function.name), ["calc"]);
    // A stream cut before its usage: released, the error surfaces.
    provider.addFault({ fault: { kind: "cut_stream", afterChunks: 3 } });
    const s = streamText({ model: chat, prompt: "say hello to me", maxOutputTokens: 64, maxRetries: 0, onError: () => undefined });
    await assert.rejects(s.text);
    for (let i = 0; i < 100 && entries(server, "release").length === 0; i++) await new Promise((r) => setTimeout(r, 10));
    assert.equal(entries(server, "release").length, 1);
    assert.equal(entries(server, "commit").length, 1);
  });
  await withSetup({ caps: { maxTokens: 0 } }, async ({ provider, server, chat }) => {
    await assert.rejects(generateText({ model: chat, prompt: "hi", maxOutputTokens: 64, maxRetries: 0 }), (e) => e instanceof CallNotSentError);
    assert.equal(provider.requests().length, 0);
    assert.equal(entries(server, "release").length, 1);
  });
  await withSetup({ allocated: 10 }, async ({ provider, server, chat }) => {
    await assert.rejects(generateText({ model: chat, prompt: "say hello to me", maxOutputTokens: 64, maxRetries: 0 }), (e) => e instanceof BudgetExceededError);
    assert.equal(provider.requests().length, 0);
    assert.equal(server.ledger().length, 0);
  });
});

test("ai: caps through core's plan of the model's API: the caps_applied event, and Responses' minimum bound (16) not sent below it", async () => {
  await withSetup({ caps: { maxTokens: 10, toolDenylist: ["shell"] } }, async ({ provider, server, chat, responses, events }) => {
    // The wrapped model called directly (generateText would refuse a reply without the forced tool).
    const tools = ["shell", "calc"].map((name) => ({ type: "function", name, inputSchema: { type: "object" } }));
    await chat.doGenerate({ prompt: [{ role: "user", content: [{ type: "text", text: "say hello to me" }] }], maxOutputTokens: 64, tools, toolChoice: { type: "tool", toolName: "shell" } });
    const sent = provider.requests()[0];
    assert.equal(sent.outputBound, 10);
    assert.deepEqual(sent.body.tools.map((t) => t.function.name), ["calc"]);
    assert.equal("tool_choice" in sent.body, false, "a choice naming a removed tool is removed");
    const applied = await eventsOf(events, "caps_applied", 1, 1);
    assert.equal(applied.length, 1);
    assert.deepEqual([applied[0].api, applied[0].boundFrom, applied[0].boundTo, applied[0].removedTools, applied[0].send], ["chat_completions", 64, 10, ["shell"], true]);
    // Responses refuses a bound below 16: the call is not made.
    await assert.rejects(generateText({ model: responses, prompt: "say hello to me", maxOutputTokens: 64, maxRetries: 0 }), (e) => e instanceof CallNotSentError && e.plan.send === false && /responses does not accept/.test(e.message));
    assert.equal(provider.requests().length, 1);
    // Events are delivered asynchronously: wait (bounded) for the second.
    assert.deepEqual((await eventsOf(events, "caps_applied", 2, 1)).map((e) => [e.api, e.boundTo, e.send]), [["chat_completions", 10, true], ["responses", 10, false]]);
    assert.equal(entries(server, "release").length, 1);
  });
  assert.deepEqual(["openai.responses", "openai.chat", "anthropic.messages", "google.generative-ai", undefined].map(apiOf), ["responses", "chat_completions", "messages", "messages", "messages"]);
});

test("ai: a stream its consumer cancels or aborts is a succeeded call: its usage, else the estimate", async () => {
  await withSetup({}, async ({ provider, server, chat }) => {
    // The wrapped model's own stream, cancelled after its first part.
    const { stream } = await chat.doStream({ prompt: [{ role: "user", content: [{ type: "text", text: "say hello to me" }] }], maxOutputTokens: 64 });
    const reader = stream.getReader();
    await reader.read();
    await reader.cancel();
    assert.deepEqual(server.ledger().map((e) => [e.kind, e.amount]), [["reserve", 72], ["commit", 72]]);
    // streamText aborted mid-stream, before the finish part carried the usage.
    provider.addFault({ fault: { kind: "slow_chunks", ms: 30 } });
    const abort = new AbortController();
    const s = streamText({ model: chat, prompt: "say hello to me", maxOutputTokens: 64, maxRetries: 0, abortSignal: abort.signal, onError: () => undefined });
    try {
      for await (const _ of s.textStream) abort.abort();
    } catch {
      // An abort may surface as the stream's error; the settlement is what this checks.
    }
    for (let i = 0; i < 100 && server.ledger().length < 4; i++) await new Promise((r) => setTimeout(r, 10));
    assert.deepEqual(server.ledger().map((e) => [e.kind, e.amount]), [["reserve", 72], ["commit", 72], ["reserve", 72], ["commit", 72]]);
    assert.equal(provider.requests().length, 2);
  });
});
