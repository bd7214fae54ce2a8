/**
 * The guarded lifecycle's results: {@link GuardedReservation} (a running reservation and,
 * after it finished, how it was settled), {@link Settlement}, {@link DrainReport},
 * {@link LeaseInfo}, and {@link currentReservation} (AsyncLocalStorage).
 * @module
 */
import { AsyncLocalStorage } from "node:async_hooks";

import { CallNotSentError, HeartbeatLapsedError, InvalidActualError, InvalidArgumentError, MissingActualError, type NativeFields, awaitNative, call, fromFields } from "./errors";
import { parseJson, stringifyJson } from "./json";
import type { Amount, Caps, Decision, Int64, StandardMetrics } from "./models";
import { fromWire } from "./wire";
import type { NativeActive } from "./native";
import { type Api, type CapsPlan, capsPlanOf } from "./pricing";

/** What every {@link Settlement} carries, whatever its status. */
export interface SettlementFields {
  reservationId: string;
  /** Why it is pending or rejected (null when settled). */
  reason: string | null;
  /** Core's error kind of the last failed attempt or of the rejection, if any. */
  errorKind: string | null;
  /** Whether a pending settlement is in the journal (null unless pending). */
  journaled: boolean | null;
  /**
   * Why a pending settlement is not journaled although journaling is on (the failed journal
   * operation and its OS error, e.g. a full disk); null otherwise. Such a settlement is kept
   * in memory and retried by the replay, `flush()` and `drain()`, but is lost if the process
   * ends first (`DrainReport.unjournaled`).
   */
  journalError: string | null;
  /** The earliest replay of a pending settlement (epoch ms; null when none is set). */
  notBeforeMs: Int64 | null;
  /** The HTTP status of a rejection. */
  httpStatus: number | null;
  /** The server's error code of a rejection. */
  errorCode: string | null;
  /** The server's response as received (wire keys; null unless settled). */
  body: Record<string, unknown> | null;
}

/** A commit the server applied: `charged` is what it applied. */
export interface SettlementCommitted extends SettlementFields {
  status: "committed";
  charged: Amount;
  settled: true;
}

/**
 * The reservation had expired and an event recorded the spend: `charged` is what the
 * event applied, when the server said (its `charged` is optional in the spec).
 */
export interface SettlementRecovered extends SettlementFields {
  status: "recovered_via_event";
  charged: Amount | null;
  settled: true;
}

/**
 * Not settled yet: when `journaled`, the background replay, `flush()` and `drain()` retry
 * it with the same key. Nothing was applied, so `charged` is null.
 */
export interface SettlementPending extends SettlementFields {
  status: "pending";
  charged: null;
  settled: false;
}

/** A terminal rejection (`errorKind`, `httpStatus`, `errorCode` say why); nothing was applied. */
export interface SettlementRejected extends SettlementFields {
  status: "rejected";
  charged: null;
  settled: false;
}

/**
 * How a settlement ended (core's `SettleOutcome`), discriminated by `status` (or `settled`):
 * `charged`, the amount applied to the budget, exists on a committed settlement.
 */
export type Settlement = SettlementCommitted | SettlementRecovered | SettlementPending | SettlementRejected;

/** A settlement still pending in the journal. */
export interface PendingSettlement {
  reservationId: string;
  mode: string;
  /** When the record was last written (epoch ms), null when the record does not say. */
  recordedAtMs: Int64 | null;
  notBeforeMs: Int64 | null;
  file: string;
}

/** What a flush, drain or close did. */
export interface DrainReport {
  outcomes: Settlement[];
  remaining: PendingSettlement[];
  quarantined: string[];
  /** Reservations still pending that the journal could not take: only in this process's memory. */
  unjournaled: string[];
  /** How many outcomes settled. */
  settled: number;
  /** Nothing remains (journaled or not) and nothing was quarantined. */
  clean: boolean;
}

/** What the heartbeat did. */
export interface LeaseInfo {
  extensions: number;
  failures: number;
  /** `primary` or `fallback`. */
  path: string;
  stoppedEarly: boolean;
  /** `finished` (stopped with its work) or `stopped` (by the planner). */
  end: string;
  stopReason: string | null;
  stopDetail: Record<string, unknown> | null;
  lastError: [string, string] | null;
}

/** How a guarded reservation ended: core's `Finished` kinds. */
export type OutcomeKind = "settled" | "work_failed" | "missing_actual" | "invalid_actual" | "released" | "heartbeat_lapsed";

/**
 * The server's decision on a guarded reservation: `ALLOW`, or `ALLOW_WITH_CAPS` (see
 * {@link GuardedReservation.caps}); a denial never makes one.
 */
export type GuardedDecision = typeof Decision.ALLOW | typeof Decision.ALLOW_WITH_CAPS;

/** How a guarded reservation ended (core's `Finished`), as `finish()` and `fail()` resolve. */
export interface Outcome {
  /**
   * `settled` (the work succeeded, its actual went to settlement), `work_failed` (the known
   * actual was settled, else the reservation released), `missing_actual` / `invalid_actual`
   * (nothing was committed; the reservation released), `released` (ended early by
   * {@link GuardedReservation.release}) or `heartbeat_lapsed` (settled, the lease lost under
   * `fail_on_finalize`).
   */
  kind: OutcomeKind;
  reservationId: string;
  /** The actual amount that went to settlement (`settled`), or was refused (`invalid_actual`); else null. */
  actual: Int64 | null;
  /** The settlement; null when none was attempted (a release, or no usable actual). */
  settlement: Settlement | null;
  /** What the heartbeat did (null when disabled, or not reported for this kind). */
  lease: LeaseInfo | null;
  /**
   * True when the reservation was released (the estimate given back): failed work without
   * an actual, a missing or negative actual, or {@link GuardedReservation.release}.
   */
  released: boolean;
  /** `[errorKind, message]` when that release failed (the estimate stays held until the lease expires). */
  releaseError: [string, string] | null;
}

/** The outcome of {@link GuardedReservation.release}: nothing was committed. */
export interface ReleasedOutcome extends Outcome {
  kind: "released";
  actual: null;
  settlement: null;
}

/**
 * The outcome of work that succeeded and was settled: what {@link GuardedReservation.finish}
 * resolves with and what `client.guardedWithOutcome` hands back. A settlement always exists
 * here (committed, recovered via an event, pending in the journal, or rejected).
 */
export interface SettledOutcome extends Outcome {
  kind: "settled";
  actual: Int64;
  settlement: Settlement;
}

type Raw = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

/** @internal */
export function settlementOf(reservationId: string, d: Raw): Settlement {
  const c = d.charged as Raw | null | undefined;
  // One object for every status: the members a status has no value for are null.
  return {
    status: d.status,
    reservationId,
    charged: c ? { unit: c.unit, amount: c.amount } : null,
    reason: d.reason ?? null,
    errorKind: d.error_kind ?? null,
    journaled: d.journaled ?? null,
    journalError: d.journal_error ?? null,
    notBeforeMs: d.not_before_ms ?? null,
    httpStatus: d.http_status ?? null,
    errorCode: d.error_code ?? null,
    body: d.body ?? null,
    settled: d.status === "committed" || d.status === "recovered_via_event",
  } as Settlement;
}

/** @internal */
export function drainReportOf(text: string): DrainReport {
  const d = parseJson(text) as Raw;
  const outcomes = (d.outcomes as Raw[]).map((o) => settlementOf(o.reservation_id, o.settlement));
  const remaining = (d.remaining as Raw[]).map((p) => ({
    reservationId: p.reservation_id,
    mode: p.mode,
    recordedAtMs: p.recorded_at_ms ?? null,
    notBeforeMs: p.not_before_ms ?? null,
    file: p.file,
  }));
  const quarantined = d.quarantined as string[];
  const unjournaled = d.unjournaled as string[];
  return {
    outcomes,
    remaining,
    quarantined,
    unjournaled,
    settled: outcomes.filter((o) => o.settled).length,
    clean: remaining.length === 0 && quarantined.length === 0 && unjournaled.length === 0,
  };
}

/** The report of a close that had nothing to drain: the client never started its lifecycle. @internal */
export function emptyDrainReport(): DrainReport {
  return { outcomes: [], remaining: [], quarantined: [], unjournaled: [], settled: 0, clean: true };
}

function leaseOf(d: Raw | null | undefined): LeaseInfo | null {
  if (!d) return null;
  return {
    extensions: d.extensions,
    failures: d.failures,
    path: d.path,
    stoppedEarly: d.stopped_early,
    end: d.end,
    stopReason: d.stop_reason ?? null,
    stopDetail: d.stop_detail ?? null,
    lastError: d.last_error ?? null,
  };
}

const CURRENT = new AsyncLocalStorage<GuardedReservation>();

/** How often a `cancel`-policy reservation checks core's cancellation flag. */
const CANCEL_POLL_MS = 50;

/** The reason of `r.signal` when the heartbeat lost the lease under the `cancel` policy. */
export class CancelledByHeartbeatError extends Error {
  constructor(readonly reservationId: string) {
    super(`the heartbeat of reservation ${reservationId} stopped: the work is cancelled (cancel policy)`);
    this.name = "CancelledByHeartbeatError";
  }
}

/**
 * The guarded reservation whose callback is running in this async context
 * (`client.guarded` / `client.wrap`), or null. Nested guards see the innermost; concurrent
 * tasks each see their own. Settlement never depends on it.
 */
export function currentReservation(): GuardedReservation | null {
  let r = CURRENT.getStore() ?? null;
  // A task started inside a guard may outlive it: skip finished ones.
  while (r !== null && r.finished) r = r.outer;
  return r;
}

/** Runs `fn` with `r` as the current reservation. @internal */
export function runWith<T>(r: GuardedReservation, fn: () => T): T {
  return CURRENT.run(r, fn);
}

/** @internal */
export function currentStore(): GuardedReservation | null {
  return currentReservation();
}

/** The smallest and largest amounts a settlement carries (int64, the spec's amounts). */
const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;

/**
 * An actual amount as the native module takes it, exactly: a safe integer as a number, a
 * bigint beyond ±(2^53 - 1) as its decimal text (a number would round it).
 */
function exactAmount(amount: number | bigint | Amount, unit: string): number | string {
  let n: number | bigint;
  if (typeof amount === "object" && amount !== null) {
    if (amount.unit !== unit) {
      throw new InvalidArgumentError(`actual unit ${amount.unit} differs from the estimate's ${unit}`);
    }
    n = amount.amount;
  } else {
    n = amount;
  }
  if (typeof n === "bigint") {
    if (n > INT64_MAX || n < INT64_MIN) {
      throw new InvalidArgumentError(`an actual amount must be from -2^63 to 2^63 - 1, not ${n}`);
    }
    return n >= BigInt(Number.MIN_SAFE_INTEGER) && n <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(n) : n.toString();
  }
  if (typeof n !== "number" || !Number.isSafeInteger(n)) {
    throw new InvalidArgumentError("an actual amount must be a safe integer, a bigint or an Amount");
  }
  return n;
}

/**
 * A reservation whose work is running. Report usage with {@link setActual} or {@link add};
 * after it finished, {@link outcome}, {@link settlement} and {@link lease} tell what
 * happened. With `await using` it settles when the scope ends.
 */
export class GuardedReservation implements AsyncDisposable {
  /** How it ended: `settled`, `work_failed`, `missing_actual`, `invalid_actual`, `released` or `heartbeat_lapsed` (null while running). */
  outcome: OutcomeKind | null = null;
  /** The settlement (null while running, after a release, or when nothing was sent). */
  settlement: Settlement | null = null;
  /** What the heartbeat did (null while running or when disabled). */
  lease: LeaseInfo | null = null;
  /** `[errorKind, message]` when the release that ended it failed. */
  releaseError: [string, string] | null = null;
  /** Whether it ended by giving the estimate back (see {@link Outcome.released}). */
  released = false;
  private capsRead: Caps | null | undefined = undefined;
  private finishing: Promise<Outcome> | null = null;
  private readonly abort = new AbortController();
  private readonly unlink: () => void = () => undefined;
  private watch: NodeJS.Timeout | null = null;

  /** @internal */
  constructor(
    private readonly native: NativeActive,
    /** The unit of the estimate; actual amounts are in it. */
    readonly unit: string,
    /** The reservation current when this one started. @internal */
    readonly outer: GuardedReservation | null,
    signal?: AbortSignal,
    watchCancel = false,
  ) {
    if (watchCancel) {
      // Under the `cancel` policy a lost lease sets core's cancellation flag; polled here
      // (unref'd: it never keeps the process alive) so `signal` aborts with it.
      this.watch = setInterval(() => {
        if (this.native.cancelled) {
          this.stopWatch();
          this.abort.abort(new CancelledByHeartbeatError(this.reservationId));
        }
      }, CANCEL_POLL_MS);
      this.watch.unref();
    }
    if (signal) {
      const forward = (): void => this.abort.abort(signal.reason);
      if (signal.aborted) forward();
      else {
        signal.addEventListener("abort", forward, { once: true });
        // Dropped when the reservation ends, so a long-lived signal holds no finished one.
        this.unlink = () => signal.removeEventListener("abort", forward);
      }
    }
  }

  /**
   * Aborts when the `signal` given to `reserve`/`guarded` aborts while the work runs, or
   * (under the `cancel` heartbeat policy) when the lease is lost, with a
   * {@link CancelledByHeartbeatError}: long work should watch it (pass it to `fetch`, check
   * `aborted`). The settlement that follows is never aborted.
   */
  get signal(): AbortSignal {
    return this.abort.signal;
  }

  /** The server's reservation id. */
  get reservationId(): string {
    return this.native.reservationId;
  }

  /** The actual amount reported so far, if any. */
  get actual(): number | null {
    return this.native.actual();
  }

  /** True once the heartbeat stopped abnormally under the `cancel` policy: stop the work. */
  get cancelled(): boolean {
    return this.native.cancelled;
  }

  /** True once finished. */
  get finished(): boolean {
    return this.native.finished;
  }

  /** The server's decision: `ALLOW`, or `ALLOW_WITH_CAPS` when {@link caps} limit the work. */
  get decision(): GuardedDecision {
    return this.native.decision as GuardedDecision;
  }

  /**
   * The caps under `ALLOW_WITH_CAPS` (camelCase, as every result of this package: e.g.
   * `maxTokens`), null under `ALLOW`. The work should honour them, e.g. shrink the model
   * call's `max_tokens` to `caps.maxTokens`.
   */
  get caps(): Caps | null {
    if (this.capsRead === undefined) {
      const text = this.native.capsJson;
      this.capsRead = text === null || text === undefined ? null : fromWire<Caps>(parseJson(text));
    }
    return this.capsRead;
  }

  /**
   * The caps rewrite of a provider request under this reservation's caps (core's
   * `plan_caps`, `cycles-sdk/pricing`'s {@link CapsPlan}): `api` is `chat_completions`,
   * `responses` or `messages`, `request` the provider's JSON body. Set each member of
   * `plan.set` on the request and remove each one in `plan.unset` before sending it; do not
   * send it when `plan.send` is false (a cap of 0). Under `ALLOW` the plan changes nothing. A
   * rewrite (`plan.changed`) is reported as the `caps_applied` event (docs/events.md), as in
   * every language. Throws `InvalidArgumentError` for a request core cannot read (a bound
   * that is not a count) or once the reservation has finished.
   *
   * @example
   * ```ts
   * const plan = r.planCaps("chat_completions", body);
   * if (!plan.send) { await r.release("capped to 0 tokens"); return; }
   * const sent: Record<string, unknown> = { ...body, ...plan.set };
   * for (const k of plan.unset) delete sent[k];
   * ```
   */
  planCaps(api: Api, request: object): CapsPlan {
    return capsPlanOf(parseJson(call(() => this.native.planCaps(api, stringifyJson(request)))));
  }

  /**
   * Sets the actual amount (in the estimate's unit), replacing anything before. Throws
   * `InvalidArgumentError` once the reservation has finished: the amount would not be settled.
   */
  setActual(amount: number | bigint | Amount): void {
    const n = exactAmount(amount, this.unit);
    call(() => this.native.setActual(n));
  }

  /**
   * Adds to the actual amount (streaming); whatever is known when it ends is settled. Throws
   * `InvalidArgumentError` once the reservation has finished.
   */
  add(amount: number | bigint | Amount): void {
    const n = exactAmount(amount, this.unit);
    call(() => this.native.add(n));
  }

  /** Metrics sent with the commit (camelCase standard metrics; `custom` kept as given). */
  setMetrics(metrics: StandardMetrics): void {
    const m = {
      tokens_input: metrics.tokensInput,
      tokens_output: metrics.tokensOutput,
      latency_ms: metrics.latencyMs,
      model_version: metrics.modelVersion,
      custom: metrics.custom,
    };
    call(() => this.native.setMetrics(stringifyJson(m)));
  }

  /**
   * Commit-time metadata (a JSON-serialisable object), sent exactly as `JSON.stringify`
   * writes it, except that a `bigint` is written as the exact JSON integer.
   */
  setMetadata(metadata: Record<string, unknown>): void {
    if (metadata === null || typeof metadata !== "object" || Array.isArray(metadata)) {
      throw new InvalidArgumentError("metadata must be an object");
    }
    call(() => this.native.setMetadata(stringifyJson(metadata)));
  }

  /**
   * Commit-time metadata as JSON text (an object), kept exactly as written: for what a
   * JavaScript object cannot hold, such as integers beyond 2^53 − 1. Text that is not a JSON
   * object throws {@link InvalidArgumentError}.
   */
  setMetadataJson(json: string): void {
    if (typeof json !== "string") throw new InvalidArgumentError("metadata JSON must be a string");
    call(() => this.native.setMetadata(json));
  }

  /**
   * Ends the work as succeeded: settles the known actual (journaled first) and resolves with
   * the {@link SettledOutcome}, whose `settlement` always exists. Throws
   * {@link MissingActualError} when no actual was reported, {@link InvalidActualError} for a
   * negative one, {@link HeartbeatLapsedError} under `fail_on_finalize`, and
   * {@link InvalidArgumentError} when the reservation already ended through {@link fail}
   * (or `await using` without an actual). Idempotent.
   */
  async finish(): Promise<SettledOutcome> {
    const o = await this.end(true);
    if (o.kind !== "settled") {
      throw new InvalidArgumentError(`reservation ${o.reservationId} already ended as ${o.kind}: finish() has nothing left to settle`);
    }
    return o as SettledOutcome;
  }

  /**
   * Ends the work as failed: the known actual is still settled, otherwise the reservation
   * is released; resolves with the {@link Outcome}. Never throws for the work's sake.
   * Idempotent (after {@link finish}, the same result).
   */
  async fail(): Promise<Outcome> {
    return this.end(false);
  }

  /**
   * `await using`: a disposer cannot see whether its scope threw, so a known actual is
   * settled and a reservation without one is released (call {@link finish} to get
   * {@link MissingActualError} instead).
   */
  async [Symbol.asyncDispose](): Promise<void> {
    if (this.finishing === null) await this.end(this.actual !== null);
    else await this.finishing.catch(() => undefined);
  }

  /**
   * Ends the action early and gives the estimate back (`{key}:release` with `reason`);
   * resolves with the {@link ReleasedOutcome} (`released` false and `releaseError` set when
   * the release itself failed). Rejects with {@link InvalidArgumentError}, the action going
   * on, once usage was reported (a release would drop a known actual: end it normally to
   * commit it), or when it already ended. After a release, `finish()` rejects with
   * `InvalidArgumentError`, `fail()` resolves with this outcome and `await using` sends nothing more.
   */
  async release(reason?: string): Promise<ReleasedOutcome> {
    if (reason !== undefined && typeof reason !== "string") throw new InvalidArgumentError("a release reason must be a string");
    // Refused here (synchronously in the native call) leaves the action running.
    const pending = call(() => this.native.release(reason));
    this.finishing = this.ended(pending, false);
    return (await this.finishing) as ReleasedOutcome;
  }

  /**
   * Does not make the provider call this reservation guards, and says so: releases it
   * (`{key}:release` with core's reason) and resolves with the {@link CallNotSentError} to
   * throw (its message is core's text; `released` and `releaseError` say how the release
   * went). `why` is your own reason (a library that cannot carry the capped bound); without
   * one it is why the latest {@link planCaps} said `send` false, and it rejects with
   * `InvalidArgumentError` when no plan did. Refused like {@link release} once usage was
   * reported. Afterwards `fail()` resolves with the released outcome.
   *
   * @example
   * ```ts
   * const plan = r.planCaps("messages", body);
   * if (!plan.send) throw Object.assign(await r.refuseCall(), { plan });
   * ```
   */
  async refuseCall(why?: string): Promise<CallNotSentError> {
    if (why !== undefined && typeof why !== "string") throw new InvalidArgumentError("a refusal reason must be a string");
    const pending = call(() => this.native.refuseCall(why));
    let text = "";
    this.finishing = this.ended(
      pending.then((t) => (text = t)),
      false,
    );
    await this.finishing;
    const e = fromFields((parseJson(text) as { error: NativeFields }).error);
    if (!(e instanceof CallNotSentError)) throw e; // the bridge's variant has no class: a bug
    e.reservationId = this.reservationId;
    e.released = this.released;
    e.releaseError = this.releaseError;
    return e;
  }

  /** @internal */
  end(succeeded: boolean): Promise<Outcome> {
    if (this.finishing === null) this.finishing = this.settle(succeeded);
    return this.finishing;
  }

  private stopWatch(): void {
    if (this.watch !== null) clearInterval(this.watch);
    this.watch = null;
  }

  private async settle(succeeded: boolean): Promise<Outcome> {
    return this.ended(call(() => this.native.finish(succeeded)), succeeded);
  }

  private async ended(pending: Promise<string>, succeeded: boolean): Promise<Outcome> {
    this.unlink();
    this.stopWatch();
    const text = await awaitNative(pending);
    return this.apply(parseJson(text) as Raw, succeeded);
  }

  private apply(d: Raw, succeeded: boolean): Outcome {
    const rid = d.reservation_id as string;
    this.outcome = d.outcome;
    this.settlement = d.settlement ? settlementOf(rid, d.settlement) : null;
    this.lease = leaseOf(d.lease);
    const rel = d.release_error as Raw | null | undefined;
    this.releaseError = rel ? [rel.error_kind, rel.message] : null;
    this.released = d.released === true;
    const outcome: Outcome = {
      kind: d.outcome,
      reservationId: rid,
      actual: d.actual ?? null,
      settlement: this.settlement,
      lease: this.lease,
      released: this.released,
      releaseError: this.releaseError,
    };
    if (!succeeded) return outcome;
    if (this.outcome === "missing_actual" || this.outcome === "invalid_actual") {
      // Core's message, as every language raises it.
      const e = this.outcome === "missing_actual" ? new MissingActualError(d.message as string) : new InvalidActualError(d.message as string);
      e.reservationId = rid;
      e.released = this.released;
      e.releaseError = this.releaseError;
      throw e;
    }
    if (this.outcome === "heartbeat_lapsed") {
      const e = new HeartbeatLapsedError((d.message as string) ?? "the heartbeat lapsed");
      e.reservationId = rid;
      e.reason = d.reason ?? null;
      e.settlement = this.settlement;
      throw e;
    }
    return outcome;
  }
}
