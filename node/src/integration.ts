/**
 * What every model-client integration does (`cycles-sdk/openai`, `cycles-sdk/anthropic`):
 * estimate, reserve, apply the caps, call the provider, fold the usage, settle, each step
 * through core's functions (`cycles-sdk/pricing`, `GuardedReservation.planCaps`). Only the
 * library idioms live here: how a call is made and how a stream is handed back.
 * @module
 * @internal
 */
import type { Client } from "./client";
import { InvalidArgumentError } from "./errors";
import type { GuardedReservation } from "./lifecycle";
import type { Action, Amount, Int64, Subject } from "./models";
import * as pricing from "./pricing";
import type { Api, Pricing, ReportedUsage } from "./pricing";
import { checkTokenizer, textTokens, type Tokenizer } from "./tokenizer";

// Core's refusal of a call (`GuardedReservation.refuseCall`), a BudgetExceededError.
export { CallNotSentError } from "./errors";

export type { TextCounter, Tokenizer } from "./tokenizer";

/** How a guarded model client reserves and charges (the second argument of `guardOpenAI` / `guardAnthropic`). */
export interface GuardConfig {
  /** The Cycles client that reserves and settles. */
  client: Client;
  /** How calls are priced (default `{ unit: "TOKENS" }`: one unit per token, no table). */
  pricing?: Pricing;
  /** The output bound of a request that sets none (without one, such a request is refused before anything is sent). */
  defaultOutputBound?: Int64;
  /**
   * What counts the prompt's texts (core adds the framing): `"auto"` (default: `js-tiktoken`
   * when installed and it knows the model, else core's estimate), a function of a text
   * returning its token count, or `null` (core's estimate).
   */
  tokenizer?: Tokenizer;
  /** The action kind of every call (default `llm.completion`); its name is the request's model. */
  actionKind?: string;
  /** Action tags of every call. */
  actionTags?: string[];
  /** Who spends (default: the Cycles client's tenant). */
  subject?: Subject;
  /** Lease length of each reservation (the heartbeat extends it while a call or stream runs). */
  ttlMs?: number;
  /** What a lost heartbeat does (default `warn`). */
  heartbeatPolicy?: "warn" | "fail_on_finalize" | "cancel";
}

/**
 * Per-call overrides: the `cycles` member of a call's request options (the second argument of
 * `create` / `stream`), removed before the provider is called. In TypeScript, where the
 * libraries' request options are closed types, build them with {@link withCycles}.
 */
export interface CyclesCallOptions {
  /** The action's name (default: the request's model). */
  actionName?: string;
  /** The action's kind (default: the guard's `actionKind`). */
  actionKind?: string;
  /** The action's tags (default: the guard's `actionTags`). */
  actionTags?: string[];
  /** Who spends (default: the guard's subject). */
  subject?: Subject;
  /** The estimate to reserve instead of core's (a number is in the pricing's unit). */
  estimate?: number | bigint | Amount;
  /** The reservation's idempotency key (default: a fresh one). */
  idempotencyKey?: string;
  /** Reservation metadata. */
  metadata?: Record<string, unknown>;
  /** Receives the reservation once it exists (read its `settlement` after the call). */
  onReservation?: (reservation: GuardedReservation) => void;
}

/**
 * Request options carrying {@link CyclesCallOptions}, typed as the library's own options
 * (`O`): `client.chat.completions.create(body, withCycles({ actionName: "summary" }, { timeout: 5000 }))`.
 */
export function withCycles<O extends object = Record<string, unknown>>(cycles: CyclesCallOptions, options?: O): O {
  return { ...(options ?? {}), cycles } as unknown as O;
}

/** What a provider call handed back, as `APIPromise.withResponse()` resolves. */
export interface WithResponse<T> {
  data: T;
  response: Response;
  request_id?: string | null;
}

/** A guarded call's result: a promise of the data, with `withResponse()` as the library's `APIPromise` has. */
export type GuardedPromise<T> = Promise<T> & { withResponse(): Promise<WithResponse<T>> };

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AnyFn = (...args: any[]) => any;
type Obj = Record<string | symbol, unknown>;

/** A library `Stream` (openai's and @anthropic-ai/sdk's share the shape): an async iterable with its controller. */
interface LibraryStream {
  controller: AbortController;
  [Symbol.asyncIterator](): AsyncIterator<unknown>;
  constructor: new (iterator: () => AsyncIterator<unknown>, controller: AbortController, client?: unknown) => unknown;
}

const DEFAULT_KIND = "llm.completion";
const CALL_KEYS = new Set(["actionName", "actionKind", "actionTags", "subject", "estimate", "idempotencyKey", "metadata", "onReservation"]);

/** The `cycles` request option checked: unknown members refused by name. @internal */
export function checkCall(c: unknown): CyclesCallOptions {
  if (c === undefined || c === null) return {};
  if (typeof c !== "object" || Array.isArray(c)) throw new InvalidArgumentError("the cycles request option must be an object");
  for (const k of Object.keys(c)) {
    if (!CALL_KEYS.has(k)) throw new InvalidArgumentError(`unknown cycles request option ${k} (known: ${[...CALL_KEYS].join(", ")})`);
  }
  return c as CyclesCallOptions;
}

/**
 * What one call reserves: the per-call `estimate` (a number is in the pricing's unit), else core's
 * estimate of `request`, its prompt counted by the guard's tokenizer where one applies.
 * @internal
 */
export function callEstimate(config: GuardConfig, model: string, request: object, given?: number | bigint | Amount): Amount {
  const table = config.pricing ?? { unit: "TOKENS" };
  if (given === undefined) return pricing.estimateRequest(table, model, request, config.defaultOutputBound, textTokens(config.tokenizer, model, request)).amount;
  return typeof given === "object" ? given : { unit: table.unit, amount: given };
}

/** The action of one call: the per-call name, kind and tags over the guard's, named after the model by default. @internal */
export function callAction(config: GuardConfig, call: Pick<CyclesCallOptions, "actionName" | "actionKind" | "actionTags">, model: string): Action {
  const action: Action = { kind: call.actionKind ?? config.actionKind ?? DEFAULT_KIND, name: call.actionName ?? model };
  const tags = call.actionTags ?? config.actionTags;
  if (tags !== undefined) action.tags = tags;
  return action;
}

/** The guard's configuration checked once, when the client is guarded. @internal */
export function checkConfig(config: GuardConfig, what: string): GuardConfig {
  if (config === null || typeof config !== "object") throw new InvalidArgumentError(`${what} needs {client, pricing?}`);
  const c = config.client as unknown as Obj | undefined;
  if (!c || typeof c.reserve !== "function") throw new InvalidArgumentError(`${what}: config.client must be a cycles-sdk Client`);
  checkTokenizer(config.tokenizer, what);
  // The table itself is core's to check, at the first call's estimate.
  return { ...config, pricing: config.pricing ?? { unit: "TOKENS" } };
}

/**
 * A guarded call (`create`, streaming or not, of any of the three APIs). `send(body,
 * options)` makes the provider call and resolves as `withResponse()` does.
 * @internal
 */
export function guardedCall(
  api: Api,
  config: GuardConfig,
  body: unknown,
  options: unknown,
  send: (body: Obj, options: Obj | undefined) => Promise<WithResponse<unknown>>,
  streamClient: unknown,
): GuardedPromise<unknown> {
  const run = runCall(api, config, body, options, send, streamClient);
  const p = run.then((x) => x.data) as GuardedPromise<unknown>;
  // Whoever reads withResponse() instead must not leave `p` an unhandled rejection.
  p.catch(() => undefined);
  p.withResponse = () => run;
  return p;
}

async function runCall(
  api: Api,
  config: GuardConfig,
  body: unknown,
  options: unknown,
  send: (body: Obj, options: Obj | undefined) => Promise<WithResponse<unknown>>,
  streamClient: unknown,
): Promise<WithResponse<unknown>> {
  if (body === null || typeof body !== "object" || Array.isArray(body)) throw new InvalidArgumentError("the request body must be an object");
  const request = body as Obj;
  let providerOptions: Obj | undefined;
  let call: CyclesCallOptions = {};
  if (options !== undefined && options !== null) {
    const { cycles, ...rest } = options as Obj;
    call = checkCall(cycles);
    providerOptions = rest;
  }
  const model = request.model;
  if (typeof model !== "string") throw new InvalidArgumentError("the request has no model (a string): it names the action and its price");
  const table = config.pricing ?? { unit: "TOKENS" };
  const estimate = callEstimate(config, model, request, call.estimate);
  const action = callAction(config, call, model);
  // A denial throws here (BudgetExceededError, ...): nothing reaches the provider.
  const r = await config.client.reserve({
    estimate,
    action,
    subject: call.subject ?? config.subject,
    idempotencyKey: call.idempotencyKey,
    metadata: call.metadata,
    ttlMs: config.ttlMs,
    heartbeatPolicy: config.heartbeatPolicy,
    signal: (providerOptions?.signal as AbortSignal | undefined) ?? undefined,
  });
  try {
    call.onReservation?.(r);
  } catch (e) {
    await r.fail(); // a throwing callback must not leave the reservation held
    throw e;
  }
  const settle = (u: ReportedUsage, succeeded: boolean, actual?: Amount | null): Promise<unknown> => settleCall(r, table, model, estimate, u, succeeded, actual);
  let sent: Obj;
  let got: WithResponse<unknown>;
  try {
    sent = await applyCaps(r, api, request);
    // Core's rule sets nothing on a request that does not stream: skip the crossing then.
    const streams = (sent as { stream?: unknown }).stream;
    if (streams !== undefined && streams !== null && streams !== false) {
      sent = { ...sent, ...pricing.streamRequest(api, sent) };
    }
  } catch (e) {
    await r.fail(); // released (a refused call was released already: its outcome)
    throw e;
  }
  try {
    got = await send(sent, providerOptions);
  } catch (e) {
    // Failed before any usage: released (core's settlement rule).
    await settle({ inputTokens: null, outputTokens: null }, false);
    throw e;
  }
  const data = got.data as Obj | null;
  if (sent.stream === true && data !== null && typeof data === "object" && typeof (data as unknown as LibraryStream)[Symbol.asyncIterator] === "function") {
    return { ...got, data: meteredStream(api, data as unknown as LibraryStream, settle, streamClient, table, model) };
  }
  let o: pricing.Observation;
  try {
    o = pricing.observe(table, model, api, data ?? {});
  } catch (e) {
    await r.fail(); // a usage core cannot price: released, then thrown (as settleCall does)
    throw e;
  }
  await settle(o.usage, !o.failed, o.actual);
  return got;
}

/** Under ALLOW_WITH_CAPS, the request rewritten by core's plan (the `caps_applied` event says so); `send: false` releases and throws. */
async function applyCaps(r: GuardedReservation, api: Api, request: Obj): Promise<Obj> {
  if (r.decision !== "ALLOW_WITH_CAPS") return request;
  const plan = r.planCaps(api, request);
  if (!plan.send) throw Object.assign(await r.refuseCall(), { plan });
  if (!plan.changed) return request;
  const out: Obj = { ...request, ...plan.set };
  for (const k of plan.unset) delete out[k];
  return out;
}

/** Settles a call by core's `actual` (unless given: `actual`, core's of `u`) and `settlement` (a pricing error releases, then throws). @internal */
export async function settleCall(r: GuardedReservation, table: Pricing, model: string, estimate: Amount, u: ReportedUsage, succeeded: boolean, actual?: Amount | null): Promise<unknown> {
  let s: pricing.SettlementAction;
  try {
    s = pricing.settlement(actual === undefined ? pricing.actual(table, model, u) : actual, succeeded, estimate);
  } catch (e) {
    await r.fail();
    throw e;
  }
  if (s.action === "release") return r.fail();
  r.setActual(s.amount);
  if (u.inputTokens !== null || u.outputTokens !== null) {
    r.setMetrics({ tokensInput: u.inputTokens ?? undefined, tokensOutput: u.outputTokens ?? undefined });
  }
  return succeeded ? r.finish() : r.fail();
}

/**
 * The library's stream, of the library's own class, whose events fold into the usage in
 * order; it settles when it ends (docs/integrations.md, the rule every language follows): a
 * stream that errs is a failed call (its usage so far committed, else released); one the
 * consumer stops early (a `break`, an abort, which the libraries end quietly) or that runs
 * to its end succeeded (its usage, else its estimate: the provider may have billed what
 * nobody saw), unless an event said the call failed (core's `callFailed`). The
 * reservation's lease is kept alive until then: a stream that is never read holds it.
 */
function meteredStream(
  api: Api,
  source: LibraryStream,
  settle: (u: ReportedUsage, succeeded: boolean, actual: Amount | null) => Promise<unknown>,
  client: unknown,
  table: Pricing,
  model: string,
): unknown {
  let u: ReportedUsage = { inputTokens: null, outputTokens: null };
  let actual: Amount | null = null; // core's actual of `u`
  let settled = false;
  async function* metered(): AsyncGenerator<unknown, void, undefined> {
    let ok = true;
    try {
      for await (const event of source) {
        if (event !== null && typeof event === "object") {
          // One crossing per event for its usage, failure and actual.
          const o = pricing.observe(table, model, api, event, u);
          if (o.failed) ok = false;
          u = o.usage;
          actual = o.actual;
        }
        yield event;
      }
    } catch (e) {
      ok = false;
      throw e;
    } finally {
      if (!settled) {
        settled = true;
        await settle(u, ok, actual);
      }
    }
  }
  const Stream = source.constructor;
  return new Stream(() => metered(), source.controller, client);
}

/**
 * A view of `target` (a client or one of its resources) whose members named in `replace`
 * are the given functions and whose other methods run on `target` itself (private fields
 * intact); `nested` members are views too. The library's client is left unguarded.
 * @internal
 */
export function view<T extends object>(target: T, replace: Record<string, AnyFn>, nested: Record<string, (inner: object) => object> = {}): T {
  const cache = new Map<string | symbol, unknown>();
  return new Proxy(target, {
    get(t, key) {
      if (typeof key === "string" && key in replace) return replace[key];
      if (typeof key === "string" && key in nested) {
        if (!cache.has(key)) cache.set(key, nested[key]((t as Obj)[key] as object));
        return cache.get(key);
      }
      const v = Reflect.get(t, key, t);
      return typeof v === "function" ? (v as AnyFn).bind(t) : v;
    },
  });
}

/** The method `name` of `resource`, or an error naming the package the guard expects. @internal */
export function method(resource: unknown, path: string, pkg: string): AnyFn {
  let v: unknown = resource;
  for (const p of path.split(".")) v = v !== null && v !== undefined ? (v as Obj)[p] : undefined;
  if (typeof v !== "function") {
    throw new InvalidArgumentError(`not a client of the ${pkg} package (no ${path}): pass a client of ${pkg} (npm install ${pkg})`);
  }
  return v as AnyFn;
}
