// The Node face of the cross-language matrix (conformance/matrix/PROTOCOL.md): one JSON
// request per stdin line, one JSON answer per stdout line, every answer computed through the
// public API of the `cycles-sdk` package as a user imports it (prepare.sh links the built
// package into ./node_modules). Plain ESM, no dependencies.
import { createInterface } from "node:readline";

import { Client, CyclesError, decodeResponse, toWire } from "cycles-sdk";
import * as journal from "cycles-sdk/journal";
import * as pricing from "cycles-sdk/pricing";
import * as timing from "cycles-sdk/timing";
import { work } from "./work.mjs";

const SAFE = BigInt(Number.MAX_SAFE_INTEGER);

// ---- the number encoding (integers, decimal strings beyond 2^53 - 1, "±infinite") ----

/** An encoded value as the API takes it; anything else passes through for the API to reject. */
function num(v) {
  if (v === undefined || v === null) return null;
  if (v === "infinite") return Infinity;
  if (v === "-infinite") return -Infinity;
  if (typeof v === "string" && /^-?\d+$/.test(v)) return BigInt(v);
  return v;
}

/** An API value (number, bigint, ±Infinity, objects of them) in the encoding, keys snake_case. */
function enc(v) {
  if (v === Infinity) return "infinite";
  if (v === -Infinity) return "-infinite";
  if (typeof v === "bigint") return v <= SAFE && v >= -SAFE ? Number(v) : v.toString();
  if (Array.isArray(v)) return v.map(enc);
  if (v !== null && typeof v === "object") {
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [k.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`), enc(x)]));
  }
  return v;
}

// ---- pricing: the vectors' JSON (snake_case) as cycles-sdk/pricing's typed arguments ----

const camel = (k) => k.replace(/_([a-z])/g, (_, c) => c.toUpperCase());
const camelInts = (o) => (o && typeof o === "object" && !Array.isArray(o) ? Object.fromEntries(Object.entries(o).map(([k, v]) => [camel(k), num(v)])) : o);
function table(p) {
  if (!p || typeof p !== "object") return p;
  const out = {};
  for (const [k, v] of Object.entries(p)) {
    if (k === "models" && v && typeof v === "object") out.models = Object.fromEntries(Object.entries(v).map(([m, x]) => [m, camelInts(x)]));
    else if (k === "default") out.default = camelInts(v);
    else out[k] = v;
  }
  return out;
}
const counts = (c) => (Array.isArray(c) ? c.map((m) => (Array.isArray(m) ? m.map(num) : m)) : c);
const amountIn = (a) => (a && typeof a === "object" ? { unit: a.unit, amount: num(a.amount) } : (a ?? null));
const PRICING = {
  text_tokens: (i) => pricing.textTokens(i.text),
  prompt_texts: (i) => pricing.promptTexts(i.request),
  prompt_tokens: (i) => pricing.promptTokens(i.request, counts(i.text_tokens)),
  output_bound: (i) => pricing.outputBound(i.request, num(i.default)),
  lookup_price: (i) => pricing.lookupPrice(table(i.pricing), i.model),
  cost: (i) => pricing.cost(table(i.pricing), i.model, num(i.input_tokens), num(i.output_tokens)),
  estimate: (i) => pricing.estimate(table(i.pricing), i.model, num(i.prompt_tokens), num(i.output_bound)),
  estimate_request: (i) => pricing.estimateRequest(table(i.pricing), i.model, i.request, num(i.default_output_bound), counts(i.text_tokens)),
  actual: (i) => pricing.actual(table(i.pricing), i.model, camelInts(i.usage)),
  settlement: (i) => pricing.settlement(amountIn(i.actual), i.call_succeeded, amountIn(i.estimate)),
  lower_bound: (i) => pricing.lowerBound(num(i.bound), camelInts(i.caps)),
  tool_allowed: (i) => pricing.toolAllowed(i.name, camelInts(i.caps)),
  filter_tools: (i) => pricing.filterTools(i.tools, camelInts(i.caps)),
  plan_caps: (i) => pricing.planCaps(i.api, i.request, camelInts(i.caps)),
  usage: (i) => pricing.usage(i.api, i.body, i.usage === undefined ? undefined : camelInts(i.usage)),
  stream_request: (i) => ({ set: pricing.streamRequest(i.api, i.request) }),
  call_failed: (i) => pricing.callFailed(i.api, i.body),
  observe: (i) => pricing.observe(table(i.pricing), i.model, i.api, i.body, i.usage === undefined ? undefined : camelInts(i.usage)),
};

/** A plan's `set` holds request members as the provider spells them: kept as given. */
function pricingOut(fn, v) {
  if (fn === "stream_request") return v;
  if (fn !== "plan_caps") return enc(v);
  const { set, ...rest } = v;
  return { ...enc(rest), set };
}

// ---- timing ----

const FNS = {
  schedule: (a) => timing.schedule(num(a.remaining_ttl_ms), num(a.rtt_ms), num(a.max_rtt_ms), num(a.request_timeout_ms)),
  lead_floor: (a) => timing.leadFloor(num(a.remaining_ttl_ms), num(a.rtt_ms)),
  attempt_budget: (a) => timing.attemptBudget(num(a.request_timeout_ms), num(a.max_rtt_ms)),
  safety_margin: (a) => timing.safetyMargin(num(a.max_rtt_ms)),
  retry_reserve: (a) => timing.retryReserve(num(a.attempt_budget_ms), num(a.safety_margin_ms)),
  next_delay: (a) => timing.nextDelay(num(a.lead_floor_ms), num(a.retry_reserve_ms)),
  current_lead_estimate: (a) => timing.currentLeadEstimate(num(a.last_lead_floor_ms), num(a.elapsed_ms)),
  retry_window: (a) => timing.retryWindow(num(a.current_lead_estimate_ms), num(a.attempt_budget_ms), num(a.safety_margin_ms)),
  transient_retry_delay: (a) => timing.transientRetryDelay(num(a.current_lead_estimate_ms), num(a.retry_window_ms)),
  parse_retry_after: (a) => timing.parseRetryAfter(a.raw ?? null),
  extend_timeout: (a) => timing.extendTimeout(num(a.lead_floor_ms), num(a.max_rtt_ms), num(a.configured_timeout_ms)),
  min_lead_floor: (a) => timing.minLeadFloor(num(a.timeout_ms), num(a.max_rtt_ms)),
  attempt_cutoff: (a) => timing.attemptCutoff(num(a.timeout_ms)),
  classify_grant: (a) => timing.classifyGrant(num(a.grant_ms), num(a.elapsed_ms), num(a.requested_ttl_ms)),
  cadence: (a) => timing.cadence(a.regime, num(a.last_grant_ms), num(a.requested_ttl_ms)),
  delay_with_skips: (a) => timing.delayWithSkips(num(a.lead_min_now_ms), num(a.last_grant_ms), num(a.cadence_ms)),
  is_permanent_stop_code: (a) => timing.isPermanentStopCode(a.code),
};

/** A Decision as the bridge's `decision_json` writes it. */
function decision(d) {
  if (d.kind === "extend") return { extend: { delay_ms: enc(d.delayMs), key: d.key } };
  const detail = enc(d.detail);
  // The error code is the server's text: never a number, whatever it looks like.
  if ("code" in d.detail) detail.code = d.detail.code;
  return { stop: d.reason, ...detail };
}

function failure(f) {
  if (f.kind === "rate_limited") return { kind: "rate_limited", retryAfter: f.retry_after ?? null };
  if (f.kind === "error") return { kind: "error", status: f.status ?? null, code: f.code ?? null };
  return { kind: f.kind };
}

function primary(r) {
  const p = new timing.PrimaryPlanner(num(r.request_timeout_ms), r.derive === true);
  return r.steps.map((s) => {
    const d = s.event === "success" ? p.onSuccess(num(s.at_us), num(s.remaining_ttl_ms), num(s.rtt_ms)) : p.onFailure(num(s.at_us), failure(s.failure));
    return { decision: decision(d), attempt_timeout_ms: enc(p.attemptTimeoutMs) };
  });
}

function fallback(r) {
  const p = new timing.FallbackPlanner(num(r.requested_ttl_ms), num(r.create.at_us), num(r.create.expires_at_ms));
  const first = decision(p.firstBeat(r.prime === true));
  const steps = r.steps.map((s) => {
    const d = s.event === "success" ? p.onSuccess(num(s.at_us), num(s.expires_at_ms)) : p.onFailure(num(s.at_us), failure(s.failure));
    return { decision: decision(d), regime: p.regime };
  });
  return { first, steps };
}

// ---- journal ----

function parseRecord(text) {
  let rec;
  try {
    rec = journal.parseRecord(text);
  } catch (e) {
    const kind = e instanceof CyclesError ? e.details?.journal_error : undefined;
    if (kind === undefined) throw e;
    return { ok: false, error: kind };
  }
  return {
    ok: true,
    reservation_id: rec.reservationId,
    base_url: rec.baseUrl,
    mode: rec.mode,
    idempotency_key: rec.idempotencyKey,
    recorded_at_ms: rec.recordedAtMs,
    not_before_ms: rec.notBeforeMs,
    commit_body_wire: rec.commitBody,
    event_fallback_body_wire: rec.eventFallbackBody,
    extra_keys: [...rec.extraKeys], // file order, as the SDK keeps them
  };
}

// ---- decode ----

function decode(x) {
  const resp = x.response;
  const headers = Object.entries(resp.headers).map(([k, v]) => [k, String(v)]);
  try {
    const { meta: _meta, ...result } = decodeResponse(x.operation ?? null, resp.status, headers, resp.body);
    return { result: toWire(result) };
  } catch (e) {
    if (!(e instanceof CyclesError)) throw e;
    const secs = e.retryAfterSeconds;
    return {
      error: {
        kind: e.errorName,
        status: e.httpStatus,
        error_code: e.serverCode,
        request_id: e.requestId,
        retryable: e.retryable,
        retry_after_ms: secs === null ? null : enc(BigInt(secs) * 1000n),
      },
    };
  }
}

// ---- write and drain, against the orchestrator's server ----

/**
 * The exact text of the member at `path` in the JSON `text` (object keys only), or
 * undefined: metadata goes to the API as text, so integers beyond 2^53 - 1 stay exact
 * (JSON.parse would round them).
 */
function rawMember(text, path) {
  let i = 0;
  const ws = () => {
    while (/\s/.test(text[i])) i++;
  };
  const str = () => {
    const start = i++;
    while (text[i] !== '"') i += text[i] === "\\" ? 2 : 1;
    i++;
    return JSON.parse(text.slice(start, i));
  };
  // Skips one value from i; returns [start, end).
  const value = () => {
    ws();
    const start = i;
    if (text[i] === '"') str();
    else if (text[i] === "{" || text[i] === "[") {
      const close = text[i] === "{" ? "}" : "]";
      i++;
      ws();
      while (text[i] !== close) {
        if (close === "}") {
          ws();
          str();
          ws();
          i++; // ':'
        }
        value();
        ws();
        if (text[i] === ",") i++;
        ws();
      }
      i++;
    } else while (i < text.length && !/[\s,}\]]/.test(text[i])) i++;
    return [start, i];
  };
  const find = (keys) => {
    ws();
    if (text[i] !== "{") return undefined;
    i++;
    for (;;) {
      ws();
      if (text[i] === "}") return undefined;
      const k = str();
      ws();
      i++; // ':'
      ws();
      if (k === keys[0]) return keys.length === 1 ? value() : find(keys.slice(1));
      value();
      ws();
      if (text[i] === ",") i++;
    }
  };
  const span = find(path);
  return span && text.slice(span[0], span[1]);
}

const METRICS = { tokens_input: "tokensInput", tokens_output: "tokensOutput", latency_ms: "latencyMs", model_version: "modelVersion", custom: "custom" };

function client(r, extra = {}) {
  return new Client({ baseUrl: r.url, apiKey: r.api_key, ...(r.tenant == null ? {} : { tenant: r.tenant }), journalDir: r.journal_dir, ...journalUrl(r), ...extra });
}

/** The request's Redis journal (`journal_url`), when it names one. */
export function journalUrl(r) {
  return r.journal_url == null ? {} : { journalUrl: r.journal_url };
}

async function write(r, line) {
  const c = r.case;
  let metrics = null;
  if (c.metrics != null) {
    const unknown = Object.keys(c.metrics).filter((k) => !(k in METRICS));
    if (unknown.length) return { fail: `setMetrics takes the standard metrics only, not ${unknown.join(", ")}` };
    metrics = Object.fromEntries(Object.entries(c.metrics).map(([k, v]) => [METRICS[k], v]));
  }
  const metadata = c.metadata == null ? null : rawMember(line, ["case", "metadata"]);
  // The fewest settlement attempts the configuration allows; no background replay meanwhile.
  const cl = client(r, { maxAttempts: 1, replayIntervalMs: 3_600_000 });
  try {
    let res;
    await cl.guarded(
      { estimate: { unit: c.estimate.unit, amount: num(c.estimate.amount) }, action: c.action, subject: c.subject, idempotencyKey: `matrix-node-${c.name}` },
      (g) => {
        res = g;
        g.setActual(num(c.actual));
        if (metrics) g.setMetrics(metrics);
        if (metadata !== null) g.setMetadataJson(metadata);
      },
    );
    return { ok: { reservation_id: res.reservationId, outcome: res.settlement?.status ?? res.outcome } };
  } finally {
    await cl.close(0);
  }
}

async function drain(r) {
  const cl = client(r);
  try {
    const report = await cl.drain(Number(r.timeout_ms));
    return { ok: { settled: report.settled, pending: report.remaining.length, quarantined: report.quarantined.length } };
  } finally {
    await cl.close(0);
  }
}

// ---- client: the options table of the lifecycle contract ----

/** Node's names of the canonical options (all in ms, as here). */
const NODE_OPTIONS = {
  tenant: "tenant",
  default_unit: "defaultUnit",
  request_timeout_ms: "requestTimeoutMs",
  connect_timeout_ms: "connectTimeoutMs",
  max_concurrent_requests: "maxConcurrentRequests",
  settle_max_attempts: "maxAttempts",
  replay_interval_ms: "replayIntervalMs",
  journal_enabled: "journalEnabled",
};

/** A client of the options through `new Client`, then one guarded action (bare 5, actual 3). */
async function clientCase(r) {
  const options = { baseUrl: r.url, apiKey: r.api_key, journalDir: r.journal_dir };
  for (const [name, value] of Object.entries(r.options)) {
    if (!(name in NODE_OPTIONS)) return { fail: `unknown option ${JSON.stringify(name)}` };
    options[NODE_OPTIONS[name]] = value;
  }
  let cl;
  try {
    cl = new Client(options);
  } catch (e) {
    if (e instanceof CyclesError) return { ok: { error: e.errorName } };
    throw e;
  }
  try {
    const error = await step(() =>
      cl.guarded({ estimate: 5, action: { kind: "llm.completion", name: "matrix" }, idempotencyKey: r.key, actual: 3 }, async () => null),
    );
    return { ok: { error } };
  } finally {
    await cl.close(0);
  }
}

// ---- guard: one action of the lifecycle contract ----

/** The work's own exception (a `fail` step): it must propagate unchanged. */
class WorkFailed extends Error {}

/** null, or the Cycles error name `fn` threw (anything else propagates). */
async function step(fn) {
  try {
    await fn();
    return null;
  } catch (e) {
    if (e instanceof CyclesError) return e.errorName;
    throw e;
  }
}

/**
 * One guarded action through `client.guarded` with only the action and the bare estimate
 * (the key and subject only when the case gives them: the client's defaults otherwise), the
 * steps run on the handle inside the work.
 */
async function guard(r) {
  const c = r.case;
  const known = new Set(["add", "set_actual", "release", "end", "fail"]);
  const unknown = c.steps.find((s) => !known.has(s.do));
  if (unknown) return { fail: `unknown step ${JSON.stringify(unknown.do)}` };
  const cl = new Client({ baseUrl: r.url, apiKey: r.api_key, tenant: r.tenant, defaultUnit: r.default_unit, journalDir: r.journal_dir });
  const out = { decision: null, caps: null, steps: [], outcome: null, released: null, charged: null, error: null };
  const options = { action: { kind: "llm.completion", name: "matrix" }, estimate: num(c.estimate) };
  if (c.idempotency_key != null) options.idempotencyKey = c.idempotency_key;
  if (c.subject != null) options.subject = c.subject;
  let handle = null;
  try {
    await cl.guarded(options, async (g) => {
      handle = g;
      out.decision = g.decision;
      out.caps = g.caps === null ? null : enc(g.caps);
      for (const s of c.steps) {
        if (s.do === "add") out.steps.push(await step(() => g.add(num(s.amount))));
        else if (s.do === "set_actual") out.steps.push(await step(() => g.setActual(num(s.amount))));
        else if (s.do === "end") {
          out.steps.push(null);
          return;
        } else if (s.do === "fail") {
          out.steps.push(null);
          throw new WorkFailed("the work failed");
        } else {
          const refused = await step(() => g.release(s.reason ?? undefined));
          out.steps.push(refused);
          if (refused === null) return; // a release that succeeds ends the action
        }
      }
    });
  } catch (e) {
    if (e instanceof WorkFailed) out.error = "work";
    else if (e instanceof CyclesError) out.error = e.errorName;
    else throw e;
  } finally {
    await cl.close(0);
  }
  if (handle !== null && handle.outcome !== null) {
    out.outcome = handle.outcome;
    // `released` exists where the bridge's outcome has it (not on a settlement).
    out.released = handle.outcome === "settled" || handle.outcome === "heartbeat_lapsed" ? null : handle.released;
    out.charged = enc(handle.settlement?.charged?.amount ?? null);
  }
  return { ok: out };
}

// ---- journal_fail: a journal that cannot be written ----

const DISK_EVENTS = new Set(["journal_io_failed", "settlement_pending", "settlement_settled"]);

/**
 * One guarded action (bare 5, actual 3, the case's key) whose first commit fails on a journal
 * that cannot be written, then `flush()`: the settlement's typed fields, the flush's
 * unjournaled count and this reservation's events.
 */
async function journalFail(r) {
  const seen = [];
  const cl = new Client({
    baseUrl: r.url, apiKey: r.api_key, tenant: r.tenant, defaultUnit: r.default_unit, journalDir: r.journal_dir,
    maxAttempts: 1, replayIntervalMs: 3_600_000, onEvent: (e) => seen.push(e),
  });
  let res;
  let report;
  try {
    await cl.guarded({ estimate: 5, action: { kind: "llm.completion", name: "matrix" }, idempotencyKey: r.key }, (g) => {
      res = g;
      g.setActual(3);
    });
    report = await cl.flush();
  } finally {
    await cl.close(0); // delivers the last events
  }
  const s = res.settlement;
  const events = seen
    .filter((e) => e.reservationId === res.reservationId && DISK_EVENTS.has(e.kind))
    .map((e) => ({ kind: e.kind, level: e.level, operation: e.operation ?? null, journaled: e.journaled ?? null }));
  return {
    ok: { status: s.status, journaled: s.journaled, journal_error: s.journalError, flush_unjournaled: report.unjournaled.length, events },
  };
}

// ---- dispatch ----

/**
 * The load run (PROTOCOL.md, `load`): `count` guarded actions at once on one client, each a
 * promise under its own key, counted by outcome; closed without a drain, so what could not
 * settle stays journaled for the orchestrator's drain.
 */
async function load(r) {
  const cl = new Client({ baseUrl: r.url, apiKey: r.api_key, tenant: r.tenant, defaultUnit: r.default_unit, journalDir: r.journal_dir });
  const action = { kind: "llm.completion", name: "load" };
  const one = async (i) => {
    let handle = null;
    try {
      await cl.guarded({ action, estimate: 5, idempotencyKey: `${r.key_prefix}-${i}` }, (g) => {
        handle = g;
        g.setActual(3);
      });
    } catch (e) {
      if (e instanceof CyclesError) return `error:${e.errorName}`;
      throw e;
    }
    return handle.settlement?.status ?? String(handle.outcome);
  };
  const outcomes = {};
  try {
    const names = await Promise.all(Array.from({ length: Number(r.count) }, (_, i) => one(i)));
    for (const n of names) outcomes[n] = (outcomes[n] ?? 0) + 1;
  } finally {
    await cl.close(0);
  }
  return { ok: { outcomes } };
}

async function answer(r, line) {
  switch (r.op) {
    case "pricing": {
      const f = PRICING[r.fn];
      if (!f) return { fail: `unknown pricing function ${JSON.stringify(r.fn)}` };
      return { ok: pricingOut(r.fn, f(r.args ?? {})) };
    }
    case "timing": {
      const f = FNS[r.fn];
      if (!f) return { fail: `unknown timing function ${JSON.stringify(r.fn)}` };
      return { ok: enc(f(r.args ?? {})) };
    }
    case "primary":
      return { ok: primary(r) };
    case "fallback":
      return { ok: fallback(r) };
    case "journal_names":
      return { ok: { standard: journal.fileName(r.reservation_id), legacy: journal.legacyFileName(r.reservation_id) } };
    case "fingerprint":
      return { ok: journal.identityFingerprint(r.base_url, r.api_key, r.tenant ?? null) };
    case "parse_record":
      return { ok: parseRecord(r.text) };
    case "decode":
      return { ok: decode(r.exchange) };
    case "write":
      return write(r, line);
    case "drain":
      return drain(r);
    case "guard":
      return guard(r);
    case "client":
      return clientCase(r);
    case "work":
      return work(r);
    case "journal_fail":
      return journalFail(r);
    case "load":
      return load(r);
    default:
      return { fail: `unknown op ${JSON.stringify(r.op)}` };
  }
}

async function serve(line) {
  let r;
  try {
    r = JSON.parse(line);
  } catch (e) {
    return { fail: `request is not JSON: ${e.message}` };
  }
  let out;
  try {
    out = await answer(r, line);
  } catch (e) {
    out = e instanceof CyclesError ? { error: e.errorName } : { fail: String(e?.stack ?? e) };
  }
  return { id: r.id ?? null, ...out };
}

for await (const line of createInterface({ input: process.stdin, crlfDelay: Infinity })) {
  if (!line.trim()) continue;
  process.stdout.write(`${JSON.stringify(await serve(line))}\n`);
}
