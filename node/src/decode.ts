/**
 * Core's response path without a network, for captured exchanges.
 * @module
 */
import { call } from "./errors";
import { parseJson } from "./json";
import type { ResponseMeta } from "./models";
import { fromWire } from "./wire";
import { native } from "./native";

/**
 * Decodes one captured response as the client would: returns the camelCase result
 * (plus `meta`; every int64 exact, a `bigint` beyond 2^53 − 1), or throws the {@link CyclesError} the client would throw. `operation` is the
 * spec's operationId (`createReservation`, `decide`, ...); null only for a non-2xx status.
 */
export function decodeResponse(
  operation: string | null,
  status: number,
  headers: Record<string, string> | [string, string][],
  body: string,
): Record<string, unknown> & { meta: ResponseMeta } {
  const pairs = Array.isArray(headers) ? headers : Object.entries(headers);
  const text = call(() => native.decodeCapturedResponse(operation, status, pairs, body));
  const env = parseJson(text) as { status: number; request_id: string | null; trace_id: string | null; rtt_us: number; body: unknown };
  return {
    ...fromWire<Record<string, unknown>>(env.body),
    meta: { status: env.status, requestId: env.request_id, traceId: env.trace_id, rttUs: env.rtt_us },
  };
}

/** The native addon's version. */
export function nativeVersion(): string {
  return native.version();
}
