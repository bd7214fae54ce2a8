// The guarded lifecycle over real HTTP: guarded/wrap/reserve settle what the work reports,
// failures release or settle known usage, a short lease is kept alive, currentReservation()
// nests across awaits and concurrent tasks, events reach listeners.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { after, before, test } from "node:test";

import { Client, ConfigError, InvalidArgumentError, MissingActualError, currentReservation } from "cycles-sdk";
import { listPending, parseRecord } from "cycles-sdk/journal";
import { ACTION, journalDir, ops, startServer } from "./support.mjs";

let server;
let client;
const events = [];

before(() => {
  server = startServer();
  client = server.client({ journalDir: journalDir(), onEvent: (e) => events.push(e) });
});
after(async () => {
  await client.close();
  server.stop();
});

const committed = (rid) => server.ledger().find((e) => e.kind === "commit" && e.reservation_id === rid);

test("guarded settles the actual of the result; the ledger shows it", async () => {
  let rid;
  const out = await client.guarded({ estimate: 500_000, action: ACTION, actual: (reply) => reply.cost }, async (r) => {
    rid = r.reservationId;
    await sleep(5);
    return { answer: "42", cost: 420_000 };
  });
  assert.deepEqual(out, { answer: "42", cost: 420_000 });
  assert.equal(committed(rid).amount, 420_000);
});

test("reserve + finish, and Symbol.asyncDispose settles what is known", async () => {
  const r = await client.reserve({ estimate: 200_000, action: ACTION, metadata: { step: 1 } });
  r.setActual(150_000);
  r.setMetadata({ note: "done" });
  const outcome = await r.finish();
  assert.deepEqual([outcome.kind, outcome.reservationId, outcome.actual, outcome.released], ["settled", r.reservationId, 150_000, false]);
  assert.equal(outcome.settlement, r.settlement);
  assert.equal(r.outcome, "settled");
  assert.equal(r.settlement.status, "committed");
  assert.deepEqual(r.settlement.charged, { unit: "USD_MICROCENTS", amount: 150_000 });
  assert.equal(committed(r.reservationId).amount, 150_000);
  assert.equal(await r.finish(), outcome, "idempotent: the same outcome");
  // Usage reported after the end would not be settled: refused, not dropped unseen.
  assert.throws(() => r.setActual(1), (e) => e instanceof InvalidArgumentError && /would not be settled/.test(e.message));
  assert.throws(() => r.add(1), InvalidArgumentError);
  assert.throws(() => r.setMetadata({ late: true }), InvalidArgumentError);
  assert.equal(committed(r.reservationId).amount, 150_000);

  const d = await client.reserve({ estimate: 1000, action: ACTION });
  d.add(10);
  d.add(15n);
  await d[Symbol.asyncDispose]();
  assert.equal(d.settlement.status, "committed");
  assert.equal(committed(d.reservationId).amount, 25);

  const none = await client.reserve({ estimate: 1000, action: ACTION });
  await none[Symbol.asyncDispose]();
  assert.equal(none.outcome, "work_failed");
  assert.equal(none.released, true);
  assert.ok(server.ledger().some((e) => e.kind === "release" && e.reservation_id === none.reservationId));
  // fail() resolves with that outcome; finish() has no settled one to give.
  const failed = await none.fail();
  assert.deepEqual([failed.kind, failed.settlement, failed.released, failed.actual], ["work_failed", null, true, null]);
  await assert.rejects(none.finish(), (e) => e instanceof InvalidArgumentError && /already ended as work_failed/.test(e.message));
});

test("guardedWithOutcome hands back the value and the settled outcome; the ledger agrees", async () => {
  const { value, outcome } = await client.guardedWithOutcome({ estimate: 500_000, action: ACTION, actual: (reply) => reply.cost }, async (r) => {
    assert.equal(currentReservation(), r);
    return { answer: "42", cost: 420_000 };
  });
  assert.deepEqual(value, { answer: "42", cost: 420_000 });
  assert.deepEqual([outcome.kind, outcome.actual, outcome.released, outcome.releaseError], ["settled", 420_000, false, null]);
  assert.equal(outcome.settlement.status, "committed");
  assert.equal(outcome.settlement.settled, true);
  assert.equal(outcome.settlement.reservationId, outcome.reservationId);
  assert.deepEqual(outcome.settlement.charged, { unit: "USD_MICROCENTS", amount: 420_000 });
  assert.equal(outcome.settlement.body.status, "COMMITTED", "the server's commit response");
  assert.deepEqual([outcome.lease.path, outcome.lease.end], ["primary", "finished"]);
  assert.equal(committed(outcome.reservationId).amount, 420_000);

  // It rejects as guarded does: the work's error unchanged (released), a missing actual.
  const boom = new Error("boom");
  let rid;
  await assert.rejects(client.guardedWithOutcome({ estimate: 1000, action: ACTION }, async (r) => { rid = r.reservationId; throw boom; }), (e) => e === boom);
  assert.ok(server.ledger().some((e) => e.kind === "release" && e.reservation_id === rid));
  await assert.rejects(client.guardedWithOutcome({ estimate: 1000, action: ACTION }, async () => "x"), MissingActualError);

  // Work that ends its reservation itself: guarded still returns the value; there is no settled outcome.
  assert.equal(await client.guarded({ estimate: 1000, action: ACTION }, async (r) => (await r.fail(), "mine")), "mine");
  await assert.rejects(
    client.guardedWithOutcome({ estimate: 1000, action: ACTION }, async (r) => { rid = r.reservationId; await r.fail(); return "mine"; }),
    (e) => e instanceof InvalidArgumentError && /no settled outcome/.test(e.message),
  );
  assert.ok(server.ledger().some((e) => e.kind === "release" && e.reservation_id === rid));
  assert.equal(committed(rid), undefined);
});

test("wrap: estimate from the arguments, actual as a value", async () => {
  const ask = client.wrap({ estimate: (q) => q.length * 100, action: ACTION, actual: 7 }, async (q) => `echo ${q}`);
  assert.equal(await ask("hello"), "echo hello");
  const last = server.ledger().filter((e) => e.kind === "reserve").at(-1);
  assert.equal(last.amount, 500);
  assert.equal(committed(last.reservation_id).amount, 7);
});

test("a failing body releases, or settles known usage; its error propagates unchanged", async () => {
  const boom = new Error("boom");
  let rid;
  await assert.rejects(client.guarded({ estimate: 1000, action: ACTION }, async (r) => { rid = r.reservationId; throw boom; }), (e) => e === boom);
  assert.ok(server.ledger().some((e) => e.kind === "release" && e.reservation_id === rid));
  await assert.rejects(client.guarded({ estimate: 1000, action: ACTION }, async (r) => { rid = r.reservationId; r.add(300); throw boom; }), (e) => e === boom);
  assert.equal(committed(rid).amount, 300);
});

test("no actual raises MissingActualError; bad amounts are InvalidArgumentError", async () => {
  await assert.rejects(client.guarded({ estimate: 1000, action: ACTION }, async () => "x"), (e) => e instanceof MissingActualError && e.errorName === "MISSING_ACTUAL" && e.reservationId.length > 0);
  await assert.rejects(client.guarded({ estimate: 1000, action: ACTION }, async (r) => r.setActual(1.5)), InvalidArgumentError);
  await assert.rejects(client.reserve({ estimate: 1000, action: ACTION, heartbeatPolicy: "ignore" }), InvalidArgumentError);
  await assert.rejects(client.reserve({ estimate: 2 ** 60, action: ACTION }), InvalidArgumentError);
});

test("a short lease is kept alive while the work runs", async () => {
  const c = server.client({ journalDir: journalDir(), requestTimeoutMs: 500 });
  const before = ops(server).filter((o) => o === "extendReservation").length;
  const r = await c.reserve({ estimate: 1000, action: ACTION, ttlMs: 3500 });
  await sleep(4500);
  r.setActual(900);
  await r.finish();
  await c.close();
  assert.ok(r.lease.extensions >= 1, JSON.stringify(r.lease));
  assert.equal(r.lease.stoppedEarly, false);
  assert.deepEqual([r.lease.path, r.lease.end, r.lease.stopReason], ["primary", "finished", null]);
  assert.equal(r.settlement.status, "committed", "never expired, so no event fallback");
  assert.ok(ops(server).filter((o) => o === "extendReservation").length > before);
});

test("currentReservation nests across awaits and concurrent tasks", async () => {
  assert.equal(currentReservation(), null);
  const seen = {};
  await client.guarded({ estimate: 1000, action: ACTION, actual: 1 }, async (outer) => {
    assert.equal(currentReservation(), outer);
    await sleep(1);
    const task = async (name, delay) =>
      client.guarded({ estimate: 1000, action: ACTION, actual: 2 }, async (inner) => {
        await sleep(delay);
        seen[name] = currentReservation() === inner && inner.outer === outer;
        await sleep(delay);
        return name;
      });
    const names = await Promise.all([task("a", 15), task("b", 5), task("c", 10)]);
    assert.deepEqual(names, ["a", "b", "c"]);
    assert.equal(currentReservation(), outer, "back to the outer one after the inner guards");
  });
  assert.deepEqual(seen, { a: true, b: true, c: true });
  assert.equal(currentReservation(), null);
});

test("settlement does not depend on currentReservation: a task outliving its guard", async () => {
  let late;
  let rid;
  await client.guarded({ estimate: 1000, action: ACTION, actual: 3 }, async (r) => {
    rid = r.reservationId;
    late = (async () => {
      await sleep(20);
      return currentReservation();
    })();
  });
  assert.equal(await late, null, "a finished guard is not current any more");
  assert.equal(committed(rid).amount, 3);
});

test("events reach listeners, camelCase, with the stable kinds", async () => {
  const seen = [];
  const listener = (e) => seen.push(e);
  client.on("event", listener);
  const r = await client.reserve({ estimate: 1000, action: ACTION });
  r.setActual(5);
  await r.finish();
  for (let i = 0; i < 100 && !seen.some((e) => e.kind === "settlement_settled" && e.reservationId === r.reservationId); i++) await sleep(10);
  client.off("event", listener);
  const settled = seen.find((e) => e.kind === "settlement_settled" && e.reservationId === r.reservationId);
  assert.ok(settled, JSON.stringify(seen.map((e) => e.kind)));
  assert.equal(settled.level, "debug"); // a first-attempt commit is routine
  assert.equal(settled.mode, "commit");
  assert.equal(typeof settled.message, "string");
  assert.ok(events.includes(settled), "the onEvent option listener got it too");
});

test("events stop while nobody listens and come back with the next listener", async () => {
  const c = server.client({ journalDir: journalDir() });
  const settledFor = (seen, rid) => seen.some((e) => e.kind === "settlement_settled" && e.reservationId === rid);
  const finishOne = async () => {
    const r = await c.reserve({ estimate: 100, action: ACTION });
    r.setActual(1);
    await r.finish();
    return r.reservationId;
  };
  const first = [];
  const l1 = (e) => first.push(e);
  c.on("event", l1);
  const rid1 = await finishOne();
  for (let i = 0; i < 100 && !settledFor(first, rid1); i++) await sleep(10);
  assert.ok(settledFor(first, rid1), JSON.stringify(first.map((e) => e.kind)));
  c.off("event", l1); // nobody listens: core builds no events for this client
  await finishOne();
  const second = [];
  c.on("event", (e) => second.push(e));
  const rid3 = await finishOne();
  for (let i = 0; i < 100 && !settledFor(second, rid3); i++) await sleep(10);
  assert.ok(settledFor(second, rid3), "a listener added later gets the events from then on");
  await c.close(0);
});

test("setMetadataJson keeps integers beyond 2^53 exact in the journaled body", async () => {
  const dir = journalDir();
  const c = server.client({ journalDir: dir, maxAttempts: 1 });
  const r = await c.reserve({ estimate: 1000, action: ACTION });
  r.setActual(10);
  assert.throws(() => r.setMetadataJson("[1]"), InvalidArgumentError);
  r.setMetadataJson('{"big":9007199254740993,"max":18446744073709551615,"min":-9223372036854775808}');
  server.addFault({ operation: "commitReservation", fault: { kind: "server_error", status: 503 }, times: 0 });
  try {
    await r.finish();
  } finally {
    server.clearFaults();
  }
  assert.equal(r.settlement.status, "pending");
  const [p] = listPending(dir);
  const body = parseRecord(readFileSync(join(dir, p.partition, p.file))).commitBody;
  for (const exact of ['"big":9007199254740993', '"max":18446744073709551615', '"min":-9223372036854775808']) assert.ok(body.includes(exact), body);
  assert.equal((await c.drain(5000)).settled, 1);
  await c.close(0);
});

test("close() always resolves with a drain report: a client that never ran a guarded call, closed twice", async () => {
  const EMPTY = { outcomes: [], remaining: [], quarantined: [], unjournaled: [], settled: 0, clean: true };
  const idle = server.client({ journalDir: journalDir() });
  const first = await idle.close();
  assert.deepEqual(first, EMPTY);
  assert.equal(await idle.close(), first, "closed twice: the same report");
  assert.equal(idle.closed, true);

  // Operations only (no lifecycle): the same.
  const ops = server.client({ journalDir: journalDir() });
  assert.equal((await ops.getBalances({ tenant: "acme" })).meta.status, 200);
  assert.deepEqual(await ops.close(0), EMPTY);
  assert.deepEqual(await ops.close(), EMPTY);
});

test("flush, drain and close return drain reports", async () => {
  const c = server.client({ journalDir: journalDir() });
  const f = await c.flush();
  assert.deepEqual([f.outcomes, f.remaining, f.quarantined, f.clean], [[], [], [], true]);
  const d = await c.drain(100);
  assert.equal(d.clean, true);
  const closed = await c.close();
  assert.equal(closed.clean, true);
  assert.equal(await c.close(), closed, "idempotent");
});

test("AbortSignal: aborted before the call sends nothing", async () => {
  const sent = server.requests().length;
  const ac = new AbortController();
  ac.abort(new Error("stop"));
  await assert.rejects(client.guarded({ estimate: 1000, action: ACTION, signal: ac.signal }, async () => 1), /stop/);
  await assert.rejects(client.reserve({ estimate: 1000, action: ACTION, signal: AbortSignal.abort() }), (e) => e.name === "AbortError");
  assert.equal(server.requests().length, sent, "no request reached the server");
});

test("AbortSignal: aborting the work aborts r.signal; known usage is still settled", async () => {
  const ac = new AbortController();
  let rid;
  await assert.rejects(
    client.guarded({ estimate: 1000, action: ACTION, signal: ac.signal }, async (r) => {
      rid = r.reservationId;
      r.add(5);
      setTimeout(() => ac.abort(new Error("user gave up")), 5);
      await new Promise((resolve, reject) => r.signal.addEventListener("abort", () => reject(r.signal.reason), { once: true }));
    }),
    /user gave up/,
  );
  assert.equal(committed(rid).amount, 5, "the settlement was not aborted");
});

test("AbortSignal: aborted while reserving releases the reservation at once", async () => {
  const ac = new AbortController();
  const p = client.reserve({ estimate: 1000, action: ACTION, signal: ac.signal });
  ac.abort(new Error("too late"));
  await assert.rejects(p, /too late/);
  const last = server.ledger().filter((e) => e.kind === "reserve").at(-1);
  assert.ok(server.ledger().some((e) => e.kind === "release" && e.reservation_id === last.reservation_id));
});

test("stream: usage accumulates per item and settles at the end, on break, and on error", async () => {
  async function* tokens(n, failAt = -1) {
    for (let i = 0; i < n; i++) {
      if (i === failAt) throw new Error("source broke");
      await sleep(1);
      yield { text: `t${i}`, tokens: 10 };
    }
  }
  let r;
  const got = [];
  for await (const chunk of client.stream({ estimate: 1000, action: ACTION, onReservation: (x) => (r = x) }, tokens(4), (c) => c.tokens)) got.push(chunk.text);
  assert.deepEqual(got, ["t0", "t1", "t2", "t3"]);
  assert.equal(r.settlement.status, "committed");
  assert.equal(committed(r.reservationId).amount, 40);

  for await (const chunk of client.stream({ estimate: 1000, action: ACTION, onReservation: (x) => (r = x) }, tokens(10), (c) => c.tokens)) {
    if (chunk.text === "t1") break;
  }
  assert.equal(committed(r.reservationId).amount, 20, "a consumer's break settles what was used");

  await assert.rejects(async () => {
    for await (const _ of client.stream({ estimate: 1000, action: ACTION, onReservation: (x) => (r = x) }, tokens(5, 3), (c) => c.tokens)) void _;
  }, /source broke/);
  assert.equal(committed(r.reservationId).amount, 30);
});

test("stream: a clean stream with no usage releases, commits nothing and throws MissingActualError", async () => {
  let r;
  const got = [];
  await assert.rejects(async () => {
    for await (const chunk of client.stream({ estimate: 1000, action: ACTION, onReservation: (x) => (r = x) }, [], (c) => c.tokens)) got.push(chunk);
  }, (e) => e instanceof MissingActualError && e.errorName === "MISSING_ACTUAL" && e.reservationId === r.reservationId && e.released === true && /released/.test(e.message));
  assert.deepEqual(got, []);
  assert.equal(r.outcome, "missing_actual");
  assert.equal(r.settlement, null);
  assert.equal(r.released, true);
  assert.equal(committed(r.reservationId), undefined, "no commit (of 0 or anything) in the ledger");
  assert.deepEqual(
    server.ledger().filter((e) => e.reservation_id === r.reservationId).map((e) => [e.kind, e.amount]),
    [["reserve", 1000], ["release", 1000]],
    "the estimate is given back in the same call",
  );
  assert.ok(!server.requests().some((q) => q.operation === "commitReservation" && q.reservation_id === r.reservationId), "no commit was even sent");

  // Usage that is reported, even 0, is an actual: it is committed.
  for await (const _ of client.stream({ estimate: 1000, action: ACTION, onReservation: (x) => (r = x) }, [{ tokens: 0 }], (c) => c.tokens)) void _;
  assert.equal(r.settlement.status, "committed");
  assert.equal(committed(r.reservationId).amount, 0);
});

test("cancel policy: a lost lease aborts r.signal; what was used is still settled", async () => {
  const seen = [];
  const c = server.client({ journalDir: journalDir(), requestTimeoutMs: 500, onEvent: (e) => seen.push(e) });
  server.addFault({ operation: "extendReservation", fault: { kind: "error", status: 409, code: "RESERVATION_FINALIZED" }, times: 0 });
  try {
    let r;
    await assert.rejects(
      c.guarded({ estimate: 100, action: ACTION, ttlMs: 2000, heartbeatPolicy: "cancel" }, async (g) => {
        r = g;
        g.add(9);
        await new Promise((resolve, reject) => {
          const t = setTimeout(() => resolve("not cancelled"), 3000);
          g.signal.addEventListener("abort", () => (clearTimeout(t), reject(g.signal.reason)), { once: true });
        });
      }),
      (e) => e.name === "CancelledByHeartbeatError" && e.reservationId === r.reservationId,
    );
    assert.equal(r.cancelled, true);
    assert.equal(r.lease.stoppedEarly, true);
    assert.deepEqual([r.lease.end, r.lease.stopReason, r.lease.stopDetail], ["stopped", "permanent", { code: "RESERVATION_FINALIZED" }]);
    assert.equal(r.settlement.status, "committed");
    assert.equal(committed(r.reservationId).amount, 9);
  } finally {
    server.clearFaults();
    await c.close();
  }
  const failed = seen.find((e) => e.kind === "heartbeat_failed");
  assert.ok(failed, JSON.stringify(seen.map((e) => e.kind)));
  assert.equal(failed.level, "error");
});

test("fail_on_finalize: settles, then throws HeartbeatLapsedError", async () => {
  const c = server.client({ journalDir: journalDir(), requestTimeoutMs: 500 });
  server.addFault({ operation: "extendReservation", fault: { kind: "error", status: 409, code: "RESERVATION_FINALIZED" }, times: 0 });
  try {
    let r;
    await assert.rejects(
      c.guarded({ estimate: 100, action: ACTION, ttlMs: 2000, heartbeatPolicy: "fail_on_finalize", actual: 40 }, async (g) => {
        r = g;
        await sleep(1600);
      }),
      (e) => {
        assert.equal(e.name, "HeartbeatLapsedError");
        assert.equal(e.errorName, "HEARTBEAT_LAPSED");
        assert.equal(e.reservationId, r.reservationId);
        assert.equal(e.reason, "permanent");
        assert.equal(e.settlement.status, "committed");
        return true;
      },
    );
    assert.equal(r.outcome, "heartbeat_lapsed");
    assert.equal(committed(r.reservationId).amount, 40);
  } finally {
    server.clearFaults();
    await c.close();
  }
});

// -- decision, caps, release(), the default unit, keys a header cannot carry ------------------

/** A server whose tenant budget in TOKENS grants caps, with a plain USD budget beside it. */
function capsServer() {
  return startServer({
    budgets: [
      { scope: "tenant:acme", unit: "TOKENS", allocated: 1000, caps: { maxTokens: 64, toolDenylist: ["shell"] } },
      { scope: "tenant:acme", unit: "USD_MICROCENTS", allocated: 1_000_000 },
    ],
  });
}

const ofReservation = (s, rid) => s.ledger().filter((e) => e.reservation_id === rid).map((e) => [e.kind, e.unit, e.amount]);

test("decision and caps: ALLOW_WITH_CAPS from a budget's caps, plain ALLOW without", async () => {
  const s = capsServer();
  const c = s.client({ journalDir: journalDir(), defaultUnit: "TOKENS" });
  try {
    const r = await c.reserve({ estimate: 100, action: ACTION });
    assert.equal(r.decision, "ALLOW_WITH_CAPS");
    assert.deepEqual(r.caps, { maxTokens: 64, toolDenylist: ["shell"] });
    r.setActual(Math.min(100, r.caps.maxTokens));
    await r.finish();
    assert.deepEqual(ofReservation(s, r.reservationId), [["reserve", "TOKENS", 100], ["commit", "TOKENS", 64]]);
  } finally {
    await c.close();
    s.stop();
  }
  const plain = await client.reserve({ estimate: 10, action: ACTION });
  assert.deepEqual([plain.decision, plain.caps], ["ALLOW", null]);
  await plain.release();
});

test("release(): gives the estimate back with its reason; then finish/fail/dispose send nothing more", async () => {
  const s = capsServer();
  const c = s.client({ journalDir: journalDir(), defaultUnit: "TOKENS" });
  try {
    const r = await c.reserve({ estimate: 200, action: ACTION, idempotencyKey: "rel-1" });
    const o = await r.release("the caps are too tight");
    assert.deepEqual([o.kind, o.reservationId, o.released, o.releaseError, o.settlement, o.actual], ["released", r.reservationId, true, null, null, null]);
    assert.deepEqual([r.outcome, r.released, r.finished], ["released", true, true]);
    const sent = s.requests().filter((q) => q.operation === "releaseReservation");
    assert.deepEqual(sent.map((q) => q.idempotency_key), ["rel-1:release"]);
    assert.equal(JSON.parse(sent[0].body).reason, "the caps are too tight");
    const before = s.requests().length;
    await assert.rejects(r.finish(), InvalidArgumentError);
    assert.equal((await r.fail()).kind, "released");
    await r[Symbol.asyncDispose]();
    await assert.rejects(r.release(), InvalidArgumentError);
    assert.throws(() => r.add(1), InvalidArgumentError);
    assert.equal(s.requests().length, before, "nothing more was sent");
    assert.deepEqual(ofReservation(s, r.reservationId), [["reserve", "TOKENS", 200], ["release", "TOKENS", 200]]);

    // Refused once usage is known: the action goes on and commits what it reports.
    const k = await c.reserve({ estimate: 50, action: ACTION });
    k.add(10);
    await assert.rejects(k.release(), (e) => e instanceof InvalidArgumentError && e.errorName === "INVALID_ARGUMENT");
    assert.equal(k.finished, false);
    k.add(5);
    const done = await k.finish();
    assert.equal(done.settlement.status, "committed");
    assert.deepEqual(ofReservation(s, k.reservationId), [["reserve", "TOKENS", 50], ["commit", "TOKENS", 15]]);

    // Inside guarded(): the work releases, guarded returns its value, nothing is committed.
    let rid;
    const v = await c.guarded({ estimate: 30, action: ACTION }, async (g) => {
      rid = g.reservationId;
      await g.release();
      return "skipped";
    });
    assert.equal(v, "skipped");
    assert.deepEqual(ofReservation(s, rid), [["reserve", "TOKENS", 30], ["release", "TOKENS", 30]]);
  } finally {
    await c.close();
    s.stop();
  }
});

test("defaultUnit: a bare estimate is reserved in the client's default unit; unit overrides; unknown is ConfigError", async () => {
  const s = capsServer();
  const c = s.client({ journalDir: journalDir(), defaultUnit: "TOKENS" });
  try {
    assert.equal(c.defaultUnit, "TOKENS");
    const r = await c.reserve({ estimate: 7, action: ACTION });
    assert.equal(r.unit, "TOKENS");
    r.setActual(3);
    await r.finish();
    assert.deepEqual(ofReservation(s, r.reservationId), [["reserve", "TOKENS", 7], ["commit", "TOKENS", 3]]);
    const u = await c.reserve({ estimate: 9, unit: "USD_MICROCENTS", action: ACTION });
    assert.equal(u.unit, "USD_MICROCENTS");
    await u.release();
    assert.deepEqual(ofReservation(s, u.reservationId)[0], ["reserve", "USD_MICROCENTS", 9]);
    // The bridge refuses a unit that differs from an Amount's.
    await assert.rejects(c.reserve({ estimate: { unit: "TOKENS", amount: 1 }, unit: "CREDITS", action: ACTION }), InvalidArgumentError);
  } finally {
    await c.close();
    s.stop();
  }
  assert.equal(client.defaultUnit, "USD_MICROCENTS");
  assert.throws(() => new Client({ baseUrl: server.url, apiKey: server.apiKey, defaultUnit: "TOKEN" }), ConfigError);
  assert.throws(() => new Client({ baseUrl: server.url, apiKey: server.apiKey, defaultUnit: 5 }), InvalidArgumentError);
});

const ODD_KEYS = [" padded ", "trail ", "kéy", "漢字-😀"];

test("idempotency keys a header cannot carry work through guarded calls and release()", async () => {
  // This file's server is its own: the keys are used exactly as written.
  for (const key of ODD_KEYS) {
    let rid;
    const out = await client.guardedWithOutcome({ estimate: 100, action: ACTION, idempotencyKey: key, actual: 40 }, (r) => {
      rid = r.reservationId;
      return "ok";
    });
    assert.equal(out.outcome.settlement.status, "committed", JSON.stringify(key));
    const mine = server.ledger().filter((e) => e.reservation_id === rid);
    assert.deepEqual(mine.map((e) => [e.kind, e.idempotency_key, e.amount]), [["reserve", key, 100], ["commit", `${key}:commit`, 40]]);
  }
  // A release keeps the key too (another server: the same keys again).
  const s = startServer();
  const c = s.client({ journalDir: journalDir() });
  try {
    for (const key of ODD_KEYS) {
      const r = await c.reserve({ estimate: 5, action: ACTION, idempotencyKey: key });
      await r.release();
      assert.deepEqual(s.ledger().filter((e) => e.reservation_id === r.reservationId).map((e) => e.idempotency_key), [key, `${key}:release`]);
    }
  } finally {
    await c.close();
    s.stop();
  }
});
