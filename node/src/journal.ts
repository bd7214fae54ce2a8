/**
 * `cycles-sdk/journal`: the durable settlement journal of core (format shared with the
 * official SDKs): identity partitions, record file names, record parsing and the pending
 * listing. Bodies are the exact wire text a replay sends.
 * @module
 */
import { InvalidArgumentError, call } from "./errors";
import { parseJson } from "./json";
import type { Int64 } from "./models";
import { native } from "./native";

/** One journal record as core parses it. */
export interface JournalRecord {
  version: number;
  reservationId: string;
  baseUrl: string | null;
  /** `commit` or `event`. */
  mode: string;
  idempotencyKey: string;
  /** When the record was last written (epoch ms; a `bigint` beyond 2^53 − 1), null when the file does not say. */
  recordedAtMs: Int64 | null;
  /** The rate-limit floor (epoch ms), when set. */
  notBeforeMs: Int64 | null;
  /** The commit body exactly as it will be sent (JSON text). */
  commitBody: string | null;
  /** The event-fallback body exactly as it will be sent (JSON text). */
  eventFallbackBody: string | null;
  /** Members core keeps but does not interpret, in file order. */
  extraKeys: string[];
}

/** A pending record on disk. */
export interface PendingRecord {
  reservationId: string;
  mode: string;
  /** When the record was last written (epoch ms), null when the file does not say. */
  recordedAtMs: Int64 | null;
  /** The rate-limit floor (epoch ms), when set. */
  notBeforeMs: Int64 | null;
  /** File name within its partition. */
  file: string;
  /** Identity partition (fp16). */
  partition: string;
  /** Whether the file has a legacy name. */
  legacy: boolean;
}

/** The identity partition (fp16) of a server URL, API key and tenant. */
export function identityFingerprint(baseUrl: string, apiKey: string, tenant: string | null = null): string {
  return call(() => native.journalFingerprint(baseUrl, apiKey, tenant));
}

/** The record file name of a reservation. */
export function fileName(reservationId: string): string {
  return call(() => native.journalFileName(reservationId));
}

/** The legacy record file name of a reservation (still read). */
export function legacyFileName(reservationId: string): string {
  return call(() => native.journalLegacyFileName(reservationId));
}

/**
 * Parses one record file. A file that is not a usable record throws
 * {@link InvalidArgumentError} whose `details` is `{journal_error: "corrupt" | "unsupported"}`.
 */
export function parseRecord(data: Uint8Array | string): JournalRecord {
  const buf = typeof data === "string" ? Buffer.from(data, "utf8") : Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  const r = parseJson(call(() => native.journalParseRecord(buf))) as Record<string, never>;
  return {
    version: r.version,
    reservationId: r.reservation_id,
    baseUrl: r.base_url,
    mode: r.mode,
    idempotencyKey: r.idempotency_key,
    recordedAtMs: r.recorded_at_ms,
    notBeforeMs: r.not_before_ms,
    commitBody: r.commit_body,
    eventFallbackBody: r.event_fallback_body,
    extraKeys: r.extra_keys,
  };
}

/**
 * The pending records in `journalDir` (a directory, or a `redis://` URL as the `journalUrl`
 * option takes it): one identity's partition when `baseUrl` and `apiKey` are given, every
 * partition when neither is. A missing directory has none; a Redis that cannot be read is an
 * `InvalidArgumentError` saying why.
 */
export function listPending(journalDir: string, baseUrl?: string, apiKey?: string, tenant: string | null = null): PendingRecord[] {
  if ((baseUrl === undefined) !== (apiKey === undefined)) {
    throw new InvalidArgumentError("listPending: give both baseUrl and apiKey, or neither");
  }
  const rows = parseJson(call(() => native.journalPending(journalDir, baseUrl, apiKey, tenant))) as Record<string, never>[];
  return rows.map((p) => ({
    reservationId: p.reservation_id,
    mode: p.mode,
    recordedAtMs: p.recorded_at_ms,
    notBeforeMs: p.not_before_ms,
    file: p.file,
    partition: p.partition,
    legacy: p.legacy,
  }));
}
