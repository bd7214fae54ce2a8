// Guarded lifecycles of the Node package against a plain `fetch` create + commit pair, in one
// process, in alternating rounds; then core's own `lifecycle-cpu` in the same run; then the
// memory of 10,000 guarded calls in flight at once (docs/benchmarks.md, "Node guarded
// lifecycle"). node/scripts/bench.sh builds everything and starts the server.
//
// One lifecycle at a time (or --in-flight K: K loops at once, each running its share in turn):
// reserve (heartbeat armed), trivial work, commit 800 of 1,000.
// Client CPU is process.cpuUsage() over a round: the whole process (the JS thread, V8's GC
// and compiler threads, core's native runtime threads alike), divided by its lifecycles.
//
//   node --expose-gc bench/lifecycle.mjs --url URL [--rounds 7] [--lifecycles 1000]
//       [--lifecycle-cpu BIN --cycles-bin BIN] [--concurrent 10000] [--passes 2] [--paths off,on,fetch,hop,net] (also: http)
//       [--in-flight 1]
//
// `hop` is one native async round trip with no I/O, straight on the addon (the native
// lifecycle's `flush()` without a journal: a napi call, a task on core's runtime, a promise
// settled from it, awaited). A guarded lifecycle makes two of them (reserve, then settle), so
// core's lifecycle plus two hops is the floor of any promise-based binding of core. `net` is a
// probe of the other design: the same two requests written by hand on keep-alive `net`
// sockets, all on the JS thread (no TLS, retries or timeouts: a lower bound, not a client).
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { Agent, request as httpRequest } from "node:http";
import { createRequire } from "node:module";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";

import { Client } from "cycles-sdk";

const { values: opt } = parseArgs({
  options: {
    url: { type: "string" },
    key: { type: "string", default: "cycles-local-key" },
    rounds: { type: "string", default: "7" },
    lifecycles: { type: "string", default: "1000" },
    warmup: { type: "string", default: "300" },
    "lifecycle-cpu": { type: "string" },
    "cycles-bin": { type: "string" },
    concurrent: { type: "string", default: "10000" },
    // A second pass tells a leak from pages the allocator kept: its "after" should be ~0.
    passes: { type: "string", default: "2" },
    paths: { type: "string", default: "off,on,fetch,hop,net" },
    "in-flight": { type: "string", default: "1" },
  },
});
if (!opt.url) throw new Error("--url is required (a running `cycles serve`)");
if (typeof globalThis.gc !== "function") throw new Error("run with node --expose-gc");
const URL_ = opt.url;
const KEY = opt.key;
const ROUNDS = Number(opt.rounds);
const N = Number(opt.lifecycles);
const WARMUP = Number(opt.warmup);
const CONCURRENT = Number(opt.concurrent);
const PASSES = Number(opt.passes);
const IN_FLIGHT = Number(opt["in-flight"]);
if (!Number.isInteger(IN_FLIGHT) || IN_FLIGHT < 1) throw new Error("--in-flight takes a whole number >= 1");
const ACTION = { kind: "llm.completion", name: "bench" };
const GUARD = { estimate: 1000, action: ACTION, ttlMs: 60_000, actual: 800 };

const journal = mkdtempSync(join(tmpdir(), "cycles-node-bench-"));
const off = new Client({ baseUrl: URL_, apiKey: KEY, tenant: "acme", journalEnabled: false });
const on = new Client({ baseUrl: URL_, apiKey: KEY, tenant: "acme", journalDir: journal });

// The addon itself (the package's internal native layer), for the `hop` path only.
const { native: addon } = createRequire(import.meta.url)("../dist/native.js");
let hopLc = null;
function hopLifecycle() {
  if (hopLc === null) {
    const n = new addon.NativeClient({ baseUrl: URL_, apiKey: KEY, tenant: "acme", journalEnabled: false });
    hopLc = n.lifecycle(undefined, undefined, () => undefined);
    hopLc.setEventsWanted(false);
  }
  return hopLc;
}

/** The package's guarded lifecycle; the settlement checked, as core's bench asserts it. */
async function guarded(client) {
  let r;
  await client.guarded(GUARD, (res) => {
    r = res;
    return null;
  });
  if (r.settlement?.status !== "committed") throw new Error(`not committed: ${JSON.stringify(r.settlement)}`);
}

let seq = 0;
const fresh = (p) => `${p}-${process.pid}-${seq++}`;
const HEADERS = { "X-Cycles-API-Key": KEY, "Content-Type": "application/json" };

async function post(path, body) {
  const res = await fetch(URL_ + path, { method: "POST", headers: HEADERS, body: JSON.stringify(body) });
  const json = await res.json();
  if (res.status !== 200) throw new Error(`${path}: HTTP ${res.status} ${JSON.stringify(json)}`);
  return json;
}

/**
 * A probe, not a client: the least a JS-thread HTTP/1.1 exchange can cost in Node. Keep-alive
 * `net` sockets (a pool, one request at a time each), request bytes written by hand, the
 * response framed by Content-Length and its body parsed. No TLS, no timeouts, no retries, no
 * error handling: what core's I/O would cost if it ran on the JS thread (docs/benchmarks.md).
 */
const target = new globalThis.URL(URL_);
const idle = [];
function exchange(path, body) {
  const sock = idle.pop() ?? openSocket();
  return new Promise((resolve, reject) => {
    sock.cyclesPending = { resolve, reject, buf: Buffer.alloc(0) };
    const bytes = Buffer.from(JSON.stringify(body));
    sock.write(
      `POST ${path} HTTP/1.1\r\nHost: ${target.host}\r\nX-Cycles-API-Key: ${KEY}\r\n` +
        `Content-Type: application/json\r\nAccept: application/json\r\nContent-Length: ${bytes.length}\r\n\r\n`,
    );
    sock.write(bytes);
  });
}
function openSocket() {
  const sock = connect(Number(target.port), target.hostname);
  sock.setNoDelay(true);
  sock.on("data", (chunk) => {
    const p = sock.cyclesPending;
    p.buf = p.buf.length ? Buffer.concat([p.buf, chunk]) : chunk;
    const end = p.buf.indexOf("\r\n\r\n");
    if (end < 0) return;
    const head = p.buf.toString("latin1", 0, end);
    const len = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1]);
    if (p.buf.length < end + 4 + len) return;
    sock.cyclesPending = null;
    idle.push(sock);
    const status = Number(head.slice(9, 12));
    const json = JSON.parse(p.buf.toString("utf8", end + 4, end + 4 + len));
    if (status !== 200) p.reject(new Error(`HTTP ${status} ${JSON.stringify(json)}`));
    else p.resolve(json);
  });
  sock.on("error", (e) => sock.cyclesPending?.reject(e));
  return sock;
}

/** One POST by node:http on a keep-alive agent, the body read and parsed. */
const agent = new Agent({ keepAlive: true });
function httpPost(path, body) {
  return new Promise((resolve, reject) => {
    const bytes = Buffer.from(JSON.stringify(body));
    const req = httpRequest(
      {
        agent,
        host: target.hostname,
        port: target.port,
        path,
        method: "POST",
        headers: { ...HEADERS, Accept: "application/json", "Content-Length": bytes.length },
      },
      (res) => {
        const chunks = [];
        res.on("data", (c) => chunks.push(c));
        res.on("end", () => {
          const json = JSON.parse(Buffer.concat(chunks).toString("utf8"));
          if (res.statusCode !== 200) reject(new Error(`HTTP ${res.statusCode} ${JSON.stringify(json)}`));
          else resolve(json);
        });
      },
    );
    req.on("error", reject);
    req.end(bytes);
  });
}

/**
 * The baselines' lifecycle: the create and the commit posted by `post` (fetch, or a probe),
 * each response parsed as JSON.
 */
async function createCommit(post, prefix) {
  const created = await post("/v1/reservations", {
    idempotency_key: fresh(prefix),
    subject: { tenant: "acme" },
    action: ACTION,
    estimate: { unit: "USD_MICROCENTS", amount: 1000 },
    ttl_ms: 60000,
  });
  const committed = await post(`/v1/reservations/${created.reservation_id}/commit`, {
    idempotency_key: fresh(`${prefix}-commit`),
    actual: { unit: "USD_MICROCENTS", amount: 800 },
  });
  if (committed.status !== "COMMITTED") throw new Error(`not committed: ${JSON.stringify(committed)}`);
}

const ALL = {
  off: { name: "node guarded, journal off", run: () => guarded(off) },
  on: { name: "node guarded, journal on", run: () => guarded(on) },
  fetch: { name: "fetch create+commit", run: () => createCommit(post, "bench-fetch") },
  hop: { name: "native round trip, no I/O", run: () => hopLifecycle().flush() },
  net: { name: "net socket create+commit", run: () => createCommit(exchange, "bench-net") },
  http: { name: "node:http create+commit", run: () => createCommit(httpPost, "bench-http") },
};
const paths = opt.paths.split(",").map((k) => {
  if (!ALL[k]) throw new Error(`unknown path ${k} (${Object.keys(ALL).join(", ")})`);
  return ALL[k];
});

/** [lifecycles per second, client CPU µs per lifecycle] over n lifecycles, IN_FLIGHT at a time. */
async function round(run, n) {
  const each = Math.floor(n / IN_FLIGHT);
  const loop = async () => {
    for (let i = 0; i < each; i++) await run();
  };
  const c0 = process.cpuUsage();
  const t0 = process.hrtime.bigint();
  await Promise.all(Array.from({ length: IN_FLIGHT }, loop));
  const wall = Number(process.hrtime.bigint() - t0);
  const c = process.cpuUsage(c0);
  const done = each * IN_FLIGHT;
  return [(done * 1e9) / wall, (c.user + c.system) / done];
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const fmt = (x, d = 0) => x.toLocaleString("en-US", { minimumFractionDigits: d, maximumFractionDigits: d });
const pad = (s) => s.padEnd(28);

async function cpuRounds() {
  for (const p of paths) for (let i = 0; i < WARMUP; i++) await p.run(); // JIT, pools, server state
  const results = paths.map(() => []);
  for (let r = 0; r < ROUNDS; r++) {
    for (const [k, p] of paths.entries()) {
      const m = await round(p.run, N);
      results[k].push(m);
      console.log(`round ${r + 1} ${pad(p.name)} ${fmt(m[0]).padStart(7)} lifecycles/s ${fmt(m[1], 1).padStart(8)} µs CPU per lifecycle`);
    }
  }
  const med = new Map();
  for (const [k, p] of paths.entries()) {
    const m = [median(results[k].map((x) => x[0])), median(results[k].map((x) => x[1]))];
    med.set(p, m);
    console.log(`median  ${pad(p.name)} ${fmt(m[0]).padStart(7)} lifecycles/s ${fmt(m[1], 1).padStart(8)} µs CPU per lifecycle`);
  }
  return med;
}

/** Core's guarded lifecycle and a bare reqwest pair (conformance/bench lifecycle-cpu), this run. */
function coreFigures() {
  if (!opt["lifecycle-cpu"]) return null;
  const out = execFileSync(
    opt["lifecycle-cpu"],
    ["--cycles-bin", opt["cycles-bin"], "--rounds", String(ROUNDS), "--lifecycles", String(N), "--in-flight", String(IN_FLIGHT), "--json"],
    { encoding: "utf8" },
  );
  const c = JSON.parse(out.trim().split("\n").pop());
  console.log(`core    ${pad("core guarded lifecycle")} ${fmt(1e6 / c.core_wall_us).padStart(7)} lifecycles/s ${fmt(c.core_cpu_us, 1).padStart(8)} µs CPU per lifecycle`);
  console.log(`core    ${pad("bare reqwest create+commit")} ${fmt(1e6 / c.bare_wall_us).padStart(7)} lifecycles/s ${fmt(c.bare_cpu_us, 1).padStart(8)} µs CPU per lifecycle`);
  return c;
}

function ratios(med, core) {
  const fetchM = med.get(ALL.fetch);
  for (const p of [ALL.off, ALL.on]) {
    const m = med.get(p);
    if (!m) continue;
    if (fetchM) console.log(`ratio ${p.name} / fetch: rate ${(m[0] / fetchM[0]).toFixed(2)}x, CPU ${(m[1] / fetchM[1]).toFixed(2)}x`);
    if (core) console.log(`ratio ${p.name} / core: rate ${(m[0] / (1e6 / core.core_wall_us)).toFixed(2)}x, CPU ${(m[1] / core.core_cpu_us).toFixed(2)}x`);
  }
  if (core) console.log(`ratio core / bare reqwest (lifecycle-cpu): CPU ${core.cpu_ratio.toFixed(2)}x, wall ${core.wall_ratio.toFixed(2)}x`);
  const hopM = med.get(ALL.hop);
  if (core && hopM) {
    const floor = core.core_cpu_us + 2 * hopM[1];
    console.log(`floor core + 2 round trips: ${fmt(floor, 1)} µs CPU per lifecycle, ${(floor / core.core_cpu_us).toFixed(2)}x core`);
  }
  const netM = med.get(ALL.net);
  if (core && netM) console.log(`ratio net probe / core: CPU ${(netM[1] / core.core_cpu_us).toFixed(2)}x`);
}

function mem() {
  const m = process.memoryUsage();
  return { rss: m.rss, heap: m.heapUsed, external: m.external + m.arrayBuffers };
}
function settle() {
  globalThis.gc();
  globalThis.gc();
  return mem();
}

/**
 * CONCURRENT guarded calls in flight at once: each reserves (heartbeat armed) and then awaits
 * one shared promise, resolved only once every work function has started. RSS is sampled
 * every 10 ms for the peak; "held" is after a full GC with all of them waiting. Each pass
 * measures from its own base line.
 */
async function inFlight(pass) {
  await guarded(off); // every native path touched before the base line
  const base = settle();
  let peak = base.rss;
  const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage.rss())), 10);
  let open;
  const gate = new Promise((resolve) => (open = resolve));
  let started = 0;
  let allStarted;
  const everyone = new Promise((resolve) => (allStarted = resolve));
  const t0 = process.hrtime.bigint();
  const calls = [];
  for (let i = 0; i < CONCURRENT; i++) {
    calls.push(
      off.guarded(GUARD, async (r) => {
        if (++started === CONCURRENT) allStarted();
        await gate;
        return r;
      }),
    );
  }
  await everyone;
  const rampS = Number(process.hrtime.bigint() - t0) / 1e9;
  const held = settle();
  peak = Math.max(peak, held.rss);
  open();
  const rs = await Promise.all(calls);
  const totalS = Number(process.hrtime.bigint() - t0) / 1e9;
  clearInterval(sampler);
  const committed = rs.filter((r) => r.settlement?.status === "committed").length;
  if (committed !== CONCURRENT) throw new Error(`${CONCURRENT - committed} of ${CONCURRENT} not committed`);
  rs.length = 0; // nothing of the calls stays reachable for the after-figures
  calls.length = 0;
  const after = settle();
  const mb = (b) => `${fmt(b / 2 ** 20, 1)} MiB`;
  const per = (b) => `${fmt(b / CONCURRENT)} B`;
  console.log(`in flight, pass ${pass}: ${fmt(CONCURRENT)} guarded calls (journal off), all reserved after ${rampS.toFixed(1)} s, all committed after ${totalS.toFixed(1)} s`);
  console.log(`| measure | delta from base | per in-flight call |`);
  console.log(`|---|---:|---:|`);
  console.log(`| RSS, peak (sampled every 10 ms) | ${mb(peak - base.rss)} | ${per(peak - base.rss)} |`);
  console.log(`| RSS, held (all waiting, after GC) | ${mb(held.rss - base.rss)} | ${per(held.rss - base.rss)} |`);
  console.log(`| JS heap used, held | ${mb(held.heap - base.heap)} | ${per(held.heap - base.heap)} |`);
  console.log(`| external + array buffers, held | ${mb(held.external - base.external)} | ${per(held.external - base.external)} |`);
  console.log(`| RSS after all settled (after GC) | ${mb(after.rss - base.rss)} | |`);
  console.log(`| JS heap used after all settled | ${mb(after.heap - base.heap)} | |`);
}

try {
  const med = await cpuRounds();
  const core = coreFigures();
  ratios(med, core);
  if (CONCURRENT > 0) for (let p = 1; p <= PASSES; p++) await inFlight(p);
} finally {
  await off.close();
  await on.close();
  if (hopLc !== null) await hopLc.close(0);
  for (const sock of idle) sock.destroy();
  agent.destroy();
  rmSync(journal, { recursive: true, force: true });
}
