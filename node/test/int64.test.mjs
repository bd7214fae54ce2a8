// 64-bit result fields decoded exactly: captured reference-server replies carrying 2^63 - 1 in
// remaining_ttl_ms, expires_at_ms, created_at_ms and an amount go through core's response path
// (decodeResponse) and come back as bigints; cycles-sdk/timing computes with them exactly and
// refuses a number that has already lost its value. (Amounts of 2^63 - 1 over real HTTP:
// operations.test.mjs.)
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";

import { decodeResponse, fromWire } from "cycles-sdk";
import * as timing from "cycles-sdk/timing";
import { REPO } from "./support.mjs";

const MAX = 2n ** 63n - 1n;
const CORPUS = process.env.CYCLES_REFERENCE_CORPUS ?? join(REPO, "..", "shared", "fixtures", "reference-server", "exchanges.jsonl");

function exchange(name) {
  const x = readFileSync(CORPUS, "utf8").split("\n").filter((l) => l.trim()).map((l) => JSON.parse(l)).find((e) => e.name === name);
  assert.ok(x, `${name} is in the corpus`);
  return { ...x, headers: Object.entries(x.response.headers).map(([k, v]) => [k, String(v)]) };
}

/** A captured exchange of the corpus, its body's TTL fields set to 2^63 - 1 (as raw JSON integers). */
function captured(name) {
  const x = exchange(name);
  const body = x.response.body.replace(/"(remaining_ttl_ms|expires_at_ms)":\d+/g, `"$1":${MAX}`);
  assert.equal(body.split(String(MAX)).length, 3, `${name} has both fields`);
  return { ...x, body };
}

const withoutNulls = (v) =>
  Array.isArray(v)
    ? v.map(withoutNulls)
    : v !== null && typeof v === "object"
      ? Object.fromEntries(Object.entries(v).filter(([, x]) => x !== null).map(([k, x]) => [k, withoutNulls(x)]))
      : v;

test("remaining_ttl_ms and expires_at_ms of 2^63 - 1 decode exactly (bigint), smaller ones stay numbers", () => {
  for (const [name, op] of [["create.allow_full", "createReservation"], ["extend.success", "extendReservation"]]) {
    const x = captured(name);
    const r = decodeResponse(op, x.response.status, x.headers, x.body);
    assert.equal(r.remainingTtlMs, MAX, name);
    assert.equal(r.expiresAtMs, MAX, name);
    assert.equal(JSON.parse(x.body).remaining_ttl_ms, 9223372036854775808, "what JSON.parse makes of it");
    // Everything else exactly as JSON.parse reads the original reply.
    const { meta: _meta, remainingTtlMs: _r, expiresAtMs: _e, ...rest } = r;
    const { remainingTtlMs: _r0, expiresAtMs: _e0, ...want } = fromWire(JSON.parse(x.response.body));
    assert.deepEqual(withoutNulls(rest), withoutNulls(want), name);
    for (const b of r.balances ?? []) assert.equal(typeof b.remaining.amount, "number", `${name}: a safe amount is a number`);
  }
});

test("int64 members and free-form metadata of a captured reservation decode exactly", () => {
  const x = exchange("get.active");
  const metadata = String.raw`{"big":-9223372036854775808,"beyond":9007199254740993,"text":"n:1234567890123456789 \" \\ \ud83d\ude00","__proto__":{"polluted":true},"list":[1.5,-0,12345678901234567890123]}`;
  const body = x.response.body
    .replace(/"(created_at_ms|expires_at_ms)":\d+/g, `"$1":${MAX}`)
    .replace(/"reserved":\{"unit":"USD_MICROCENTS","amount":\d+\}/, `"reserved":{"unit":"USD_MICROCENTS","amount":${MAX}}`)
    .replace(/"metadata":\{.*\}\}$/, `"metadata":${metadata}}`);
  assert.ok(body.includes('"big":'), "metadata replaced");
  const r = decodeResponse("getReservation", 200, x.headers, body);
  assert.deepEqual([r.createdAtMs, r.expiresAtMs, r.reserved.amount], [MAX, MAX, MAX]);
  const m = r.metadata;
  assert.equal(m.big, -(2n ** 63n));
  assert.equal(m.beyond, 9007199254740993n);
  assert.equal(m.text, 'n:1234567890123456789 " \\ \u{1F600}');
  assert.deepEqual(m.list.slice(0, 2), [1.5, -0]);
  assert.equal(typeof m.list[2], "number", "beyond 64 bits core itself reads a float");
  assert.ok(Object.hasOwn(m, "__proto__") && m.__proto__.polluted === true, "an own __proto__ member, as JSON.parse makes it");
  assert.equal(Object.getPrototypeOf(m), Object.prototype);
  assert.equal({}.polluted, undefined);
});

test("timing computes with a decoded 2^63 - 1 exactly and refuses a number that lost its value", () => {
  const x = captured("create.allow_full");
  const { remainingTtlMs } = decodeResponse("createReservation", 200, x.headers, x.body);
  // The lead floor is remaining_ttl - rtt, within 64 bits.
  assert.equal(timing.leadFloor(remainingTtlMs, 0), MAX);
  assert.equal(timing.leadFloor(remainingTtlMs, 7), MAX - 7n);
  assert.equal(timing.schedule(remainingTtlMs, 10, 10, 10_000).leadFloorMs, MAX - 10n);
  const p = new timing.PrimaryPlanner(10_000);
  assert.equal(p.onSuccess(1_000, remainingTtlMs, 10).kind, "extend");

  const rounded = Number(MAX); // 9223372036854775808: past the 64-bit limit already
  const refused = (name) => (e) => e instanceof RangeError && e.message.includes(name) && /safe integer/.test(e.message);
  assert.throws(() => timing.leadFloor(rounded, 0), refused("remainingTtlMs"));
  assert.throws(() => timing.schedule(rounded, 10, 10, 10_000), refused("remainingTtlMs"));
  assert.throws(() => timing.leadFloor(2 ** 53, 0), refused("remainingTtlMs"), "2^53 is not a safe integer");
  assert.throws(() => timing.leadFloor(1000, 1.5), refused("rttMs"));
  assert.throws(() => timing.currentLeadEstimate(NaN, 0), refused("lastLeadFloorMs"));
  assert.throws(() => p.onSuccess(2_000, rounded, 10), refused("remainingTtlMs"));
  assert.throws(() => new timing.FallbackPlanner(60_000, 0, rounded), refused("expiresAtMs"));
  assert.throws(() => new timing.PrimaryPlanner(10_000.5), refused("requestTimeoutMs"));
  // The largest safe integer, a bigint and ±Infinity are taken as before.
  assert.equal(timing.leadFloor(Number.MAX_SAFE_INTEGER, 1), Number.MAX_SAFE_INTEGER - 1);
  assert.equal(timing.leadFloor(2n ** 53n, 0), 2n ** 53n);
  assert.equal(timing.attemptBudget(Infinity, null), Infinity);
});
