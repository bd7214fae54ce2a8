/**
 * What a JavaScript caller hands the client, on its way into the native module. The client
 * options go as JSON to the bridge, which checks them (one table and one error text for
 * every language); call arguments in milliseconds are checked here, since napi would coerce
 * them silently (`-1` becomes 4294967295 ms, `1.5` becomes 1).
 * @module
 * @internal
 */
import { InvalidArgumentError } from "./errors";
import { stringifyJson } from "./json";

/** The largest value the native module takes for a count or a duration in milliseconds. */
const U32_MAX = 0xffff_ffff;

/** `value` as an integer from `min` to 2^32 - 1 (`undefined`/`null` pass as `undefined`). */
function uint(value: unknown, name: string, min: number): number | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== "number" || !Number.isInteger(value) || value < min || value > U32_MAX) {
    throw new InvalidArgumentError(`${name} must be an integer from ${min} to ${U32_MAX}, not ${describe(value)}`);
  }
  return value;
}

function optional(value: unknown, type: "string" | "boolean" | "function", name: string): void {
  if (value !== undefined && value !== null && typeof value !== type) {
    throw new InvalidArgumentError(`${name} must be a ${type}, not ${describe(value)}`);
  }
}

function describe(value: unknown): string {
  if (typeof value === "string") return JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}...` : value);
  if (typeof value === "number" || typeof value === "bigint" || typeof value === "boolean") return String(value);
  if (value === null || value === undefined) return String(value);
  return `a value of type ${typeof value}`;
}

/**
 * The client options as the bridge's JSON (camelCase, `onEvent` left out): the bridge checks
 * every member against its one table and names a bad one as written here
 * (`requestTimeoutMs must be an integer from 1 to 4294967295, not -1`). A number JSON cannot
 * carry (`NaN`, `Infinity`) goes as its text, so it is refused by name rather than dropped.
 */
export function optionsJson(options: object): string {
  const out: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(options)) {
    if (name === "onEvent") continue;
    out[name] = typeof value === "number" && !Number.isFinite(value) ? String(value) : value;
  }
  return stringifyJson(out);
}

/** The `onEvent` listener of client options, checked (a function or absent). */
export function eventListenerOf<L extends (...args: never[]) => unknown>(options: unknown): L | undefined {
  if (options === null || typeof options !== "object") {
    throw new InvalidArgumentError(`the client options must be an object ({ baseUrl, apiKey, ... }), not ${describe(options)}`);
  }
  optional((options as { onEvent?: unknown }).onEvent, "function", "onEvent");
  return (options as { onEvent?: L }).onEvent ?? undefined;
}

/** A required argument in milliseconds, 0 allowed (a drain bound, a clock step); throws {@link InvalidArgumentError}. */
export function requiredMs(value: unknown, name: string): number {
  const ms = uint(value, name, 0);
  if (ms === undefined) throw new InvalidArgumentError(`${name} is required`);
  return ms;
}
