// cycles-sdk/testing's LocalServer config: typed, camelCase, its members reaching the server
// (checked by its behaviour over real HTTP where a client can see it), unknown keys and wrong types refused with
// InvalidArgumentError naming them; docs/node.md's small-budget example run verbatim.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";

import { BudgetExceededError, InvalidArgumentError, TenantClosedError, UnauthorizedError } from "cycles-sdk";
import { LocalServer } from "cycles-sdk/testing";
import { ACTION, NODE_DIR, REPO } from "./support.mjs";

test("a small budget, tenants, regime and mode reach the server", async () => {
  const server = new LocalServer({
    tenants: [{ id: "beta", apiKeys: ["beta-key"] }, { id: "gamma", apiKeys: ["gamma-key"], closed: true }],
    budgets: [
      { scope: "tenant:beta", unit: "USD_MICROCENTS", allocated: 1000, overdraftLimit: 50 },
      { scope: "tenant:gamma", unit: "TOKENS", allocated: 10n },
    ],
    regime: { emitRemainingTtl: false, extend: { kind: "grant_cap", maxGrantMs: 1000 }, maxExtensions: null },
    adminApiKey: null,
    idempotencyCompare: "canonical",
    evidence: false,
    mode: "reference",
  });
  assert.deepEqual([server.tenant, server.apiKey, server.mode], ["beta", "beta-key", "reference"]);
  const c = server.client({ journalEnabled: false });
  const gamma = server.client({ apiKey: "gamma-key", tenant: "gamma", journalEnabled: false });
  const stranger = server.client({ apiKey: "cycles-local-key", journalEnabled: false });
  try {
    const [bal] = (await c.getBalances({ tenant: "beta" })).balances;
    assert.deepEqual([bal.allocated, bal.overdraftLimit], [{ unit: "USD_MICROCENTS", amount: 1000 }, { unit: "USD_MICROCENTS", amount: 50 }]);
    const created = await c.createReservation({ idempotencyKey: "k1", subject: { tenant: "beta" }, action: ACTION, estimate: { unit: "USD_MICROCENTS", amount: 600 } });
    assert.equal(created.remainingTtlMs, undefined, "emitRemainingTtl: false");
    assert.equal(created.cyclesEvidence, undefined, "evidence: false");
    const extended = await c.extendReservation(created.reservationId, { idempotencyKey: "e1", extendByMs: 60_000 });
    assert.equal(extended.expiresAtMs, created.expiresAtMs + 1000, "grant_cap of 1000 ms");
    await assert.rejects(
      c.createReservation({ idempotencyKey: "k2", subject: { tenant: "beta" }, action: ACTION, estimate: { unit: "USD_MICROCENTS", amount: 600 } }),
      BudgetExceededError,
      "1000 allocated, 600 reserved",
    );
    await assert.rejects(
      gamma.createReservation({ idempotencyKey: "k3", subject: { tenant: "gamma" }, action: ACTION, estimate: { unit: "TOKENS", amount: 1 } }),
      TenantClosedError,
    );
    await assert.rejects(stranger.getBalances({ tenant: "beta" }), UnauthorizedError, "only the configured keys authenticate");
  } finally {
    for (const x of [c, gamma, stranger]) await x.close();
    server.stop();
  }
});

test("unknown keys and wrong types are InvalidArgumentError naming them; nothing starts", () => {
  const cases = [
    [{ budget: [{ scope: "tenant:acme", unit: "USD_MICROCENTS", allocated: 1 }] }, /unknown LocalServer config key budget$/],
    [{ budgets: [{ scope: "tenant:acme", unit: "USD_MICROCENTS", allocated: 1, overdraft: 5 }] }, /unknown LocalServer config key budgets\[0\]\.overdraft$/],
    [{ budgets: [{ scope: "tenant:acme", unit: "USD_MICROCENTS", allocated: 1, overdraft_limit: 5 }] }, /key budgets\[0\]\.overdraft_limit \(did you mean overdraftLimit\?\)/],
    [{ tenants: [{ id: "acme", api_keys: ["k"] }] }, /key tenants\[0\]\.api_keys \(did you mean apiKeys\?\)/],
    [{ regime: { emit_remaining_ttl: false } }, /key regime\.emit_remaining_ttl \(did you mean emitRemainingTtl\?\)/],
    [{ regime: { extend: { kind: "max_lead", maxGrantMs: 5 } } }, /unknown LocalServer config key regime\.extend\.maxGrantMs/],
    [{ regime: { extend: { kind: "sometimes" } } }, /regime\.extend\.kind must be "additive", "grant_cap" or "max_lead", not "sometimes"/],
    [{ budgets: [{ scope: "tenant:acme", unit: "USD_MICROCENTS" }] }, /budgets\[0\]\.allocated is required/],
    [{ budgets: [{ scope: "tenant:acme", unit: "USD_MICROCENTS", allocated: 1.5 }] }, /budgets\[0\]\.allocated must be a safe integer or a bigint within 64 bits, not 1\.5/],
    [{ budgets: [{ scope: "tenant:acme", unit: "USD_MICROCENTS", allocated: 2n ** 63n }] }, /budgets\[0\]\.allocated must be/],
    [{ budgets: { scope: "tenant:acme" } }, /budgets must be an array/],
    [{ budgets: [{ scope: "tenant:acme", unit: "TOKENS", allocated: 1, caps: { max_tokens: 64 } }] }, /key budgets\[0\]\.caps\.max_tokens \(did you mean maxTokens\?\)/],
    [{ budgets: [{ scope: "tenant:acme", unit: "TOKENS", allocated: 1, caps: { toolAllowlist: "shell" } }] }, /budgets\[0\]\.caps\.toolAllowlist must be an array/],
    [{ mode: "strict" }, /mode must be "spec" or "reference", not "strict"/],
    [{ evidence: "yes" }, /evidence must be a boolean/],
    [{ regime: { maxExtensions: -1 } }, /regime\.maxExtensions must be an integer from 0/],
    [[], /^LocalServer config must be an object, not an array$/],
    // Past the typed checks, the bridge's config check answers (no serde positions).
    [{ bind: "nope" }, /^invalid server config: bind: invalid socket address syntax$/],
  ];
  for (const [config, message] of cases) {
    assert.throws(() => new LocalServer(config), (e) => {
      assert.ok(e instanceof InvalidArgumentError, `${message}: ${e}`);
      assert.match(e.message, message);
      return true;
    });
  }
});

test("docs/node.md's small-budget LocalServer example runs verbatim", () => {
  const blocks = [...readFileSync(join(REPO, "docs", "node.md"), "utf8").matchAll(/```js\n([\s\S]*?)```/g)].map((m) => m[1]);
  const example = blocks.filter((b) => b.includes("new LocalServer({"));
  assert.equal(example.length, 1, "docs/node.md has one LocalServer config example");
  const dir = join(NODE_DIR, ".quickstart");
  mkdirSync(dir, { recursive: true });
  const file = join(dir, "local-server-budget.mjs");
  writeFileSync(file, example[0]);
  const r = spawnSync(process.execPath, [file], { encoding: "utf8", timeout: 15_000 });
  assert.equal(r.error, undefined, `did not exit in time: ${r.stderr}`);
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stdout, "denied BUDGET_EXCEEDED\nremaining 400\n");
});
