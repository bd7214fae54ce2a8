/**
 * `cycles-sdk/timing`: core's pure heartbeat math (`cycles_core::timing`), unchanged: the
 * spec's primary schedule, retry windows, `Retry-After`, the fallback planner and the
 * derived extend timeout. Durations are {@link Millis}: a `number` of milliseconds, a
 * `bigint` beyond 2^53 − 1, or `Infinity` (unbounded); signed windows may be `-Infinity`.
 * A `number` argument that is not a safe integer (2^63 − 1 read by `JSON.parse` is
 * 9223372036854775808, already wrong) throws a `RangeError`: pass a `bigint` instead.
 * Every case of the shared vectors (conformance/vectors/heartbeat.json) runs through this.
 * @module
 */
import { call } from "./errors";
import { native, type NativeFallbackPlanner, type NativePrimaryPlanner } from "./native";

/** Milliseconds: a number, a bigint beyond 2^53 − 1, or ±Infinity. */
export type Millis = number | bigint;

/** What a planner decided. */
export type Decision =
  | { kind: "extend"; delayMs: Millis; key: "fresh" | "same" }
  | {
      kind: "stop";
      /** Core's stable stop name (as in the `heartbeat_failed` event). */
      reason: string;
      detail: Record<string, unknown>;
      /** The server's error code of a `permanent` or `rejected` stop. */
      code: string | null;
      /** The HTTP status of a `rejected` stop. */
      status: number | null;
    };

/** An extend failure as a planner sees it. */
export type Failure =
  | { kind: "transient" }
  | { kind: "rate_limited"; retryAfter: string | null }
  | { kind: "error"; status: number; code: string | null };

/** The primary schedule of one response. */
export interface Schedule {
  leadFloorMs: Millis;
  attemptBudgetMs: Millis;
  safetyMarginMs: Millis;
  retryReserveMs: Millis;
  nextDelayMs: Millis;
}

/** The enforced extend timeout and how it was derived. */
export interface ExtendTimeout {
  timeoutMs: Millis;
  /** `configured` or `derived`. */
  source: string;
  minLeadFloorMs: Millis;
  maxKeepingTimeoutMs: Millis | null;
  targetTimeoutMs: Millis;
  attemptCutoffMs: Millis;
}

/** A parsed `Retry-After`. */
export interface RetryAfter {
  /** `missing`, `invalid` or `seconds`. */
  kind: string;
  /** The header's seconds (a `bigint` beyond 2^53 − 1), or null. */
  seconds: number | bigint | null;
  ms: Millis | null;
}

/** The failure arithmetic of a planner at one instant. */
export interface FailureMath {
  elapsedMs: Millis;
  currentLeadEstimateMs: Millis;
  retryWindowMs: Millis;
}

const SAFE = BigInt(Number.MAX_SAFE_INTEGER);

const camel = (k: string): string => k.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());

/**
 * An argument in the bridge's encoding. A number must be a safe integer or ±Infinity: a
 * larger one has already lost its exact value, and core would compute with the wrong one.
 */
function enc(v: unknown, name: string): unknown {
  if (v === null || v === undefined) return null;
  if (typeof v === "bigint") return v <= SAFE && v >= -SAFE ? Number(v) : v.toString();
  if (v === Infinity) return "infinite";
  if (v === -Infinity) return "-infinite";
  if (typeof v === "number" && !Number.isSafeInteger(v)) {
    throw new RangeError(`${camel(name)} must be a safe integer, a bigint or ±Infinity, not ${v} (pass a bigint beyond 2^53 - 1)`);
  }
  return v;
}

/** The numeric members of an argument object encoded (text such as `raw` or `regime` as given). */
function encAll(args: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(args)) out[k] = typeof v === "number" || typeof v === "bigint" || v === undefined ? enc(v, k) : v;
  return out;
}

function dec(v: unknown): unknown {
  if (typeof v === "string") {
    if (v === "infinite") return Infinity;
    if (v === "-infinite") return -Infinity;
    if (/^-?\d+$/.test(v)) return BigInt(v);
    return v;
  }
  if (Array.isArray(v)) return v.map(dec);
  if (v !== null && typeof v === "object") {
    // A server's error code is text even when it looks like a number.
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [k.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase()), k === "code" ? x : dec(x)]));
  }
  return v;
}

/** One function of the bridge's timing table; `args` are its named arguments (snake_case), encoded here. */
function run(name: string, args: Record<string, unknown>): unknown {
  return dec(JSON.parse(call(() => native.timingCall(name, JSON.stringify(encAll(args))))));
}

/** A decision of the bridge's form: `{extend: {delayMs, key}}` or `{stop, ...detail}`. */
function decision(raw: unknown): Decision {
  const { extend, stop, ...detail } = raw as { extend?: { delayMs: Millis; key: "fresh" | "same" }; stop?: string } & Record<string, unknown>;
  if (extend) return { kind: "extend", delayMs: extend.delayMs, key: extend.key };
  return {
    kind: "stop",
    reason: stop as string,
    detail,
    code: (detail.code as string | undefined) ?? null,
    status: detail.status === undefined || detail.status === null ? null : Number(detail.status),
  };
}

/** A failure as the vectors' step object spells it. */
function failureJson(f: Failure): Record<string, unknown> {
  switch (f.kind) {
    case "transient":
      return { kind: "transient" };
    case "rate_limited":
      return { kind: "rate_limited", retry_after: f.retryAfter };
    case "error":
      return { kind: "error", status: f.status, code: f.code };
  }
}

/** Microseconds rounded up to whole milliseconds. */
export const fromMicrosCeil = (micros: number | bigint): Millis => run("from_micros_ceil", { micros }) as Millis;
/** Microseconds rounded down to whole milliseconds. */
export const fromMicrosFloor = (micros: number | bigint): Millis => run("from_micros_floor", { micros }) as Millis;
/** The spec's primary schedule of one schema-valid response. */
export const schedule = (remainingTtlMs: Millis, rttMs: Millis | null, maxRttMs: Millis | null, requestTimeoutMs: Millis): Schedule =>
  run("schedule", { remaining_ttl_ms: remainingTtlMs, rtt_ms: rttMs, max_rtt_ms: maxRttMs, request_timeout_ms: requestTimeoutMs }) as Schedule;
/** `remaining_ttl_ms − rtt` (the lead the client can count on). */
export const leadFloor = (remainingTtlMs: Millis, rttMs: Millis | null): Millis => run("lead_floor", { remaining_ttl_ms: remainingTtlMs, rtt_ms: rttMs }) as Millis;
/** One attempt's budget. */
export const attemptBudget = (requestTimeoutMs: Millis, maxRttMs: Millis | null): Millis => run("attempt_budget", { request_timeout_ms: requestTimeoutMs, max_rtt_ms: maxRttMs }) as Millis;
/** The safety margin. */
export const safetyMargin = (maxRttMs: Millis | null): Millis => run("safety_margin", { max_rtt_ms: maxRttMs }) as Millis;
/** The retry reserve. */
export const retryReserve = (attemptBudgetMs: Millis, safetyMarginMs: Millis): Millis => run("retry_reserve", { attempt_budget_ms: attemptBudgetMs, safety_margin_ms: safetyMarginMs }) as Millis;
/** The delay to the next beat. */
export const nextDelay = (leadFloorMs: Millis, retryReserveMs: Millis): Millis => run("next_delay", { lead_floor_ms: leadFloorMs, retry_reserve_ms: retryReserveMs }) as Millis;
/** `max(0, last lead floor − elapsed)`. */
export const currentLeadEstimate = (lastLeadFloorMs: Millis, elapsedMs: Millis): Millis => run("current_lead_estimate", { last_lead_floor_ms: lastLeadFloorMs, elapsed_ms: elapsedMs }) as Millis;
/** The retry window (may be negative). */
export const retryWindow = (currentLeadEstimateMs: Millis, attemptBudgetMs: Millis, safetyMarginMs: Millis): Millis =>
  run("retry_window", { current_lead_estimate_ms: currentLeadEstimateMs, attempt_budget_ms: attemptBudgetMs, safety_margin_ms: safetyMarginMs }) as Millis;
/** The delay before a transient retry. */
export const transientRetryDelay = (currentLeadEstimateMs: Millis, retryWindowMs: Millis): Millis =>
  run("transient_retry_delay", { current_lead_estimate_ms: currentLeadEstimateMs, retry_window_ms: retryWindowMs }) as Millis;
/** A `Retry-After` header value parsed as the spec reads it. */
export const parseRetryAfter = (raw: string | null): RetryAfter => run("parse_retry_after", { raw }) as RetryAfter;
/** The delay of a `Retry-After` header in milliseconds, or null. */
export const retryAfterMs = (raw: string | null): Millis | null => parseRetryAfter(raw).ms;
/** Whether an error code stops the heartbeat for good. */
export const isPermanentStopCode = (code: string): boolean => run("is_permanent_stop_code", { code }) as boolean;
/** Every permanent stop code. */
export const permanentStopCodes = (): string[] => run("permanent_stop_codes", {}) as string[];
/** The fallback regime of a grant. */
export const classifyGrant = (grantMs: number | bigint, elapsedMs: Millis, requestedTtlMs: number | bigint): string =>
  run("classify_grant", { grant_ms: grantMs, elapsed_ms: elapsedMs, requested_ttl_ms: requestedTtlMs }) as string;
/** The fallback cadence of a regime. */
export const cadence = (regime: string, lastGrantMs: number | bigint, requestedTtlMs: number | bigint): Millis =>
  run("cadence", { regime, last_grant_ms: lastGrantMs, requested_ttl_ms: requestedTtlMs }) as Millis;
/** The fallback delay with the skip rule. */
export const delayWithSkips = (leadMinNowMs: number | bigint, lastGrantMs: number | bigint, cadenceMs: Millis): Millis =>
  run("delay_with_skips", { lead_min_now_ms: leadMinNowMs, last_grant_ms: lastGrantMs, cadence_ms: cadenceMs }) as Millis;
/** The enforced extend timeout (derived from a short lease when the configured one leaves no cadence). */
export const extendTimeout = (leadFloorMs: Millis, maxRttMs: Millis | null, configuredTimeoutMs: Millis): ExtendTimeout =>
  run("extend_timeout", { lead_floor_ms: leadFloorMs, max_rtt_ms: maxRttMs, configured_timeout_ms: configuredTimeoutMs }) as ExtendTimeout;
/** The least lead floor a timeout can keep. */
export const minLeadFloor = (timeoutMs: Millis, maxRttMs: Millis | null): Millis => run("min_lead_floor", { timeout_ms: timeoutMs, max_rtt_ms: maxRttMs }) as Millis;
/** When an attempt is cut off. */
export const attemptCutoff = (timeoutMs: Millis): Millis => run("attempt_cutoff", { timeout_ms: timeoutMs }) as Millis;

/** JSON text of a native result, decoded (`bigint` beyond 2^53 − 1, `±Infinity`). */
function out(text: string): unknown {
  return dec(JSON.parse(text));
}

/** Core's primary planner (the server reports `remaining_ttl_ms`). */
export class PrimaryPlanner {
  private readonly native: NativePrimaryPlanner;
  constructor(requestTimeoutMs: Millis, deriveTimeout = false) {
    this.native = call(() => new native.NativePrimaryPlanner(JSON.stringify(enc(requestTimeoutMs, "request_timeout_ms")), deriveTimeout));
  }
  /** The timeout of the next attempt. */
  get attemptTimeoutMs(): Millis {
    return out(call(() => this.native.attemptTimeout())) as Millis;
  }
  /** The largest round trip seen. */
  get maxRttMs(): Millis | null {
    return out(call(() => this.native.maxRtt())) as Millis | null;
  }
  /** After a schema-valid response. */
  onSuccess(receivedUs: number | bigint, remainingTtlMs: Millis, rttMs: Millis | null): Decision {
    const step = { event: "success", at_us: enc(receivedUs, "received_us"), remaining_ttl_ms: enc(remainingTtlMs, "remaining_ttl_ms"), rtt_ms: enc(rttMs, "rtt_ms") };
    return decision(out(call(() => this.native.step(JSON.stringify(step)))));
  }
  /** After a failed extend. */
  onFailure(nowUs: number | bigint, failure: Failure): Decision {
    const step = { event: "failure", at_us: enc(nowUs, "now_us"), failure: failureJson(failure) };
    return decision(out(call(() => this.native.step(JSON.stringify(step)))));
  }
  /** Records a round trip. */
  observeRtt(rttMs: Millis): void {
    call(() => this.native.observeRtt(JSON.stringify(enc(rttMs, "rtt_ms"))));
  }
  /** The failure arithmetic now, if any response was seen. */
  failureMath(nowUs: number | bigint): FailureMath | null {
    return out(call(() => this.native.failureMath(JSON.stringify({ now_us: enc(nowUs, "now_us") })))) as FailureMath | null;
  }
}

/** Core's fallback planner (no `remaining_ttl_ms`: works from `expires_at_ms`). */
export class FallbackPlanner {
  private readonly native: NativeFallbackPlanner;
  constructor(requestedTtlMs: number | bigint, reserveReceivedUs: number | bigint, expiresAtMs: number | bigint) {
    const args = { requested_ttl_ms: enc(requestedTtlMs, "requested_ttl_ms"), reserve_received_us: enc(reserveReceivedUs, "reserve_received_us"), expires_at_ms: enc(expiresAtMs, "expires_at_ms") };
    this.native = call(() => new native.NativeFallbackPlanner(JSON.stringify(args)));
  }
  /** The first beat (primed or not). */
  firstBeat(prime = true): Decision {
    return decision(out(call(() => this.native.firstBeat(prime))));
  }
  /** After a schema-valid response. */
  onSuccess(receivedUs: number | bigint, expiresAtMs: number | bigint): Decision {
    const step = { event: "success", at_us: enc(receivedUs, "received_us"), expires_at_ms: enc(expiresAtMs, "expires_at_ms") };
    return decision(out(call(() => this.native.step(JSON.stringify(step)))));
  }
  /** After a failed extend. */
  onFailure(nowUs: number | bigint, failure: Failure): Decision {
    const step = { event: "failure", at_us: enc(nowUs, "now_us"), failure: failureJson(failure) };
    return decision(out(call(() => this.native.step(JSON.stringify(step)))));
  }
  /** The current regime name. */
  get regime(): string {
    return call(() => this.native.regime());
  }
  /** The last grant. */
  get lastGrantMs(): number | bigint | null {
    return out(call(() => this.native.lastGrantMs())) as number | bigint | null;
  }
  /** The least lead now. */
  leadMinMs(nowUs: number | bigint): number | bigint {
    return out(call(() => this.native.leadMinMs(JSON.stringify({ now_us: enc(nowUs, "now_us") })))) as number | bigint;
  }
}
