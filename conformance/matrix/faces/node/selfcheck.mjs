// Self-check of the Node face without the orchestrator: every case of the shared vectors and
// every exchange of the reference-server corpus sent through run.sh, each answer compared
// with the vectors' expectation (2xx decodes with the body minus its nulls), then a write and
// a drain against a LocalServer. Prints the
// counts; exits 1 on any difference. Usage: node selfcheck.mjs (after prepare.sh).
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { isDeepStrictEqual } from "node:util";

import { listPending, parseRecord } from "cycles-sdk/journal";
import { LocalServer } from "cycles-sdk/testing";

const HERE = dirname(fileURLToPath(import.meta.url));
const REPO = join(HERE, "..", "..", "..", "..");
const hb = JSON.parse(readFileSync(join(REPO, "conformance", "vectors", "heartbeat.json"), "utf8"));
const jv = JSON.parse(readFileSync(join(REPO, "conformance", "vectors", "journal.json"), "utf8"));
const CORPUS = process.env.CYCLES_REFERENCE_CORPUS ?? join(REPO, "..", "shared", "fixtures", "reference-server", "exchanges.jsonl");

const reqs = [];
const ask = (req, check, what) => reqs.push({ req: { id: reqs.length, ...req }, check, what });
const ok = (want) => (got) => isDeepStrictEqual(got.ok, want);
const pick = (o, keys) => Object.fromEntries(keys.map((k) => [k, o[k]]));

for (const c of hb.schedule) ask({ op: "timing", fn: "schedule", args: c.input }, ok(c.expect), `schedule ${c.name}`);
for (const c of hb.retry_after) ask({ op: "timing", fn: "parse_retry_after", args: { raw: c.raw } }, (g) => g.ok.kind === c.kind && isDeepStrictEqual(g.ok.ms, c.ms), `retry_after ${c.why}`);
for (const c of hb.retry) {
  const i = c.input;
  ask({ op: "timing", fn: "current_lead_estimate", args: pick(i, ["last_lead_floor_ms", "elapsed_ms"]) }, ok(c.expect.current_lead_estimate_ms), `retry ${c.name}`);
  ask({ op: "timing", fn: "retry_window", args: { current_lead_estimate_ms: c.expect.current_lead_estimate_ms, ...pick(i, ["attempt_budget_ms", "safety_margin_ms"]) } }, ok(c.expect.retry_window_ms), `retry ${c.name}`);
}
for (const c of hb.extend_timeout) ask({ op: "timing", fn: "extend_timeout", args: c.input }, ok(c.expect), `extend_timeout ${c.name}`);
// The vectors' planner expectations list only some detail members: compare those.
const sameDecision = (got, want) => Object.entries(want).every(([k, v]) => (k === "attempt_timeout_ms" ? true : isDeepStrictEqual(got[k], v)));
for (const c of hb.planner) {
  ask({ op: "primary", request_timeout_ms: c.request_timeout_ms, derive: false, steps: c.steps }, (g) => g.ok.length === c.expect.length && g.ok.every((s, n) => sameDecision(s.decision, c.expect[n])), `planner ${c.name}`);
}
for (const c of hb.planner_derived) {
  const check = (g) => g.ok.every((s, n) => sameDecision(s.decision, c.expect[n]) && isDeepStrictEqual(s.attempt_timeout_ms, c.expect[n].attempt_timeout_ms));
  ask({ op: "primary", request_timeout_ms: c.configured_timeout_ms, derive: true, steps: c.steps }, check, `planner_derived ${c.name}`);
}
for (const c of hb.fallback) {
  const e = c.expect;
  const check = (g) =>
    sameDecision(g.ok.first, e.first_beat) &&
    g.ok.steps.every((s, n) => sameDecision(s.decision, e.decisions[n]) && (n >= (e.regimes ?? []).length || s.regime === e.regimes[n]));
  ask({ op: "fallback", requested_ttl_ms: c.requested_ttl_ms, create: c.create, prime: c.prime, steps: c.steps }, check, `fallback ${c.name}`);
}
for (const c of jv.partition) ask({ op: "fingerprint", base_url: c.base_url, api_key: c.api_key, tenant: c.tenant }, ok(c.fp16), `partition ${c.note}`);
for (const c of jv.file_names) ask({ op: "journal_names", reservation_id: c.reservation_id }, ok({ standard: c.standard, legacy: c.legacy }), `file_names ${c.reservation_id}`);
for (const c of jv.records) {
  const e = c.expect;
  const check = (g) => {
    if (!e.ok) return isDeepStrictEqual(g.ok, { ok: false, error: e.error });
    const body = (w) => (w === null ? null : JSON.parse(w));
    const same = ["reservation_id", "base_url", "mode", "idempotency_key", "recorded_at_ms", "not_before_ms"].every((k) => !(k in e) || isDeepStrictEqual(g.ok[k], e[k]));
    // Bodies with integers beyond 2^53 cannot be compared after JSON.parse: text checks only.
    const exact = (k) => !(k in e) || e[k] === null ? g.ok[`${k}_wire`] === (e[k] ?? g.ok[`${k}_wire`]) : typeof g.ok[`${k}_wire`] === "string";
    const parsed = (k) => !(k in e) || JSON.stringify(e[k]).length === 0 || /\d{16,}/.test(g.ok[`${k}_wire`] ?? "") || isDeepStrictEqual(body(g.ok[`${k}_wire`]), e[k]);
    return g.ok.ok === true && same && exact("commit_body") && exact("event_fallback_body") && parsed("commit_body") && parsed("event_fallback_body");
  };
  ask({ op: "parse_record", text: c.text }, check, `record ${c.name}`);
}

const withoutNulls = (v) =>
  Array.isArray(v) ? v.map(withoutNulls) : v !== null && typeof v === "object" ? Object.fromEntries(Object.entries(v).filter(([, x]) => x !== null).map(([k, x]) => [k, withoutNulls(x)])) : v;
let exchanges = 0;
if (existsSync(CORPUS)) {
  for (const line of readFileSync(CORPUS, "utf8").split("\n").filter((l) => l.trim())) {
    const x = JSON.parse(line);
    exchanges++;
    const s = x.response.status;
    const check = s >= 200 && s < 300 ? (g) => isDeepStrictEqual(withoutNulls(g.ok.result), withoutNulls(JSON.parse(x.response.body))) : (g) => g.ok.error?.status === s && typeof g.ok.error.kind === "string";
    ask({ op: "decode", exchange: x }, check, `decode ${x.name}`);
  }
} else {
  console.error(`no corpus at ${CORPUS}`);
  process.exitCode = 1;
}
ask({ op: "nope" }, (g) => typeof g.fail === "string", "unknown op fails");

// write then drain over real HTTP: the local server fails every commit (503) until the
// write answered, then the drain settles the record exactly once.
const server = new LocalServer();
const dir = mkdtempSync(join(tmpdir(), "cycles-node-face-"));
const who = { url: server.url, api_key: server.apiKey, tenant: server.tenant, journal_dir: dir };
const META = '{"note":"caf\u00e9 \u2603 \ud834\udd1e","big":9007199254740993,"min":-9223372036854775808,"max":18446744073709551615,"ratio":0.1,"list":[1,"\u00e9",null,true]}';
server.addFault({ operation: "commitReservation", fault: { kind: "server_error", status: 503 }, times: 0 });
const kase = { name: "unicode", subject: { tenant: server.tenant }, action: { kind: "llm.completion", name: "matrix" }, estimate: { unit: "USD_MICROCENTS", amount: 500000 }, actual: 321000, metrics: { latency_ms: 12, tokens_input: 5 }, metadata: "@META@" };
const writeReq = { id: reqs.length, op: "write", ...who, case: kase };
reqs.push({
  raw: JSON.stringify(writeReq).replace('"@META@"', META),
  req: writeReq,
  check: (g) => {
    server.clearFaults();
    const [p] = listPending(dir);
    const body = parseRecord(readFileSync(join(dir, p.partition, p.file))).commitBody;
    return g.ok.outcome === "pending" && g.ok.reservation_id === p.reservationId && ["9007199254740993", "-9223372036854775808", "18446744073709551615"].every((x) => body.includes(x));
  },
  what: "write leaves one pending record, metadata exact",
});
// `settled` is not checked: the client's background replay starts with a pass of its own,
// which may settle the record before drain() runs (then the report says 0).
ask({ op: "drain", ...who, timeout_ms: 5000 }, (g) => g.ok.pending === 0 && g.ok.quarantined === 0 && server.ledger().filter((e) => e.kind === "commit" && e.amount === 321000).length === 1, "drain settles it once");

const child = spawn("bash", [join(HERE, "run.sh")], { stdio: ["pipe", "pipe", "inherit"] });
const started = Date.now();
// One request at a time: the write's check clears the faults before the drain is sent.
const answers = createInterface({ input: child.stdout })[Symbol.asyncIterator]();

let n = 0;
let bad = 0;
for (const r of reqs) {
  child.stdin.write(`${r.raw ?? JSON.stringify(r.req)}\n`);
  const next = await answers.next();
  if (next.done) break;
  const line = next.value;
  const got = JSON.parse(line);
  n++;
  let pass = got.id === r.req.id;
  try {
    pass = pass && r.check(got);
  } catch {
    pass = false;
  }
  if (!pass) {
    bad++;
    console.error(`DIFF ${r.what}: ${line.slice(0, 600)}`);
  }
}
child.stdin.end();
server.stop();
if (n !== reqs.length) {
  console.error(`${reqs.length - n} requests unanswered`);
  bad++;
}
console.log(`node face self-check: ${n - bad}/${reqs.length} answers as expected (${exchanges} exchanges), ${Date.now() - started} ms`);
if (bad) process.exitCode = 1;
