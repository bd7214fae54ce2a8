/**
 * The wire conversion of the models (`./models`, generated from core's types): camelCase
 * requests to the wire's snake_case and results back, free-form members untouched.
 * @module
 */

import { OPAQUE_MEMBERS } from "./models";

const snakeKey = (k: string): string => k.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
const camelKey = (k: string): string => k.replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase());

function convert(v: unknown, key: (k: string) => string, dropUndefined: boolean): unknown {
  if (Array.isArray(v)) return v.map((x) => convert(x, key, dropUndefined));
  if (v === null || typeof v !== "object") return v;
  const out: Record<string, unknown> = {};
  for (const [k, x] of Object.entries(v as Record<string, unknown>)) {
    if (x === undefined && dropUndefined) continue;
    out[key(k)] = OPAQUE_MEMBERS.has(k) ? x : convert(x, key, dropUndefined);
  }
  return out;
}

/** A camelCase request as wire JSON (snake_case keys, undefined members dropped). @internal */
export function toWire(v: unknown): unknown {
  return convert(v, snakeKey, true);
}

/** A wire JSON value with camelCase keys. @internal */
export function fromWire<T>(v: unknown): T {
  return convert(v, camelKey, false) as T;
}
