/**
 * `cycles-sdk/timing`: core's pure heartbeat math (`cycles_core::timing`), unchanged: the
 * spec's primary schedule, retry windows, `Retry-After`, the fallback planner and the
 * derived extend timeout. Durations are {@link Millis}: a `number` of milliseconds, a
 * `bigint` beyond 2^53 − 1, or `Infinity` (unbounded); signed windows may be `-Infinity`.
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
  seconds: number | null;
  ms: Millis | null;
}

/** The failure arithmetic of a planner at one instant. */
export interface FailureMath {
  elapsedMs: Millis;
  currentLeadEstimateMs: Millis;
  retryWindowMs: Millis;
}

const SAFE = BigInt(Number.MAX_SAFE_INTEGER);

function enc(v: Millis | null | undefined): unknown {
  if (v === null || v === undefined) return null;
  if (typeof v === "bigint") return v <= SAFE && v >= -SAFE ? Number(v) : v.toString();
  if (v === Infinity) return "infinite";
  if (v === -Infinity) return "-infinite";
  return v;
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
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [k.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase()), dec(x)]));
  }
  return v;
}

function run(name: string, args: unknown[]): unknown {
  return dec(JSON.parse(call(() => native.timingCall(name, JSON.stringify(args)))));
}

function decision(raw: unknown): Decision {
  const d = raw as { extend?: { delayMs: Millis; key: "fresh" | "same" }; stop?: string; detail?: Record<string, unknown> };
  if (d.extend) return { kind: "extend", delayMs: d.extend.delayMs, key: d.extend.key };
  const detail = d.detail ?? {};
  return {
    kind: "stop",
    reason: d.stop as string,
    detail,
    code: (detail.code as string | undefined) ?? null,
    status: detail.status === undefined || detail.status === null ? null : Number(detail.status),
  };
}

function failureArgs(f: Failure): unknown[] {
  switch (f.kind) {
    case "transient":
      return ["transient", null, null, null];
    case "rate_limited":
      return ["rate_limited", f.retryAfter, null, null];
    case "error":
      return ["error", null, f.status, f.code];
  }
}

/** Microseconds rounded up to whole milliseconds. */
export const fromMicrosCeil = (micros: number | bigint): Millis => run("from_micros_ceil", [enc(micros)]) as Millis;
/** Microseconds rounded down to whole milliseconds. */
export const fromMicrosFloor = (micros: number | bigint): Millis => run("from_micros_floor", [enc(micros)]) as Millis;
/** The spec's primary schedule of one schema-valid response. */
export const schedule = (remainingTtlMs: Millis, rttMs: Millis | null, maxRttMs: Millis | null, requestTimeoutMs: Millis): Schedule =>
  run("schedule", [enc(remainingTtlMs), enc(rttMs), enc(maxRttMs), enc(requestTimeoutMs)]) as Schedule;
/** `remaining_ttl_ms − rtt` (the lead the client can count on). */
export const leadFloor = (remainingTtlMs: Millis, rttMs: Millis | null): Millis => run("lead_floor", [enc(remainingTtlMs), enc(rttMs)]) as Millis;
/** One attempt's budget. */
export const attemptBudget = (requestTimeoutMs: Millis, maxRttMs: Millis | null): Millis => run("attempt_budget", [enc(requestTimeoutMs), enc(maxRttMs)]) as Millis;
/** The safety margin. */
export const safetyMargin = (maxRttMs: Millis | null): Millis => run("safety_margin", [enc(maxRttMs)]) as Millis;
/** The retry reserve. */
export const retryReserve = (attemptBudgetMs: Millis, safetyMarginMs: Millis): Millis => run("retry_reserve", [enc(attemptBudgetMs), enc(safetyMarginMs)]) as Millis;
/** The delay to the next beat. */
export const nextDelay = (leadFloorMs: Millis, retryReserveMs: Millis): Millis => run("next_delay", [enc(leadFloorMs), enc(retryReserveMs)]) as Millis;
/** `max(0, last lead floor − elapsed)`. */
export const currentLeadEstimate = (lastLeadFloorMs: Millis, elapsedMs: Millis): Millis => run("current_lead_estimate", [enc(lastLeadFloorMs), enc(elapsedMs)]) as Millis;
/** The retry window (may be negative). */
export const retryWindow = (currentLeadEstimateMs: Millis, attemptBudgetMs: Millis, safetyMarginMs: Millis): Millis =>
  run("retry_window", [enc(currentLeadEstimateMs), enc(attemptBudgetMs), enc(safetyMarginMs)]) as Millis;
/** The delay before a transient retry. */
export const transientRetryDelay = (currentLeadEstimateMs: Millis, retryWindowMs: Millis): Millis =>
  run("transient_retry_delay", [enc(currentLeadEstimateMs), enc(retryWindowMs)]) as Millis;
/** A `Retry-After` header value parsed as the spec reads it. */
export const parseRetryAfter = (raw: string | null): RetryAfter => run("parse_retry_after", [raw]) as RetryAfter;
/** The delay of a `Retry-After` header in milliseconds, or null. */
export const retryAfterMs = (raw: string | null): Millis | null => parseRetryAfter(raw).ms;
/** Whether an error code stops the heartbeat for good. */
export const isPermanentStopCode = (code: string): boolean => run("is_permanent_stop_code", [code]) as boolean;
/** Every permanent stop code. */
export const permanentStopCodes = (): string[] => run("permanent_stop_codes", []) as string[];
/** The fallback regime of a grant. */
export const classifyGrant = (grantMs: number | bigint, elapsedMs: Millis, requestedTtlMs: number | bigint): string =>
  run("classify_grant", [enc(grantMs), enc(elapsedMs), enc(requestedTtlMs)]) as string;
/** The fallback cadence of a regime. */
export const cadence = (regime: string, lastGrantMs: number | bigint, requestedTtlMs: number | bigint): Millis =>
  run("cadence", [regime, enc(lastGrantMs), enc(requestedTtlMs)]) as Millis;
/** The fallback delay with the skip rule. */
export const delayWithSkips = (leadMinNowMs: number | bigint, lastGrantMs: number | bigint, cadenceMs: Millis): Millis =>
  run("delay_with_skips", [enc(leadMinNowMs), enc(lastGrantMs), enc(cadenceMs)]) as Millis;
/** The enforced extend timeout (derived from a short lease when the configured one leaves no cadence). */
export const extendTimeout = (leadFloorMs: Millis, maxRttMs: Millis | null, configuredTimeoutMs: Millis): ExtendTimeout =>
  run("extend_timeout", [enc(leadFloorMs), enc(maxRttMs), enc(configuredTimeoutMs)]) as ExtendTimeout;
/** The least lead floor a timeout can keep. */
export const minLeadFloor = (timeoutMs: Millis, maxRttMs: Millis | null): Millis => run("min_lead_floor", [enc(timeoutMs), enc(maxRttMs)]) as Millis;
/** When an attempt is cut off. */
export const attemptCutoff = (timeoutMs: Millis): Millis => run("attempt_cutoff", [enc(timeoutMs)]) as Millis;

/** Core's primary planner (the server reports `remaining_ttl_ms`). */
export class PrimaryPlanner {
  private readonly native: NativePrimaryPlanner;
  constructor(requestTimeoutMs: Millis, deriveTimeout = false) {
    this.native = call(() => new native.NativePrimaryPlanner(JSON.stringify([enc(requestTimeoutMs), deriveTimeout])));
  }
  private run(method: string, args: unknown[]): unknown {
    return dec(JSON.parse(call(() => this.native.call(method, JSON.stringify(args)))));
  }
  /** The timeout of the next attempt. */
  get attemptTimeoutMs(): Millis {
    return this.run("attempt_timeout_ms", []) as Millis;
  }
  /** The largest round trip seen. */
  get maxRttMs(): Millis | null {
    return this.run("max_rtt_ms", []) as Millis | null;
  }
  /** After a schema-valid response. */
  onSuccess(receivedUs: number | bigint, remainingTtlMs: Millis, rttMs: Millis | null): Decision {
    return decision(this.run("on_success", [enc(receivedUs), enc(remainingTtlMs), enc(rttMs)]));
  }
  /** After a failed extend. */
  onFailure(nowUs: number | bigint, failure: Failure): Decision {
    return decision(this.run("on_failure", [enc(nowUs), ...failureArgs(failure)]));
  }
  /** Records a round trip. */
  observeRtt(rttMs: Millis): void {
    this.run("observe_rtt", [enc(rttMs)]);
  }
  /** The failure arithmetic now, if any response was seen. */
  failureMath(nowUs: number | bigint): FailureMath | null {
    return this.run("failure_math", [enc(nowUs)]) as FailureMath | null;
  }
}

/** Core's fallback planner (no `remaining_ttl_ms`: works from `expires_at_ms`). */
export class FallbackPlanner {
  private readonly native: NativeFallbackPlanner;
  constructor(requestedTtlMs: number | bigint, reserveReceivedUs: number | bigint, expiresAtMs: number | bigint) {
    this.native = call(() => new native.NativeFallbackPlanner(JSON.stringify([enc(requestedTtlMs), enc(reserveReceivedUs), enc(expiresAtMs)])));
  }
  private run(method: string, args: unknown[]): unknown {
    return dec(JSON.parse(call(() => this.native.call(method, JSON.stringify(args)))));
  }
  /** The first beat (primed or not). */
  firstBeat(prime = true): Decision {
    return decision(this.run("first_beat", [prime]));
  }
  /** After a schema-valid response. */
  onSuccess(receivedUs: number | bigint, expiresAtMs: number | bigint): Decision {
    return decision(this.run("on_success", [enc(receivedUs), enc(expiresAtMs)]));
  }
  /** After a failed extend. */
  onFailure(nowUs: number | bigint, failure: Failure): Decision {
    return decision(this.run("on_failure", [enc(nowUs), ...failureArgs(failure)]));
  }
  /** The current regime name. */
  get regime(): string {
    return this.run("regime", []) as string;
  }
  /** The last grant. */
  get lastGrantMs(): number | bigint | null {
    return this.run("last_grant_ms", []) as number | bigint | null;
  }
  /** The least lead now. */
  leadMinMs(nowUs: number | bigint): number | bigint {
    return this.run("lead_min_ms", [enc(nowUs)]) as number | bigint;
  }
}
