// Helpers of the recovery conformance tests (recovery-*.test.mjs): the server's view of one
// settlement, journal files on disk, and child Node processes (recovery-child.mjs) that a test
// SIGKILLs mid-settlement. Ported from python/tests/recovery_support.py.
import { spawn } from "node:child_process";
import { existsSync, readFileSync, readdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { fileURLToPath } from "node:url";

import * as journal from "cycles-sdk/journal";

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

/** The idempotency key a record settles with. */
export function commitKey(rec) {
  return rec.idempotencyKey;
}

/** Polls `probe` until it returns something other than null/undefined/false, within `limitS`. */
export async function waitFor(limitS, what, probe) {
  const end = Date.now() + limitS * 1000;
  for (;;) {
    const v = probe();
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
