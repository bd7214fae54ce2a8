// Client CPU per model call of each Node integration against the bare library call, in one
// process, in alternating rounds (docs/integrations.md, "Node", "What a guard costs"): the
// bare `openai` chat.completions.create, the same through guardOpenAI (reserve + commit added),
// the bare `@anthropic-ai/sdk` messages.create and the same through guardAnthropic, the AI SDK's
// generateText of an `@ai-sdk/openai` chat model bare and wrapped by cyclesMiddleware, and
// LangChain's ChatOpenAI invoke bare and through guardChatModel; and, as
// the goal's yardstick, a bare `fetch` create + commit pair against the same Cycles server.
// The fake provider and the Cycles server run as their own processes (`cycles fake-provider`,
// `cycles serve`), so process.cpuUsage() here is the client's CPU only (the JS thread, V8's
// threads and core's runtime threads alike), divided by its calls.
//
//   node bench/integrations.mjs --cycles-bin BIN [--rounds 5] [--calls 300]
//
// No test asserts a timing; the figures are read, not checked.
import { spawn } from "node:child_process";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

import { Client } from "cycles-sdk";
import { guardAnthropic } from "cycles-sdk/anthropic";
import { cyclesMiddleware } from "cycles-sdk/ai";
import { guardChatModel } from "cycles-sdk/langchain";
import { guardOpenAI } from "cycles-sdk/openai";

const { values: opt } = parseArgs({
  options: { "cycles-bin": { type: "string" }, rounds: { type: "string", default: "5" }, calls: { type: "string", default: "300" } },
});
if (!opt["cycles-bin"]) throw new Error("--cycles-bin BIN (the cycles CLI) is required");
const ROUNDS = Number(opt.rounds);
const CALLS = Number(opt.calls);
// The pinned libraries of the integration tests.
const libs = createRequire(join(dirname(fileURLToPath(import.meta.url)), "..", "test", "integrations", "package.json"));
const OpenAI = libs("openai").default;
const Anthropic = libs("@anthropic-ai/sdk").default;
const { generateText, wrapLanguageModel } = libs("ai");
const { createOpenAI } = libs("@ai-sdk/openai");
const { ChatOpenAI } = libs("@langchain/openai");

/** Starts `cycles <args>` and resolves with the first URL it prints. */
function start(args) {
  const child = spawn(opt["cycles-bin"], args, { stdio: ["ignore", "pipe", "inherit"] });
  return new Promise((resolve, reject) => {
    let out = "";
    child.stdout.on("data", (d) => {
      out += d;
      const m = /(http:\/\/127\.0\.0\.1:\d+)/.exec(out);
      if (m) resolve({ child, url: m[1] });
    });
    child.on("exit", (code) => reject(new Error(`cycles ${args.join(" ")} exited ${code}: ${out}`)));
  });
}

const server = await start(["serve", "--port", "0"]);
const provider = await start(["fake-provider", "--port", "0"]);
const KEY = "cycles-local-key";
const cycles = new Client({ baseUrl: server.url, apiKey: KEY, tenant: "acme", journalEnabled: false });
const pricing = { unit: "USD_MICROCENTS", default: { inputPerMtok: 15_000_000, outputPerMtok: 60_000_000 } };
const USER = [{ role: "user", content: "say hello to me" }];
const oai = new OpenAI({ baseURL: `${provider.url}/v1`, apiKey: "sk-fake", maxRetries: 0 });
const ant = new Anthropic({ baseURL: provider.url, apiKey: "sk-ant-fake", maxRetries: 0 });
const guardedOai = guardOpenAI(oai, { client: cycles, pricing });
const guardedAnt = guardAnthropic(ant, { client: cycles, pricing });
const aiModel = createOpenAI({ baseURL: `${provider.url}/v1`, apiKey: "sk-fake" }).chat("gpt-fake");
const aiGuarded = wrapLanguageModel({ model: aiModel, middleware: cyclesMiddleware({ client: cycles, pricing }) });
const lc = new ChatOpenAI({ model: "gpt-fake", apiKey: "sk-fake", maxRetries: 0, maxTokens: 64, configuration: { baseURL: `${provider.url}/v1` } });
const lcGuarded = guardChatModel(lc, { client: cycles, pricing });
let n = 0;
async function fetchPair() {
  const key = `bench-${process.pid}-${n++}`;
  const headers = { "content-type": "application/json", "x-cycles-api-key": KEY };
  const created = await (
    await fetch(`${server.url}/v1/reservations`, {
      method: "POST",
      headers,
      body: JSON.stringify({ idempotency_key: key, subject: { tenant: "acme" }, action: { kind: "llm.completion", name: "m" }, estimate: { unit: "USD_MICROCENTS", amount: 1000 }, ttl_ms: 60000 }),
    })
  ).json();
  await (
    await fetch(`${server.url}/v1/reservations/${created.reservation_id}/commit`, { method: "POST", headers, body: JSON.stringify({ idempotency_key: `${key}:commit`, actual: { unit: "USD_MICROCENTS", amount: 800 } }) })
  ).json();
}

const PATHS = {
  "openai bare": () => oai.chat.completions.create({ model: "gpt-fake", max_tokens: 64, messages: USER }),
  "openai guarded": () => guardedOai.chat.completions.create({ model: "gpt-fake", max_tokens: 64, messages: USER }),
  "anthropic bare": () => ant.messages.create({ model: "claude-fake", max_tokens: 64, messages: USER }),
  "anthropic guarded": () => guardedAnt.messages.create({ model: "claude-fake", max_tokens: 64, messages: USER }),
  "ai bare": () => generateText({ model: aiModel, prompt: "say hello to me", maxOutputTokens: 64, maxRetries: 0 }),
  "ai guarded": () => generateText({ model: aiGuarded, prompt: "say hello to me", maxOutputTokens: 64, maxRetries: 0 }),
  "langchain bare": () => lc.invoke("say hello to me"),
  "langchain guarded": () => lcGuarded.invoke("say hello to me"),
  "fetch create + commit": fetchPair,
};

async function round(fn) {
  const t = process.cpuUsage();
  for (let i = 0; i < CALLS; i++) await fn();
  const d = process.cpuUsage(t);
  return (d.user + d.system) / CALLS;
}

const samples = Object.fromEntries(Object.keys(PATHS).map((k) => [k, []]));
try {
  for (const fn of Object.values(PATHS)) await round(fn); // warm-up
  for (let r = 0; r < ROUNDS; r++) for (const [k, fn] of Object.entries(PATHS)) samples[k].push(await round(fn));
} finally {
  await cycles.close();
  server.child.kill("SIGINT");
  provider.child.kill("SIGINT");
}
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const m = Object.fromEntries(Object.entries(samples).map(([k, xs]) => [k, median(xs)]));
for (const [k, v] of Object.entries(m)) console.log(`${k.padEnd(22)} ${v.toFixed(0).padStart(6)} us CPU per call (median of ${ROUNDS} rounds of ${CALLS})`);
for (const lib of ["openai", "anthropic", "ai", "langchain"]) {
  const added = m[`${lib} guarded`] - m[`${lib} bare`];
  console.log(`${lib}: the guard adds ${added.toFixed(0)} us per call = ${(added / m["fetch create + commit"]).toFixed(2)}x a bare fetch create + commit pair (goal: at most 1x)`);
}
