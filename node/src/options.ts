/**
 * Checks of what a JavaScript caller hands the client before it crosses into the native
 * module. TypeScript checks typed callers only; napi would coerce the rest silently (`-1`
 * becomes 4294967295 ms, `1.5` becomes 1, `2 ** 40` becomes 0) or fail with a message
 * naming Rust types. Ranges beyond these (a timeout's maximum, ...) stay core's to check
 * (`ConfigError`). `InvalidArgumentError` here, as the Python and JVM bindings raise for an
 * option value their own checks refuse.
 * @module
 * @internal
 */
import { InvalidArgumentError } from "./errors";

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

/** The settings `Client` and `Client.fromEnv` share (everything but `baseUrl` and `apiKey`). */
export interface CheckedSettings {
  maxAttempts: number | undefined;
  replayIntervalMs: number | undefined;
  closeTimeoutMs: number | undefined;
}

/**
 * Checks a `Client`'s options object: `withEndpoint` also requires `baseUrl` and `apiKey`
 * (not for `Client.fromEnv`, whose endpoint comes from the environment). Throws
 * {@link InvalidArgumentError}.
 */
export function checkOptions(options: unknown, withEndpoint: boolean): CheckedSettings {
  if (options === null || typeof options !== "object") {
    throw new InvalidArgumentError(`the client options must be an object ({ baseUrl, apiKey, ... }), not ${describe(options)}`);
  }
  const o = options as Record<string, unknown>;
  if (withEndpoint) {
    for (const name of ["baseUrl", "apiKey"]) {
      if (typeof o[name] !== "string") throw new InvalidArgumentError(`${name} is required and must be a string, not ${describe(o[name])}`);
    }
  }
  optional(o.tenant, "string", "tenant");
  optional(o.defaultUnit, "string", "defaultUnit");
  optional(o.journalDir, "string", "journalDir");
  optional(o.journalEnabled, "boolean", "journalEnabled");
  optional(o.onEvent, "function", "onEvent");
  uint(o.requestTimeoutMs, "requestTimeoutMs", 1);
  uint(o.connectTimeoutMs, "connectTimeoutMs", 1);
  uint(o.maxConcurrentRequests, "maxConcurrentRequests", 1);
  return {
    maxAttempts: uint(o.maxAttempts, "maxAttempts", 1),
    replayIntervalMs: uint(o.replayIntervalMs, "replayIntervalMs", 1),
    closeTimeoutMs: uint(o.closeTimeoutMs, "closeTimeoutMs", 0),
  };
}

/** A required argument in milliseconds, 0 allowed (a drain bound, a clock step); throws {@link InvalidArgumentError}. */
export function requiredMs(value: unknown, name: string): number {
  const ms = uint(value, name, 0);
  if (ms === undefined) throw new InvalidArgumentError(`${name} is required`);
  return ms;
}
