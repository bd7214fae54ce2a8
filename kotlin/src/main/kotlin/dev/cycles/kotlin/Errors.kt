package dev.cycles.kotlin

import dev.cycles.kotlin.ffi.CyclesNativeException
import kotlinx.serialization.json.JsonObject

/**
 * Every error of the Cycles SDK: core's stable kind ([name], [code]; the table is core's,
 * [CyclesException.errorCodes]) and what the server said. Catch it and branch on [name], or
 * catch the subclasses the lifecycle raises ([MissingActualException],
 * [HeartbeatLapsedException]) and [ClientClosedException].
 *
 * ```
 * try { client.withReservation(spec) { ... } }
 * catch (e: CyclesException) { if (e.name == "BUDGET_EXCEEDED") ... else throw e }
 * ```
 */
open class CyclesException internal constructor(
    /** Core's stable name of the kind (`INVALID_ARGUMENT`, `BUDGET_EXCEEDED`, ...). */
    val name: String,
    /** Core's stable numeric code of the kind. */
    val code: Int,
    message: String,
    /** The HTTP status, when a response was received. */
    val httpStatus: Int? = null,
    /** The server's `error` code, when its body had one. */
    val errorCode: String? = null,
    /** The server's request id. */
    val requestId: String? = null,
    /** The server's trace id. */
    val traceId: String? = null,
    /** Whether core classifies the failure as retryable. */
    val retryable: Boolean = false,
    /** `Retry-After` exactly as received. */
    val retryAfterRaw: String? = null,
    /** `Retry-After` in seconds, when it was a delta. */
    val retryAfterSeconds: Long? = null,
    /** The server's `details` object. */
    val details: JsonObject? = null,
    /** The error body's evidence reference (`evidence_id`, `cycles_evidence_url`). */
    val evidence: JsonObject? = null,
) : RuntimeException(message) {
    /** Core's error table and the translation of the native error. */
    companion object {
        /** Core's `(name, code)` table, in core's order. */
        val errorCodes: Map<String, Int> by lazy {
            dev.cycles.kotlin.ffi.errorCodes().associate { it.name to it.code.toInt() }
        }

        internal fun of(e: CyclesNativeException.Failure): CyclesException {
            val details = e.detailsJson?.let { jsonObject(it) }
            val evidence = e.evidenceJson?.let { jsonObject(it) }
            val seconds = e.retryAfterSeconds?.toLong()
            if (e.variant == "closed") return ClientClosedException(e.code.toInt(), e.name, e.reason)
            return CyclesException(
                e.name, e.code.toInt(), e.reason, e.httpStatus?.toInt(), e.errorCode, e.requestId,
                e.traceId, e.retryable, e.retryAfterRaw, seconds, details, evidence,
            )
        }

        /** An exception of core's kind [name] (its code from the table). */
        internal fun kind(name: String, message: String): CyclesException = CyclesException(name, errorCodes[name] ?: 0, message)
    }

    override fun toString(): String = "CyclesException($name, $code): $message"
}

/** A call on a closed client (core's RUNTIME kind). */
class ClientClosedException internal constructor(code: Int, name: String, message: String) : CyclesException(name, code, message)

/**
 * Guarded work that succeeded without reporting its actual: nothing was committed, and the
 * reservation was released in the same call unless [releaseError] says why not.
 */
class MissingActualException internal constructor(
    message: String,
    /** The reservation. */
    val reservationId: String,
    /** Whether the estimate was given back. */
    val released: Boolean,
    /** Why the release failed (`[kind, message]`), when it did. */
    val releaseError: List<String>?,
) : CyclesException("MISSING_ACTUAL", errorCodes["MISSING_ACTUAL"] ?: 0, message)

/** Guarded work that reported a negative actual: nothing committed, the estimate released. */
class InvalidActualException internal constructor(
    message: String,
    /** The reservation. */
    val reservationId: String,
    /** Whether the estimate was given back. */
    val released: Boolean,
) : CyclesException("INVALID_ARGUMENT", errorCodes["INVALID_ARGUMENT"] ?: 0, message)

/** Policy `FAIL_ON_FINALIZE`: the heartbeat stopped before the work ended; the actual was settled. */
class HeartbeatLapsedException internal constructor(
    message: String,
    /** The outcome, with the settlement of the actual. */
    val outcome: Outcome,
) : CyclesException("HEARTBEAT_LAPSED", errorCodes["HEARTBEAT_LAPSED"] ?: 0, message)

/** Runs a native call, turning the generated exception into [CyclesException]. */
internal inline fun <T> native(call: () -> T): T = try {
    call()
} catch (e: CyclesNativeException.Failure) {
    throw CyclesException.of(e)
}
