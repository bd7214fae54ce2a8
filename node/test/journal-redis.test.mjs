// `journalUrl`: the settlement journal in Redis (core's Redis store), against a real
// `redis-server` (scripts/test-all.sh installs Debian's package) and the local server: what one
// client could not settle is drained by another that shares nothing with it but Redis, once;
// a Redis that does not make writes durable is refused when the settlement engine starts; a
// record's key ends in the file store's name of its exact id (CR-DURABLE-007 on Redis,
// conformance/adapters/node-redis-map.json).
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { existsSync, readdirSync } from "node:fs";
import { test } from "node:test";

import { ConfigError, InvalidArgumentError } from "cycles-sdk";
import * as journal from "cycles-sdk/journal";
import { TRICKY_IDS } from "./recovery-support.mjs";
import { ACTION, RedisConnection, journalDir, startRedis, startServer } from "./support.mjs";

test("a settlement journaled in Redis is drained by another client, once", async () => {
  const redis = await startRedis(true);
  const server = startServer();
  try {
    server.addFault({ operation: "commitReservation", fault: { kind: "server_error", status: 503 }, times: 0 });
    const ownDir = journalDir();
    const first = server.client({ journalUrl: redis.url, journalDir: ownDir, maxAttempts: 1, replayIntervalMs: 3_600_000 });
    const r = await first.reserve({ estimate: 1000, action: ACTION });
    r.setActual(640);
    await r.finish();
    assert.equal(r.settlement.status, "pending");
    assert.equal(r.settlement.journaled, true);
    await first.close(0);
    assert.deepEqual(recordFiles(ownDir), [], "nothing was written to the directory");
    // The face's listing reads the Redis journal as the client names it.
    const listed = journal.listPending(redis.url, server.url, server.apiKey, server.tenant);
    assert.deepEqual(listed.map((p) => [p.reservationId, p.file, p.legacy]), [[r.reservationId, journal.fileName(r.reservationId), false]]);
    assert.deepEqual(journal.listPending(redis.url).map((p) => p.reservationId), [r.reservationId]);
    assert.deepEqual(journal.listPending(redis.url, server.url, "another-key"), []);
    server.clearFaults();
    const other = server.client({ journalUrl: redis.url, journalDir: journalDir(), replayIntervalMs: 3_600_000 });
    const report = await other.drain(5000);
    assert.equal(report.settled, 1);
    assert.deepEqual(report.remaining, []);
    await other.close();
    assert.equal(server.ledger().filter((e) => e.kind === "commit" && e.amount === 640).length, 1);
    assert.deepEqual(journal.listPending(redis.url, server.url, server.apiKey, server.tenant), []);
    assert.throws(() => journal.listPending("redis://127.0.0.1:1/0"), (e) => e instanceof InvalidArgumentError && /127\.0\.0\.1:1/.test(e.message));
  } finally {
    server.stop();
    redis.stop();
  }
});

test("a Redis that does not make writes durable is refused unless opted out", async () => {
  const redis = await startRedis(false);
  const server = startServer();
  try {
    const refused = server.client({ journalUrl: redis.url, journalDir: journalDir() });
    await assert.rejects(refused.flush(), (e) => e instanceof ConfigError && /appendfsync always/.test(e.message));
    await refused.close(0);
    const ok = server.client({ journalUrl: `${redis.url}?durability=none`, journalDir: journalDir() });
    assert.deepEqual((await ok.flush()).remaining, []);
    await ok.close();
  } finally {
    server.stop();
    redis.stop();
  }
});

// CR-DURABLE-007 on Redis, which has no legacy names to migrate: the key of each record is
// `cycles:journal:{<partition>}:r:` + `v2-<sha256 of the exact UTF-8 id>.json` (computed here
// independently), ids that differ only in ways a lossy scheme would erase never share a key,
// and each key holds that id's own record.
test("redis record keys are the file names of the exact ids", async () => {
  const redis = await startRedis(true);
  const server = startServer();
  const conn = await RedisConnection.open(redis.port);
  try {
    // Every commit fails: each settlement stays journaled under its reservation's id.
    server.addFault({ operation: "commitReservation", fault: { kind: "server_error", status: 503 }, times: 0 });
    const dir = journalDir();
    const client = server.client({ journalUrl: redis.url, journalDir: dir, maxAttempts: 1, replayIntervalMs: 3_600_000 });
    for (const id of TRICKY_IDS) {
      // The local server gives the next reservation this id.
      server.addFault({ operation: "createReservation", fault: { kind: "reservation_id", id }, times: 1 });
      const r = await client.reserve({ estimate: 1000, action: ACTION, heartbeat: false });
      assert.equal(r.reservationId, id);
      r.setActual(100);
      await r.finish();
      assert.equal(r.settlement.status, "pending", id);
      assert.equal(r.settlement.journaled, true, id);
    }
    await client.close(0);
    const part = journal.identityFingerprint(server.url, server.apiKey, server.tenant);
    const want = TRICKY_IDS.map((id) => `cycles:journal:{${part}}:r:v2-${createHash("sha256").update(id, "utf8").digest("hex")}.json`);
    assert.equal(new Set(want).size, TRICKY_IDS.length, "distinct ids, distinct keys");
    const keys = (await conn.command("KEYS", "cycles:journal:*:r:*")).map(String);
    assert.deepEqual(keys.sort(), [...want].sort(), "one key per id, named as the file store names it");
    for (const [i, id] of TRICKY_IDS.entries()) {
      const rec = journal.parseRecord(await conn.command("GET", want[i]));
      assert.equal(rec.reservationId, id, "each key holds its own id's record");
    }
    const members = (await conn.command("SMEMBERS", `cycles:journal:{${part}}:records`)).map(String);
    assert.deepEqual(members.sort(), want.map((k) => k.slice(k.lastIndexOf(":") + 1)).sort());
    assert.deepEqual(recordFiles(dir), [], "nothing was written to the directory");
  } finally {
    conn.close();
    server.stop();
    redis.stop();
  }
});

/** The record files (`<partition>/v2-*.json`) under a journal directory. */
function recordFiles(dir) {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { recursive: true }).filter((f) => /(^|\/)v2-[0-9a-f]{64}\.json$/.test(String(f)));
}
