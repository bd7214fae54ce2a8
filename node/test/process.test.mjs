// Process lifetime: a plain `node script.mjs` that uses a client and returns exits by itself,
// within a time limit, whatever it leaves behind (an idle client never closed, an unfinished
// guard, a listener, a pending journal record). Each script runs in its own node process,
// not under the test runner.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { test } from "node:test";

import { NODE_DIR, tempDir } from "./support.mjs";

const LIMIT_MS = 15_000;
const SDK = pathToFileURL(join(NODE_DIR, "dist", "esm", "index.mjs")).href;
const TESTING = pathToFileURL(join(NODE_DIR, "dist", "esm", "testing.mjs")).href;

/** Runs `body` as an ES module in a fresh node process; returns its result. */
export function runScript(body, { limitMs = LIMIT_MS } = {}) {
  const dir = tempDir("cycles-node-proc-");
  const file = join(dir, "script.mjs");
  writeFileSync(file, body);
  const started = Date.now();
  const r = spawnSync(process.execPath, [file], { cwd: dir, encoding: "utf8", timeout: limitMs, env: { ...process.env, CYCLES_JOURNAL_DIR: dir } });
  return { ...r, ms: Date.now() - started };
}

const PRELUDE = `
import { Client } from ${JSON.stringify(SDK)};
import { LocalServer } from ${JSON.stringify(TESTING)};
const server = new LocalServer();
const ACTION = { kind: "llm.completion", name: "m" };
`;

function assertExits(r, marker) {
  assert.equal(r.error, undefined, `did not exit within ${LIMIT_MS} ms: ${r.error}\n${r.stderr}`);
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, marker);
}

test("exits by itself: an idle client never closed, with a listener and a finished guard", () => {
  const r = runScript(`${PRELUDE}
const client = server.client({ onEvent: () => {} });
await client.guarded({ estimate: 10, action: ACTION, actual: 5 }, async () => 1);
console.log("done-idle");
`);
  assertExits(r, /done-idle/);
});

test("exits by itself: an unfinished guard (its lease holds no ref)", () => {
  const r = runScript(`${PRELUDE}
const client = server.client({ closeTimeoutMs: 500 });
const g = await client.reserve({ estimate: 10, action: ACTION, ttlMs: 60000 });
console.log("done-unfinished", g.reservationId.length > 0);
`);
  assertExits(r, /done-unfinished true/);
});

test("exits by itself: a pending journal record (bounded exit drain)", () => {
  const r = runScript(`${PRELUDE}
server.addFault(JSON.parse('{"operation":"commitReservation","fault":{"kind":"server_error","status":503},"times":0}'));
const client = server.client({ closeTimeoutMs: 300, maxAttempts: 1, replayIntervalMs: 3600000 });
const g = await client.reserve({ estimate: 10, action: ACTION });
g.setActual(7);
await g.finish();
console.log("done-pending", g.settlement.status, g.settlement.journaled);
`);
  assertExits(r, /done-pending pending true/);
});

const CJS = join(NODE_DIR, "dist", "index.js");
const CJS_TESTING = join(NODE_DIR, "dist", "testing.js");
const WORKER = `
const { parentPort } = require("node:worker_threads");
const { Client } = require(${JSON.stringify(CJS)});
const { LocalServer } = require(${JSON.stringify(CJS_TESTING)});
const server = new LocalServer();
const client = new Client({ baseUrl: server.url, apiKey: server.apiKey, tenant: "acme", journalEnabled: false, onEvent: () => {} });
(async () => {
  for (let n = 1; ; n++) {
    await client.guarded({ estimate: 10, action: { kind: "k", name: "n" }, actual: 1 }, async () => {
      if (n === 3) parentPort.postMessage("busy");
    });
  }
})();
`;

test("worker_threads: 4 workers terminated mid-flight; the main thread lives on and exits", () => {
  const r = runScript(`
import { Worker } from "node:worker_threads";
${PRELUDE}
const worker = ${JSON.stringify(WORKER)};
const done = [];
for (let i = 0; i < 4; i++) {
  const w = new Worker(worker, { eval: true });
  done.push(new Promise((resolve, reject) => {
    w.on("message", () => w.terminate().then(resolve, reject));
    w.on("error", reject);
  }));
}
await Promise.all(done);
const client = server.client({ journalEnabled: false });
await client.guarded({ estimate: 10, action: ACTION, actual: 2 }, async () => 1);
await client.close();
console.log("done-workers");
`);
  assertExits(r, /done-workers/);
});

test("worker_threads: the addon loaded only in workers; the process exits", () => {
  const r = runScript(`
import { Worker } from "node:worker_threads";
const worker = ${JSON.stringify(WORKER)};
await new Promise((resolve, reject) => {
  const w = new Worker(worker, { eval: true });
  w.on("message", () => w.terminate().then(resolve, reject));
  w.on("error", reject);
});
console.log("done-worker-only");
`);
  assertExits(r, /done-worker-only/);
});

// Settlements still in flight when their worker's environment is torn down: each worker keeps
// 16 guarded calls running, and is terminated at a staggered moment, so some settlements reach
// the JS thread, some are queued at the teardown and some arrive after it. None may crash the
// process or keep it alive, and the main thread's own promises still settle afterwards.
const BUSY_WORKER = `
const { parentPort } = require("node:worker_threads");
const { Client } = require(${JSON.stringify(CJS)});
const { LocalServer } = require(${JSON.stringify(CJS_TESTING)});
const server = new LocalServer();
const client = new Client({ baseUrl: server.url, apiKey: server.apiKey, tenant: "acme", journalEnabled: false });
let done = 0;
for (let lane = 0; lane < 16; lane++) {
  (async () => {
    for (;;) {
      await client.guarded({ estimate: 10, action: { kind: "k", name: "n" }, actual: 1 }, async () => {});
      if (++done === 32) parentPort.postMessage("busy");
    }
  })();
}
`;

test("worker_threads: 12 workers with 16 calls in flight each, terminated at staggered moments", () => {
  const r = runScript(`
import { Worker } from "node:worker_threads";
${PRELUDE}
const worker = ${JSON.stringify(BUSY_WORKER)};
for (let batch = 0; batch < 3; batch++) {
  const done = [];
  for (let i = 0; i < 4; i++) {
    const w = new Worker(worker, { eval: true });
    done.push(new Promise((resolve, reject) => {
      w.on("message", () => setTimeout(() => w.terminate().then(resolve, reject), i * 3));
      w.on("error", reject);
    }));
  }
  await Promise.all(done);
}
const client = server.client({ journalEnabled: false });
const results = await Promise.all(
  Array.from({ length: 16 }, (_, i) => client.guarded({ estimate: 10, action: ACTION, actual: 1 }, async () => i)),
);
await client.close();
console.log("done-staggered", results.length);
`, { limitMs: 60_000 });
  assertExits(r, /done-staggered 16/);
});
