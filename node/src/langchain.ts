/**
 * `cycles-sdk/langchain`: any LangChain.js chat model guarded (`@langchain/core`, an optional
 * peer dependency). `guardChatModel(model, { client })` is a chat model of its own (a
 * `BaseChatModel`, so a Runnable: `invoke`, `stream`, `batch`, chains, LangGraph nodes) whose
 * every model call reserves first, is capped under `ALLOW_WITH_CAPS` and commits the usage
 * the model reports.
 *
 * Why a chat-model wrapper and not callbacks (the same choice as Python's
 * `cycles.integrations.langchain`): a callback handler can refuse a call in
 * `handleChatModelStart` and read the usage in `handleLLMEnd`, but it cannot change the
 * request, so it could not lower the output bound or remove tools under caps, and it has no
 * place to keep a reservation across a stream its consumer abandons. Every entry point of a
 * `BaseChatModel` ends in `_generate` or `_streamResponseChunks` (also LangGraph's
 * `streamMode: "messages"` and `streamEvents`), which is where the wrapper sits.
 *
 * Each call: core's estimate of the messages' texts (`{ role, content }` per message) and the
 * model's output bound (its `maxTokens`, else `maxOutputTokens`, else the guard's
 * `defaultOutputBound`), reserved as `{ kind: "llm.completion", name: <model> }`; a denial
 * throws `BudgetExceededError` before the model is called. Under caps, core's `planCaps` on
 * that request (the `caps_applied` event) lowers the bound, which is applied to a per-call
 * view of the model whose bound fields carry it (the model itself is left as it was), and
 * filters the call's `tools` (a `tool_choice` naming a removed tool dropped). The usage is
 * LangChain's `usage_metadata` (a stream's chunks summed), priced by core's `actual` and
 * settled by core's `settlement`.
 *
 * @example
 * ```ts
 * import { ChatOpenAI } from "@langchain/openai";
 * import { Client } from "cycles-sdk";
 * import { guardChatModel } from "cycles-sdk/langchain";
 * const llm = guardChatModel(new ChatOpenAI({ model: "gpt-4o-mini", maxTokens: 256 }), { client: Client.fromEnv() });
 * const reply = await llm.invoke("Say hello.");
 * ```
 * @module
 */
import type { CallbackManagerForLLMRun } from "@langchain/core/callbacks/manager";
import type * as ChatModels from "@langchain/core/language_models/chat_models";
import type { AIMessageChunk, BaseMessage } from "@langchain/core/messages";
import type { ChatGenerationChunk, ChatResult } from "@langchain/core/outputs";

import { InvalidArgumentError } from "./errors";
import { CallNotSentError, type CyclesCallOptions, type GuardConfig, callAction, callEstimate, checkCall, checkConfig, settleCall } from "./integration";
import type { GuardedReservation } from "./lifecycle";
import type { Int64 } from "./models";
import type { Api, ReportedUsage } from "./pricing";

export { CallNotSentError, type CyclesCallOptions, type GuardConfig } from "./integration";

const PEER = "@langchain/core";

/** `@langchain/core`'s module `path`, or an error that names the package to install. */
function requirePeer<T>(path: string): T {
  try {
    // A CommonJS require: the package's `require` export, resolved from the app's node_modules.
    return require(path) as T; // eslint-disable-line @typescript-eslint/no-require-imports
  } catch (e) {
    const err = e as NodeJS.ErrnoException;
    if (err?.code === "MODULE_NOT_FOUND" && String(err.message).includes(`'${PEER}`)) {
      throw Object.assign(new Error(`cycles-sdk/langchain needs ${PEER} (an optional peer dependency): npm install ${PEER}`, { cause: e }), {
        code: "MODULE_NOT_FOUND",
      });
    }
    throw e;
  }
}

const { BaseChatModel } = requirePeer<typeof ChatModels>(`${PEER}/language_models/chat_models`);

type Obj = Record<string, unknown>;
type AnyChatModel = ChatModels.BaseChatModel<any, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

/** The call options of a guarded model: the model's own, and `cycles` (per-call overrides, removed before the model sees them). */
export type CyclesChatModelCallOptions<O extends ChatModels.BaseChatModelCallOptions = ChatModels.BaseChatModelCallOptions> = O & {
  /** Per-call overrides of the action, subject, estimate and idempotency key. */
  cycles?: CyclesCallOptions;
};

/** {@link guardChatModel}'s configuration: a {@link GuardConfig} and the model's name. */
export interface ChatModelGuardConfig extends GuardConfig {
  /** The model name the action and the price table use (default: the model's `model`, else `modelName`, else its LangChain type). */
  modelName?: string;
}

/** The model fields that bound the output, in the order they are read. */
const BOUND_FIELDS = ["maxTokens", "maxOutputTokens"] as const;
const NO_USAGE: ReportedUsage = { inputTokens: null, outputTokens: null };
/** Tool choices that name no tool. */
const MODES = new Set(["auto", "none", "required", "any"]);

function isChatModel(v: unknown): v is AnyChatModel {
  return v !== null && typeof v === "object" && typeof (v as Obj)._generate === "function" && typeof (v as Obj)._llmType === "function";
}

/** A bound a model field holds (ChatOpenAI's -1 is "none"). */
function boundOf(model: object): number | undefined {
  for (const f of BOUND_FIELDS) {
    const v = (model as Obj)[f];
    if (typeof v === "number" && Number.isSafeInteger(v) && v >= 0) return v;
  }
  return undefined;
}

/** The name LangChain's tool formats give a tool (StructuredTool, OpenAI and Anthropic shapes); else its `type` (a built-in tool). */
function toolName(t: unknown): string | undefined {
  if (t === null || typeof t !== "object") return undefined;
  const o = t as Obj;
  if (typeof o.name === "string") return o.name;
  const f = o.function as Obj | undefined;
  if (f !== null && typeof f === "object" && typeof f.name === "string") return f.name;
  return typeof o.type === "string" ? o.type : undefined;
}

/**
 * A per-call view of `model` whose bound fields carry `bound`, as are those of every chat
 * model it delegates to (ChatOpenAI's `completions` and `responses`): its methods run on the
 * view, everything else reads through to the model, which stays as it was.
 */
function withBound<M extends object>(model: M, bound: number): M {
  const view = Object.create(model) as Obj;
  for (const f of BOUND_FIELDS) if (f in model) view[f] = bound;
  for (const [k, v] of Object.entries(model)) if (v !== model && isChatModel(v)) view[k] = withBound(v, bound);
  return view as M;
}

function hasBoundField(model: object): boolean {
  return BOUND_FIELDS.some((f) => f in model);
}

function addUsage(u: ReportedUsage, m: Obj | undefined): ReportedUsage {
  if (m === undefined || m === null || typeof m !== "object") return u;
  const n = (v: unknown): number | null => (typeof v === "number" && Number.isSafeInteger(v) && v >= 0 ? v : null);
  const i = n(m.input_tokens);
  const o = n(m.output_tokens);
  const sum = (a: Int64 | null, b: number | null): Int64 | null => (b === null ? a : a === null ? b : (a as number) + b);
  return { inputTokens: sum(u.inputTokens, i), outputTokens: sum(u.outputTokens, o) };
}

function resultUsage(result: ChatResult): ReportedUsage {
  for (const g of result.generations ?? []) {
    const m = (g.message as unknown as Obj | undefined)?.usage_metadata as Obj | undefined;
    if (m !== undefined) return addUsage(NO_USAGE, m);
  }
  return NO_USAGE;
}

/** One guarded model call: what to call and how it settles. */
interface Call {
  model: AnyChatModel;
  options: Obj;
  settle: (u: ReportedUsage, succeeded: boolean) => Promise<unknown>;
}

/**
 * A chat model guarded by Cycles (see the module); build it with {@link guardChatModel}.
 * `inner` is the model it calls.
 */
export class CyclesChatModel<O extends ChatModels.BaseChatModelCallOptions = ChatModels.BaseChatModelCallOptions> extends BaseChatModel<
  CyclesChatModelCallOptions<O>,
  AIMessageChunk
> {
  /** The guarded model. */
  readonly inner: AnyChatModel;
  private readonly config: ChatModelGuardConfig;

  constructor(inner: AnyChatModel, config: ChatModelGuardConfig) {
    // The inner model's own callbacks, tags and metadata: its entry points are bypassed.
    super({ callbacks: inner.callbacks, tags: inner.tags, metadata: inner.metadata, verbose: inner.verbose });
    this.inner = inner;
    this.config = checkConfig(config, "guardChatModel") as ChatModelGuardConfig;
    this.disableStreaming = inner.disableStreaming === true;
  }

  _llmType(): string {
    // Called by the base class's field initialisers too, before `inner` is set.
    return `cycles-guarded-${this.inner?._llmType() ?? "model"}`;
  }

  /** The model name of the action and the price table. */
  get guardedModelName(): string {
    if (this.config.modelName !== undefined) return this.config.modelName;
    const m = this.inner as unknown as Obj;
    for (const k of ["model", "modelName"]) if (typeof m[k] === "string" && m[k] !== "") return m[k] as string;
    return this.inner._llmType();
  }

  /**
   * The inner model's tools bound to this guard (`bindTools` of the inner model, in its own
   * tool format), so the guard sees and caps them.
   */
  bindTools(tools: ChatModels.BindToolsInput[], kwargs?: Partial<CyclesChatModelCallOptions<O>>): ReturnType<NonNullable<ChatModels.BaseChatModel<CyclesChatModelCallOptions<O>, AIMessageChunk>["bindTools"]>> {
    const inner = this.inner as unknown as { bindTools?: (t: unknown, k?: unknown) => unknown };
    if (typeof inner.bindTools !== "function") throw new InvalidArgumentError(`the guarded model (${this.inner._llmType()}) has no bindTools`);
    const { cycles, ...rest } = (kwargs ?? {}) as Obj;
    const bound = inner.bindTools(tools, rest) as Obj;
    // ChatOpenAI binds into a new model's defaultOptions; the base Runnable into a binding's config and kwargs.
    const options = { ...((bound.defaultOptions as Obj | undefined) ?? {}), ...((bound.config as Obj | undefined) ?? {}), ...((bound.kwargs as Obj | undefined) ?? {}) };
    if (cycles !== undefined) options.cycles = cycles;
    return this.withConfig(options as Partial<CyclesChatModelCallOptions<O>>);
  }

  /** The API whose rules the caps follow: Responses for a ChatOpenAI call that takes it (its minimum bound is 16), else Chat Completions. */
  private apiOf(options: Obj): Api {
    const m = this.inner as unknown as { _useResponsesApi?: (o: unknown) => boolean };
    try {
      if (typeof m._useResponsesApi === "function" && m._useResponsesApi(options) === true) return "responses";
    } catch {
      // A model's own routing that fails here fails again when called: that error is the caller's.
    }
    return "chat_completions";
  }

  /** Estimate, reserve, apply the caps: the model and options to call, and how to settle. */
  private async begin(messages: BaseMessage[], parsed: Obj): Promise<Call> {
    const cfg = this.config;
    const { cycles, ...callOptions } = parsed;
    const call = checkCall(cycles);
    // ChatOpenAI merges its defaultOptions (bound tools) only in some entry points: here, in all.
    const defaults = (this.inner as unknown as Obj).defaultOptions;
    const options: Obj = { ...(defaults !== null && typeof defaults === "object" ? (defaults as Obj) : {}), ...callOptions };
    const model = this.guardedModelName;
    const api = this.apiOf(options);
    const request: Obj = {
      model,
      messages: messages.map((m) => ({ role: (m as unknown as { type?: string }).type ?? m._getType(), content: m.content })),
    };
    const bound = boundOf(this.inner);
    if (bound !== undefined) request[api === "responses" ? "max_output_tokens" : "max_tokens"] = bound;
    const tools = Array.isArray(options.tools) ? (options.tools as unknown[]) : undefined;
    if (tools !== undefined && tools.length > 0) {
      request.tools = tools.map((t) => ({ type: "function", function: { name: toolName(t) ?? "" } }));
      const choice = options.tool_choice;
      if (typeof choice === "string" && !MODES.has(choice)) request.tool_choice = { type: "function", function: { name: choice } };
      else if (choice !== undefined && choice !== null) request.tool_choice = choice;
      if (options.parallel_tool_calls !== undefined) request.parallel_tool_calls = options.parallel_tool_calls;
    }
    const table = cfg.pricing ?? { unit: "TOKENS" };
    const estimate = callEstimate(cfg, model, request, call.estimate);
    const action = callAction(cfg, call, model);
    // A denial throws here: the model is not called.
    const r = await cfg.client.reserve({
      estimate,
      action,
      subject: call.subject ?? cfg.subject,
      idempotencyKey: call.idempotencyKey,
      metadata: call.metadata,
      ttlMs: cfg.ttlMs,
      heartbeatPolicy: cfg.heartbeatPolicy,
      signal: options.signal as AbortSignal | undefined,
    });
    let sent: Call;
    try {
      call.onReservation?.(r);
      sent = await this.capped(r, api, request, options);
    } catch (e) {
      await r.fail(); // nothing was sent: released (a refused call was released already)
      throw e;
    }
    sent.settle = (u, succeeded) => settleCall(r, table, model, estimate, u, succeeded);
    return sent;
  }

  /** Under ALLOW_WITH_CAPS, core's plan of the request mapped back onto the model (its bound) and the call options (tools). */
  private async capped(r: GuardedReservation, api: Api, request: Obj, options: Obj): Promise<Call> {
    const call: Call = { model: this.inner, options, settle: async () => undefined };
    if (r.decision !== "ALLOW_WITH_CAPS") return call;
    const plan = r.planCaps(api, request);
    // Core's refusal (released, its reason and message), with the plan that caused it.
    const notSent = async (why?: string): Promise<CallNotSentError> => Object.assign(await r.refuseCall(why), { plan });
    if (!plan.send) throw await notSent();
    if (!plan.changed) return call;
    if (plan.boundTo !== null && plan.boundTo !== plan.boundFrom) {
      // The bound is the model's field, not a call option, in LangChain.js: a model without one cannot carry the cap.
      if (!hasBoundField(this.inner)) throw await notSent(`caps lower the output bound to ${String(plan.boundTo)}, but ${this.inner._llmType()} has no maxTokens or maxOutputTokens field to carry it`);
      call.model = withBound(this.inner, Number(plan.boundTo));
    }
    if (plan.removedTools.length > 0 || plan.unset.length > 0) {
      const out: Obj = { ...options };
      const removed = new Set(plan.removedTools);
      const kept = (options.tools as unknown[]).filter((t) => !removed.has(toolName(t) ?? ""));
      // Set to undefined rather than deleted: a model's defaultOptions must not bring them back.
      out.tools = kept.length > 0 ? kept : undefined;
      for (const k of ["tool_choice", "parallel_tool_calls"]) if (plan.unset.includes(k)) out[k] = undefined;
      call.options = out;
    }
    return call;
  }

  async _generate(messages: BaseMessage[], options: this["ParsedCallOptions"], runManager?: CallbackManagerForLLMRun): Promise<ChatResult> {
    const c = await this.begin(messages, options as unknown as Obj);
    let result: ChatResult;
    try {
      result = await c.model._generate(messages, c.options, runManager);
    } catch (e) {
      await c.settle(NO_USAGE, false);
      throw e;
    }
    await c.settle(resultUsage(result), true);
    return result;
  }

  /**
   * The inner model's chunks, their usage summed. It settles when the stream ends: one that
   * errs is a failed call (its usage so far committed, else released); one its consumer
   * stops early (a `break`, an abort) or that runs to its end succeeded (its usage, else its
   * estimate: the provider may have billed what nobody saw), as every integration does.
   */
  async *_streamResponseChunks(messages: BaseMessage[], options: this["ParsedCallOptions"], runManager?: CallbackManagerForLLMRun): AsyncGenerator<ChatGenerationChunk> {
    const c = await this.begin(messages, options as unknown as Obj);
    const signal = (options as unknown as Obj).signal as AbortSignal | undefined;
    let u = NO_USAGE;
    let ok = true;
    let settled = false;
    const settle = async (succeeded: boolean): Promise<void> => {
      if (settled) return;
      settled = true;
      await c.settle(u, succeeded);
    };
    // LangChain's stream() rejects its consumer on an abort without returning this generator,
    // which would stay suspended: the abort settles it.
    const onAbort = (): void => void settle(true).catch((e: unknown) => process.emitWarning(`cycles-sdk/langchain: settling an aborted stream failed: ${String(e)}`));
    signal?.addEventListener("abort", onAbort, { once: true });
    try {
      for await (const chunk of c.model._streamResponseChunks(messages, c.options, runManager)) {
        u = addUsage(u, (chunk.message as unknown as Obj).usage_metadata as Obj | undefined);
        yield chunk;
      }
    } catch (e) {
      // An abort surfaces as the model's error: the consumer ended it, not the provider.
      if (signal?.aborted !== true) ok = false;
      throw e;
    } finally {
      signal?.removeEventListener("abort", onAbort);
      await settle(ok);
    }
  }
}

type CallOptionsOf<M> = M extends ChatModels.BaseChatModel<infer O, any> ? O : ChatModels.BaseChatModelCallOptions; // eslint-disable-line @typescript-eslint/no-explicit-any

/**
 * `model` guarded by `config.client`: a chat model of its own ({@link CyclesChatModel}); the
 * model passed in is left as it was. Pass the chat model itself, not a binding of it: bind
 * tools on the guard (`guardChatModel(model, cfg).bindTools(tools)`).
 */
export function guardChatModel<M extends AnyChatModel>(model: M, config: ChatModelGuardConfig): CyclesChatModel<CallOptionsOf<M>> {
  if (!isChatModel(model)) {
    throw new InvalidArgumentError(`guardChatModel needs a LangChain chat model (a BaseChatModel of ${PEER}), not a binding or another Runnable: guard the model, then bindTools on the guard`);
  }
  return new CyclesChatModel<CallOptionsOf<M>>(model, config);
}
