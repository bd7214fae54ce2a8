// Recovery conformance on journals written by others (CR-DURABLE-005 and CR-DURABLE-007 of
// ../shared/spec/scenarios.yaml): corrupt and unsupported records are quarantined and reported
// while valid records still replay (in a restarted process), and record file names are the
// sha256 of the exact UTF-8 reservation id, with legacy names migrated without deleting a
// colliding record. Real files (or, for CR-DURABLE-005 with CYCLES_TEST_JOURNAL_STORE=redis,
// a real Redis: TestJournal), real HTTP to the in-process LocalServer.
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { basename, join } from "node:path";
import { test } from "node:test";

import { InvalidArgumentError } from "cycles-sdk";
import * as journal from "cycles-sdk/journal";
import { LocalServer } from "cycles-sdk/testing";
import { Child, TRICKY_IDS, TestJournal, USD, eventsOf, fault, leafName, readRecord, recordFiles, settlementRequests, settlements } from "./recovery-support.mjs";
import { ACTION, tempDir } from "./support.mjs";

const HOUR = 3_600_000;

/** A record as the official Python SDK writes it (spaced separators, `\u` escapes, no `mode`). */
export function pythonSdkRecord(rid, baseUrl, key, amount) {
  return (
    `{"version": 1, "reservation_id": "${rid}", "base_url": "${baseUrl}", ` +
    `"commit_body": {"idempotency_key": "${key}", "actual": {"unit": "${USD}", ` +
    `"amount": ${amount}}, "metadata": {"note": "caf\\u00e9"}}, ` +
    `"event_fallback_body": null, "recorded_at_ms": ${Date.now()}, "not_before_ms": null}`
  );
}

async function reserve(server, key) {
  const c = server.client({ journalEnabled: false });
  try {
    const created = await c.createReservation({ idempotencyKey: key, subject: { tenant: server.tenant }, action: ACTION, estimate: { unit: USD, amount: 1_000 } });
    assert.ok(created.reservationId);
    return created.reservationId;
  } finally {
    await c.close();
  }
}

async function withServer(fn) {
  const server = new LocalServer();
  try {
    await fn(server, tempDir("cycles-node-durable-"));
  } finally {
    server.stop();
  }
}

// -- CR-DURABLE-005 ----------------------------------------------------------------------------

test("corrupt and unsupported records are quarantined and valid records still replay", async () => {
  await withServer(async (server, tmp) => {
    // The journal under test: a directory, or a Redis of this test's own (TestJournal).
    const j = await TestJournal.open(join(tmp, "journal"));
    try {
      const rid = await reserve(server, "d5-reserve");
      const key = "d5-python-sdk-key";
      const valid = journal.fileName(rid);
      const corrupt = journal.fileName("rsv-corrupt");
      const future = journal.fileName("rsv-future");
      const corruptText = '{"version": 1, "reserv';
      const futureText = '{"version": 2, "reservation_id": "rsv-future", "payload": {}}';
      // Written as another writer would have (another SDK's record, a torn one, a newer one).
      const put = (file, text) => j.put(server.url, server.apiKey, server.tenant, file, text);
      await put(valid, pythonSdkRecord(rid, server.url, key, 300));
      await put(corrupt, corruptText);
      await put(future, futureText);
      for (const [text, error] of [[corruptText, "corrupt"], [futureText, "unsupported"]]) {
        assert.throws(() => journal.parseRecord(text), (e) => e instanceof InvalidArgumentError && e.details?.journal_error === error);
      }
      assert.deepEqual(await j.pending(), [rid]);

      // A restarted process (journal only) quarantines the bad records and replays the valid one.
      const result = await new Child(
        { url: server.url, api_key: server.apiKey, tenant: server.tenant, ...j.spec(), mode: "drain", timeout: 20 },
        join(tmp, "restart.json"),
      ).finish();
      assert.deepEqual(result.report.remaining, [], JSON.stringify(result.report));

      // corruption_is_reported: one event per quarantined record, naming it and its new name.
      const reported = eventsOf(result, "journal_quarantined");
      assert.deepEqual(reported.map((e) => leafName(e.file)).sort(), [corrupt, future].sort(), JSON.stringify(reported));
      const byFile = Object.fromEntries(reported.map((e) => [leafName(e.file), e]));
      assert.ok(reported.every((e) => e.disposition === "quarantined"));
      assert.match(byFile[corrupt].reason, /corrupt/);
      assert.match(byFile[future].reason, /unsupported/);
      // corrupt / unsupported_record_version quarantined: renamed, evidence kept, never deleted.
      const part = journal.identityFingerprint(server.url, server.apiKey, server.tenant);
      const quarantined = await j.quarantined();
      assert.ok(quarantined.every((q) => q.partition === part), JSON.stringify(quarantined));
      const left = quarantined.map((q) => q.name);
      const qCorrupt = quarantined.filter((q) => q.name.startsWith(`${corrupt}.corrupt-`));
      const qFuture = quarantined.filter((q) => q.name.startsWith(`${future}.unsupported-`));
      assert.equal(qCorrupt.length, 1, JSON.stringify(left));
      assert.equal(qFuture.length, 1, JSON.stringify(left));
      assert.equal(quarantined.length, 2, JSON.stringify(left));
      for (const e of reported) assert.ok(left.includes(leafName(e.quarantinedAs)), JSON.stringify([e, left]));
      assert.equal(qCorrupt[0].bytes.toString("utf8"), corruptText);
      assert.equal(qFuture[0].bytes.toString("utf8"), futureText);

      // other_valid_records_still_replay: committed once, stored key, record removed.
      assert.deepEqual(eventsOf(result, "settlement_settled").map((e) => e.reservationId), [rid]);
      const reqs = settlementRequests(server, rid, key);
      assert.deepEqual(reqs.map((r) => [r.operation, r.idempotency_key, r.status]), [["commitReservation", key, 200]]);
      // The stored body's members and escapes as written (core drops only insignificant whitespace).
      assert.equal(reqs[0].body, `{"idempotency_key":"${key}","actual":{"unit":"${USD}","amount":300},"metadata":{"note":"caf\\u00e9"}}`);
      assert.deepEqual(settlements(server, rid, key), [1, 0]);
      // No record is left: the valid one settled, the bad ones live on only under their new names.
      assert.deepEqual(await j.records(), []);
      assert.deepEqual(await j.pending(), []);
      // Nothing was ever sent for the quarantined records (expected_requests: []).
      const sent = server.requests().filter((r) => r.operation === "commitReservation" || r.operation === "createEvent");
      assert.deepEqual(sent.map((r) => r.reservation_id), [rid]);
      assert.ok(j.dirUntouchedOnRedis());
    } finally {
      j.stop();
    }
  });
});

// -- CR-DURABLE-007 ----------------------------------------------------------------------------

test("journal file names are sha256 of the exact utf8 id and never shared", () => {
  const names = new Set();
  for (const rid of TRICKY_IDS) {
    const expected = `v2-${createHash("sha256").update(Buffer.from(rid, "utf8")).digest("hex")}.json`;
    assert.equal(journal.fileName(rid), expected, rid);
    names.add(expected);
  }
  assert.equal(names.size, TRICKY_IDS.length, "distinct ids, distinct files");
  assert.equal(journal.fileName("rsv/a"), "v2-e3edb9ca022de3c9c90c5667d47fa66448cee1f254e488a761313faee34141d7.json");
  // The legacy scheme is lossy: these collide there, and only there.
  assert.equal(new Set(["rsv/a", "rsv_a", "rsv.a", "rsv a"].map(journal.legacyFileName)).size, 1);
});

// Legacy names exist only in the file store: this test journals into a directory whichever
// store CYCLES_TEST_JOURNAL_STORE names (on Redis, CR-DURABLE-007 maps to the Redis key test of
// journal-redis.test.mjs instead).
/**
 * Writes `text` to `path` whole, as another SDK's atomic write would: written beside the
 * journal, then renamed in. The client's background replay is already scanning the journal,
 * and a file it reads half-written is quarantined as corrupt (seen once in 13 runs).
 */
function plantWhole(tmp, path, text) {
  const staged = join(tmp, `staged-${basename(path)}`);
  writeFileSync(staged, text);
  renameSync(staged, path);
}

test("legacy record migrates to its standard name without deleting a colliding record", async () => {
  await withServer(async (server, tmp) => {
    const d = join(tmp, "journal");
    const part = join(d, journal.identityFingerprint(server.url, server.apiKey, server.tenant));
    const got = [];
    const client = server.client({ journalDir: d, onEvent: (e) => got.push(e), maxAttempts: 1, replayIntervalMs: HOUR });
    let outcomes;
    let rid, rid2, legacy, legacy2, standard, cText;
    try {
      const r = await client.reserve({ estimate: 1_000, action: ACTION, idempotencyKey: "d7-r", heartbeat: false });
      rid = r.reservationId;
      // C differs from R, yet the lossy legacy scheme names both the same.
      const collider = rid.replace("_", ".");
      assert.notEqual(collider, rid);
      legacy = join(part, journal.legacyFileName(rid));
      assert.equal(basename(legacy), journal.legacyFileName(collider));
      assert.equal(basename(legacy), `${rid}.json`);
      mkdirSync(part, { recursive: true });
      cText = pythonSdkRecord(collider, "http://127.0.0.1:9", "d7-collider-key", 111);
      plantWhole(tmp, legacy, cText);
      fault(server, "commitReservation", { kind: "server_error", status: 503 }, { reservation_id: rid });
      r.setActual(400);
      await r.finish();
      assert.equal(r.settlement.status, "pending");
      assert.equal(r.settlement.journaled, true);
      standard = join(part, journal.fileName(rid));
      assert.deepEqual(recordFiles(d), [legacy, standard].sort(), "two ids, two files");
      const rec = readRecord(standard);
      assert.equal(rec.reservationId, rid);
      assert.equal(rec.idempotencyKey, "d7-r:commit");
      assert.equal(readFileSync(legacy, "utf8"), cText, "the colliding record is neither read nor touched");

      // A matching legacy record of a real reservation R2 (as an older SDK named it).
      rid2 = await reserve(server, "d7-r2");
      legacy2 = join(part, journal.legacyFileName(rid2));
      plantWhole(tmp, legacy2, pythonSdkRecord(rid2, server.url, "d7-r2-key", 222));
      const pending = Object.fromEntries(journal.listPending(d).map((p) => [p.reservationId, p]));
      assert.deepEqual(Object.keys(pending).sort(), [rid, collider, rid2].sort());
      assert.ok(pending[collider].legacy && pending[rid2].legacy && !pending[rid].legacy);

      const report = await client.flush();
      outcomes = Object.fromEntries(report.outcomes.map((o) => [o.reservationId, o.status]));
    } finally {
      await client.close(0); // delivers every event; C stays journaled
    }
    const collider = rid.replace("_", ".");
    assert.ok([undefined, "committed"].includes(outcomes[rid]) && [undefined, "committed"].includes(outcomes[rid2]), JSON.stringify(outcomes));
    // R settled once with ITS key (never C's); its standard record is gone.
    assert.deepEqual(settlements(server, rid, "d7-r:commit"), [1, 0]);
    assert.ok(!existsSync(standard));
    // R2 migrated, then settled once with the stored key; no file of it is left.
    assert.deepEqual(settlements(server, rid2, "d7-r2-key"), [1, 0]);
    assert.ok(!existsSync(legacy2) && !existsSync(join(part, journal.fileName(rid2))));
    // C's colliding legacy record is still there, untouched, and still listed as pending.
    assert.equal(readFileSync(legacy, "utf8"), cText, "a colliding legacy record is never deleted");
    assert.deepEqual(recordFiles(d), [legacy]);
    const left = journal.listPending(d);
    assert.deepEqual(left.map((p) => [p.reservationId, p.legacy, p.file]), [[collider, true, basename(legacy)]]);
    const migrated = got.filter((e) => e.kind === "journal_migrated").map((e) => e.reservationId);
    assert.deepEqual([...new Set(migrated)], [rid2], JSON.stringify(got.map((e) => e.kind)));
    assert.deepEqual(settlementRequests(server, collider, "d7-collider-key"), [], "never sent");
  });
});
