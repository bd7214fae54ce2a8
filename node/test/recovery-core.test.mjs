// Recovery conformance, core and boundary scenarios (CR-CORE-001..004, CR-BOUNDARY-001 of
// ../shared/spec/scenarios.yaml), through the package's public API against the in-process
// LocalServer over real HTTP, journaling into a fresh directory, or into a Redis of the test's
// own (TestJournal, CYCLES_TEST_JOURNAL_STORE=redis). The server's request log holds every body
// exactly as received. conformance/adapters/node-map.json (node-redis-map.json on Redis) names
// these tests; each asserts its scenario's expected requests and assertions.
import assert from "node:assert/strict";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { test } from "node:test";

import { Client, MissingActualError, currentReservation } from "cycles-sdk";
import { LocalServer } from "cycles-sdk/testing";
import { TestJournal, USD, applied, fault, noRelease, settlementRequests, settlements } from "./recovery-support.mjs";
import { ACTION, tempDir } from "./support.mjs";

const MALFORMED = ["missing_required_field", "wrong_status_code", "not_json", "wrong_field_type"];
const HOUR = 3_600_000;

/**
 * A server for one test and `journalAt(name)`, which opens a journal under test (a directory
 * of this test's temp dir, or a Redis of its own); all stopped when the test ends.
 */
async function withServer(fn) {
  const server = new LocalServer();
  const tmp = tempDir("cycles-node-core-");
  const journals = [];
  const journalAt = async (name = "journal") => {
    const j = await TestJournal.open(join(tmp, name));
    journals.push(j);
    return j;
  };
  try {
    await fn(server, journalAt);
  } finally {
    for (const j of journals) j.stop();
    server.stop();
  }
}

// -- CR-CORE-001 -------------------------------------------------------------------------------

test("lost commit response is retried with the same key and applied once", async () => {
  await withServer(async (server, journalAt) => {
    const j = await journalAt();
    fault(server, "commitReservation", { kind: "drop_response_after_apply" });
    const client = server.client({ ...j.options(), replayIntervalMs: HOUR });
    const r = await client.reserve({ estimate: 1_000, action: ACTION, idempotencyKey: "core-1", heartbeat: false });
    r.setActual(400);
    await r.finish();
    await client.close();
    const key = "core-1:commit";
    const s = r.settlement;
    assert.equal(s.status, "committed");
    assert.ok(s.settled);
    assert.deepEqual(s.charged, { unit: USD, amount: 400 });

    const reqs = settlementRequests(server, r.reservationId, key);
    // expected_requests: commit, commit_same_key
    assert.deepEqual(reqs.map((q) => q.operation), ["commitReservation", "commitReservation"]);
    assert.deepEqual(reqs.map((q) => q.idempotency_key), [key, key], "retry uses the original key");
    assert.equal(reqs[0].status, null);
    assert.equal(reqs[0].fault, "drop_response_after_apply");
    assert.equal(reqs[1].status, 200);
    assert.equal(reqs[1].replay, true, "the retry got the original result");
    assert.equal(reqs[1].body, reqs[0].body, "the retry sends the same bytes");
    assert.deepEqual(settlements(server, r.reservationId, key), [1, 0], "settled at most once");
    assert.deepEqual(applied(server, "commit").map((e) => [e.amount, e.idempotency_key]), [[400, key]]);
    assert.deepEqual(await j.records(), [], "the record is removed after success");
    assert.ok(j.dirUntouchedOnRedis());
    noRelease(server);
  });
});

// -- CR-CORE-002 -------------------------------------------------------------------------------

test("expired commit falls back to one event with the original subject action and actual", async () => {
  await withServer(async (server, journalAt) => {
    const j = await journalAt();
    const got = [];
    const action = { kind: "llm.completion", name: "test-model", tags: ["core-2"] };
    const subject = { tenant: server.tenant };
    const client = new Client({
      baseUrl: server.url, apiKey: server.apiKey, tenant: server.tenant, ...j.options(),
      onEvent: (e) => got.push(e), replayIntervalMs: HOUR,
    });
    const r = await client.reserve({ estimate: 1_000, action, subject, idempotencyKey: "core-2", heartbeat: false });
    r.setActual(400);
    r.setMetrics({ tokensInput: 12, tokensOutput: 34 });
    r.setMetadata({ run: "r-7" });
    server.advanceClock(200_000); // past expires_at + grace while the work ran
    await r.finish();
    await client.close();
    const rid = r.reservationId;
    const key = "core-2:commit";
    assert.equal(r.settlement.status, "recovered_via_event");
    assert.ok(r.settlement.settled);

    // expected_requests: commit, event_same_key (and nothing else settles it)
    const reqs = settlementRequests(server, rid, key);
    assert.deepEqual(reqs.map((q) => [q.operation, q.status]), [["commitReservation", 410], ["createEvent", 201]]);
    assert.ok(reqs.every((q) => q.idempotency_key === key));

    // The bytes sent: the event carries the ORIGINAL subject, action and actual.
    const commit = JSON.parse(reqs[0].body);
    const event = JSON.parse(reqs[1].body);
    const actual = { unit: USD, amount: 400 };
    assert.equal(commit.idempotency_key, key);
    assert.deepEqual(commit.actual, actual);
    assert.equal(event.idempotency_key, key);
    assert.deepEqual(event.subject, { tenant: server.tenant });
    assert.deepEqual(event.action, action);
    assert.deepEqual(event.actual, actual, "the known actual, unchanged");
    assert.deepEqual(event.metrics, { tokens_input: 12, tokens_output: 34 });
    assert.deepEqual(commit.metrics, event.metrics);
    assert.equal(event.metadata.run, "r-7");
    assert.equal(event.metadata.recovered_reservation_id, rid);
    assert.equal(event.metadata.recovery_reason, "commit_after_reservation_expired");

    // Settled at most once: one event with the actual, no commit; the record is gone.
    const evs = applied(server, "event");
    assert.deepEqual(evs.map((e) => [e.idempotency_key, e.tenant, e.unit, e.amount]), [[key, server.tenant, USD, 400]]);
    assert.deepEqual(applied(server, "commit"), []);
    assert.deepEqual(await j.records(), []);
    assert.ok(j.dirUntouchedOnRedis());
    assert.ok(got.some((e) => e.kind === "settlement_mode_switched" && e.reservationId === rid), JSON.stringify(got.map((e) => e.kind)));
    const settled = got.filter((e) => e.kind === "settlement_settled");
    assert.deepEqual(settled.map((e) => [e.reservationId, e.mode]), [[rid, "event"]]);
    noRelease(server);
  });
});

// -- CR-CORE-003 -------------------------------------------------------------------------------

test("heartbeat transport failure is observable and non fatal", async () => {
  await withServer(async (server, journalAt) => {
    const j = await journalAt();
    fault(server, "extendReservation", { kind: "connection_reset" });
    const got = [];
    // A lease long enough for a same-key retry inside the retry window after the reset.
    const ttlMs = 3_500;
    const client = server.client({ ...j.options(), requestTimeoutMs: 500, onEvent: (e) => got.push(e), replayIntervalMs: HOUR });
    const out = await client.guarded(
      { estimate: 1_000, action: ACTION, actual: (v) => v * 10, ttlMs, idempotencyKey: "core-3", heartbeatPolicy: "warn" },
      async () => {
        const started = Date.now();
        // The work outlives its original TTL and the first (failed) extension.
        while (Date.now() - started < ttlMs + 300 || !got.some((e) => e.kind === "heartbeat_extended")) {
          assert.ok(Date.now() - started < 10_000, "no successful extension");
          await sleep(20);
        }
        const r = currentReservation();
        assert.ok(r && !r.cancelled, "warn policy never cancels the work");
        return 70;
      },
    );
    await client.close();
    assert.equal(out, 70, "guarded_action_continues_under_warn_policy");

    const failures = got.filter((e) => e.kind === "heartbeat_failed");
    assert.ok(failures.length > 0, `the failure is an event: ${got.map((e) => e.kind)}`);
    const f = failures[0];
    const rid = f.reservationId;
    assert.match(rid, /^rsv_/);
    assert.equal(f.errorKind, "TRANSPORT_RESET", JSON.stringify(f));
    assert.equal(f.disposition, "retry", JSON.stringify(f));
    assert.equal(typeof f.retryInMs, "number", JSON.stringify(f));

    // expected_requests: extend, extend_same_key, commit
    const ops = server.requests().map((q) => [q.operation, q.idempotency_key, q.status]);
    const extends_ = ops.filter((q) => q[0] === "extendReservation");
    assert.ok(extends_.length >= 2 && extends_[0][1] === extends_[1][1], JSON.stringify(ops));
    assert.equal(extends_[0][2], null);
    assert.equal(extends_[1][2], 200);
    assert.deepEqual(ops.at(-1).slice(0, 2), ["commitReservation", "core-3:commit"], "final settlement attempted");
    assert.deepEqual(settlements(server, rid, "core-3:commit"), [1, 0]);
    assert.deepEqual(applied(server, "commit").map((c) => c.amount), [700]);
    assert.deepEqual(await j.records(), []);
    assert.ok(j.dirUntouchedOnRedis());
    noRelease(server);
  });
});

// -- CR-CORE-004 -------------------------------------------------------------------------------

async function protocolInvalidRound(server, journalAt, shape, viaEvent) {
  const what = `${shape} viaEvent=${viaEvent}`;
  const j = await journalAt(`${shape}-${viaEvent}`);
  const op = viaEvent ? "createEvent" : "commitReservation";
  fault(server, op, { kind: "malformed_success", shape });
  const key = `core-4-${shape}:commit`;
  const oneTry = server.client({ ...j.options(), maxAttempts: viaEvent ? 2 : 1, replayIntervalMs: HOUR });
  const r = await oneTry.reserve({ estimate: 1_000, action: ACTION, idempotencyKey: key.slice(0, -":commit".length), heartbeat: false });
  r.setActual(400);
  if (viaEvent) server.advanceClock(200_000);
  await r.finish();
  const rid = r.reservationId;
  const s = r.settlement;
  // Applied by the server, but not schema-valid: NOT a success.
  assert.equal(s.status, "pending", what);
  assert.equal(s.journaled, true, what);
  const once = viaEvent ? [0, 1] : [1, 0];
  assert.deepEqual(settlements(server, rid, key), once, `${what}: the server applied it`);
  const rec = await j.record(server, rid);
  assert.ok(rec, `${what}: record retained`);
  assert.equal(rec.idempotencyKey, key, `${what}: with the original key`);
  assert.equal(rec.mode, viaEvent ? "event" : "commit", what);
  await oneTry.close(0);

  // A fresh client replays the record with the SAME key; only the valid answer ends it.
  const fresh = server.client({ ...j.options(), replayIntervalMs: HOUR });
  const report = await fresh.drain(10_000);
  await fresh.close(0);
  assert.deepEqual(report.remaining, [], what);
  assert.deepEqual(await j.records(), [], `${what}: removed after schema-valid success`);
  assert.ok(j.dirUntouchedOnRedis(), what);
  const reqs = settlementRequests(server, rid, key).filter((q) => q.operation === op);
  assert.equal(reqs.length, 2, `${what}: ${JSON.stringify(reqs)}`);
  assert.ok(reqs.every((q) => q.idempotency_key === key), what);
  assert.equal(reqs[1].body, reqs[0].body, `${what}: the retry sends the same bytes`);
  assert.equal(reqs[0].fault, "malformed_success", what);
  assert.equal(reqs[1].status, viaEvent ? 201 : 200, what);
  assert.equal(reqs[1].replay, true, `${what}: the retry got the original result`);
  assert.deepEqual(settlements(server, rid, key), once, `${what}: settled at most once`);
}

test("protocol invalid commit success stays ambiguous and is retried with its key", async () => {
  await withServer(async (server, journalAt) => {
    for (const shape of MALFORMED) await protocolInvalidRound(server, journalAt, shape, false);
  });
});

test("protocol invalid event success stays ambiguous and is retried with its key", async () => {
  await withServer(async (server, journalAt) => {
    for (const shape of MALFORMED) await protocolInvalidRound(server, journalAt, shape, true);
  });
});

// -- CR-BOUNDARY-001 ---------------------------------------------------------------------------

class ProviderDown extends Error {}

test("missing actual is surfaced without settlement", async () => {
  await withServer(async (server, journalAt) => {
    const j = await journalAt();
    const client = server.client({ ...j.options(), replayIntervalMs: HOUR });
    const r = await client.reserve({ estimate: 1_000, action: ACTION, idempotencyKey: "boundary-1", heartbeat: false });
    // The work "succeeded" but never said what it cost.
    const missing = await r.finish().then(
      () => null,
      (e) => e,
    );
    assert.ok(missing instanceof MissingActualError, String(missing));
    assert.equal(missing.reservationId, r.reservationId);
    assert.equal(missing.released, true, "the estimate is given back in the same call");
    assert.equal(missing.releaseError, null);
    assert.match(missing.message, /released/);
    assert.equal(r.outcome, "missing_actual");
    assert.equal(r.settlement, null);
    assert.equal(r.released, true);
    // Exactly one release with the derived key after the create; no commit, no event.
    const after = server.requests().map((q) => [q.operation, q.idempotency_key ?? null]);
    assert.deepEqual(after, [
      ["createReservation", "boundary-1"],
      ["releaseReservation", "boundary-1:release"],
    ]);
    assert.deepEqual(server.ledger().map((e) => e.kind), ["reserve", "release"]);

    await assert.rejects(
      client.guarded({ estimate: 1_000, action: ACTION, heartbeat: false }, () => "done"),
      (e) => e instanceof MissingActualError && e.released === true,
    );
    assert.deepEqual(server.requests().map((q) => q.operation), ["createReservation", "releaseReservation", "createReservation", "releaseReservation"]);

    await assert.rejects(
      client.guarded({ estimate: 1_000, action: ACTION, actual: 5, heartbeat: false }, async () => {
        throw new ProviderDown("provider down");
      }),
      (e) => e instanceof ProviderDown && e.message === "provider down",
    );
    // What `await using` compiles to (Node 20 has no `using` syntax): dispose on the way out.
    const viaUsing = async () => {
      const d = await client.reserve({ estimate: 1_000, action: ACTION, heartbeat: false });
      try {
        throw new ProviderDown("using provider down");
      } finally {
        await d[Symbol.asyncDispose]();
      }
    };
    await assert.rejects(viaUsing(), (e) => e instanceof ProviderDown && e.message === "using provider down");
    await client.close();

    const ops = server.requests().map((q) => q.operation);
    assert.ok(!ops.includes("commitReservation") && !ops.includes("createEvent"), JSON.stringify(ops));
    assert.equal(ops.filter((o) => o === "releaseReservation").length, 4, "every action without an actual is released");
    assert.ok(server.ledger().every((e) => e.kind === "reserve" || e.kind === "release"));
    assert.deepEqual(await j.records(), [], "nothing journaled without an actual");
    assert.deepEqual(await j.quarantined(), []);
    assert.deepEqual(await j.pending(), []);
    assert.ok(j.dirUntouchedOnRedis());
  });
});
