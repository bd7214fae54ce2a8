// Every case of conformance/vectors/journal.json through cycles-sdk/journal (identity
// partitions, file names, record fixtures), checked as core/tests/journal_vectors.rs and the
// Python suite check them; the `drain` fixtures (official SDKs' byte forms) drained against
// the local server, each applied once byte for byte; listPending against a pending settlement.
import assert from "node:assert/strict";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, test } from "node:test";

import { InvalidArgumentError } from "cycles-sdk";
import * as journal from "cycles-sdk/journal";
import { ACTION, REPO, journalDir, startServer } from "./support.mjs";

const DOC = JSON.parse(readFileSync(join(REPO, "conformance", "vectors", "journal.json"), "utf8"));
const EXPECTED = { partition: 6, file_names: 5, records: 23 };
let server;
before(() => (server = startServer()));
after(() => server.stop());

function section(name) {
  assert.equal(DOC[name].length, EXPECTED[name], `section ${name}`);
  return DOC[name];
}

test("journal vectors: every section is covered", () => {
  assert.deepEqual(Object.keys(DOC).sort(), ["description", "file_names", "partition", "records"]);
});

test("journal vectors: partitions and file names", () => {
  let n = 0;
  for (const c of section("partition")) {
    assert.equal(journal.identityFingerprint(c.base_url, c.api_key, c.tenant), c.fp16, c.note);
    n++;
  }
  for (const c of section("file_names")) {
    assert.equal(journal.fileName(c.reservation_id), c.standard, c.reservation_id);
    assert.equal(journal.legacyFileName(c.reservation_id), c.legacy, c.reservation_id);
    n++;
  }
  assert.equal(n, EXPECTED.partition + EXPECTED.file_names);
});

test("journal vectors: records", () => {
  let n = 0;
  for (const c of section("records")) {
    const e = c.expect;
    if (e.ok === false) {
      assert.throws(() => journal.parseRecord(c.text), (err) => {
        assert.ok(err instanceof InvalidArgumentError, c.name);
        assert.deepEqual(err.details, { journal_error: e.error }, c.name);
        assert.ok(err.message.startsWith(`${e.error} record: `), c.name);
        return true;
      });
    } else {
      const r = journal.parseRecord(c.text);
      assert.equal(r.version, 1, c.name);
      assert.equal(r.reservationId, e.reservation_id, c.name);
      assert.equal(r.baseUrl, e.base_url, c.name);
      assert.equal(r.mode, e.mode, c.name);
      assert.equal(r.idempotencyKey, e.idempotency_key, c.name);
      assert.equal(r.recordedAtMs, e.recorded_at_ms, c.name);
      assert.equal(r.notBeforeMs, e.not_before_ms, c.name);
      if ("commit_body" in e) assert.deepEqual(r.commitBody === null ? null : JSON.parse(r.commitBody), e.commit_body, c.name);
      if ("event_fallback_body" in e) assert.deepEqual(r.eventFallbackBody === null ? null : JSON.parse(r.eventFallbackBody), e.event_fallback_body, c.name);
      assert.equal(r.commitBody, e.commit_body_wire, c.name);
      assert.equal(r.eventFallbackBody, e.event_fallback_body_wire, c.name);
      assert.deepEqual(r.extraKeys, e.extra_keys, c.name);
    }
    n++;
  }
  assert.equal(n, EXPECTED.records);
});

test("listPending sees a pending settlement until it is drained", async () => {
  const dir = journalDir();
  assert.deepEqual(journal.listPending(join(dir, "missing")), []);
  assert.throws(() => journal.listPending(dir, "http://localhost"), InvalidArgumentError);
  const client = server.client({ journalDir: dir, maxAttempts: 1, replayIntervalMs: 3_600_000 });
  try {
    server.addFault({ operation: "commitReservation", fault: { kind: "server_error", status: 503 }, times: 0 });
    const r = await client.reserve({ estimate: 1000, action: ACTION });
    r.setActual(640);
    await r.finish();
    assert.equal(r.settlement.status, "pending");
    const fp = journal.identityFingerprint(server.url, server.apiKey, server.tenant);
    const mine = journal.listPending(dir, server.url, server.apiKey, server.tenant);
    assert.deepEqual(journal.listPending(dir), mine);
    assert.equal(mine.length, 1);
    assert.equal(mine[0].reservationId, r.reservationId);
    assert.equal(mine[0].mode, "commit");
    assert.equal(mine[0].partition, fp);
    assert.equal(mine[0].file, journal.fileName(r.reservationId));
    assert.equal(mine[0].legacy, false);
    const onDisk = journal.parseRecord(readFileSync(join(dir, fp, mine[0].file)));
    assert.equal(onDisk.baseUrl, server.url);
    assert.equal(JSON.parse(onDisk.commitBody).actual.amount, 640);
    assert.deepEqual(journal.listPending(dir, server.url, "other-key", "other-tenant"), []);
    server.clearFaults();
    const report = await client.drain(5000);
    assert.equal(report.settled, 1);
    assert.deepEqual(report.remaining, []);
    assert.deepEqual(journal.listPending(dir), []);
  } finally {
    server.clearFaults();
    await client.close();
  }
});

test("journal vectors: the drain fixtures are applied once, byte for byte", async () => {
  const cases = section("records").filter((c) => c.drain);
  assert.ok(cases.length >= 4, "drain fixtures missing");
  const dir = journalDir();
  const part = join(dir, journal.identityFingerprint(server.url, server.apiKey, server.tenant));
  mkdirSync(part, { recursive: true });
  const live = (text, subs) => subs.reduce((t, [a, b]) => t.split(a).join(b), text);
  const expected = [];
  // Reservations through a client that journals elsewhere: the journaling client below
  // starts its replay when its lifecycle opens and must find every record in place.
  const plain = server.client({ journalDir: journalDir() });
  let k = 0;
  for (const c of cases) {
    const e = c.expect;
    const created = await plain.createReservation({ idempotencyKey: `reserve-node-${c.name}-${++k}`, subject: { tenant: server.tenant }, action: ACTION, estimate: { unit: "USD_MICROCENTS", amount: 1000 } });
    const rid = created.reservationId;
    const subs = [[JSON.stringify(e.reservation_id), JSON.stringify(rid)], ['"http://localhost"', JSON.stringify(server.url)]];
    writeFileSync(join(part, journal.fileName(rid)), live(c.text, subs), "utf8");
    const wire = e.mode === "event" ? e.event_fallback_body_wire : e.commit_body_wire;
    expected.push([c.name, e.idempotency_key, e.mode, live(wire, subs)]);
  }
  await plain.close();
  assert.equal(journal.listPending(dir, server.url, server.apiKey, server.tenant).length, cases.length);
  const client = server.client({ journalDir: dir, replayIntervalMs: 3_600_000 });
  const report = await client.drain(10_000);
  await client.close();
  assert.equal(report.clean, true, JSON.stringify(report));
  const ledger = server.ledger();
  const requests = server.requests();
  for (const [name, key, mode, wire] of expected) {
    assert.deepEqual(ledger.filter((x) => x.idempotency_key === key).map((x) => x.kind), [mode], name);
    const sent = requests.filter((x) => x.idempotency_key === key);
    assert.deepEqual(sent.map((x) => x.body), [wire], name);
    assert.equal(sent[0].status, mode === "event" ? 201 : 200, name);
  }
  assert.deepEqual(journal.listPending(dir), []);
});
