// `journalUrl`: the settlement journal in Redis (core's Redis store), against a real
// `redis-server` (scripts/test-all.sh installs Debian's package) and the local server: what one
// client could not settle is drained by another that shares nothing with it but Redis, once;
// a Redis that does not make writes durable is refused when the settlement engine starts.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync } from "node:fs";
import { createConnection, createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { test } from "node:test";

import { ConfigError } from "cycles-sdk";
import { ACTION, journalDir, startServer } from "./support.mjs";

async function freePort() {
  const s = createServer();
  await new Promise((ok) => s.listen(0, "127.0.0.1", ok));
  const { port } = s.address();
  await new Promise((ok) => s.close(ok));
  return port;
}

/** A redis-server on a free loopback port; `aof`: appendonly + appendfsync always. */
async function startRedis(aof) {
  const port = await freePort();
  const args = ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--dir", mkdtempSync(join(tmpdir(), "cycles-redis-"))];
  if (aof) args.push("--appendonly", "yes", "--appendfsync", "always");
  const child = spawn("redis-server", args, { stdio: "ignore" });
  child.on("error", (e) => assert.fail(`redis-server (apt-get install redis-server; scripts/test-all.sh does): ${e}`));
  const deadline = Date.now() + 10_000;
  for (;;) {
    const up = await new Promise((ok) => {
      const c = createConnection({ port, host: "127.0.0.1" }, () => { c.destroy(); ok(true); });
      c.on("error", () => ok(false));
    });
    if (up) break;
    assert.ok(Date.now() < deadline, "redis-server did not come up");
    await sleep(20);
  }
  return { url: `redis://127.0.0.1:${port}/0`, stop: () => child.kill("SIGKILL") };
}

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
    server.clearFaults();
    const other = server.client({ journalUrl: redis.url, journalDir: journalDir(), replayIntervalMs: 3_600_000 });
    const report = await other.drain(5000);
    assert.equal(report.settled, 1);
    assert.deepEqual(report.remaining, []);
    await other.close();
    assert.equal(server.ledger().filter((e) => e.kind === "commit" && e.amount === 640).length, 1);
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

/** The record files (`<partition>/v2-*.json`) under a journal directory. */
function recordFiles(dir) {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { recursive: true }).filter((f) => /(^|\/)v2-[0-9a-f]{64}\.json$/.test(String(f)));
}
