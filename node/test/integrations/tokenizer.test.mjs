// The integrations' `tokenizer`: js-tiktoken counts the prompt's texts when it is installed and
// knows the model, core's estimate applies otherwise, a counter of your own replaces both; core
// adds the framing every time (src/tokenizer.ts). Counts by hand:
// - system "internationalization": core ceil(20 / 4) = 5, o200k_base 2 tokens;
// - user "日本語のテキスト": core ceil(8 / 4) = 2, o200k_base 6 tokens;
// so core's estimate is (4 + 5) + (4 + 2) = 15 and js-tiktoken's (4 + 2) + (4 + 6) = 16.
//
// The "auto" case runs tokenizer-child.mjs in a child process (a process builds each encoding
// once). cycles-sdk is linked into this folder (file:../..): `--preserve-symlinks` makes Node
// resolve the SDK's own `require("js-tiktoken/lite")` from this folder's node_modules, as an
// installed cycles-sdk resolves it from the application's. "auto" without js-tiktoken is
// scripts/install-check.sh's: the packed package in a clean folder, before and after
// `npm install js-tiktoken`.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { test } from "node:test";
import { promisify } from "node:util";

import OpenAI from "openai";
import { InvalidArgumentError } from "cycles-sdk";
import { guardOpenAI } from "cycles-sdk/openai";
import { FakeProvider, LocalServer } from "cycles-sdk/testing";

const SYSTEM = "internationalization";
const USER = "日本語のテキスト";
const BOUND = 50;
const CORE_PROMPT = 4 + 5 + (4 + 2);
const TIKTOKEN_PROMPT = 4 + 2 + (4 + 6);
const CHILD = fileURLToPath(new URL("./tokenizer-child.mjs", import.meta.url));

async function child(flags) {
  const { stdout } = await promisify(execFile)(process.execPath, [...flags, CHILD], { timeout: 60_000 });
  return JSON.parse(stdout.trim().split("\n").at(-1));
}

test("auto: js-tiktoken counts an OpenAI model's prompt when it is installed", async () => {
  const got = await child(["--preserve-symlinks"]);
  assert.deepEqual(got, { "gpt-4o-mini": [TIKTOKEN_PROMPT + BOUND, TIKTOKEN_PROMPT + BOUND], "claude-fake": [CORE_PROMPT + BOUND] });
});

async function withGuard(config, body) {
  const provider = new FakeProvider();
  const server = new LocalServer({ budgets: [{ scope: "tenant:acme", unit: "TOKENS", allocated: 1_000_000 }] });
  const cycles = server.client({ journalEnabled: false });
  try {
    const openai = guardOpenAI(new OpenAI({ baseURL: provider.openaiBaseUrl, apiKey: "sk-fake", maxRetries: 0 }), { client: cycles, ...config });
    const call = (model = "gpt-4o-mini") =>
      openai.chat.completions.create({
        model,
        max_tokens: BOUND,
        messages: [
          { role: "system", content: SYSTEM },
          { role: "user", content: USER },
        ],
      });
    await body({ provider, server, call });
  } finally {
    await cycles.close();
    server.stop();
    provider.stop();
  }
}

const reserves = (server) => server.ledger().filter((e) => e.kind === "reserve").map((e) => e.amount);

test("a counter of your own counts every text; null is core's estimate", async () => {
  const seen = [];
  await withGuard({ tokenizer: (t) => (seen.push(t), [...t].length) }, async ({ server, call }) => {
    await call();
    assert.deepEqual(seen, [SYSTEM, USER]);
    assert.deepEqual(reserves(server), [4 + 20 + (4 + 8) + BOUND]);
  });
  await withGuard({ tokenizer: null }, async ({ server, call }) => {
    await call();
    assert.deepEqual(reserves(server), [CORE_PROMPT + BOUND]);
  });
});

test("a bad tokenizer is refused before anything is reserved or sent", async () => {
  const server = new LocalServer({ budgets: [{ scope: "tenant:acme", unit: "TOKENS", allocated: 10 }] });
  const cycles = server.client({ journalEnabled: false });
  try {
    assert.throws(
      () => guardOpenAI(new OpenAI({ apiKey: "k" }), { client: cycles, tokenizer: "tiktoken" }),
      (e) => e instanceof InvalidArgumentError && /tokenizer must be/.test(e.message),
    );
  } finally {
    await cycles.close();
    server.stop();
  }
  await withGuard({ tokenizer: () => -1 }, async ({ provider, server, call }) => {
    await assert.rejects(call(), (e) => e instanceof InvalidArgumentError && /returned -1 for a text/.test(e.message));
    assert.deepEqual(server.ledger(), []);
    assert.equal(provider.requests().length, 0);
  });
});
