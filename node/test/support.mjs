// Shared helpers of the node:test suite: a local server per test file, clients with their own
// journal directory, a real redis-server with a minimal client, and the repository paths of
// the shared fixtures.
import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { createConnection, createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { fileURLToPath } from "node:url";

import { LocalServer } from "cycles-sdk/testing";

export const NODE_DIR = join(dirname(fileURLToPath(import.meta.url)), "..");
export const REPO = join(NODE_DIR, "..");
export const ACTION = { kind: "llm.completion", name: "openai:gpt-4o-mini" };

const made = [];
const redisServers = new Set();
// Each test file runs in its own process: its directories go when it exits (children included,
// which have exited by then), and so does any redis-server a failed test did not stop.
process.once("exit", () => {
  for (const child of redisServers) child.kill("SIGKILL");
  for (const dir of made) rmSync(dir, { recursive: true, force: true });
});

/** A fresh directory under the OS temp dir, removed when this test process exits. */
export function tempDir(prefix) {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  made.push(dir);
  return dir;
}

/** A fresh journal directory. */
export function journalDir() {
  return tempDir("cycles-node-test-");
}

/** A local server (mode from CYCLES_TEST_SERVER_MODE, as the Python suite does). */
export function startServer(config = {}) {
  const mode = process.env.CYCLES_TEST_SERVER_MODE;
  return new LocalServer(mode ? { ...config, mode } : config);
}

/** The kinds of the requests the server received, by operation name. */
export function ops(server) {
  return server.requests().map((r) => r.operation);
}

async function freePort() {
  const s = createServer();
  await new Promise((ok) => s.listen(0, "127.0.0.1", ok));
  const { port } = s.address();
  await new Promise((ok) => s.close(ok));
  return port;
}

/**
 * A redis-server (Debian's package; scripts/test-all.sh installs it) on a free loopback port,
 * its data in `dataDir` (default: a fresh temp dir). `aof`: `appendonly yes` + `appendfsync
 * always`, what the journal requires unless `?durability=none`. Resolves once it answers PING.
 */
export async function startRedis(aof, dataDir = tempDir("cycles-redis-")) {
  mkdirSync(dataDir, { recursive: true });
  const port = await freePort();
  const args = ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--dir", dataDir];
  if (aof) args.push("--appendonly", "yes", "--appendfsync", "always");
  const child = spawn("redis-server", args, { stdio: "ignore" });
  redisServers.add(child);
  const failed = new Promise((_, reject) => child.on("error", (e) => reject(new Error(`redis-server (apt-get install redis-server): ${e.message}`))));
  const stop = () => {
    redisServers.delete(child);
    child.kill("SIGKILL");
  };
  const deadline = Date.now() + 10_000;
  for (;;) {
    const conn = await Promise.race([RedisConnection.open(port).catch(() => null), failed]);
    // PING, not just a connect: a server still loading its AOF answers -LOADING.
    const up = conn && (await conn.command("PING").then((r) => r === "PONG", () => false));
    conn?.close();
    if (up) break;
    if (Date.now() > deadline) {
      stop();
      throw new Error("redis-server did not come up within 10 s");
    }
    await sleep(20);
  }
  return { port, url: `redis://127.0.0.1:${port}/0`, stop };
}

/**
 * One connection to a Redis speaking just enough RESP2 for tests: commands in, replies out
 * (bulk strings as Buffers, so a record's bytes come back exactly; nil as null; arrays; an
 * error reply rejects). Commands are answered in order on the one socket.
 */
export class RedisConnection {
  static open(port) {
    return new Promise((resolve, reject) => {
      const socket = createConnection({ port, host: "127.0.0.1" });
      socket.once("error", reject);
      socket.once("connect", () => {
        socket.off("error", reject);
        resolve(new RedisConnection(socket));
      });
    });
  }

  constructor(socket) {
    this.socket = socket;
    this.buf = Buffer.alloc(0);
    this.waiting = [];
    // A test that forgets to close it must not keep its process alive.
    socket.unref();
    socket.on("data", (d) => {
      this.buf = Buffer.concat([this.buf, d]);
      for (;;) {
        const parsed = parseReply(this.buf, 0);
        if (!parsed) break;
        this.buf = this.buf.subarray(parsed.end);
        const w = this.waiting.shift();
        if (parsed.value instanceof RedisError) w?.reject(parsed.value);
        else w?.resolve(parsed.value);
      }
    });
    const fail = (e) => {
      for (const w of this.waiting.splice(0)) w.reject(e ?? new Error("redis connection closed"));
    };
    socket.on("error", fail);
    socket.on("close", () => fail());
  }

  /** Sends one command (strings or Buffers); resolves with its reply. */
  command(...args) {
    const parts = [Buffer.from(`*${args.length}\r\n`)];
    for (const a of args) {
      const b = Buffer.isBuffer(a) ? a : Buffer.from(String(a), "utf8");
      parts.push(Buffer.from(`$${b.length}\r\n`), b, Buffer.from("\r\n"));
    }
    return new Promise((resolve, reject) => {
      this.waiting.push({ resolve, reject });
      this.socket.write(Buffer.concat(parts));
    });
  }

  close() {
    this.socket.destroy();
  }
}

class RedisError extends Error {}

/** One RESP2 reply at `at` of `buf`: { value, end }, or null while it is incomplete. */
function parseReply(buf, at) {
  const eol = buf.indexOf("\r\n", at);
  if (eol < 0) return null;
  const line = buf.toString("utf8", at + 1, eol);
  const next = eol + 2;
  switch (String.fromCharCode(buf[at])) {
    case "+":
      return { value: line, end: next };
    case "-":
      return { value: new RedisError(line), end: next };
    case ":":
      return { value: Number(line), end: next };
    case "$": {
      const n = Number(line);
      if (n < 0) return { value: null, end: next };
      if (buf.length < next + n + 2) return null;
      return { value: Buffer.from(buf.subarray(next, next + n)), end: next + n + 2 };
    }
    case "*": {
      const n = Number(line);
      if (n < 0) return { value: null, end: next };
      const items = [];
      let end = next;
      for (let i = 0; i < n; i++) {
        const item = parseReply(buf, end);
        if (!item) return null;
        items.push(item.value);
        end = item.end;
      }
      return { value: items, end };
    }
    default:
      throw new Error(`not a RESP reply: ${JSON.stringify(buf.toString("utf8", at, Math.min(buf.length, at + 40)))}`);
  }
}
