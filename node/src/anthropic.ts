/**
 * `cycles-sdk/anthropic`: an `Anthropic` client (the `@anthropic-ai/sdk` package, an optional
 * peer dependency) guarded in one line: `messages.create` (streaming and not) and
 * `messages.stream` reserve before the provider is called, lower `max_tokens` and filter the
 * tools under `ALLOW_WITH_CAPS`, and commit the usage the provider reports (`message_start`'s
 * input, `message_delta`'s output; cache tokens count as input), by the same core rules as
 * `cycles-sdk/openai` (docs/integrations.md, "Node").
 *
 * `messages.stream` returns the library's own `MessageStream` at once, as unguarded; its
 * request waits for the reservation. Like every error of a `MessageStream`, a denial then
 * reaches its listeners and promises as the library wraps it: an `AnthropicError` whose
 * `cause` is the {@link BudgetExceededError} (`messages.create` throws the
 * `BudgetExceededError` itself). A broken stream commits the usage seen so far (a stream cut
 * after `message_start` is charged its input tokens).
 *
 * @example
 * ```ts
 * import Anthropic from "@anthropic-ai/sdk";
 * import { Client } from "cycles-sdk";
 * import { guardAnthropic } from "cycles-sdk/anthropic";
 * const anthropic = guardAnthropic(new Anthropic(), { client: Client.fromEnv() });
 * const m = await anthropic.messages.create({ model: "claude-3-5-haiku-latest", max_tokens: 64, messages: [{ role: "user", content: "Hi" }] });
 * ```
 * @module
 */
import { BudgetExceededError } from "./errors";
import { type GuardConfig, checkConfig, guardedCall, method, view } from "./integration";

export { CallNotSentError, type CyclesCallOptions, type GuardConfig, type GuardedPromise, type WithResponse, withCycles } from "./integration";
export { BudgetExceededError };

/** The part of an `Anthropic` client the guard replaces. */
export interface AnthropicLike {
  messages: { create: (...args: never[]) => unknown; stream: (...args: never[]) => unknown };
}

const PKG = "@anthropic-ai/sdk";

/**
 * `@anthropic-ai/sdk` guarded: a view of the client whose `messages.create` and
 * `messages.stream` reserve, cap and settle (everything else is the client's own). The
 * client passed in stays unguarded. Typed as the client itself.
 */
export function guardAnthropic<C extends AnthropicLike>(anthropic: C, config: GuardConfig): C {
  const cfg = checkConfig(config, "guardAnthropic");
  const create = method(anthropic, "messages.create", PKG);
  const stream = method(anthropic, "messages.stream", PKG);
  const messages = anthropic.messages as object;
  const client: unknown = anthropic; // what a library stream keeps (for tee())
  const guardedCreate = (body: unknown, options?: unknown) =>
    guardedCall("messages", cfg, body, options, (b, o) => create.call(messages, b, o).withResponse(), client);
  // The library's own stream helper, making its request through the guarded create: one
  // reservation per stream, every event it reads folded into the usage.
  const through = Object.create(messages) as object;
  Object.defineProperty(through, "create", { value: guardedCreate });
  const guardedStream = (body: unknown, options?: unknown) => stream.call(through, body, options);
  return view(anthropic, {}, {
    messages: (m) => view(m, { create: guardedCreate, stream: guardedStream }),
  });
}
