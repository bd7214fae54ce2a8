/**
 * One error hierarchy for every failure, rooted at {@link CyclesError}. The class is chosen
 * from core's stable error kind; the numeric codes come from core's table (the addon's
 * `errorCodesJson()`), never from a copy here.
 *
 * @example
 * ```ts
 * try { await client.commitReservation(id, req); }
 * catch (e) {
 *   if (e instanceof RateLimitedError) { ... e.retryAfterSeconds ... }
 *   else if (e instanceof TransportError) { ... retry with the same key ... }
 *   else throw e;
 * }
 * ```
 * @module
 */
import { parseJson } from "./json";
import type { Settlement } from "./lifecycle";
import type { EvidenceRef } from "./models";
import { native } from "./native";
import type { CapsPlan } from "./pricing";

/** Core's stable `name -> code` table, from the addon. */
export const ERROR_CODES: ReadonlyMap<string, number> = new Map(
  JSON.parse(native.errorCodesJson()) as [string, number][],
);

/**
 * The bridge's refinements of a kind, `variant -> [kind name, code]` (`error_variants()`):
 * each has a subclass of its kind's class, named after it.
 */
export const ERROR_VARIANTS: ReadonlyMap<string, [string, number]> = new Map(
  (JSON.parse(native.errorVariantsJson()) as [string, string, number][]).map(([v, name, code]) => [v, [name, code]]),
);

/** The fields every {@link CyclesError} carries. */
export interface CyclesErrorFields {
  /** Core's stable numeric code of the kind. */
  code: number;
  /** Core's stable name of the kind (`"TRANSPORT_TIMEOUT"`, `"BUDGET_EXCEEDED"`). */
  name: string;
  /** HTTP status when a response was received. */
  httpStatus: number | null;
  /** The server's `error` code, verbatim, when its body had one. */
  serverCode: string | null;
  /** `X-Request-Id` (or the body's `request_id`). */
  requestId: string | null;
  /** The server's trace id. */
  traceId: string | null;
  /** Whether a retry with the SAME idempotency key may succeed. */
  retryable: boolean;
  /** `Retry-After` as delta seconds, when it was one. */
  retryAfterSeconds: number | null;
  /** `Retry-After` exactly as received. */
  retryAfterRaw: string | null;
  /** The server's `details` object. */
  details: Record<string, unknown> | null;
  /**
   * The server's `cycles_evidence` reference on the error body, when it sent one (a live
   * reservation's 409 denial does): `client.getEvidence(e.cyclesEvidence.evidenceId)`
   * fetches the signed envelope.
   */
  cyclesEvidence: EvidenceRef | null;
}

/** Base of every error this package throws. Never contains the API key. */
export class CyclesError extends Error implements CyclesErrorFields {
  /** Core's kind name this class stands for (subclasses override). */
  static readonly kind: string = "INTERNAL";
  code: number;
  /** Core's stable kind name (`name` is the class name, as for every JavaScript error). */
  errorName: string;
  httpStatus: number | null = null;
  serverCode: string | null = null;
  requestId: string | null = null;
  traceId: string | null = null;
  retryable = false;
  retryAfterSeconds: number | null = null;
  retryAfterRaw: string | null = null;
  details: Record<string, unknown> | null = null;
  cyclesEvidence: EvidenceRef | null = null;

  /** An error of this class's kind; `fields` override the defaults. */
  constructor(message: string, fields: Partial<Omit<CyclesErrorFields, "name">> & { errorName?: string } = {}, options?: { cause?: unknown }) {
    super(message, options);
    const kind = (new.target as typeof CyclesError).kind;
    this.errorName = fields.errorName ?? kind;
    this.code = fields.code ?? ERROR_CODES.get(this.errorName) ?? 0;
    Object.assign(this, { ...fields, errorName: this.errorName, code: this.code });
    this.name = new.target.name;
  }
}

function kind<C extends typeof CyclesError>(cls: C, name: string): C {
  Object.defineProperty(cls, "kind", { value: name });
  return cls;
}

/** A panic or bug inside the native module (INTERNAL). */
export class InternalError extends CyclesError {}
/** Invalid configuration (CONFIG). */
export class ConfigError extends CyclesError {}
/** A bad argument (INVALID_ARGUMENT). */
export class InvalidArgumentError extends CyclesError {}
/** The runtime is unusable (RUNTIME). */
export class CyclesRuntimeError extends CyclesError {}
/** A call on a closed client (RUNTIME, variant "closed"). */
export class ClientClosedError extends CyclesRuntimeError {}
/** No usable response: connect, timeout, reset or other. */
export class TransportError extends CyclesError {}
/** The connection could not be made (TRANSPORT_CONNECT). */
export class TransportConnectError extends TransportError {}
/** The attempt timed out; its outcome is unknown (TRANSPORT_TIMEOUT). */
export class TransportTimeoutError extends TransportError {}
/** The connection was reset (TRANSPORT_RESET). */
export class TransportResetError extends TransportError {}
/** Any other transport failure (TRANSPORT_OTHER). */
export class TransportOtherError extends TransportError {}
/** The server answered with an error status. */
export class HttpError extends CyclesError {}
/** 429: wait `retryAfterSeconds` (RATE_LIMITED). */
export class RateLimitedError extends HttpError {}
/** 5xx (SERVER_ERROR). */
export class ServerError extends HttpError {}
/** A write's 2xx that is not schema-valid (AMBIGUOUS_SUCCESS). */
export class AmbiguousSuccessError extends HttpError {}
/** A status the spec does not define (UNEXPECTED_STATUS). */
export class UnexpectedStatusError extends HttpError {}
/** A read's 2xx that is not schema-valid (INVALID_RESPONSE). */
export class InvalidResponseError extends HttpError {}
/** The server's own error codes. */
export class ApiError extends HttpError {}
/** INVALID_REQUEST. */ export class InvalidRequestError extends ApiError {}
/** UNAUTHORIZED. */ export class UnauthorizedError extends ApiError {}
/** FORBIDDEN. */ export class ForbiddenError extends ApiError {}
/** NOT_FOUND. */ export class NotFoundError extends ApiError {}
/** BUDGET_EXCEEDED. */ export class BudgetExceededError extends ApiError {}
/** BUDGET_FROZEN. */ export class BudgetFrozenError extends ApiError {}
/** BUDGET_CLOSED. */ export class BudgetClosedError extends ApiError {}
/** RESERVATION_EXPIRED. */ export class ReservationExpiredError extends ApiError {}
/** RESERVATION_FINALIZED. */ export class ReservationFinalizedError extends ApiError {}
/** IDEMPOTENCY_MISMATCH. */ export class IdempotencyMismatchError extends ApiError {}
/** UNIT_MISMATCH. */ export class UnitMismatchError extends ApiError {}
/** OVERDRAFT_LIMIT_EXCEEDED. */ export class OverdraftLimitExceededError extends ApiError {}
/** DEBT_OUTSTANDING. */ export class DebtOutstandingError extends ApiError {}
/** MAX_EXTENSIONS_EXCEEDED. */ export class MaxExtensionsExceededError extends ApiError {}
/** LIMIT_EXCEEDED. */ export class LimitExceededError extends ApiError {}
/** TENANT_CLOSED. */ export class TenantClosedError extends ApiError {}
/** The server's INTERNAL_ERROR. */ export class ServerInternalError extends ApiError {}
/** An error code this version does not know (UNKNOWN_ERROR_CODE). */ export class UnknownErrorCodeError extends ApiError {}
/**
 * A guarded action succeeded without reporting its actual amount (an empty stream too):
 * nothing was committed and the reservation was released in the same call (MISSING_ACTUAL).
 * The message is core's text, the same in every language.
 */
export class MissingActualError extends CyclesError {
  /** The reservation (never charged). */
  reservationId = "";
  /** Whether the release succeeded (false: the estimate stays held until the lease expires). */
  released = false;
  /** `[errorKind, message]` of the failed release, null when it succeeded. */
  releaseError: [string, string] | null = null;
}
/**
 * A guarded action reported a negative actual: nothing was committed and the reservation
 * was released (INVALID_ARGUMENT). The message is core's text.
 */
export class InvalidActualError extends InvalidArgumentError {
  /** The reservation. */
  reservationId = "";
  /** Whether the release succeeded. */
  released = false;
  /** `[errorKind, message]` of the failed release, null when it succeeded. */
  releaseError: [string, string] | null = null;
}
/**
 * A provider call that was not made: under `ALLOW_WITH_CAPS` the caps leave no output bound
 * the API accepts (a `caps.maxTokens` of 0, or below Responses' minimum of 16), so the
 * integration did not send it and released the reservation
 * (`GuardedReservation.refuseCall`). A {@link BudgetExceededError} (BUDGET_EXCEEDED,
 * variant `call_not_sent`: the budget allows nothing for this call), so code that handles a
 * denial handles this too. The message is core's text, the same in every language.
 */
export class CallNotSentError extends BudgetExceededError {
  /** The reservation given back. */
  reservationId = "";
  /** Whether its release succeeded (false: the estimate stays held until the lease expires). */
  released = false;
  /** `[errorKind, message]` of the failed release, null when it succeeded. */
  releaseError: [string, string] | null = null;
  /** Core's caps plan that said not to send, when there was one. */
  plan: CapsPlan | null = null;
}
/** The heartbeat stopped before the work finished, under `fail_on_finalize` (HEARTBEAT_LAPSED). */
export class HeartbeatLapsedError extends CyclesError {
  /** The reservation. */
  reservationId = "";
  /** The stop reason's stable name (as in the `heartbeat_failed` event). */
  reason: string | null = null;
  /** How the known actual was settled anyway. */
  settlement: Settlement | null = null;
}

const BY_NAME: Record<string, typeof CyclesError> = {
  INTERNAL: InternalError,
  CONFIG: ConfigError,
  INVALID_ARGUMENT: InvalidArgumentError,
  RUNTIME: CyclesRuntimeError,
  MISSING_ACTUAL: MissingActualError,
  HEARTBEAT_LAPSED: HeartbeatLapsedError,
  TRANSPORT_CONNECT: TransportConnectError,
  TRANSPORT_TIMEOUT: TransportTimeoutError,
  TRANSPORT_RESET: TransportResetError,
  TRANSPORT_OTHER: TransportOtherError,
  RATE_LIMITED: RateLimitedError,
  SERVER_ERROR: ServerError,
  AMBIGUOUS_SUCCESS: AmbiguousSuccessError,
  UNEXPECTED_STATUS: UnexpectedStatusError,
  INVALID_RESPONSE: InvalidResponseError,
  INVALID_REQUEST: InvalidRequestError,
  UNAUTHORIZED: UnauthorizedError,
  FORBIDDEN: ForbiddenError,
  NOT_FOUND: NotFoundError,
  BUDGET_EXCEEDED: BudgetExceededError,
  BUDGET_FROZEN: BudgetFrozenError,
  BUDGET_CLOSED: BudgetClosedError,
  RESERVATION_EXPIRED: ReservationExpiredError,
  RESERVATION_FINALIZED: ReservationFinalizedError,
  IDEMPOTENCY_MISMATCH: IdempotencyMismatchError,
  UNIT_MISMATCH: UnitMismatchError,
  OVERDRAFT_LIMIT_EXCEEDED: OverdraftLimitExceededError,
  DEBT_OUTSTANDING: DebtOutstandingError,
  MAX_EXTENSIONS_EXCEEDED: MaxExtensionsExceededError,
  LIMIT_EXCEEDED: LimitExceededError,
  TENANT_CLOSED: TenantClosedError,
  INTERNAL_ERROR: ServerInternalError,
  UNKNOWN_ERROR_CODE: UnknownErrorCodeError,
};
for (const [name, cls] of Object.entries(BY_NAME)) kind(cls, name);
kind(InvalidActualError, "INVALID_ARGUMENT");

/** The class of each variant of {@link ERROR_VARIANTS}; its kind is the table's. @internal */
export const BY_VARIANT: Record<string, typeof CyclesError> = {
  closed: ClientClosedError,
  call_not_sent: CallNotSentError,
};
for (const [variant, [name]] of ERROR_VARIANTS) {
  const cls = BY_VARIANT[variant];
  if (cls !== undefined) kind(cls, name);
}

/** The class of a stable kind name ({@link CyclesError} for a name this version does not know). */
export function errorClass(name: string): typeof CyclesError {
  return BY_NAME[name] ?? CyclesError;
}

const MARKER = native.errorMarker();

/** The bridge's error fields (`ErrorFields`), as JSON decodes them. @internal */
export interface NativeFields {
  code: number;
  name: string;
  message: string;
  http_status: number | null;
  error_code: string | null;
  request_id: string | null;
  trace_id: string | null;
  retryable: boolean;
  retry_after_raw: string | null;
  retry_after_seconds: number | null;
  details_json: string | null;
  cycles_evidence: { evidence_id: string; cycles_evidence_url: string } | null;
  variant: string | null;
}

/** The {@link CyclesError} of an error thrown by the addon; any other value is returned as is. @internal */
export function fromNative(e: unknown): unknown {
  if (!(e instanceof Error) || !e.message.startsWith(MARKER)) return e;
  let f: NativeFields;
  try {
    f = JSON.parse(e.message.slice(MARKER.length)) as NativeFields;
  } catch {
    return e;
  }
  return fromFields(f);
}

/** The {@link CyclesError} of the bridge's error fields (JSON decoded). @internal */
export function fromFields(f: NativeFields): CyclesError {
  const cls = (f.variant !== null ? BY_VARIANT[f.variant] : undefined) ?? errorClass(f.name);
  let details: Record<string, unknown> | null = null;
  if (f.details_json !== null) {
    try {
      details = parseJson(f.details_json) as Record<string, unknown>;
    } catch {
      details = null;
    }
  }
  return new cls(f.message, {
    code: f.code,
    errorName: f.name,
    httpStatus: f.http_status,
    serverCode: f.error_code,
    requestId: f.request_id,
    traceId: f.trace_id,
    retryable: f.retryable,
    retryAfterSeconds: f.retry_after_seconds,
    retryAfterRaw: f.retry_after_raw,
    details,
    cyclesEvidence: f.cycles_evidence
      ? { evidenceId: f.cycles_evidence.evidence_id, cyclesEvidenceUrl: f.cycles_evidence.cycles_evidence_url }
      : null,
  });
}

/** Runs a native call, rethrowing its error as a {@link CyclesError}. @internal */
export function call<T>(f: () => T): T {
  try {
    return f();
  } catch (e) {
    throw fromNative(e);
  }
}

/** Awaits a native promise, rethrowing its error as a {@link CyclesError}. @internal */
export async function awaitNative<T>(p: Promise<T>): Promise<T> {
  try {
    return await p;
  } catch (e) {
    throw fromNative(e);
  }
}
