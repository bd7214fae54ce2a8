/**
 * The request and result shapes of the runtime plane, camelCase. Requests are converted to
 * the wire's snake_case and results back; free-form members (`metadata`, `custom`,
 * `dimensions`, `details`, `payload`) are passed through untouched.
 * @module
 */

/**
 * A 64-bit integer of the wire (`format: int64`: amounts, epoch and duration milliseconds,
 * token counts): a `number` while it is a safe integer, a `bigint` beyond ±(2^53 − 1), so
 * every value arrives exactly. Requests take either form.
 */
export type Int64 = number | bigint;

/** An amount in a unit (`USD_MICROCENTS`, `TOKENS`, `CREDITS`, `RISK_POINTS`). */
export interface Amount {
  unit: string;
  amount: Int64;
}

/** Who spends: at least one of the standard fields. */
export interface Subject {
  tenant?: string;
  workspace?: string;
  app?: string;
  workflow?: string;
  agent?: string;
  toolset?: string;
  dimensions?: Record<string, string>;
}

/** What is being done. */
export interface Action {
  kind: string;
  name: string;
  tags?: string[];
}

/** Operator caps on an ALLOW_WITH_CAPS decision. */
export interface Caps {
  maxTokens?: Int64;
  maxStepsRemaining?: Int64;
  toolAllowlist?: string[];
  toolDenylist?: string[];
  cooldownMs?: Int64;
}

/** Standard metrics sent with a commit or event. */
export interface StandardMetrics {
  tokensInput?: Int64;
  tokensOutput?: Int64;
  latencyMs?: Int64;
  modelVersion?: string;
  custom?: Record<string, unknown>;
}

/** One scope's balance. */
export interface Balance {
  scope: string;
  scopePath: string;
  remaining: Amount;
  reserved?: Amount;
  spent?: Amount;
  debt?: Amount;
  allocated?: Amount;
  overdraftLimit?: Amount;
  isOverLimit?: boolean;
}

/** A reference to signed evidence. */
export interface EvidenceRef {
  evidenceId: string;
  cyclesEvidenceUrl: string;
}

/** Transport facts of one response. */
export interface ResponseMeta {
  status: number;
  requestId: string | null;
  traceId: string | null;
  /** Round trip of the attempt in microseconds (0 when not one request). */
  rttUs: number;
}

/** Every result carries its response's transport facts. */
export interface WithMeta {
  meta: ResponseMeta;
}

/** `createReservation` request. */
export interface ReservationCreateRequest {
  idempotencyKey: string;
  /** Who spends; default: the client's tenant (`INVALID_ARGUMENT` when it has none). */
  subject?: Subject;
  action: Action;
  estimate: Amount;
  ttlMs?: Int64;
  gracePeriodMs?: Int64;
  overagePolicy?: string;
  dryRun?: boolean;
  metadata?: Record<string, unknown>;
}

/** `createReservation` result. */
export interface ReservationCreated extends WithMeta {
  decision: string;
  affectedScopes: string[];
  reservationId?: string;
  reserved?: Amount;
  expiresAtMs?: Int64;
  remainingTtlMs?: Int64;
  scopePath?: string;
  caps?: Caps;
  balances?: Balance[];
  reasonCode?: string;
  retryAfterMs?: Int64;
  cyclesEvidence?: EvidenceRef;
}

/** `commitReservation` request. */
export interface CommitRequest {
  idempotencyKey: string;
  actual: Amount;
  metrics?: StandardMetrics;
  metadata?: Record<string, unknown>;
}

/** `commitReservation` result. */
export interface CommitResult extends WithMeta {
  status: string;
  charged: Amount;
  released?: Amount;
  balances?: Balance[];
  cyclesEvidence?: EvidenceRef;
}

/** `releaseReservation` request. */
export interface ReleaseRequest {
  idempotencyKey: string;
  reason?: string;
}

/** `releaseReservation` result. */
export interface ReleaseResult extends WithMeta {
  status: string;
  released: Amount;
  balances?: Balance[];
  cyclesEvidence?: EvidenceRef;
}

/** `extendReservation` request. */
export interface ExtendRequest {
  idempotencyKey: string;
  extendByMs: Int64;
  metadata?: Record<string, unknown>;
}

/** `extendReservation` result. */
export interface ExtendResult extends WithMeta {
  status: string;
  expiresAtMs: Int64;
  remainingTtlMs?: Int64;
  balances?: Balance[];
}

/** `decide` request. */
export interface DecisionRequest {
  idempotencyKey: string;
  /** Who spends; default: the client's tenant (`INVALID_ARGUMENT` when it has none). */
  subject?: Subject;
  action: Action;
  estimate: Amount;
  metadata?: Record<string, unknown>;
}

/** `decide` result. */
export interface DecisionResult extends WithMeta {
  decision: string;
  caps?: Caps;
  reasonCode?: string;
  retryAfterMs?: Int64;
  affectedScopes?: string[];
  cyclesEvidence?: EvidenceRef;
}

/** `createEvent` request. */
export interface EventCreateRequest {
  idempotencyKey: string;
  /** Who spends; default: the client's tenant (`INVALID_ARGUMENT` when it has none). */
  subject?: Subject;
  action: Action;
  actual: Amount;
  overagePolicy?: string;
  metrics?: StandardMetrics;
  clientTimeMs?: Int64;
  metadata?: Record<string, unknown>;
}

/** `createEvent` result. */
export interface EventResult extends WithMeta {
  status: string;
  eventId: string;
  charged?: Amount;
  balances?: Balance[];
}

/** `getBalances` query (at least one subject field). */
export interface BalanceQuery {
  tenant?: string;
  workspace?: string;
  app?: string;
  workflow?: string;
  agent?: string;
  toolset?: string;
  includeChildren?: boolean;
  limit?: number;
  cursor?: string;
}

/** `getBalances` result. */
export interface BalancesResult extends WithMeta {
  balances: Balance[];
  nextCursor?: string;
  hasMore?: boolean;
}

/** `listReservations` query. */
export interface ListReservationsQuery {
  idempotencyKey?: string;
  status?: string;
  tenant?: string;
  workspace?: string;
  app?: string;
  workflow?: string;
  agent?: string;
  toolset?: string;
  from?: string;
  to?: string;
  expiresFrom?: string;
  expiresTo?: string;
  finalizedFrom?: string;
  finalizedTo?: string;
  sortBy?: string;
  sortDir?: string;
  include?: string[];
  limit?: number;
  cursor?: string;
}

/** One reservation as the server reports it. */
export interface Reservation {
  reservationId: string;
  status: string;
  subject: Subject;
  action: Action;
  reserved: Amount;
  createdAtMs: Int64;
  expiresAtMs: Int64;
  scopePath: string;
  affectedScopes: string[];
  idempotencyKey?: string;
  committed?: Amount;
  finalizedAtMs?: Int64;
  metadata?: Record<string, unknown>;
  committedMetadata?: Record<string, unknown>;
  evidence?: { reserve?: EvidenceRef; commit?: EvidenceRef; release?: EvidenceRef };
}

/** `getReservation` result. */
export interface ReservationResult extends Reservation, WithMeta {}

/** `listReservations` result. */
export interface ReservationPage extends WithMeta {
  reservations: Reservation[];
  nextCursor?: string;
  hasMore?: boolean;
}

/** `getEvidence` result (the payload as signed). */
export interface EvidenceEnvelope extends WithMeta {
  schemaVersion: string;
  artifactType: string;
  serverId: string;
  signerDid: string;
  issuedAtMs: Int64;
  payload: unknown;
  [key: string]: unknown;
}

/** `getEvidenceJwks` result. */
export interface EvidenceJwks extends WithMeta {
  keys: Record<string, unknown>[];
}

// Members whose contents are the user's (or the server's) own keys: never renamed.
const OPAQUE = new Set([
  "metadata",
  "committed_metadata",
  "committedMetadata",
  "custom",
  "dimensions",
  "details",
  "payload",
  "keys",
]);

const snakeKey = (k: string): string => k.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
const camelKey = (k: string): string => k.replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase());

function convert(v: unknown, key: (k: string) => string, dropUndefined: boolean): unknown {
  if (Array.isArray(v)) return v.map((x) => convert(x, key, dropUndefined));
  if (v === null || typeof v !== "object") return v;
  const out: Record<string, unknown> = {};
  for (const [k, x] of Object.entries(v as Record<string, unknown>)) {
    if (x === undefined && dropUndefined) continue;
    out[key(k)] = OPAQUE.has(k) ? x : convert(x, key, dropUndefined);
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
