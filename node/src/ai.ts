/**
 * `cycles-sdk/ai`: a Vercel AI SDK language-model middleware (`ai`'s `wrapLanguageModel`,
 * specification `v3`, AI SDK 6; it imports nothing from `ai`) guarding every `generateText`
 * and `streamText` call of the wrapped model, whatever its provider.
 *
 * Each model call: core's estimate of the call's prompt (`promptTokens` of its messages) and
 * `maxOutputTokens` (else the guard's `defaultOutputBound`), priced by the guard's `pricing`,
 * is reserved as action `llm.completion` named after the model id; a denial throws
 * `BudgetExceededError` and the provider sees no request. Under `ALLOW_WITH_CAPS`, the call
 * options are expressed as the request of the model's API (its `provider`: `openai.responses`
 * as Responses, `openai.chat` as Chat Completions, anything else as Messages) and rewritten by
 * `GuardedReservation.planCaps` (the `caps_applied` event): `maxOutputTokens` lowered, tools
 * removed; a plan that says not to send (a cap of 0, or below the API's minimum, 16 for
 * Responses) releases and throws {@link CallNotSentError}. The call's usage
 * (`usage.inputTokens.total`, `usage.outputTokens.total`; a stream's `finish` part) is
 * charged by core's `actual` and settled by core's `settlement`. A stream holds the
 * reservation until it ends, errs, is cancelled or aborted (an error settles as failed; a
 * cancel or abort by its consumer, as succeeded: its usage, else its estimate).
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
import { CallNotSentError, type GuardConfig, callAction, callEstimate, checkConfig } from "./integration";
import type { GuardedReservation } from "./lifecycle";
import type { Amount, Int64 } from "./models";
import * as pricing from "./pricing";
import type { Api, ReportedUsage } from "./pricing";

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
        ? callEstimate(cfg, modelId, { messages: params.prompt, max_tokens: params.maxOutputTokens })
        : { unit: table.unit, amount: per.estimate };
    const action = callAction(cfg, per, modelId);
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
      sent = { ...(await capped(r, params, model)) };
    } catch (e) {
      await r.fail(); // released (a refused call was released already: its outcome)
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

/** The provider API whose request format and rules (the minimum output bound) the caps follow, from the model's `provider`. */
export function apiOf(provider: string | undefined): Api {
  switch (provider) {
    case "openai.responses":
      return "responses";
    case "openai.chat":
      return "chat_completions";
    default:
      // anthropic.messages, and every other provider: Messages' rules (a minimum bound of 1).
      return "messages";
  }
}

/** The call options as `api`'s request, as far as the caps read it: the bound field, the tools by name, the tool choice. */
function asRequest(api: Api, params: CallOptionsLike): Obj {
  const request: Obj = {};
  if (params.maxOutputTokens !== undefined) request[api === "responses" ? "max_output_tokens" : "max_tokens"] = params.maxOutputTokens;
  if (Array.isArray(params.tools) && params.tools.length > 0) {
    request.tools = params.tools.map((t) => (api === "chat_completions" ? { type: "function", function: { name: t.name } } : api === "responses" ? { type: "function", name: t.name } : { name: t.name }));
    const choice = params.toolChoice;
    if (choice?.type === "tool") {
      const name = choice.toolName ?? "";
      request.tool_choice = api === "chat_completions" ? { type: "function", function: { name } } : api === "responses" ? { type: "function", name } : { type: "tool", name };
    } else if (choice !== undefined) {
      request.tool_choice = api === "messages" ? { type: choice.type === "required" ? "any" : choice.type } : choice.type;
    }
  }
  return request;
}

/**
 * Under ALLOW_WITH_CAPS, core's plan (`GuardedReservation.planCaps`, which emits the
 * `caps_applied` event) of the call options expressed as the model's API's request, mapped
 * back: `maxOutputTokens` lowered, the removed tools dropped (every tool removed: `tools` and
 * `toolChoice` dropped; a `toolChoice` naming a removed tool dropped). `send: false` (a cap
 * of 0, or below the API's minimum) throws {@link CallNotSentError}.
 */
async function capped(r: GuardedReservation, params: CallOptionsLike, model: ModelLike): Promise<CallOptionsLike> {
  if (r.decision !== "ALLOW_WITH_CAPS") return params;
  const api = apiOf(model.provider);
  const plan = r.planCaps(api, asRequest(api, params));
  if (!plan.send) throw Object.assign(await r.refuseCall(), { plan });
  if (!plan.changed) return params;
  const out: CallOptionsLike = { ...params };
  if (plan.boundTo !== null && plan.boundTo !== plan.boundFrom) out.maxOutputTokens = Number(plan.boundTo);
  if (plan.removedTools.length > 0 && Array.isArray(params.tools)) {
    const removed = new Set(plan.removedTools);
    out.tools = params.tools.filter((t) => !removed.has(t.name));
  }
  if (plan.unset.includes("tools")) delete out.tools;
  if (plan.unset.includes("tool_choice")) delete out.toolChoice;
  return out;
}

/**
 * The model's stream, folded: `finish` carries the usage. The reservation settles when the
 * stream ends, errs or is cancelled, by the rule every integration follows
 * (docs/integrations.md): a stream that errs (or sent an `error` part) is a failed call, its
 * usage so far committed, else released; one its consumer cancels or aborts
 * (`abortSignal`), or that runs to its end, succeeded: its usage, else its estimate (the
 * provider may have billed what nobody saw).
 */
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
        // An abort surfaces as the provider stream's error: the consumer ended it, not the provider.
        await end(c.params.abortSignal?.aborted === true && !failed);
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
      try {
        await reader.cancel(reason);
      } finally {
        await end(!failed);
      }
    },
  });
}
