/**
 * {@link Client}: every runtime operation of the Cycles protocol, and the guarded
 * lifecycle (reserve, heartbeat, settle) on core's runtime.
 * @module
 */
import { InvalidArgumentError, awaitNative, call } from "./errors";
import { parseJson, stringifyJson } from "./json";
import {
  type DrainReport,
  GuardedReservation,
  type Outcome,
  type SettledOutcome,
  currentReservation,
  drainReportOf,
  emptyDrainReport,
  runWith,
} from "./lifecycle";
import type * as M from "./models";
import { fromWire, toWire } from "./wire";
import { native, type NativeClient, type NativeLifecycle } from "./native";
import { eventListenerOf, optionsJson, requiredMs } from "./options";

/** One event of core's stable schema (docs/events.md), keys in camelCase. */
export interface CyclesEvent {
  /** `reservation_created`, `heartbeat_extended`, `settlement_settled`, ... */
  kind: string;
  /** `debug`, `info`, `warning` or `error`. */
  level: string;
  message: string;
  reservationId?: string;
  [field: string]: unknown;
}

/** A listener of {@link CyclesEvent}s. It never keeps the process alive. */
export type EventListener = (event: CyclesEvent) => void;

/** Settings of a {@link Client}; unset ones keep core's defaults. */
export interface ClientOptions {
  /** Server root (without `/v1`). */
  baseUrl: string;
  /** API key: sent as `X-Cycles-API-Key`, redacted from everything the server sends back. */
  apiKey: string;
  /** Default tenant of guarded reservations (their subject when none is given). */
  tenant?: string;
  /**
   * Unit of an estimate given as a bare number without `unit` (default `USD_MICROCENTS`);
   * an unknown unit is a `ConfigError`. `Client.fromEnv` reads `CYCLES_UNIT`.
   */
  defaultUnit?: string;
  /** Per-attempt request timeout. */
  requestTimeoutMs?: number;
  /** Connect timeout. */
  connectTimeoutMs?: number;
  /** Directory of the durable settlement journal. */
  journalDir?: string;
  /** Whether settlements are journaled before they are sent (default true). */
  journalEnabled?: boolean;
  /**
   * Keep the settlement journal in Redis instead of `journalDir` (`redis://host:6379/0`,
   * `CYCLES_JOURNAL_URL`), so another machine's client drains what this one could not settle
   * (docs/journal.md, "Stores"). A malformed URL is a `ConfigError` when the client is made;
   * a Redis that cannot be reached, or does not make writes as durable as the URL asks, is one
   * when the settlement engine starts (the first guarded action, `flush` or `drain`).
   */
  journalUrl?: string;
  /** Bound on concurrent requests. */
  maxConcurrentRequests?: number;
  /**
   * Bound on one response body in bytes (default 1 MiB, `CYCLES_MAX_RESPONSE_BYTES`): a longer
   * body is not read further and the call fails as a response that is not the operation's
   * (ambiguous for a write, so a settlement stays journaled and is retried).
   */
  maxResponseBytes?: number;
  /** Settlement attempts before a settlement stays pending. */
  maxAttempts?: number;
  /** How often the background replay retries pending settlements. */
  replayIntervalMs?: number;
  /** Bound on the drain of `close()` and of the exit hook (default 5000). */
  closeTimeoutMs?: number;
  /** A listener of every event (same as `client.on("event", listener)`). */
  onEvent?: EventListener;
}

/** Options of {@link Client.fromEnv}: the `CYCLES_*` variables give the rest, and these apply over them. */
export type FromEnvOptions = Omit<ClientOptions, "baseUrl" | "apiKey">;

/** What {@link Client.reserve} takes. */
export interface ReserveOptions {
  /** The estimate: an amount in `unit` (default: the client's `defaultUnit`), or an {@link M.Amount}. */
  estimate: number | bigint | M.Amount;
  /** What is being done. */
  action: M.Action;
  /** Unit of a numeric estimate. */
  unit?: string;
  /** Who spends (default: the client's tenant). */
  subject?: M.Subject;
  /** Idempotency key of the reservation (default: a fresh `cycles-<uuid>`); settlement keys derive from it. */
  idempotencyKey?: string;
  /** Lease length; the heartbeat extends it by this while the work runs (default 60000). */
  ttlMs?: number;
  gracePeriodMs?: number;
  overagePolicy?: string;
  metadata?: Record<string, unknown>;
  /** Keep the lease alive while the work runs (default true). */
  heartbeat?: boolean;
  /** What a lost heartbeat does: `warn` (default), `fail_on_finalize` or `cancel`. */
  heartbeatPolicy?: "warn" | "fail_on_finalize" | "cancel";
  /**
   * Aborts the reservation: already aborted, nothing is sent; aborted while reserving, the
   * reservation is released as soon as it exists; aborted while the work runs, the work's
   * `r.signal` aborts. A settlement is never aborted.
   */
  signal?: AbortSignal;
}

/** What {@link Client.guarded} takes: {@link ReserveOptions} plus the actual. */
export interface GuardOptions<T> extends ReserveOptions {
  /**
   * The amount to settle when the work returns: a value, or a function of its result.
   * Omitted: the work reports it itself (`r.setActual(...)` / `currentReservation()`).
   */
  actual?: number | bigint | M.Amount | ((result: T) => number | bigint | M.Amount);
}

/**
 * What {@link Client.guardedWithOutcome} resolves with: the work's value and how its
 * reservation ended (as the JVM's `Guarded<T>` record). The outcome is always `settled` here,
 * so its `settlement` exists; every other ending rejects instead.
 */
export interface Guarded<T> {
  /** What the work returned. */
  value: T;
  /** How the reservation ended. */
  outcome: SettledOutcome;
}

/** What {@link Client.wrap} takes: the estimate may depend on the call's arguments. */
export interface WrapOptions<A extends unknown[], T> extends Omit<GuardOptions<T>, "estimate"> {
  estimate: number | bigint | M.Amount | ((...args: A) => number | bigint | M.Amount);
}

/** How long close() waits for the last events after the drain. */
const EVENTS_END_WAIT_MS = 1000;

const POLICIES = new Set(["warn", "fail_on_finalize", "cancel"]);

// Clients with a lifecycle, closed within their bound when the event loop empties.
const OPEN = new Set<Client>();
let hooked = false;

function hookExit(): void {
  if (hooked) return;
  hooked = true;
  // beforeExit runs when the loop is empty (not on process.exit() or signals): a bounded
  // courtesy drain; the journal keeps whatever it could not settle for the next process.
  process.on("beforeExit", () => {
    for (const c of OPEN) void c.close().catch(() => undefined);
  });
}

const INT64_MAX = (1n << 63n) - 1n;

/** The estimate as the spec carries it: an Amount, or a bare integer the bridge gives its unit. */
function checkedEstimate(v: number | bigint | M.Amount): number | bigint | M.Amount {
  if (typeof v === "object" && v !== null) return v;
  if (typeof v === "bigint") {
    // An estimate is an int64 on the wire; the spec JSON carries a bigint exactly.
    if (v > INT64_MAX || v < 0n) throw new InvalidArgumentError(`an estimate bigint must be from 0 to 2^63 - 1, not ${v}`);
    return v;
  }
  if (typeof v !== "number" || !Number.isSafeInteger(v)) {
    throw new InvalidArgumentError("estimate must be a safe integer, a bigint or an Amount");
  }
  return v;
}

/**
 * A client of one Cycles server. Every operation returns a promise; the guarded lifecycle
 * ({@link reserve}, {@link guarded}, {@link wrap}) reserves, keeps the lease alive on
 * core's runtime, and settles through the durable journal.
 *
 * Nothing it runs in the background keeps the process alive; {@link close} (or the exit
 * hook, within `closeTimeoutMs`) drains pending settlements.
 */
export class Client implements AsyncDisposable {
  private readonly native: NativeClient;
  private lc: NativeLifecycle | null = null;
  private readonly listeners = new Set<EventListener>();
  private readonly closeTimeoutMs: number;
  private eventsEnded: Promise<void> | null = null;
  private endEvents: (() => void) | null = null;
  private closing: Promise<DrainReport> | null = null;
  /** The client's tenant (fixed): read across the native boundary once, not per reservation. */
  private readonly defaultTenant: string | null;
  /** The unit of bare estimates (fixed), read once. */
  private readonly unitOfBare: string;

  /** A client of explicit settings. */
  constructor(options: ClientOptions);
  /** @internal */
  constructor(options: ClientOptions, nativeClient: NativeClient);
  constructor(options: ClientOptions, nativeClient?: NativeClient) {
    const onEvent = eventListenerOf<EventListener>(options);
    this.native = nativeClient ?? call(() => new native.NativeClient(optionsJson(options)));
    this.defaultTenant = this.native.tenant;
    this.unitOfBare = this.native.defaultUnit;
    this.closeTimeoutMs = this.native.closeTimeoutMs;
    if (onEvent) this.listeners.add(onEvent);
  }

  /**
   * A client of the `CYCLES_*` environment variables (`CYCLES_BASE_URL`, `CYCLES_API_KEY`,
   * `CYCLES_TENANT`, `CYCLES_UNIT`, ...); the options given here apply over them.
   */
  static fromEnv(options: FromEnvOptions = {}): Client {
    eventListenerOf<EventListener>(options);
    const n = call(() => native.NativeClient.fromEnv(optionsJson(options)));
    return new Client({ ...options, baseUrl: n.baseUrl, apiKey: "" }, n);
  }

  /** Server root. */
  get baseUrl(): string {
    return this.native.baseUrl;
  }
  /** Default tenant. */
  get tenant(): string | null {
    return this.defaultTenant;
  }
  /** The unit of an estimate given as a bare number without `unit` (`USD_MICROCENTS` unless configured). */
  get defaultUnit(): string {
    return this.unitOfBare;
  }
  /** Journal directory in use. */
  get journalDir(): string {
    return this.native.journalDir;
  }
  /** Whether settlements are journaled. */
  get journalEnabled(): boolean {
    return this.native.journalEnabled;
  }
  /** Per-attempt request timeout. */
  get requestTimeoutMs(): number {
    return this.native.requestTimeoutMs;
  }
  /** Whether {@link close} was called. */
  get closed(): boolean {
    return this.native.closed;
  }

  /** Adds an event listener. Listener errors are reported as process warnings. */
  on(event: "event", listener: EventListener): this {
    if (event !== "event") throw new InvalidArgumentError(`unknown event ${String(event)}`);
    if (typeof listener !== "function") throw new InvalidArgumentError("an event listener must be a function");
    this.listeners.add(listener);
    this.lc?.setEventsWanted(true);
    return this;
  }

  /** Removes an event listener. */
  off(event: "event", listener: EventListener): this {
    if (event === "event") this.listeners.delete(listener);
    // Nobody listens any more: core stops building events for this client.
    if (this.listeners.size === 0) this.lc?.setEventsWanted(false);
    return this;
  }

  private dispatch(batch: string | null): void {
    if (batch === null) {
      this.endEvents?.();
      return;
    }
    // Nobody listens: skip parsing and converting the batch (about a tenth of the JS
    // thread's time per guarded lifecycle in node/scripts/bench.sh's profile).
    if (this.listeners.size === 0) return;
    for (const raw of parseJson(batch) as unknown[]) {
      const e = fromWire<CyclesEvent>(raw);
      for (const l of this.listeners) {
        try {
          l(e);
        } catch (err) {
          process.emitWarning(`a cycles event listener threw: ${String(err)}`);
        }
      }
    }
  }

  private lifecycle(): NativeLifecycle {
    if (this.lc === null) {
      this.eventsEnded = new Promise((resolve) => (this.endEvents = resolve));
      this.lc = call(() =>
        this.native.lifecycle((batch) => this.dispatch(batch)),
      );
      this.lc.setEventsWanted(this.listeners.size > 0);
      OPEN.add(this);
      hookExit();
    }
    return this.lc;
  }

  private async op<T>(name: string, args: unknown): Promise<T> {
    const text = await awaitNative(call(() => this.native.call(name, stringifyJson(args))));
    // Exact: an int64 beyond 2^53 - 1 (an amount, an epoch or a TTL) arrives as a bigint.
    const env = parseJson(text) as { status: number; request_id: string | null; trace_id: string | null; rtt_us: number; body: unknown };
    const body = fromWire<Record<string, unknown>>(env.body);
    if (Array.isArray(body)) return body as T; // list_reservations_all: the rows
    const meta: M.ResponseMeta = { status: env.status, requestId: env.request_id, traceId: env.trace_id, rttUs: env.rtt_us };
    return { ...body, meta } as T;
  }

  // BEGIN generated operations (`cargo run -p cycles-codegen`, from core's operation table): do not edit.
  /**
   * Asks whether a spend would be allowed, reserving nothing; a denial is a result (`DENY` with its
   * reason code), not an error.
   *
   * `POST /v1/decide` (`decide`).
   */
  decide(request: M.DecisionRequest): Promise<M.DecisionResult> {
    return this.op("decide", toWire(request));
  }
  /**
   * Reserves an estimate for an action; a denial is a result, not an error.
   *
   * `POST /v1/reservations` (`createReservation`).
   */
  createReservation(request: M.ReservationCreateRequest): Promise<M.ReservationCreated> {
    return this.op("create_reservation", toWire(request));
  }
  /**
   * Lists reservations, one page; the page's `next_cursor` asks for the next.
   *
   * `GET /v1/reservations` (`listReservations`).
   */
  listReservations(query: M.ListReservationsQuery = {}): Promise<M.ReservationPage> {
    return this.op("list_reservations", toWire(query));
  }
  /**
   * Every row, following `nextCursor` for at most `maxPages` pages (default 100), as one array. The
   * filters are `listReservations`'s.
   */
  listAllReservations(query: M.ListReservationsQuery & { maxPages?: number } = {}): Promise<M.Reservation[]> {
    return this.op("list_reservations_all", toWire(query));
  }
  /**
   * Reads one reservation.
   *
   * `GET /v1/reservations/{reservation_id}` (`getReservation`).
   */
  getReservation(reservationId: string): Promise<M.ReservationResult> {
    return this.op("get_reservation", { reservation_id: reservationId });
  }
  /**
   * Commits the actual amount a reservation's work cost.
   *
   * `POST /v1/reservations/{reservation_id}/commit` (`commitReservation`).
   */
  commitReservation(reservationId: string, request: M.CommitRequest): Promise<M.CommitResult> {
    return this.op("commit_reservation", { reservation_id: reservationId, request: toWire(request) });
  }
  /**
   * Releases a reservation, returning its amount.
   *
   * `POST /v1/reservations/{reservation_id}/release` (`releaseReservation`).
   */
  releaseReservation(reservationId: string, request: M.ReleaseRequest): Promise<M.ReleaseResult> {
    return this.op("release_reservation", { reservation_id: reservationId, request: toWire(request) });
  }
  /**
   * Extends a reservation's lease once.
   *
   * `POST /v1/reservations/{reservation_id}/extend` (`extendReservation`).
   */
  extendReservation(reservationId: string, request: M.ExtendRequest): Promise<M.ExtendResult> {
    return this.op("extend_reservation", { reservation_id: reservationId, request: toWire(request) });
  }
  /**
   * Records spend without a reservation (post-only accounting).
   *
   * `POST /v1/events` (`createEvent`).
   */
  createEvent(request: M.EventCreateRequest): Promise<M.EventResult> {
    return this.op("create_event", toWire(request));
  }
  /**
   * Reads the balances of the scopes a query matches, one page (at least one subject filter).
   *
   * `GET /v1/balances` (`getBalances`).
   */
  getBalances(query: M.BalanceQuery): Promise<M.BalancesResult> {
    return this.op("get_balances", toWire(query));
  }
  /**
   * Fetches one signed evidence envelope (public: sent without the API key; no signature check
   * here).
   *
   * `GET /v1/evidence/{evidence_id}` (`getEvidence`).
   */
  getEvidence(evidenceId: string): Promise<M.EvidenceEnvelope> {
    return this.op("get_evidence", { evidence_id: evidenceId });
  }
  /**
   * Fetches the server's evidence signing keys (public).
   *
   * `GET /v1/.well-known/cycles-jwks.json` (`getEvidenceJwks`).
   */
  getEvidenceJwks(): Promise<M.EvidenceJwks> {
    return this.op("get_evidence_jwks", {});
  }
  // END generated operations
  /**
   * The guard spec of what the caller gave, nothing more: the bridge fills the idempotency
   * key, the subject (the client's tenant) and a bare estimate's unit (`guard::parse_spec_with`).
   */
  private spec(o: ReserveOptions): { spec: string; unit: string } {
    const policy = o.heartbeatPolicy;
    if (policy !== undefined && !POLICIES.has(policy)) {
      throw new InvalidArgumentError(`heartbeatPolicy must be warn, fail_on_finalize or cancel, not ${JSON.stringify(policy)}`);
    }
    if (!o.action || typeof o.action !== "object") throw new InvalidArgumentError("action is required ({kind, name})");
    const estimate = checkedEstimate(o.estimate);
    const spec = {
      idempotency_key: o.idempotencyKey,
      subject: o.subject === undefined ? undefined : toWire(o.subject),
      action: toWire(o.action),
      estimate,
      unit: o.unit,
      ttl_ms: o.ttlMs,
      grace_period_ms: o.gracePeriodMs,
      overage_policy: o.overagePolicy,
      metadata: o.metadata,
      heartbeat: o.heartbeat,
      policy,
    };
    // The bridge refuses a `unit` that differs from an Amount's; whatever it accepts is this unit.
    const unit = typeof estimate === "object" ? estimate.unit : (o.unit ?? this.unitOfBare);
    return { spec: stringifyJson(spec), unit };
  }

  /**
   * Reserves `estimate` and starts the heartbeat; resolves with the running
   * {@link GuardedReservation}. Settle it with `await using r = await client.reserve(...)`,
   * or `await r.finish()` / `await r.fail()`. Prefer {@link guarded} where `using` is not
   * available: it settles on every exit path and sets {@link currentReservation}.
   */
  async reserve(options: ReserveOptions): Promise<GuardedReservation> {
    const signal = options.signal;
    signal?.throwIfAborted();
    const { spec, unit } = this.spec(options);
    const lc = this.lifecycle();
    const active = await awaitNative(call(() => lc.begin(spec)));
    const cancel = options.heartbeatPolicy === "cancel" && options.heartbeat !== false;
    const r = new GuardedReservation(active, unit, currentReservation(), signal, cancel);
    if (signal?.aborted) {
      // Aborted while reserving: the reservation exists now, so give it back at once.
      await r.fail();
      throw signal.reason;
    }
    return r;
  }

  /**
   * Runs `work` guarded: reserve, heartbeat while it runs, then settle the actual
   * (`options.actual`, or what the work reported) — or, when the work throws, settle what is
   * known or release, and rethrow the work's error unchanged. Inside, {@link currentReservation}
   * is the reservation (also across awaits and in tasks the work starts). Resolves with the
   * work's value; {@link guardedWithOutcome} also hands back how the reservation ended.
   */
  async guarded<T>(options: GuardOptions<T>, work: (r: GuardedReservation) => T | Promise<T>): Promise<T> {
    return (await this.runGuarded(options, work)).value;
  }

  /**
   * {@link guarded}, resolving with `{ value, outcome }`: the work's value and the
   * {@link SettledOutcome} of its reservation (`outcome.settlement.status`,
   * `outcome.settlement.charged`, `outcome.lease`, ...). Rejects exactly as `guarded` does,
   * and with {@link InvalidArgumentError} when the work ended its reservation itself with
   * `r.fail()` (there is then no settled outcome to hand back).
   */
  async guardedWithOutcome<T>(options: GuardOptions<T>, work: (r: GuardedReservation) => T | Promise<T>): Promise<Guarded<T>> {
    const { value, outcome } = await this.runGuarded(options, work);
    if (outcome.kind !== "settled") {
      throw new InvalidArgumentError(`the work ended reservation ${outcome.reservationId} itself (${outcome.kind}): there is no settled outcome`);
    }
    return { value, outcome: outcome as SettledOutcome };
  }

  private async runGuarded<T>(options: GuardOptions<T>, work: (r: GuardedReservation) => T | Promise<T>): Promise<{ value: T; outcome: Outcome }> {
    const r = await this.reserve(options);
    let value: T;
    try {
      value = await runWith(r, () => work(r));
      if (options.actual !== undefined) {
        const a = options.actual;
        r.setActual(typeof a === "function" ? a(value) : a);
      }
    } catch (e) {
      await r.fail();
      throw e;
    }
    // end(), not finish(): work that ended its reservation itself (r.fail()) still returns its value here.
    return { value, outcome: await r.end(true) };
  }

  /**
   * Meters a stream: reserves on the first pull, yields every item of `source` while adding
   * `usage(item)` to the actual, and settles when the stream ends — also when the consumer
   * stops early (`break`) or the source throws (what was added so far is settled, or the
   * reservation released when nothing was; the source's error propagates). A stream that ends
   * without any usage reported ends like a block without an actual: {@link MissingActualError},
   * nothing committed. `onReservation` receives the reservation once it exists, so its
   * `settlement` can be read after the loop.
   */
  async *stream<T>(
    options: ReserveOptions & { onReservation?: (r: GuardedReservation) => void },
    source: AsyncIterable<T> | Iterable<T>,
    usage: (item: T) => number | bigint | M.Amount,
  ): AsyncGenerator<T, void, undefined> {
    const r = await this.reserve(options);
    options.onReservation?.(r);
    // No actual until an item reports usage: an empty stream must not commit an invented 0.
    let ok = false;
    try {
      for await (const item of source) {
        r.add(usage(item));
        yield item;
      }
      ok = true;
    } finally {
      // A consumer's break lands here too (ok stays false): settle what was used either way.
      if (ok) await r.finish();
      else await r.fail();
    }
  }

  /** `fn` wrapped so every call runs {@link guarded} (the estimate may be a function of the arguments). */
  wrap<A extends unknown[], T>(options: WrapOptions<A, T>, fn: (...args: A) => T | Promise<T>): (...args: A) => Promise<T> {
    return (...args: A) => {
      const e = options.estimate;
      const estimate = typeof e === "function" ? e(...args) : e;
      return this.guarded({ ...options, estimate }, () => fn(...args));
    };
  }

  /** Replays every pending settlement of this client's server once, now. */
  async flush(): Promise<DrainReport> {
    const lc = this.lifecycle();
    return drainReportOf(await awaitNative(call(() => lc.flush())));
  }

  /** Replays pending settlements until none is left or `timeoutMs` passed. */
  async drain(timeoutMs: number): Promise<DrainReport> {
    const ms = requiredMs(timeoutMs, "timeoutMs");
    const lc = this.lifecycle();
    return drainReportOf(await awaitNative(call(() => lc.drain(ms))));
  }

  /**
   * Closes the client: stops the background replay, settles what is pending for at most
   * `timeoutMs` (default `closeTimeoutMs`), delivers the last events; later calls throw
   * `ClientClosedError`. Always resolves with a drain report: for a client that never started
   * its lifecycle (no guarded call, `flush` or `drain`) it is empty and clean, since nothing
   * of this client's can be pending (records another process left stay journaled for the
   * next drain). Idempotent: every call resolves with the first call's report; what stays
   * pending remains journaled for the next process.
   */
  close(timeoutMs?: number): Promise<DrainReport> {
    if (this.closing === null) {
      let ms: number;
      try {
        ms = requiredMs(timeoutMs ?? this.closeTimeoutMs, "timeoutMs");
      } catch (e) {
        return Promise.reject(e); // the client stays open
      }
      this.closing = this.doClose(ms);
    }
    return this.closing;
  }

  private async doClose(timeoutMs: number): Promise<DrainReport> {
    OPEN.delete(this);
    let report = emptyDrainReport();
    try {
      if (this.lc !== null) {
        const lc = this.lc;
        report = drainReportOf(await awaitNative(call(() => lc.close(timeoutMs))));
        // The event thread's end marker follows the drain's last events (bounded wait).
        let timer: NodeJS.Timeout | undefined;
        await Promise.race([
          this.eventsEnded,
          new Promise<void>((resolve) => {
            // Ref'd on purpose: the marker comes through a weak function, and this
            // bounded wait is what keeps the loop turning until it arrives.
            timer = setTimeout(resolve, EVENTS_END_WAIT_MS);
          }),
        ]);
        clearTimeout(timer);
      }
    } finally {
      this.native.close();
    }
    return report;
  }

  /** `await using client = new Client(...)`: {@link close}. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }
}
