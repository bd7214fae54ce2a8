// Every case of conformance/vectors/pricing.json through cycles-sdk/pricing's typed functions,
// matched exactly (a bigint never equals a number). The vectors give the bridge's JSON
// arguments (snake_case, decimal strings beyond 2^53); this converts them to the API's
// camelCase arguments and Int64 values, and the expected results to the API's shapes. A
// function section this file does not know, or one it expects that is missing, fails.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";

import { InvalidArgumentError } from "cycles-sdk";
import * as pricing from "cycles-sdk/pricing";
import { ACTION, REPO, journalDir, startServer } from "./support.mjs";

const DOC = JSON.parse(readFileSync(join(REPO, "conformance", "vectors", "pricing.json"), "utf8"));

/** A vector integer as the API's Int64 (a decimal string is beyond 2^53 − 1: a bigint). */
const int = (v) => (v === null || v === undefined ? v : typeof v === "string" && /^-?\d+$/.test(v) ? BigInt(v) : v);
const camel = (k) => k.replace(/_([a-z])/g, (_, c) => c.toUpperCase());
const price = (p) => (p && typeof p === "object" && !Array.isArray(p) ? Object.fromEntries(Object.entries(p).map(([k, v]) => [camel(k), int(v)])) : p);
function table(p) {
  const out = {};
  for (const [k, v] of Object.entries(p)) {
    if (k === "models") out.models = Object.fromEntries(Object.entries(v).map(([m, x]) => [m, price(x)]));
    else if (k === "default") out.default = price(v);
    else out[k] = v;
  }
  return out;
}
const caps = (c) => Object.fromEntries(Object.entries(c).map(([k, v]) => [camel(k), int(v)]));
const usage = (u) => (u && typeof u === "object" ? Object.fromEntries(Object.entries(u).map(([k, v]) => [camel(k), int(v)])) : u);
const counts = (c) => (Array.isArray(c) ? c.map((m) => (Array.isArray(m) ? m.map(int) : m)) : c);
const amount = (a) => (a === null ? null : { unit: a.unit, amount: int(a.amount) });
const reported = (u) => ({ inputTokens: int(u.input_tokens), outputTokens: int(u.output_tokens) });
const plan = (p) => ({
  boundFrom: int(p.bound_from),
  boundTo: int(p.bound_to),
  set: p.set,
  unset: p.unset,
  removedTools: p.removed_tools,
  send: p.send,
  changed: p.changed,
});

// Per function: the call of the typed API from the vector's input, and the expected value in the API's shape.
const FUNCTIONS = {
  text_tokens: [(i) => pricing.textTokens(i.text), int],
  prompt_texts: [(i) => pricing.promptTexts(i.request), (e) => e],
  prompt_tokens: [(i) => pricing.promptTokens(i.request, counts(i.text_tokens)), int],
  output_bound: [(i) => pricing.outputBound(i.request, int(i.default)), int],
  lookup_price: [(i) => pricing.lookupPrice(table(i.pricing), i.model), (e) => ({ matched: e.matched, inputPerMtok: int(e.input_per_mtok), outputPerMtok: int(e.output_per_mtok) })],
  cost: [(i) => pricing.cost(table(i.pricing), i.model, int(i.input_tokens), int(i.output_tokens)), amount],
  estimate: [(i) => pricing.estimate(table(i.pricing), i.model, int(i.prompt_tokens), int(i.output_bound)), amount],
  estimate_request: [
    (i) => pricing.estimateRequest(table(i.pricing), i.model, i.request, int(i.default_output_bound), counts(i.text_tokens)),
    (e) => ({ promptTokens: int(e.prompt_tokens), outputBound: int(e.output_bound), amount: amount(e.amount) }),
  ],
  actual: [(i) => pricing.actual(table(i.pricing), i.model, usage(i.usage)), amount],
  settlement: [(i) => pricing.settlement(amount(i.actual ?? null), i.call_succeeded, amount(i.estimate)), (e) => (e.action === "commit" ? { action: "commit", amount: amount(e.amount) } : e)],
  lower_bound: [(i) => pricing.lowerBound(int(i.bound ?? null), caps(i.caps)), (e) => ({ bound: int(e.bound), changed: e.changed })],
  tool_allowed: [(i) => pricing.toolAllowed(i.name, caps(i.caps)), (e) => e],
  filter_tools: [(i) => pricing.filterTools(i.tools, caps(i.caps)), (e) => e],
  plan_caps: [(i) => pricing.planCaps(i.api, i.request, caps(i.caps)), plan],
  usage: [(i) => pricing.usage(i.api, i.body, i.usage === undefined ? undefined : usage(i.usage)), reported],
  stream_request: [(i) => ({ set: pricing.streamRequest(i.api, i.request) }), (e) => e],
  call_failed: [(i) => pricing.callFailed(i.api, i.body), (e) => e],
  observe: [
    (i) => pricing.observe(table(i.pricing), i.model, i.api, i.body, i.usage === undefined ? undefined : usage(i.usage)),
    (e) => ({ usage: reported(e.usage), failed: e.failed, actual: amount(e.actual) }),
  ],
};

test("pricing vectors: every case of every function, through the typed API", () => {
  assert.equal(DOC.format, "cycles-pricing-vectors");
  assert.equal(DOC.version, 1);
  assert.deepEqual(Object.keys(DOC.functions).sort(), Object.keys(FUNCTIONS).sort(), "a function section is missing or unknown: update this test");
  let ran = 0;
  for (const [name, cases] of Object.entries(DOC.functions)) {
    const [run, shape] = FUNCTIONS[name];
    assert.ok(cases.length > 0, `${name} has no cases`);
    for (const c of cases) {
      const what = `${name} ${c.name}`;
      if ("error" in c) {
        assert.throws(
          () => run(c.input),
          (e) => {
            assert.ok(e instanceof InvalidArgumentError, `${what}: ${e}`);
            assert.equal(e.errorName, c.error.kind, what);
            assert.ok(e.message.includes(c.error.message_contains), `${what}: ${e.message}`);
            return true;
          },
          what,
        );
      } else {
        assert.deepEqual(run(c.input), shape(c.expect), what);
      }
      ran++;
    }
  }
  const total = Object.values(DOC.functions).reduce((n, cs) => n + cs.length, 0);
  assert.equal(ran, total);
  assert.ok(ran >= 166, `only ${ran} vectors ran`);
});

test("pricing: exact int64 both ways, and inexact numbers refused", () => {
  const big = 9007199254740993n; // 2^53 + 1
  assert.deepEqual(pricing.cost({ unit: "TOKENS" }, "m", big, 1), { unit: "TOKENS", amount: big + 1n });
  assert.equal(pricing.cost({ unit: "TOKENS" }, "m", 2n, 3n).amount, 5, "a safe result is a number");
  assert.throws(() => pricing.cost({ unit: "TOKENS" }, "m", 2 ** 60, 0), (e) => e instanceof InvalidArgumentError && /inputTokens must be a safe integer/.test(e.message));
  assert.throws(
    () => pricing.cost({ unit: "USD_MICROCENTS", models: { m: { input_per_mtok: 1, output_per_mtok: 1 } } }, "m", 1, 1),
    (e) => e instanceof InvalidArgumentError && /unknown price member pricing\.models\["m"\]\.input_per_mtok/.test(e.message),
  );
  assert.deepEqual(pricing.outputBound({}, null), null);
  assert.deepEqual(pricing.usage("messages", { type: "ping" }), { inputTokens: null, outputTokens: null });
});

test("GuardedReservation.planCaps: the reservation's caps, a typed plan, the caps_applied event", async () => {
  const server = startServer({ budgets: [{ scope: "tenant:acme", unit: "TOKENS", allocated: 1000, caps: { maxTokens: 64, toolDenylist: ["shell"] } }] });
  const client = server.client({ journalDir: journalDir() });
  const events = [];
  client.on("event", (e) => events.push(e));
  try {
    const r = await client.reserve({ estimate: { unit: "TOKENS", amount: 100 }, action: ACTION });
    assert.equal(r.decision, "ALLOW_WITH_CAPS");
    const request = { model: "m", max_tokens: 500, tools: [{ name: "shell", input_schema: {} }, { name: "calc", input_schema: {} }] };
    const plan = r.planCaps("messages", request);
    assert.deepEqual(plan, {
      boundFrom: 500,
      boundTo: 64,
      set: { max_tokens: 64, tools: [{ name: "calc", input_schema: {} }] },
      unset: [],
      removedTools: ["shell"],
      send: true,
      changed: true,
    });
    assert.deepEqual(r.planCaps("messages", { max_tokens: 10 }).changed, false);
    assert.throws(() => r.planCaps("completions", {}), (e) => e instanceof InvalidArgumentError && /unknown provider API "completions"/.test(e.message));
    r.setActual(70);
    await r.finish();
    assert.throws(() => r.planCaps("messages", request), InvalidArgumentError, "finished");
    await client.close();
    const applied = events.filter((e) => e.kind === "caps_applied");
    assert.equal(applied.length, 1, "one rewrite, one event");
    assert.deepEqual([applied[0].api, applied[0].boundFrom, applied[0].boundTo, applied[0].removedTools, applied[0].send, applied[0].reservationId], ["messages", 500, 64, ["shell"], true, r.reservationId]);
  } finally {
    await client.close();
    server.stop();
  }
});
