/**
 * `cycles-sdk/ai`: a Vercel AI SDK language-model middleware (`ai`'s `wrapLanguageModel`,
 * specification `v3`, AI SDK 6; it imports nothing from `ai`) guarding every `generateText`
 * and `streamText` call of the wrapped model, whatever its provider.
 *
 * Each model call: core's estimate of the call's prompt (`promptTokens` of its messages) and
 * `maxOutputTokens` (else the guard's `defaultOutputBound`), priced by the guard's `pricing`,
 * is reserved as action `llm.completion` named after the model id; a denial throws
 * `BudgetExceededError` and the provider sees no request. Under `ALLOW_WITH_CAPS`,
 * `maxOutputTokens` is lowered by core's `lowerBound` and the tools filtered by core's
 * `filterTools` (a cap of 0 releases and throws {@link CallNotSentError}). The call's usage
 * (`usage.inputTokens.total`, `usage.outputTokens.total`; a stream's `finish` part) is
 * charged by core's `actual` and settled by core's `settlement`. A stream holds the
 * reservation until it ends, errs or is cancelled (then what was reported is committed, else
 * it is released).
 *
 * Per call, `providerOptions: { cycles: { actionName, actionKind, estimate, idempotencyKey } }`
 * (JSON values, as the AI SDK requires there) overrides the action and the estimate.
 *
 * @example
 * ```ts
 * import { generateText, wrapLanguageModel } from "ai";
 * import { openai } from "@ai-sdk/openai";
 * import { Client } from "cycles-sdk";
 * import { cyclesMiddleware } from "cycles-sdk/ai";
 * const model = wrapLanguageModel({ model: openai("gpt-4o-mini"), middleware: cyclesMiddleware({ client: Client.fromEnv() }) });
 * const { text } = await generateText({ model, prompt: "Hi", maxOutputTokens: 64 });
 * ```
 * @module
 */
import { InvalidArgumentError } from "./errors";
import { CallNotSentError, type GuardConfig, checkConfig } from "./integration";
import type { GuardedReservation } from "./lifecycle";
import type { Action, Amount, Int64 } from "./models";
import * as pricing from "./pricing";
import type { ReportedUsage } from "./pricing";

export { CallNotSentError, type GuardConfig } from "./integration";

type Obj = Record<string, unknown>;

/** The call options of a language model call as the middleware reads them (`LanguageModelV3CallOptions`). */
export interface CallOptionsLike {
  prompt: unknown[];
  maxOutputTokens?: number;
  tools?: Array<{ name: string }>;
  toolChoice?: { type: string; toolName?: string };
  providerOptions?: Record<string, Record<string, unknown>>;
  abortSignal?: AbortSignal;
  [member: string]: unknown;
}

/** The model as the middleware reads it. */
export interface ModelLike {
  modelId: string;
  provider?: string;
}

/** A language-model middleware (`LanguageModelV3Middleware`), structurally. */
export interface CyclesLanguageModelMiddleware {
  readonly specificationVersion: "v3";
  transformParams: (options: { type: "generate" | "stream"; params: any; model: any }) => Promise<any>; // eslint-disable-line @typescript-eslint/no-explicit-any
  wrapGenerate: (options: { doGenerate: () => PromiseLike<any>; doStream: () => PromiseLike<any>; params: any; model: any }) => Promise<any>; // eslint-disable-line @typescript-eslint/no-explicit-any
  wrapStream: (options: { doGenerate: () => PromiseLike<any>; doStream: () => PromiseLike<any>; params: any; model: any }) => Promise<any>; // eslint-disable-line @typescript-eslint/no-explicit-any
}

/** The per-call `providerOptions.cycles` members. */
export interface AiCallOptions {
  actionName?: string;
  actionKind?: string;
  estimate?: number;
  idempotencyKey?: string;
}

const CALL_KEYS = new Set(["actionName", "actionKind", "estimate", "idempotencyKey"]);

function usageOf(u: unknown): ReportedUsage {
  const count = (v: unknown): Int64 | null => {
    const total = v !== null && typeof v === "object" ? (v as Obj).total : v;
    return typeof total === "number" && Number.isSafeInteger(total) && total >= 0 ? total : null;
  };
  const o = (u ?? {}) as Obj;
  return { inputTokens: count(o.inputTokens), outputTokens: count(o.outputTokens) };
}

interface Call {
  r: GuardedReservation;
  params: CallOptionsLike;
  settle: (u: ReportedUsage, succeeded: boolean) => Promise<unknown>;
}

/**
 * The middleware: `wrapLanguageModel({ model, middleware: cyclesMiddleware({ client }) })`.
 * Every `generateText` / `streamText` call of the wrapped model is reserved, capped and settled.
 */
export function cyclesMiddleware(config: GuardConfig): CyclesLanguageModelMiddleware {
  const cfg = checkConfig(config, "cyclesMiddleware");
  const table = cfg.pricing ?? { unit: "TOKENS" };

  async function begin(params: CallOptionsLike, model: ModelLike): Promise<Call> {
    const per = (params.providerOptions?.cycles ?? {}) as AiCallOptions;
    for (const k of Object.keys(per)) {
      if (!CALL_KEYS.has(k)) throw new InvalidArgumentError(`unknown providerOptions.cycles member ${k} (known: ${[...CALL_KEYS].join(", ")})`);
    }
    const modelId = model.modelId;
    // Core's estimate of the prompt's messages and the call's output bound.
    const estimate: Amount =
      per.estimate === undefined
        ? pricing.estimateRequest(table, modelId, { messages: params.prompt, max_tokens: params.maxOutputTokens }, cfg.defaultOutputBound).amount
        : { unit: table.unit, amount: per.estimate };
    const action: Action = { kind: per.actionKind ?? cfg.actionKind ?? "llm.completion", name: per.actionName ?? modelId };
    if (cfg.actionTags !== undefined) action.tags = cfg.actionTags;
    const r = await cfg.client.reserve({
      estimate,
      action,
      subject: cfg.subject,
      idempotencyKey: per.idempotencyKey,
      ttlMs: cfg.ttlMs,
      heartbeatPolicy: cfg.heartbeatPolicy,
      signal: params.abortSignal,
    });
    // Always a new object: the map below keys each call by it.
    let sent: CallOptionsLike = params;
    try {
      sent = { ...capped(r, params) };
    } catch (e) {
      const o = await r.fail();
      if (e instanceof CallNotSentError) e.released = o.released;
      throw e;
    }
    const settle = async (u: ReportedUsage, succeeded: boolean): Promise<unknown> => {
      const s = pricing.settlement(pricing.actual(table, modelId, u), succeeded, estimate);
      if (s.action === "release") return r.fail();
      r.setActual(s.amount);
      if (u.inputTokens !== null || u.outputTokens !== null) r.setMetrics({ tokensInput: u.inputTokens ?? undefined, tokensOutput: u.outputTokens ?? undefined });
      return succeeded ? r.finish() : r.fail();
    };
    return { r, params: sent, settle };
  }

  // transformParams reserves and caps; the capped params it returns are what wrapGenerate /
  // wrapStream receive (and what the model is called with), so they find their call by identity.
  const calls = new WeakMap<object, Call>();
  const callOf = (params: unknown): Call => {
    const c = calls.get(params as object);
    if (c === undefined) throw new InvalidArgumentError("cycles-sdk/ai: a model call without its reservation (use the middleware through wrapLanguageModel)");
    calls.delete(params as object);
    return c;
  };
  return {
    specificationVersion: "v3",
    async transformParams({ params, model }) {
      const c = await begin(params as CallOptionsLike, model as ModelLike);
      calls.set(c.params, c);
      return c.params;
    },
    async wrapGenerate({ doGenerate, params }) {
      const c = callOf(params);
      let result: Obj;
      try {
        result = (await doGenerate()) as Obj;
      } catch (e) {
        await c.settle({ inputTokens: null, outputTokens: null }, false);
        throw e;
      }
      await c.settle(usageOf(result.usage), true);
      return result;
    },
    async wrapStream({ doStream, params }) {
      const c = callOf(params);
      let result: Obj;
      try {
        result = (await doStream()) as Obj;
      } catch (e) {
        await c.settle({ inputTokens: null, outputTokens: null }, false);
        throw e;
      }
      return { ...result, stream: metered(result.stream as ReadableStream<Obj>, c) };
    },
  };
}

/** Under ALLOW_WITH_CAPS: `maxOutputTokens` lowered by core's rule, the tools filtered by core's lists. */
function capped(r: GuardedReservation, params: CallOptionsLike): CallOptionsLike {
  const caps = r.caps;
  if (r.decision !== "ALLOW_WITH_CAPS" || caps === null) return params;
  const out: CallOptionsLike = { ...params };
  const lowered = pricing.lowerBound(params.maxOutputTokens ?? null, caps);
  if (lowered.changed) {
    if (lowered.bound !== null && Number(lowered.bound) === 0) {
      throw Object.assign(new CallNotSentError(`the caps allow no output (max_tokens 0): the model call was not made and reservation ${r.reservationId} was released`), {
        reservationId: r.reservationId,
      });
    }
    out.maxOutputTokens = lowered.bound === null ? undefined : Number(lowered.bound);
  }
  if (Array.isArray(params.tools) && params.tools.length > 0) {
    const { allowed, removed } = pricing.filterTools(
      params.tools.map((t) => t.name),
      caps,
    );
    if (removed.length > 0) {
      const keep = new Set(allowed);
      out.tools = params.tools.filter((t) => keep.has(t.name));
      if (out.tools.length === 0) {
        delete out.tools;
        delete out.toolChoice;
      } else if (params.toolChoice?.type === "tool" && !keep.has(params.toolChoice.toolName ?? "")) {
        delete out.toolChoice;
      }
    }
  }
  return out;
}

/** The model's stream, folded: `finish` carries the usage; the reservation settles when the stream ends, errs or is cancelled. */
function metered(source: ReadableStream<Obj>, c: Call): ReadableStream<Obj> {
  const reader = source.getReader();
  let u: ReportedUsage = { inputTokens: null, outputTokens: null };
  let failed = false;
  let done = false;
  const end = async (succeeded: boolean): Promise<void> => {
    if (done) return;
    done = true;
    await c.settle(u, succeeded);
  };
  return new ReadableStream<Obj>({
    async pull(controller) {
      let next: Awaited<ReturnType<typeof reader.read>>;
      try {
        next = await reader.read();
      } catch (e) {
        await end(false);
        controller.error(e);
        return;
      }
      if (next.done) {
        await end(!failed);
        controller.close();
        return;
      }
      const part = next.value;
      if (part.type === "finish") u = usageOf(part.usage);
      else if (part.type === "error") failed = true;
      controller.enqueue(part);
    },
    async cancel(reason) {
      await reader.cancel(reason);
      await end(false);
    },
  });
}
