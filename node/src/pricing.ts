/**
 * `cycles-sdk/pricing`: core's pure pricing functions (`cycles_core::pricing`,
 * docs/integrations.md "Estimate, price, caps: the core functions"), unchanged: the prompt
 * estimate, the output bound, the price table, estimate and actual, the settlement rule, the
 * caps rule, tool lists, and the provider wire formats (the caps rewrite of a request, the
 * usage of a response or stream event). Every integration of this package charges through
 * these, so Node charges what Python and every other face charge for the same call.
 *
 * Token counts and amounts are {@link Int64}: a `number`, a `bigint` beyond 2^53 − 1. A
 * `number` argument that is not a safe integer throws {@link InvalidArgumentError} (pass a
 * `bigint`); whatever core refuses is the `InvalidArgumentError` with core's message.
 * Provider requests and response bodies are passed as the provider's JSON (snake_case, as the
 * client libraries take and give them); everything this module returns is camelCase, as every
 * result of this package, except the provider members of {@link CapsPlan.set}.
 * Every case of the shared vectors (conformance/vectors/pricing.json) runs through this.
 *
 * @example
 * ```ts
 * import { estimateRequest, usage, actual } from "cycles-sdk/pricing";
 * const pricing = { unit: "TOKENS" } as const;
 * const e = estimateRequest(pricing, "gpt-4o-mini", { messages: [{ role: "user", content: "Hi" }], max_tokens: 64 });
 * // e.amount: { unit: "TOKENS", amount: 69 } (4 + 1 prompt tokens, 64 output)
 * ```
 * @module
 */
import { InvalidArgumentError, call } from "./errors";
import { parseJson, stringifyJson } from "./json";
import type { Amount, Caps, Int64 } from "./models";
import { toWire } from "./wire";
import { native } from "./native";

/** The price of one model in a table: integers per million tokens, in the table's unit. */
export interface Price {
  inputPerMtok: Int64;
  outputPerMtok: Int64;
}

/**
 * How calls are priced: `{ unit: "TOKENS" }` (cost = input + output tokens, no table), or a
 * table in another unit: `models` maps a model name (or a pattern `P*`) to its {@link Price},
 * `default` prices every other model (without one, an unknown model is an error, never free).
 */
export type Pricing =
  | { unit: "TOKENS" }
  | { unit: string; models?: Record<string, Price>; default?: Price };

/** A provider API: OpenAI Chat Completions, OpenAI Responses, Anthropic Messages. */
export type Api = "chat_completions" | "responses" | "messages";

/** What a provider reported (null or absent: unreported). */
export interface Usage {
  inputTokens?: Int64 | null;
  outputTokens?: Int64 | null;
}

/** Usage as {@link usage} folds it: both members always present (null: not reported yet). */
export interface ReportedUsage {
  inputTokens: Int64 | null;
  outputTokens: Int64 | null;
}

/** One body or stream event folded by {@link observe}: the usage so far, whether the body said the call failed, and that usage's actual (null: nothing reported yet). */
export interface Observation {
  usage: ReportedUsage;
  failed: boolean;
  actual: Amount | null;
}

/** The price {@link lookupPrice} found: `matched` is the table key (null: the default). */
export interface PriceMatch extends Price {
  matched: string | null;
}

/** What {@link estimateRequest} computed. */
export interface RequestEstimate {
  promptTokens: Int64;
  outputBound: Int64;
  amount: Amount;
}

/** What to do with a reservation after the call ({@link settlement}). */
export type SettlementAction = { action: "commit"; amount: Amount } | { action: "release" };

/** An output bound under caps ({@link lowerBound}). */
export interface LoweredBound {
  bound: Int64 | null;
  changed: boolean;
}

/** Tools under caps ({@link filterTools}), each in the request's order. */
export interface FilteredTools {
  allowed: string[];
  removed: string[];
}

/**
 * The caps rewrite of a provider request ({@link planCaps}, `GuardedReservation.planCaps`):
 * set each member of `set` on the request (provider member names, values as JSON) and
 * remove each member named in `unset`. `send: false` (a cap of 0) means the call must not be
 * made; `changed` says whether anything is rewritten.
 */
export interface CapsPlan {
  /** The request's output bound before (null: it had none). */
  boundFrom: Int64 | null;
  /** The bound after (null: none, and no `max_tokens` cap). */
  boundTo: Int64 | null;
  /** Provider members to set, as the provider spells them. */
  set: Record<string, unknown>;
  /** Provider members to remove. */
  unset: string[];
  /** The names of the tools the caps removed. */
  removedTools: string[];
  send: boolean;
  changed: boolean;
}

const SAFE = BigInt(Number.MAX_SAFE_INTEGER);

/** An integer result in the bridge's encoding (a decimal string beyond 2^53 − 1) as an {@link Int64}. */
function int(v: unknown): Int64 {
  if (typeof v === "string" && /^-?\d+$/.test(v)) return BigInt(v);
  return v as Int64;
}

function intOrNull(v: unknown): Int64 | null {
  return v === null || v === undefined ? null : int(v);
}

/** An integer argument as the bridge takes it, exactly; null and undefined are absent. */
function enc(v: unknown, name: string): unknown {
  if (v === null || v === undefined) return null;
  if (typeof v === "bigint") return v <= SAFE && v >= -SAFE ? Number(v) : v.toString();
  // A fraction goes to core, which refuses it with its own message; a large integer has lost its value already.
  if (typeof v === "number" && Number.isInteger(v) && !Number.isSafeInteger(v)) {
    throw new InvalidArgumentError(`${name} must be a safe integer or a bigint, not ${v} (pass a bigint beyond 2^53 - 1)`);
  }
  return v;
}

function amountOut(v: unknown): Amount {
  const a = v as { unit: string; amount: unknown };
  return { unit: a.unit, amount: int(a.amount) };
}

function amountIn(a: Amount, name: string): Record<string, unknown> {
  if (a === null || typeof a !== "object") throw new InvalidArgumentError(`${name} must be an Amount {unit, amount}`);
  return { unit: a.unit, amount: enc(a.amount, `${name}.amount`) };
}

function priceIn(p: Price, at: string): Record<string, unknown> {
  if (p === null || typeof p !== "object" || Array.isArray(p)) throw new InvalidArgumentError(`${at} must be a price {inputPerMtok, outputPerMtok}`);
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(p)) {
    if (k === "inputPerMtok") out.input_per_mtok = enc(v, `${at}.inputPerMtok`);
    else if (k === "outputPerMtok") out.output_per_mtok = enc(v, `${at}.outputPerMtok`);
    else throw new InvalidArgumentError(`unknown price member ${at}.${k} (a price is {inputPerMtok, outputPerMtok})`);
  }
  return out;
}

/** A {@link Pricing} in the bridge's spelling; core validates it (unknown units, negative prices, a TOKENS table). */
function pricingIn(p: Pricing): Record<string, unknown> {
  if (p === null || typeof p !== "object" || Array.isArray(p)) throw new InvalidArgumentError('pricing must be {unit: "TOKENS"} or a price table');
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(p)) {
    if (v === undefined) continue;
    if (k === "models") {
      if (v === null || typeof v !== "object" || Array.isArray(v)) throw new InvalidArgumentError("pricing.models must map model names to prices");
      out.models = Object.fromEntries(Object.entries(v as Record<string, Price>).map(([m, x]) => [m, priceIn(x, `pricing.models[${JSON.stringify(m)}]`)]));
    } else if (k === "default") {
      out.default = priceIn(v as Price, "pricing.default");
    } else {
      // `unit`, and anything else as given: core refuses an unknown member by name.
      out[k] = v;
    }
  }
  return out;
}

function capsIn(c: Caps): unknown {
  if (c === null || typeof c !== "object" || Array.isArray(c)) throw new InvalidArgumentError("caps must be an object (Caps)");
  const wire = toWire(c) as Record<string, unknown>;
  for (const k of ["max_tokens", "max_steps_remaining", "cooldown_ms"]) if (k in wire) wire[k] = enc(wire[k], k);
  return wire;
}

function usageIn(u: Usage | null | undefined): unknown {
  if (u === null || u === undefined) return null;
  // Not an object: core refuses it ("usage must be an object").
  if (typeof u !== "object" || Array.isArray(u)) return u;
  return { input_tokens: enc(u.inputTokens, "usage.inputTokens"), output_tokens: enc(u.outputTokens, "usage.outputTokens") };
}

function usageOut(v: unknown): ReportedUsage {
  const u = v as { input_tokens: unknown; output_tokens: unknown };
  return { inputTokens: intOrNull(u.input_tokens), outputTokens: intOrNull(u.output_tokens) };
}

/** One function of the bridge's pricing table; `args` already in the bridge's spelling. */
function run(name: string, args: Record<string, unknown>): unknown {
  const text = call(() => native.pricingCall(name, stringifyJson(args)));
  return parseJson(text);
}

/** A plan as the bridge writes it (`pricing_json::plan_json`), typed. @internal */
export function capsPlanOf(v: unknown): CapsPlan {
  const p = v as Record<string, unknown>;
  return {
    boundFrom: intOrNull(p.bound_from),
    boundTo: intOrNull(p.bound_to),
    set: p.set as Record<string, unknown>,
    unset: p.unset as string[],
    removedTools: p.removed_tools as string[],
    send: p.send as boolean,
    changed: p.changed as boolean,
  };
}

/** `ceil(chars / 4)`, `chars` the text's Unicode scalar values (`[...text].length`). */
export function textTokens(text: string): Int64 {
  return int(run("text_tokens", { text }));
}

/**
 * The texts of a provider request a tokenizer counts: one array per message, its texts in order.
 * Count each and pass the counts, in this shape, as `textTokens` to {@link promptTokens} or
 * {@link estimateRequest}.
 */
export function promptTexts(request: object): string[][] {
  return run("prompt_texts", { request: request }) as string[][];
}

/** A tokenizer's counts as the bridge takes them (not an array: core says what is wrong). */
function textTokensIn(textTokens: ReadonlyArray<ReadonlyArray<Int64>> | null | undefined): unknown {
  if (!Array.isArray(textTokens)) return textTokens ?? null;
  return textTokens.map((m, i) => (Array.isArray(m) ? m.map((n, j) => enc(n, `textTokens[${i}][${j}]`)) : m));
}

/**
 * The prompt of a provider request: `Σ per message (4 + Σ tokens of its texts)`, a text's tokens
 * being core's estimate `ceil(chars / 4)` or, given `textTokens` (a tokenizer's counts of
 * {@link promptTexts}, in its shape), those counts.
 */
export function promptTokens(request: object, textTokens?: ReadonlyArray<ReadonlyArray<Int64>> | null): Int64 {
  return int(run("prompt_tokens", { request: request, text_tokens: textTokensIn(textTokens) }));
}

/** The request's output bound (the smallest of `max_tokens`, `max_completion_tokens`, `max_output_tokens`), else `defaultBound`, else null. */
export function outputBound(request: object, defaultBound?: Int64 | null): Int64 | null {
  return intOrNull(run("output_bound", { request: request, default: enc(defaultBound, "defaultBound") }));
}

/** The price of `model` in a table (exact name, undated name, longest pattern, default). */
export function lookupPrice(pricing: Pricing, model: string): PriceMatch {
  const p = run("lookup_price", { pricing: pricingIn(pricing), model }) as Record<string, unknown>;
  return { matched: (p.matched as string | null) ?? null, inputPerMtok: int(p.input_per_mtok), outputPerMtok: int(p.output_per_mtok) };
}

/** `ceil((input × inputPerMtok + output × outputPerMtok) / 10^6)` in the pricing's unit (TOKENS: the sum). */
export function cost(pricing: Pricing, model: string, inputTokens: Int64, outputTokens: Int64): Amount {
  return amountOut(
    run("cost", { pricing: pricingIn(pricing), model, input_tokens: enc(inputTokens, "inputTokens"), output_tokens: enc(outputTokens, "outputTokens") }),
  );
}

/** The cost of the prompt estimate and the output bound. */
export function estimate(pricing: Pricing, model: string, promptTokens: Int64, outputBound: Int64): Amount {
  return amountOut(
    run("estimate", { pricing: pricingIn(pricing), model, prompt_tokens: enc(promptTokens, "promptTokens"), output_bound: enc(outputBound, "outputBound") }),
  );
}

/**
 * The estimate of a provider request: its prompt ({@link promptTokens}, with `textTokens` when a
 * tokenizer counted it) and output bound (or `defaultOutputBound`), priced; no bound at all is refused.
 */
export function estimateRequest(
  pricing: Pricing,
  model: string,
  request: object,
  defaultOutputBound?: Int64 | null,
  textTokens?: ReadonlyArray<ReadonlyArray<Int64>> | null,
): RequestEstimate {
  const e = run("estimate_request", {
    pricing: pricingIn(pricing),
    model,
    request: request,
    default_output_bound: enc(defaultOutputBound, "defaultOutputBound"),
    text_tokens: textTokensIn(textTokens),
  }) as Record<string, unknown>;
  return { promptTokens: int(e.prompt_tokens), outputBound: int(e.output_bound), amount: amountOut(e.amount) };
}

/** The cost of what the provider reported (an unreported half is 0); nothing reported: null. */
export function actual(pricing: Pricing, model: string, usage: Usage): Amount | null {
  const a = run("actual", { pricing: pricingIn(pricing), model, usage: usageIn(usage) });
  return a === null ? null : amountOut(a);
}

/** Core's settlement rule: an actual is committed; none and the call failed: release; none and it succeeded: commit the estimate. */
export function settlement(actual: Amount | null, callSucceeded: boolean, estimate: Amount): SettlementAction {
  const s = run("settlement", { actual: actual === null || actual === undefined ? null : amountIn(actual, "actual"), call_succeeded: callSucceeded, estimate: amountIn(estimate, "estimate") }) as Record<
    string,
    unknown
  >;
  return s.action === "commit" ? { action: "commit", amount: amountOut(s.amount) } : { action: "release" };
}

/** `min(bound, caps.maxTokens)` (no bound: the cap; no cap: unchanged). */
export function lowerBound(bound: Int64 | null, caps: Caps): LoweredBound {
  const r = run("lower_bound", { bound: enc(bound, "bound"), caps: capsIn(caps) }) as Record<string, unknown>;
  return { bound: intOrNull(r.bound), changed: r.changed as boolean };
}

/** Whether the caps allow a tool (the spec's precedence: a non-empty allowlist, else the denylist). */
export function toolAllowed(name: string, caps: Caps): boolean {
  return run("tool_allowed", { name, caps: capsIn(caps) }) as boolean;
}

/** The tools the caps allow and remove, in the given order. */
export function filterTools(tools: string[], caps: Caps): FilteredTools {
  const r = run("filter_tools", { tools, caps: capsIn(caps) }) as Record<string, unknown>;
  return { allowed: r.allowed as string[], removed: r.removed as string[] };
}

/**
 * The caps rewrite of a provider request (see {@link CapsPlan}). On a running reservation
 * prefer `GuardedReservation.planCaps`, which uses its caps and reports the rewrite as the
 * `caps_applied` event.
 */
export function planCaps(api: Api, request: object, caps: Caps): CapsPlan {
  return capsPlanOf(run("plan_caps", { api, request: request, caps: capsIn(caps) }));
}

/**
 * Folds one provider response body or stream event into the usage so far (present counts
 * replace earlier ones: providers report cumulative counts). Fold every event of a stream,
 * in order, starting from nothing.
 */
export function usage(api: Api, body: object, soFar?: Usage | null): ReportedUsage {
  return usageOut(run("usage", { api, body, usage: usageIn(soFar) }));
}

/**
 * The members to set on `request` so that, when it streams (`stream: true`), it reports its
 * usage: Chat Completions' `stream_options.include_usage` unless the caller set it; empty
 * when nothing changes (core's `wire::stream_request`).
 */
export function streamRequest(api: Api, request: object): Record<string, unknown> {
  return (run("stream_request", { api, request }) as { set: Record<string, unknown> }).set;
}

/**
 * Whether a response body or stream event says the call failed although the HTTP exchange
 * succeeded (Responses `error` / `response.failed`, Messages `error`, a Chat Completions
 * chunk carrying `error`): such a call settles as failed.
 */
export function callFailed(api: Api, body: object): boolean {
  return run("call_failed", { api, body }) === true;
}

/**
 * {@link usage}, {@link callFailed} and {@link actual} of one response body or stream event in
 * one call of core, as an integration folds every body it reads (the body crosses to core
 * once instead of three times).
 */
export function observe(pricing: Pricing, model: string, api: Api, body: object, soFar?: Usage | null): Observation {
  const o = run("observe", { pricing: pricingIn(pricing), model, api, body, usage: usageIn(soFar) }) as { usage: unknown; failed: unknown; actual: unknown };
  return { usage: usageOut(o.usage), failed: o.failed === true, actual: o.actual === null ? null : amountOut(o.actual) };
}
