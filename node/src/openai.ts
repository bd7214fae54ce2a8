/**
 * `cycles-sdk/openai`: an `OpenAI` client (the `openai` package, an optional peer
 * dependency) guarded in one line. `chat.completions.create` and `responses.create`,
 * streaming and not, then reserve before the provider is called, lower the request's output
 * bound and filter its tools under `ALLOW_WITH_CAPS`, and commit the usage the provider
 * reports (docs/integrations.md, "Node").
 *
 * Each call: core's estimate of the request (`estimateRequest`: prompt estimate + output
 * bound, priced by the guard's `pricing`) is reserved as action `llm.completion` named after
 * the model; a denial throws {@link BudgetExceededError} and nothing is sent. Under caps the
 * request is rewritten by core's plan (the `caps_applied` event says so; a cap of 0 releases
 * and throws {@link CallNotSentError}). The provider's usage (every stream event, in order)
 * is folded by core and settled by core's rule: the actual is committed (also when the call
 * then failed), a call that failed before any usage is released, one that succeeded with no
 * usage commits the estimate. A stream holds its reservation (heartbeat) until it is
 * exhausted, aborted or left (`break`); Chat Completions streams get
 * `stream_options.include_usage: true` unless the caller set `include_usage`, so their last
 * chunk has empty `choices` and carries the usage.
 *
 * Per call, the `cycles` member of the request options (removed before the provider sees
 * them) overrides the action's name, kind and tags, the subject, the estimate and the
 * idempotency key ({@link CyclesCallOptions}; in TypeScript build them with {@link withCycles}).
 *
 * @example
 * ```ts
 * import OpenAI from "openai";
 * import { Client } from "cycles-sdk";
 * import { guardOpenAI } from "cycles-sdk/openai";
 * const openai = guardOpenAI(new OpenAI(), { client: Client.fromEnv() });
 * const r = await openai.chat.completions.create({ model: "gpt-4o-mini", max_tokens: 64, messages: [{ role: "user", content: "Hi" }] });
 * ```
 * @module
 */
import { BudgetExceededError } from "./errors";
import { type GuardConfig, checkConfig, guardedCall, method, view } from "./integration";

export { CallNotSentError, type CyclesCallOptions, type GuardConfig, type GuardedPromise, type WithResponse, withCycles } from "./integration";
export { BudgetExceededError };

/** The part of an `OpenAI` client the guard replaces. */
export interface OpenAILike {
  chat: { completions: { create: (...args: never[]) => unknown } };
  responses: { create: (...args: never[]) => unknown };
}

const PKG = "openai";

/**
 * `openai` guarded: a view of the client whose `chat.completions.create` and
 * `responses.create` reserve, cap and settle (everything else is the client's own). The
 * client passed in stays unguarded. Typed as the client itself.
 */
export function guardOpenAI<C extends OpenAILike>(openai: C, config: GuardConfig): C {
  const cfg = checkConfig(config, "guardOpenAI");
  const chatCreate = method(openai, "chat.completions.create", PKG);
  const responsesCreate = method(openai, "responses.create", PKG);
  const completions = openai.chat.completions as object;
  const responses = openai.responses as object;
  const client: unknown = openai; // what a library stream keeps (for tee())
  const createChat = (body: unknown, options?: unknown) =>
    guardedCall("chat_completions", cfg, body, options, (b, o) => chatCreate.call(completions, b, o).withResponse(), client);
  const createResponse = (body: unknown, options?: unknown) =>
    guardedCall("responses", cfg, body, options, (b, o) => responsesCreate.call(responses, b, o).withResponse(), client);
  return view(openai, {}, {
    chat: (chat) => view(chat, {}, { completions: (c) => view(c, { create: createChat }) }),
    responses: (r) => view(r, { create: createResponse }),
  });
}
