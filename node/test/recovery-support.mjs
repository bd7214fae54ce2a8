// Helpers of the recovery conformance tests (recovery-*.test.mjs): the server's view of one
// settlement, the journal under test (TestJournal: a directory, or Redis), journal files on
// disk, and child Node processes (recovery-child.mjs) that a test SIGKILLs mid-settlement.
// Ported from python/tests/recovery_support.py.
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { fileURLToPath } from "node:url";

import * as journal from "cycles-sdk/journal";
import { RedisConnection, startRedis } from "./support.mjs";

export const USD = "USD_MICROCENTS";
export const CHILD = join(dirname(fileURLToPath(import.meta.url)), "recovery-child.mjs");

/** Adds a fault rule that fires once (the local server's default `times: 0` means forever). */
export function fault(server, operation, f, extra = {}) {
  server.addFault({ operation, fault: f, times: 1, ...extra });
}

/** Commits of `rid` and events carrying `key`, in arrival order. */
export function settlementRequests(server, rid, key) {
  return server
    .requests()
    .filter(
      (r) =>
        (r.operation === "commitReservation" && r.reservation_id === rid) ||
        (r.operation === "createEvent" && r.idempotency_key === key),
    );
}

/** [applied commits of `rid`, applied events with `key`]. */
export function settlements(server, rid, key) {
  const ledger = server.ledger();
  return [
    ledger.filter((e) => e.kind === "commit" && e.reservation_id === rid).length,
    ledger.filter((e) => e.kind === "event" && e.idempotency_key === key).length,
  ];
}

/** Ledger entries of one kind. */
export function applied(server, kind) {
  return server.ledger().filter((e) => e.kind === kind);
}

/** Fails when any reservation was released (a settled reservation never is). */
export function noRelease(server) {
  const ops = server.requests().map((r) => r.operation);
  if (ops.includes("releaseReservation")) throw new Error(`nothing releases a settled reservation: ${ops}`);
}

/** The standard record path of `rid` in its identity partition under `dir`. */
export function recordPath(dir, server, rid, { apiKey = server.apiKey, tenant = server.tenant } = {}) {
  return join(dir, journal.identityFingerprint(server.url, apiKey, tenant), journal.fileName(rid));
}

/** The parsed record at `path`, or null when there is none. */
export function readRecord(path) {
  let data;
  try {
    data = readFileSync(path);
  } catch (e) {
    if (e.code === "ENOENT") return null;
    throw e;
  }
  return journal.parseRecord(data);
}

/** Every record file (`*.json`, not hidden) under `dir`, recursively. */
export function recordFiles(dir) {
  if (!existsSync(dir)) return [];
  const out = [];
  // File types from the directory listing itself: a writer in another process renames its
  // temp file while we look, so a separate stat of each entry could race (ENOENT).
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, entry.name);
    if (entry.isDirectory()) out.push(...recordFiles(p));
    else if (entry.name.endsWith(".json") && !entry.name.startsWith(".")) out.push(p);
  }
  return out.sort();
}

/** Identifiers that differ only in ways a lossy name scheme would erase. */
export const TRICKY_IDS = [
  "rsv/a", "rsv_a", "rsv.a", "rsv a", "rsv:a", "rsv%2Fa", "RSV/A", "rsv/a ", " rsv/a",
  "r\u00e9sum\u00e9", "re\u0301sume\u0301", // the same text, composed and decomposed
  "\u0440\u0441\u0432", "\u4e88\u7d04-1", "\u{1f4b8}", "rsv\\a", "../rsv", "a".repeat(300),
];

/** Whether this run's journal store is Redis (CYCLES_TEST_JOURNAL_STORE; unset or `file`: the directory). */
export function onRedis() {
  const store = process.env.CYCLES_TEST_JOURNAL_STORE ?? "";
  if (store === "" || store === "file") return false;
  if (store === "redis") return true;
  // Never silently test the default instead of what was asked.
  throw new Error(`CYCLES_TEST_JOURNAL_STORE=${JSON.stringify(store)}: expected file or redis`);
}

const QUARANTINED = /\.(corrupt|unsupported|unrecoverable)-/;

/** The last name in an event's `file` or `quarantinedAs`: a path, or a Redis location whose key ends in it. */
export function leafName(location) {
  return location.split(/[/:]/).at(-1);
}

/**
 * One test's journal, the store chosen by CYCLES_TEST_JOURNAL_STORE (`redis` runs the mapped
 * recovery tests for the adapter's Redis claim, conformance/adapters/node-redis-map.json):
 * the directory `dir`, or a redis-server of its own (AOF, `appendfsync always`, its data beside
 * `dir`) while `dir` stays unused. Tests look into the journal only through this, so the same
 * assertions hold for both stores. Made by `TestJournal.open`; `stop()` kills its Redis.
 */
export class TestJournal {
  static async open(dir) {
    const j = new TestJournal(dir);
    if (onRedis()) {
      j.redis = await startRedis(true, `${dir}.redis-data`);
      j.conn = await RedisConnection.open(j.redis.port);
    }
    return j;
  }

  constructor(dir) {
    this.dir = dir;
    this.redis = null;
    this.conn = null;
  }

  /**
   * The `journalUrl` of a Redis run, else undefined. Leases of 3 s: a SIGKILLed holder's record
   * is taken over within a drain's time (the default, 60 s, would outlast it), and a request
   * the server holds for 1.5 s still ends inside its lease.
   */
  get url() {
    return this.redis ? `${this.redis.url}?lease_ms=3000` : undefined;
  }

  /** Client options journaling here (the directory is given on Redis too: it must stay unused). */
  options() {
    return { journalDir: this.dir, journalUrl: this.url };
  }

  /** The members a recovery-child.mjs spec needs to journal here. */
  spec() {
    return { dir: this.dir, journal_url: this.url ?? null };
  }

  /** Every record of every partition: [{ partition, name, bytes }], sorted. */
  records() {
    return this.entries("r");
  }

  /** Every quarantined record of every partition: [{ partition, name, bytes }], sorted. */
  quarantined() {
    return this.entries("q");
  }

  /** The bytes of `rid`'s record in the partition of (base URL, key, tenant), or null. */
  async recordOf(baseUrl, apiKey, tenant, rid) {
    const part = journal.identityFingerprint(baseUrl, apiKey, tenant);
    const file = journal.fileName(rid);
    if (this.conn) return this.conn.command("GET", `cycles:journal:{${part}}:r:${file}`);
    try {
      return readFileSync(join(this.dir, part, file));
    } catch (e) {
      if (e.code === "ENOENT") return null;
      throw e;
    }
  }

  /** `rid`'s parsed record in `server`'s partition (its key and tenant unless given), or null. */
  async record(server, rid, { apiKey = server.apiKey, tenant = server.tenant } = {}) {
    const bytes = await this.recordOf(server.url, apiKey, tenant, rid);
    return bytes === null ? null : journal.parseRecord(bytes);
  }

  /** Puts `bytes` as record `file` of the partition of (base URL, key, tenant), as another writer would. */
  async put(baseUrl, apiKey, tenant, file, bytes) {
    const part = journal.identityFingerprint(baseUrl, apiKey, tenant);
    if (this.conn) {
      const prefix = `cycles:journal:{${part}}`;
      await this.conn.command("SET", `${prefix}:r:${file}`, bytes);
      await this.conn.command("SADD", `${prefix}:records`, file);
      return;
    }
    mkdirSync(join(this.dir, part), { recursive: true });
    writeFileSync(join(this.dir, part, file), bytes);
  }

  /** The reservation ids of the records that parse (what a replay would settle), sorted. */
  async pending() {
    if (!this.conn) return journal.listPending(this.dir).map((p) => p.reservationId).sort();
    const ids = [];
    for (const { bytes } of await this.records()) {
      try {
        ids.push(journal.parseRecord(bytes).reservationId);
      } catch {
        // Unparseable: quarantined by a replay, never settled.
      }
    }
    return ids.sort();
  }

  /** Whether a Redis run's engines wrote nothing into the unused directory (they must not). */
  dirUntouchedOnRedis() {
    return !this.redis || !existsSync(this.dir);
  }

  /** Kills this journal's Redis (file store: nothing to do). */
  stop() {
    this.conn?.close();
    this.redis?.stop();
  }

  async entries(kind) {
    const out = [];
    if (this.conn) {
      const keys = await this.conn.command("KEYS", `cycles:journal:*:${kind}:*`);
      for (const raw of keys) {
        const key = raw.toString("utf8");
        const m = /^cycles:journal:\{([^}]*)\}:[rq]:(.*)$/s.exec(key);
        const bytes = m && (await this.conn.command("GET", key));
        if (bytes) out.push({ partition: m[1], name: m[2], bytes });
      }
    } else if (existsSync(this.dir)) {
      for (const p of readdirSync(this.dir, { withFileTypes: true })) {
        if (!p.isDirectory()) continue;
        for (const f of readdirSync(join(this.dir, p.name), { withFileTypes: true })) {
          const quarantined = QUARANTINED.test(f.name);
          const record = f.isFile() && f.name.endsWith(".json") && !f.name.startsWith(".") && !quarantined;
          if ((kind === "r" && record) || (kind === "q" && quarantined)) {
            // Settled and removed meanwhile by a process still running: not there any more.
            let bytes;
            try {
              bytes = readFileSync(join(this.dir, p.name, f.name));
            } catch (e) {
              if (e.code === "ENOENT") continue;
              throw e;
            }
            out.push({ partition: p.name, name: f.name, bytes });
          }
        }
      }
    }
    const at = (e) => `${e.partition}/${e.name}`;
    return out.sort((a, b) => (at(a) < at(b) ? -1 : at(a) > at(b) ? 1 : 0));
  }
}

/** The idempotency key a record settles with. */
export function commitKey(rec) {
  return rec.idempotencyKey;
}

/** Polls `probe` (sync or async) until it returns something other than null/undefined/false, within `limitS`. */
export async function waitFor(limitS, what, probe) {
  const end = Date.now() + limitS * 1000;
  for (;;) {
    const v = await probe();
    if (v !== null && v !== undefined && v !== false) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(5);
  }
}

/** Events of `kind` (and `rid`) a child delivered. */
export function eventsOf(result, kind, rid = null) {
  return result.events.filter((e) => e.kind === kind && (rid === null || e.reservationId === rid));
}

/** One recovery-child.mjs process: its spec goes in argv, its result to `resultPath`. */
export class Child {
  constructor(spec, resultPath) {
    this.result = resultPath;
    this.stderr = "";
    this.proc = spawn(process.execPath, [CHILD, JSON.stringify({ ...spec, result: resultPath })], {
      stdio: ["ignore", "inherit", "pipe"],
    });
    this.proc.stderr.on("data", (d) => {
      this.stderr += d;
    });
    this.exited = new Promise((resolve) => this.proc.on("exit", (code, signal) => resolve({ code, signal })));
  }

  /** Waits for a clean exit and returns the child's result JSON. */
  async finish(limitS = 30) {
    let timer;
    const timeout = new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`child did not exit within ${limitS} s`)), limitS * 1000);
    });
    try {
      const { code, signal } = await Promise.race([this.exited, timeout]);
      if (code !== 0) throw new Error(`child exited with ${code ?? signal}: ${this.stderr}`);
    } finally {
      clearTimeout(timer);
    }
    return JSON.parse(readFileSync(this.result, "utf8"));
  }

  /** SIGKILLs the child and waits until it is gone. */
  async kill9() {
    this.proc.kill("SIGKILL");
    const { signal } = await this.exited;
    if (signal !== "SIGKILL" && !existsSync(this.result)) throw new Error(`child ended by ${signal}`);
  }

  /** Kills the child if it still runs (test cleanup). */
  stop() {
    if (this.proc.exitCode === null && this.proc.signalCode === null) this.proc.kill("SIGKILL");
  }
}
