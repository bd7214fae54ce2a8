// Recovery conformance across REAL process deaths (CR-DURABLE-001, -002, -003, -004, -006 of
// ../shared/spec/scenarios.yaml). The settling process is recovery-child.mjs in a fresh Node
// process; it is SIGKILLed at a chosen moment and a fresh process rebuilds its client from the
// journal alone. The LocalServer lives in this (test) process, so its ledger and request log
// outlive every child. The journal is a directory, or with CYCLES_TEST_JOURNAL_STORE=redis a
// Redis each test starts (TestJournal; the children get its journal_url and the directory stays
// unused). conformance/adapters/node-map.json (node-redis-map.json on Redis) names these tests.
import assert from "node:assert/strict";
import { existsSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { test } from "node:test";

import * as journal from "cycles-sdk/journal";
import { LocalServer } from "cycles-sdk/testing";
import { Child, TestJournal, commitKey, eventsOf, fault, noRelease, settlementRequests, settlements, waitFor } from "./recovery-support.mjs";
import { tempDir } from "./support.mjs";

/**
 * Starts children for one test on its journal `j` (the journal under test), and kills any
 * child, and any journal's Redis, that outlives it.
 */
class Spawner {
  constructor(server) {
    this.server = server;
    this.tmp = tempDir("cycles-node-recovery-");
    this.children = [];
    this.journals = [];
  }
  /** Opens another journal under test (another host's) in this test's temp dir. */
  async journalAt(name) {
    const j = await TestJournal.open(join(this.tmp, name));
    this.journals.push(j);
    return j;
  }
  spawn(name, spec) {
    const base = { url: this.server.url, api_key: this.server.apiKey, tenant: this.server.tenant, ...this.j.spec() };
    const c = new Child({ ...base, ...spec }, join(this.tmp, `${name}.json`));
    this.children.push(c);
    return c;
  }
  stop() {
    for (const c of this.children) c.stop();
    for (const j of this.journals) j.stop();
  }
}

/** A server and a spawner for one test, both stopped when it ends. */
async function withSpawner(t, fn, config = {}) {
  const server = new LocalServer(config);
  const s = new Spawner(server);
  try {
    s.j = await s.journalAt("journal");
    await fn(server, s);
  } finally {
    s.stop();
    server.stop();
  }
}

const firstCommit = (server, from = 0) => server.requests().slice(from).find((r) => r.operation === "commitReservation");

async function killedInFlight(server, s, f, n) {
  const key = `d1-${n}:commit`;
  fault(server, "commitReservation", f);
  const before = server.requests().length;
  const p1 = s.spawn(`p1-${n}`, { mode: "settle", key: `d1-${n}`, amount: 400 });
  // Process 1 journals, sends the first commit; the server holds it; SIGKILL in flight.
  const req = await waitFor(20, "the first commit", () => firstCommit(server, before));
  const rid = req.reservation_id;
  const rec = await s.j.record(server, rid);
  assert.ok(rec, "the record is in the journal while the first commit is in flight");
  assert.equal(server.requests().find((r) => r.seq === req.seq).status, null, "the commit is still in flight");
  await p1.kill9();
  const killed = Date.now();
  assert.equal(rec.reservationId, rid);
  assert.equal(rec.mode, "commit");
  assert.equal(commitKey(rec), key);
  assert.ok(rec.recordedAtMs <= req.received_at_ms, "journal write precedes the first settlement request");
  assert.deepEqual((await s.j.records()).map((r) => r.name), [journal.fileName(rid)]);
  assert.deepEqual(await s.j.record(server, rid), rec, "the unresolved record survives the kill");

  // Process 2: a fresh process with the journal only.
  const lastSeq = server.requests().at(-1).seq;
  const r2 = await s.spawn(`p2-${n}`, { mode: "drain", timeout: 20 }).finish();
  assert.deepEqual(r2.report.remaining, [], JSON.stringify(r2.report));
  assert.deepEqual(eventsOf(r2, "settlement_settled").map((e) => e.reservationId), [rid]);
  assert.equal(await s.j.record(server, rid), null, "successful replay removes the record");
  assert.deepEqual(await s.j.records(), []);
  assert.deepEqual(await s.j.quarantined(), []);
  assert.ok(s.j.dirUntouchedOnRedis());

  // Let the held first request end at the server, so a late apply would show.
  await sleep(Math.max(0, f.ms - (Date.now() - killed)) + 200);
  const reqs = settlementRequests(server, rid, key);
  assert.ok(reqs.length >= 2, JSON.stringify(reqs));
  assert.ok(reqs.every((r) => r.operation === "commitReservation" && r.idempotency_key === key));
  assert.ok(reqs.slice(1).every((r) => r.seq > lastSeq), "later commits came from the restart");
  assert.deepEqual(settlements(server, rid, key), [1, 0], "settled at most once");
}

test("first commit is journaled before it leaves and replayed after sigkill", async (t) => {
  await withSpawner(t, async (server, s) => {
    await killedInFlight(server, s, { kind: "delay_after_apply", ms: 1_500 }, 1);
    await killedInFlight(server, s, { kind: "delay", ms: 1_500 }, 2);
    noRelease(server);
  });
});

test("replayed expired commit switches durably to event mode across sigkill", async (t) => {
  await withSpawner(t, async (server, s) => {
    const key = "d2:commit";
    // Process 1 leaves a commit record (its only attempt fails with a 500).
    fault(server, "commitReservation", { kind: "server_error", status: 500 });
    const r1 = await s.spawn("p1", { mode: "settle", key: "d2", amount: 400, max_attempts: 1 }).finish();
    assert.equal(r1.settlement.status, "pending");
    const rid = r1.settlement.reservation_id;
    const record = () => s.j.record(server, rid);
    assert.equal((await record())?.mode, "commit", "the journal contains the commit");
    assert.equal(settlementRequests(server, rid, key).length, 1);

    // The reservation expires; the event will be applied and its response held.
    server.advanceClock(200_000);
    fault(server, "createEvent", { kind: "delay_after_apply", ms: 1_000 });

    // Process 2: commit -> 410 -> event mode persisted -> event in flight -> SIGKILL.
    const p2 = s.spawn("p2", { mode: "drain", timeout: 20 });
    const event = await waitFor(20, "the event request", () =>
      settlementRequests(server, rid, key).find((r) => r.operation === "createEvent"),
    );
    const switched = await record();
    assert.ok(switched, "the record is present while the event is in flight");
    await p2.kill9();
    assert.equal(event.status, null, "the event was in flight");
    assert.equal(switched.mode, "event", "event mode is persisted before the event attempt");
    assert.equal(commitKey(switched), key);
    assert.notEqual(switched.eventFallbackBody, null);
    let reqs = settlementRequests(server, rid, key);
    assert.deepEqual(reqs.slice(0, 2).map((r) => [r.operation, r.status]), [
      ["commitReservation", 500],
      ["commitReservation", 410], // commit_same_key_after_restart
    ]);
    assert.equal(reqs.length, 3, JSON.stringify(reqs));
    assert.equal((await record())?.mode, "event");

    // Process 3: sends the event only, same key; success removes the record.
    const r3 = await s.spawn("p3", { mode: "drain", timeout: 20 }).finish();
    assert.deepEqual(r3.report.remaining, []);
    assert.deepEqual(eventsOf(r3, "settlement_settled", rid).map((e) => e.mode), ["event"]);
    assert.equal(await record(), null, "successful event removes the record");
    assert.ok(s.j.dirUntouchedOnRedis());
    reqs = settlementRequests(server, rid, key);
    assert.ok(reqs.length >= 4, JSON.stringify(reqs));
    assert.ok(reqs.slice(2).every((r) => r.operation === "createEvent"), "after the mode switch only events are sent");
    assert.ok(reqs.every((r) => r.idempotency_key === key)); // event_same_key_after_restart
    assert.deepEqual(settlements(server, rid, key), [0, 1], "settled once, by the event");
    const evs = server.ledger().filter((e) => e.kind === "event" && e.idempotency_key === key);
    assert.deepEqual(evs.map((e) => [e.unit, e.amount]), [["USD_MICROCENTS", 400]]);
    noRelease(server);
  });
});

test("rate limit floor survives sigkill and restart", async (t) => {
  await withSpawner(t, async (server, s) => {
    const key = "d3:commit";
    fault(server, "commitReservation", { kind: "rate_limited", retry_after: "3" });
    const p1 = s.spawn("p1", { mode: "settle", key: "d3", amount: 400 });
    const first = await waitFor(20, "the 429", () => firstCommit(server));
    const rid = first.reservation_id;
    const record = () => s.j.record(server, rid);
    // Kill as soon as the floor is in the journal (the child then waits inline for it).
    const nb = await waitFor(20, "the persisted floor", async () => (await record())?.notBeforeMs);
    await p1.kill9();
    const [only] = settlementRequests(server, rid, key);
    assert.equal(only.status, 429);
    assert.ok(nb >= only.received_at_ms + 3_000, "the floor honours Retry-After");
    assert.equal((await record())?.notBeforeMs, nb, "the floor survives the kill");

    // Restarted before Retry-After: a fresh process sends nothing.
    const r2 = await s.spawn("p2", { mode: "flush" }).finish();
    assert.ok(Date.now() < nb, "this check ran before the floor");
    assert.deepEqual(r2.report.outcomes, []);
    assert.deepEqual(r2.report.remaining, [rid]);
    assert.equal(settlementRequests(server, rid, key).length, 1);

    // Another fresh process drains: no retry before the floor, then success removes it.
    const r3 = await s.spawn("p3", { mode: "drain", timeout: 20 }).finish();
    assert.deepEqual(r3.report.remaining, []);
    assert.equal(await record(), null, "successful replay removes the record");
    assert.ok(s.j.dirUntouchedOnRedis());
    const reqs = settlementRequests(server, rid, key);
    assert.equal(reqs.length, 2, JSON.stringify(reqs));
    assert.ok(reqs[1].received_at_ms >= nb, "no retry before the persisted not_before");
    assert.equal(reqs[1].status, 200);
    assert.ok(reqs.every((r) => r.idempotency_key === key)); // commit_same_key_after_retry_after
    assert.deepEqual(settlements(server, rid, key), [1, 0]);
  });
});

test("tenant journal survives api key rotation across processes", async (t) => {
  const cfg = { tenants: [{ id: "acme", apiKeys: ["old-key", "new-key"] }] };
  await withSpawner(
    t,
    async (server, s) => {
      const key = "d4:commit";
      fault(server, "commitReservation", { kind: "server_error", status: 500 });
      const r1 = await s
        .spawn("p1", { api_key: "old-key", tenant: "acme", mode: "settle", key: "d4", amount: 400, max_attempts: 1 })
        .finish();
      assert.equal(r1.settlement.status, "pending");
      const rid = r1.settlement.reservation_id;
      const records = await s.j.records();
      assert.ok(records.length > 0);
      for (const { partition, name, bytes } of records) {
        const where = `${partition}/${name}`;
        assert.ok(!bytes.includes("old-key") && !bytes.includes("new-key"), `API key stored in ${where}`);
        assert.ok(!where.includes("old-key") && !where.includes("new-key"), where);
      }
      if (!s.j.url) {
        // Nor in any other file of the directory.
        for (const f of allFiles(s.j.dir)) {
          const data = readFileSync(f);
          assert.ok(!data.includes("old-key") && !data.includes("new-key"), `API key stored in ${f}`);
        }
      }
      assert.equal(journal.identityFingerprint(server.url, "new-key", "acme"), journal.identityFingerprint(server.url, "old-key", "acme"));
      const tenantRecord = () => s.j.recordOf(server.url, "new-key", "acme", rid);
      assert.ok(await tenantRecord(), "the tenant partition does not depend on the key");

      // The new key WITHOUT the tenant is another partition: nothing to replay there.
      const other = await s.spawn("p-other", { api_key: "new-key", tenant: null, mode: "flush" }).finish();
      assert.deepEqual(other.report, { settled: 0, outcomes: [], remaining: [], quarantined: [] });
      assert.equal(settlementRequests(server, rid, key).length, 1);

      // Rotated: a fresh process with only the new key and the tenant finds and settles it.
      const r2 = await s.spawn("p2", { api_key: "new-key", tenant: "acme", mode: "drain", timeout: 20 }).finish();
      assert.deepEqual(r2.report.remaining, []);
      assert.deepEqual(eventsOf(r2, "settlement_settled").map((e) => e.reservationId), [rid]);
      assert.equal(await tenantRecord(), null);
      assert.ok(s.j.dirUntouchedOnRedis());
      assert.deepEqual(settlementRequests(server, rid, key).map((r) => [r.operation, r.idempotency_key, r.status]), [
        ["commitReservation", key, 500],
        ["commitReservation", key, 200], // commit_same_key_after_restart
      ]);
      assert.deepEqual(settlements(server, rid, key), [1, 0]);
    },
    cfg,
  );
});

function allFiles(dir) {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => join(e.parentPath ?? e.path, e.name));
}

// Released only once every worker has built its client: they then race for real.
async function releaseTogether(workers, go) {
  await waitFor(30, "the workers to be ready", () => workers.every((w) => existsSync(`${w.result}.ready`)));
  writeFileSync(go, "");
}

test("two processes replaying one journal settle the record once", async (t) => {
  await withSpawner(t, async (server, s) => {
    const key = "d6a:commit";
    fault(server, "commitReservation", { kind: "server_error", status: 500 });
    const r0 = await s.spawn("p0", { mode: "settle", key: "d6a", amount: 300, max_attempts: 1 }).finish();
    const rid = r0.settlement.reservation_id;
    assert.ok(await s.j.record(server, rid), "the journal contains the commit");
    fault(server, "commitReservation", { kind: "delay", ms: 400 });
    const go = join(s.tmp, "go-a");
    const workers = [0, 1].map((i) => s.spawn(`w${i}`, { mode: "drain", timeout: 20, go }));
    await releaseTogether(workers, go);
    const results = await Promise.all(workers.map((w) => w.finish()));
    const settled = results.flatMap((r) => eventsOf(r, "settlement_settled", rid));
    assert.equal(settled.length, 1, JSON.stringify(results));
    for (const r of results) assert.ok(r.report.remaining.length === 0 || (r.report.remaining.length === 1 && r.report.remaining[0] === rid));
    const reqs = settlementRequests(server, rid, key);
    assert.deepEqual(reqs.map((r) => [r.operation, r.idempotency_key]), [
      ["commitReservation", key],
      ["commitReservation", key], // concurrent_commit_same_key (after the first 500)
    ]);
    assert.equal(reqs[1].status, 200);
    assert.deepEqual(settlements(server, rid, key), [1, 0], "settled at most once");
    assert.equal(await s.j.record(server, rid), null, "the terminal record is removed");
    assert.deepEqual(await s.j.records(), []);
    assert.ok(s.j.dirUntouchedOnRedis());
  });
});

test("two processes with copies of one record commit concurrently once", async (t) => {
  await withSpawner(t, async (server, s) => {
    const key = "d6b:commit";
    fault(server, "commitReservation", { kind: "server_error", status: 500 });
    const r0 = await s.spawn("p0", { mode: "settle", key: "d6b", amount: 300, max_attempts: 1 }).finish();
    const rid = r0.settlement.reservation_id;
    // Two hosts' journals (two directories, or two Redis), each with a copy of the record.
    const bytes = await s.j.recordOf(server.url, server.apiKey, server.tenant, rid);
    assert.ok(bytes, "the journal contains the commit");
    const hosts = [await s.journalAt("host-a"), await s.journalAt("host-b")];
    for (const h of hosts) await h.put(server.url, server.apiKey, server.tenant, journal.fileName(rid), bytes);
    fault(server, "commitReservation", { kind: "hold", ms: 10_000 });
    const go = join(s.tmp, "go-b");
    const workers = hosts.map((h, i) => s.spawn(`h${i}`, { mode: "drain", timeout: 20, ...h.spec(), go }));
    await releaseTogether(workers, go);
    const results = await Promise.all(workers.map((w) => w.finish()));
    for (const r of results) {
      assert.deepEqual(r.report.remaining, []);
      assert.deepEqual(eventsOf(r, "settlement_settled").map((e) => e.reservationId), [rid]);
    }
    const reqs = settlementRequests(server, rid, key).slice(1); // after process 0's 500
    assert.equal(reqs.length, 2, JSON.stringify(reqs));
    assert.ok(reqs.every((r) => r.idempotency_key === key && r.status === 200));
    const gap = reqs[1].received_mono_us - reqs[0].received_mono_us;
    assert.ok(gap < 10_000_000, `the second commit arrived while the first was held (${gap} us)`);
    assert.equal(reqs.filter((r) => r.replay).length, 1, "one applied, one replayed");
    assert.deepEqual(settlements(server, rid, key), [1, 0], "applied once");
    for (const h of hosts) {
      assert.deepEqual(await h.records(), [], "both terminal records removed");
      assert.ok(h.dirUntouchedOnRedis());
    }
  });
});
