// Journal interop between the Node package, the Rust CLI (`cycles journal drain`) and the
// Python wheel, against the local server in this process over real HTTP:
//   Node writes (a node child process whose commit the server failed; it exits, or it is
//   SIGKILLed with the record on disk and its commit in flight), Rust drains; the same with
//   Python draining; Python writes (its commit failed, it exits), Node drains; Rust rewrites
//   (the CLI's replay meets a 429 and persists the floor in the record), Node drains.
// Each record is applied exactly once (the ledger), and the commit the drainer sends is byte
// for byte the commit body the writer journaled (the server's request log).
// Needs the CLI binary (CYCLES_NODE_INTEROP_CLI, else $CARGO_TARGET_DIR/debug/cycles: test.sh
// builds it) and the Python test venv python/scripts/test.sh leaves
// (CYCLES_NODE_INTEROP_PYTHON, else $CYCLES_PY_CACHE or ~/.cache/cycles-python, /test-venv/bin/python).
// Missing either fails these tests: they never skip.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { accessSync, constants } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { after, before, test } from "node:test";

import { LocalServer } from "cycles-sdk/testing";
import { Child, fault, readRecord, recordFiles, recordPath, settlementRequests, settlements, waitFor } from "./recovery-support.mjs";
import { REPO, tempDir } from "./support.mjs";

const CLI = process.env.CYCLES_NODE_INTEROP_CLI || join(process.env.CARGO_TARGET_DIR || join(REPO, "target"), "debug", "cycles");
const PYTHON =
  process.env.CYCLES_NODE_INTEROP_PYTHON ||
  join(process.env.CYCLES_PY_CACHE || join(homedir(), ".cache", "cycles-python"), "test-venv", "bin", "python");
const HELD_MS = 1_500;
const METADATA = { note: "caf\u00e9 \u{1f4b8}", nested: { b: [1, 2.5, null], a: '"q"' } };
const METADATA_TEXT = JSON.stringify(METADATA);

let server;
let tmp;
before(() => {
  server = new LocalServer();
  tmp = tempDir("cycles-node-interop-");
});
after(() => server.stop());

function executable(path, what) {
  try {
    accessSync(path, constants.X_OK);
  } catch {
    throw new Error(`no ${what} at ${path}`);
  }
}

/** Runs a program to completion; asserts its exit status (its output is the message). */
function run(argv, status, what) {
  const r = spawnSync(argv[0], argv.slice(1), { encoding: "utf8" });
  if (r.error) throw r.error;
  assert.equal(r.status, status, `${what}\n${r.stdout}${r.stderr}`);
}

const ridOf = (key) => server.ledger().find((e) => e.kind === "reserve" && e.idempotency_key === key).reservation_id;

/** The pending record's exact commit body, read before the drain. */
function journaledBody(dir, rid) {
  const rec = readRecord(recordPath(dir, server, rid));
  assert.ok(rec, `a pending record of ${rid} in ${dir}`);
  return rec.commitBody;
}

/** After the drain: applied once, the drained commit carried the journaled bytes, no record. */
function appliedOnce(dir, rid, key, body, amount) {
  assert.deepEqual(settlements(server, rid, key), [1, 0], "applied once");
  const reqs = settlementRequests(server, rid, key);
  assert.ok(reqs.length >= 2, JSON.stringify(reqs));
  const last = reqs.at(-1);
  assert.equal(last.status, 200);
  assert.equal(last.idempotency_key, key);
  assert.equal(last.body, body, "the drained commit is the journaled body byte for byte");
  const commit = server.ledger().find((e) => e.kind === "commit" && e.reservation_id === rid);
  assert.equal(commit.amount, amount);
  assert.deepEqual(recordFiles(dir), [], "the record is removed");
}

/** A node child process settles `key`; the server fails the commit; it exits, or is SIGKILLed. */
async function nodeWrites(dir, key, killed) {
  const spec = {
    url: server.url, api_key: server.apiKey, tenant: server.tenant, dir, mode: "settle", key, amount: 400,
    metadata: METADATA,
    max_attempts: killed ? 5 : 1,
  };
  if (!killed) {
    fault(server, "commitReservation", { kind: "server_error", status: 500 });
    const r = await new Child(spec, join(tmp, `${key}.json`)).finish();
    assert.equal(r.settlement.status, "pending");
    return;
  }
  // Killed: the server holds the (unapplied) commit; SIGKILL once the record is on disk.
  fault(server, "commitReservation", { kind: "delay", ms: HELD_MS });
  const before = server.requests().length;
  const c = new Child(spec, join(tmp, `${key}.json`));
  try {
    await waitFor(20, "the record and its commit", () =>
      recordFiles(dir).length === 1 && server.requests().slice(before).some((q) => q.operation === "commitReservation"),
    );
  } finally {
    await c.kill9();
  }
  const killedAt = Date.now();
  // Let the held commit end at the server before anyone drains.
  await sleep(Math.max(0, HELD_MS - (Date.now() - killedAt)) + 300);
}

function rustDrains(dir) {
  executable(CLI, "cycles CLI (cargo build -p cycles-cli)");
  const argv = [CLI, "journal", "drain", "--dir", dir, "--base-url", server.url, "--api-key", server.apiKey, "--tenant", server.tenant, "--deadline-ms", "20000"];
  run(argv, 0, "cycles journal drain exits 0 (every record settled)");
}

const PY_DRAIN = `
import sys, cycles
url, key, tenant, d = sys.argv[1:5]
c = cycles.Client(url, key, tenant=tenant, journal_dir=d, replay_interval=3600)
r = c.drain(20.0)
c.close(timeout=0)
assert r.remaining == (), r
`;

const PY_WRITE = `
import sys, cycles
url, key, tenant, d, k = sys.argv[1:6]
c = cycles.Client(url, key, tenant=tenant, journal_dir=d, settle_max_attempts=1, replay_interval=3600)
with c.reserve(1000, action={'kind': 'llm.completion', 'name': 'test-model'}, idempotency_key=k,
               heartbeat=False) as r:
    r.set_actual(321)
    r.set_metadata({'note': 'caf\\u00e9', 'big': 12345678901234567890})
assert r.settlement.status == 'pending', r.settlement
c.close(timeout=0)
`;

function python(script, dir, key = "") {
  executable(PYTHON, "Python test venv (run python/scripts/test.sh first)");
  run([PYTHON, "-I", "-c", script, server.url, server.apiKey, server.tenant, dir, key], 0, "python exited 0");
}

async function nodeDrains(dir) {
  const c = server.client({ journalDir: dir, replayIntervalMs: 3_600_000 });
  const report = await c.drain(20_000);
  await c.close(0);
  assert.deepEqual(report.remaining, [], JSON.stringify(report));
}

for (const [drainer, killed] of [["rust", false], ["rust", true], ["python", false], ["python", true]]) {
  test(`interop: node writes${killed ? " (SIGKILLed)" : ""}, ${drainer} drains`, async () => {
    const key = `interop-node-${drainer}-${killed ? "killed" : "exited"}`;
    const dir = join(tmp, key);
    await nodeWrites(dir, key, killed);
    const rid = ridOf(key);
    const body = journaledBody(dir, rid);
    assert.ok(body.endsWith(`"metadata":${METADATA_TEXT}}`), body);
    if (drainer === "rust") rustDrains(dir);
    else python(PY_DRAIN, dir);
    appliedOnce(dir, rid, `${key}:commit`, body, 400);
  });
}

test("interop: python writes, node drains", async () => {
  const key = "interop-python-node";
  const dir = join(tmp, key);
  fault(server, "commitReservation", { kind: "server_error", status: 500 });
  python(PY_WRITE, dir, key);
  const rid = ridOf(key);
  const body = journaledBody(dir, rid);
  assert.ok(body.includes("12345678901234567890"), `big integer kept: ${body}`);
  await nodeDrains(dir);
  appliedOnce(dir, rid, `${key}:commit`, body, 321);
});

test("interop: rust rewrites (429 floor), node drains", async () => {
  const key = "interop-rust-node";
  const dir = join(tmp, key);
  await nodeWrites(dir, key, false);
  const rid = ridOf(key);
  const body = journaledBody(dir, rid);
  // Every commit of this replay is rate-limited, so it ends with the floor persisted.
  server.addFault({ operation: "commitReservation", fault: { kind: "rate_limited", retry_after: "1" }, times: 0 });
  try {
    executable(CLI, "cycles CLI (cargo build -p cycles-cli)");
    const argv = [CLI, "journal", "replay", "--dir", dir, "--base-url", server.url, "--api-key", server.apiKey, "--tenant", server.tenant];
    run(argv, 1, "the replay leaves the record pending (exit 1)");
  } finally {
    server.clearFaults();
  }
  const rec = readRecord(recordPath(dir, server, rid));
  assert.notEqual(rec?.notBeforeMs ?? null, null, "Rust wrote the floor into the record");
  assert.equal(rec.commitBody, body, "the rewrite kept the body");
  await waitFor(5, "the floor", () => Date.now() >= rec.notBeforeMs);
  await nodeDrains(dir);
  appliedOnce(dir, rid, `${key}:commit`, body, 400);
});
