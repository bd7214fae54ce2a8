// Every case of conformance/vectors/heartbeat.json through cycles-sdk/timing, matched
// exactly (a bigint never equals a number). Vector encoding: integers, decimal strings
// beyond 2^53, "infinite" / "-infinite"; the API uses number, bigint and ±Infinity.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";

import * as timing from "cycles-sdk/timing";
import { REPO } from "./support.mjs";

const DOC = JSON.parse(readFileSync(join(REPO, "conformance", "vectors", "heartbeat.json"), "utf8"));
const EXPECTED_CASES = { schedule: 13, retry_after: 14, retry: 8, planner: 22, fallback: 7, extend_timeout: 22, planner_derived: 4 };
let ran = 0;

function num(v) {
  if (v === null || v === undefined) return null;
  if (v === "infinite") return Infinity;
  if (v === "-infinite") return -Infinity;
  if (typeof v === "string") return BigInt(v);
  assert.ok(Number.isInteger(v));
  return v;
}

function same(got, want, what) {
  assert.equal(typeof got, typeof want, `${what}: ${String(got)} vs ${String(want)}`);
  assert.equal(got, want, what);
}

function failure(f) {
  if (f.kind === "transient") return { kind: "transient" };
  if (f.kind === "rate_limited") return { kind: "rate_limited", retryAfter: f.retry_after ?? null };
  assert.equal(f.kind, "error");
  return { kind: "error", status: f.status, code: f.code ?? null };
}

function checkDecision(name, got, want) {
  if ("extend" in want) {
    assert.equal(got.kind, "extend", `${name}: ${JSON.stringify(got, (_, v) => (typeof v === "bigint" ? `${v}n` : v))}`);
    same(got.delayMs, num(want.extend.delay_ms), name);
    assert.equal(got.key, want.extend.key, name);
    return;
  }
  assert.equal(got.kind, "stop", name);
  assert.equal(got.reason, want.stop, name);
  if ("code" in want) assert.equal(got.code, want.code, name);
  if ("status" in want) assert.equal(got.status, want.status, name);
}

function section(name) {
  const cases = DOC[name];
  assert.equal(cases.length, EXPECTED_CASES[name], `section ${name}`);
  return cases;
}

test("heartbeat vectors: every section is covered", () => {
  assert.equal(DOC.format, "cycles-heartbeat-vectors");
  assert.equal(DOC.version, 1);
  assert.deepEqual(Object.keys(DOC).sort(), ["about", "format", "version", ...Object.keys(EXPECTED_CASES)].sort(), "a new vector section needs a test here");
});

test("heartbeat vectors: schedule", () => {
  for (const c of section("schedule")) {
    const i = c.input;
    const e = c.expect;
    const s = timing.schedule(num(i.remaining_ttl_ms), num(i.rtt_ms), num(i.max_rtt_ms), num(i.request_timeout_ms));
    for (const [k, key] of [["leadFloorMs", "lead_floor_ms"], ["attemptBudgetMs", "attempt_budget_ms"], ["safetyMarginMs", "safety_margin_ms"], ["retryReserveMs", "retry_reserve_ms"], ["nextDelayMs", "next_delay_ms"]]) {
      same(s[k], num(e[key]), `${c.name} ${key}`);
    }
    const budget = timing.attemptBudget(num(i.request_timeout_ms), num(i.max_rtt_ms));
    const margin = timing.safetyMargin(num(i.max_rtt_ms));
    same(budget, s.attemptBudgetMs, c.name);
    same(margin, s.safetyMarginMs, c.name);
    same(timing.retryReserve(budget, margin), s.retryReserveMs, c.name);
    same(timing.leadFloor(num(i.remaining_ttl_ms), num(i.rtt_ms)), s.leadFloorMs, c.name);
    if (i.rtt_ms !== null) same(timing.nextDelay(s.leadFloorMs, s.retryReserveMs), s.nextDelayMs, c.name);
    ran++;
  }
});

test("heartbeat vectors: retry_after", () => {
  for (const c of section("retry_after")) {
    const p = timing.parseRetryAfter(c.raw);
    assert.equal(p.kind, c.kind, c.why);
    assert.equal(p.ms, num(c.ms), c.why);
    assert.equal(timing.retryAfterMs(c.raw), num(c.ms), c.why);
    if (p.kind === "seconds") assert.equal(typeof p.seconds === "number" || typeof p.seconds === "bigint", true);
    else assert.equal(p.seconds, null);
    ran++;
  }
});

test("heartbeat vectors: retry", () => {
  for (const c of section("retry")) {
    const i = c.input;
    const e = c.expect;
    const est = timing.currentLeadEstimate(num(i.last_lead_floor_ms), num(i.elapsed_ms));
    same(est, num(e.current_lead_estimate_ms), c.name);
    const w = timing.retryWindow(est, num(i.attempt_budget_ms), num(i.safety_margin_ms));
    same(w, num(e.retry_window_ms), c.name);
    const want = num(e.transient_retry_delay_ms);
    if (want === null) assert.ok(w < 0, "no delay is defined for a negative window");
    else same(timing.transientRetryDelay(est, w), want, c.name);
    ran++;
  }
});

function runPlanner(c, planner, withTimeout) {
  assert.equal(c.steps.length, c.expect.length);
  c.steps.forEach((step, n) => {
    const want = c.expect[n];
    const got = step.event === "success" ? planner.onSuccess(step.at_us, num(step.remaining_ttl_ms), num(step.rtt_ms)) : planner.onFailure(step.at_us, failure(step.failure));
    checkDecision(c.name, got, want);
    if (withTimeout) same(planner.attemptTimeoutMs, num(want.attempt_timeout_ms), c.name);
  });
  ran++;
}

test("heartbeat vectors: planner", () => {
  for (const c of section("planner")) runPlanner(c, new timing.PrimaryPlanner(num(c.request_timeout_ms)), false);
});

test("heartbeat vectors: planner_derived", () => {
  for (const c of section("planner_derived")) runPlanner(c, new timing.PrimaryPlanner(num(c.configured_timeout_ms), true), true);
});

test("heartbeat vectors: fallback", () => {
  for (const c of section("fallback")) {
    const p = new timing.FallbackPlanner(c.requested_ttl_ms, c.create.at_us, c.create.expires_at_ms);
    const e = c.expect;
    checkDecision(c.name, p.firstBeat(c.prime), e.first_beat);
    assert.equal(c.steps.length, e.decisions.length);
    const regimes = e.regimes ?? [];
    let last = c.create.at_us;
    c.steps.forEach((step, n) => {
      last = step.at_us;
      const got = step.event === "success" ? p.onSuccess(step.at_us, step.expires_at_ms) : p.onFailure(step.at_us, failure(step.failure));
      checkDecision(c.name, got, e.decisions[n]);
      if (n < regimes.length) assert.equal(p.regime, regimes[n], c.name);
    });
    if ("final_lead_min_ms" in e) assert.equal(p.leadMinMs(last), e.final_lead_min_ms, c.name);
    ran++;
  }
});

test("heartbeat vectors: extend_timeout", () => {
  for (const c of section("extend_timeout")) {
    const i = c.input;
    const e = c.expect;
    const t = timing.extendTimeout(num(i.lead_floor_ms), num(i.max_rtt_ms), num(i.configured_timeout_ms));
    assert.equal(t.source, e.source, c.name);
    for (const [k, key] of [["timeoutMs", "timeout_ms"], ["minLeadFloorMs", "min_lead_floor_ms"], ["maxKeepingTimeoutMs", "max_keeping_timeout_ms"], ["targetTimeoutMs", "target_timeout_ms"], ["attemptCutoffMs", "attempt_cutoff_ms"]]) {
      same(t[k], num(e[key]), `${c.name} ${key}`);
    }
    same(timing.attemptCutoff(t.timeoutMs), num(e.attempt_cutoff_ms), c.name);
    same(timing.minLeadFloor(0, num(i.max_rtt_ms)), num(e.min_lead_floor_ms), c.name);
    ran++;
  }
});

// What the vectors do not reach: the helpers outside them, planner state, and values beyond
// 2^53 − 1 or below zero where core's argument is wide or signed.
test("timing: helpers, planner state and wide arguments", () => {
  same(timing.fromMicrosCeil(1001), 2, "ceil");
  same(timing.fromMicrosFloor(1999), 1, "floor");
  same(timing.fromMicrosCeil((1n << 128n) - 1n), Infinity, "u128 micros");
  assert.throws(() => timing.fromMicrosFloor(-1), { errorName: "INVALID_ARGUMENT" });
  const codes = timing.permanentStopCodes();
  assert.ok(codes.length > 0 && codes.every((c) => timing.isPermanentStopCode(c)));
  assert.equal(timing.isPermanentStopCode("NOPE"), false);
  const huge = timing.parseRetryAfter("18446744073709551615");
  assert.equal(huge.kind, "seconds");
  same(huge.seconds, 18446744073709551615n, "seconds beyond 2^53 stay exact");
  // lead_min_now_ms is a signed i128 in core: a lead already past is a negative bigint.
  same(timing.delayWithSkips(-(1n << 70n), 60000, 1000), timing.delayWithSkips(-1, 60000, 1000), "negative lead");
  assert.equal(timing.classifyGrant(60000, 0, 60000), "normal");
  const p = new timing.PrimaryPlanner(10000);
  assert.equal(p.maxRttMs, null);
  assert.equal(p.failureMath(0), null);
  p.observeRtt(1500);
  same(p.maxRttMs, 1500, "max rtt");
  p.onSuccess(0, 60000, 0);
  assert.deepEqual(p.failureMath(2_000_001), { elapsedMs: 2001, currentLeadEstimateMs: 57999, retryWindowMs: 44999 });
  const stop = p.onFailure(1000, { kind: "rate_limited", retryAfter: "18446744073709551615" });
  assert.equal(stop.kind, "stop");
  if (stop.kind === "stop") same(stop.detail.retryAfterSeconds, 18446744073709551615n, "stop detail seconds");
  const rejected = new timing.PrimaryPlanner(10000).onFailure(0, { kind: "error", status: 400, code: "123" });
  assert.equal(rejected.code, "123", "a numeric-looking error code stays a string");
  const f = new timing.FallbackPlanner(60000, 0, 60000);
  assert.equal(f.lastGrantMs, null);
  f.onSuccess(1000, 61000);
  same(f.lastGrantMs, 1000, "last grant");
});

test("heartbeat vectors: every case ran", () => {
  assert.equal(ran, Object.values(EXPECTED_CASES).reduce((a, b) => a + b, 0));
});
