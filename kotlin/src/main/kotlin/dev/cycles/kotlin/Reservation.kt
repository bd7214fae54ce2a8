package dev.cycles.kotlin

import dev.cycles.kotlin.ffi.Guard
import kotlinx.serialization.json.JsonObject

/**
 * A running guarded action: report what the work cost ([setActual], or [add] as a stream
 * goes), read the server's [decision] and [caps], then [finish] (or [release] early).
 * [CyclesClient.withReservation] does the finishing on every exit path.
 */
class Reservation internal constructor(private val guard: Guard) {
    /** The reservation's id. */
    val reservationId: String = guard.reservationId()

    /** The unit of the estimate and of every actual. */
    val unit: BudgetUnit = BudgetUnit(guard.unit())

    /** The server's decision: [Decision.ALLOW] or [Decision.ALLOW_WITH_CAPS]. */
    val decision: Decision = Decision(guard.decision())

    /** The caps under [Decision.ALLOW_WITH_CAPS] (`maxTokens`, `toolAllowlist`, ...), else null. */
    val caps: Caps? = guard.capsJson()?.let { wireJson.decodeFromString(Caps.serializer(), it) }

    /** How the action ended, once it did. */
    @Volatile
    var outcome: Outcome? = null
        private set

    /** The actual reported so far, or null. */
    val actual: Long? get() = guard.actual()

    /** Whether the heartbeat cancelled the work (policy `CANCEL`). */
    val isCancelled: Boolean get() = guard.isCancelled()

    /** Whether the action has ended. */
    val isFinished: Boolean get() = guard.isFinished()

    /** Sets the actual amount (replaces what was reported). */
    fun setActual(amount: Long) = native { guard.setActual(amount) }

    /** Adds to the actual amount (streaming usage). */
    fun add(amount: Long) = native { guard.add(amount) }

    /** The commit's metrics (`tokensInput`, `latencyMs`, `custom`, ...). */
    fun setMetrics(metrics: StandardMetrics) =
        native { guard.setMetricsJson(wireJson.encodeToString(StandardMetrics.serializer(), metrics)) }

    /** The commit's metrics as JSON (`StandardMetrics`: `tokens_input`, `latency_ms`, ...). */
    fun setMetrics(metrics: JsonObject) = native { guard.setMetricsJson(metrics.toString()) }

    /** The commit's metadata, sent exactly as given. */
    fun setMetadata(metadata: JsonObject) = native { guard.setMetadataJson(metadata.toString()) }

    /**
     * The caps rewrite of a provider request (`api`: `chat_completions`, `responses` or
     * `messages`): the plan (`send`, `set`, `removed_tools`, ...). Reported as `caps_applied`.
     */
    fun planCaps(api: String, request: JsonObject): JsonObject = jsonObject(native { guard.planCaps(api, request.toString()) })

    /**
     * Ends the action early and gives the estimate back ([OutcomeKind.RELEASED]).
     * `INVALID_ARGUMENT`, the action left running, once usage was reported.
     */
    suspend fun release(reason: String? = null): Outcome {
        val o = Outcome.parse(native { guard.release(reason) })
        outcome = o
        return o
    }

    /**
     * Ends the action: the known usage is settled (journal first), else the estimate is
     * released. With [workSucceeded], a missing actual throws [MissingActualException], a
     * negative one [InvalidActualException], a lapsed heartbeat under `FAIL_ON_FINALIZE`
     * [HeartbeatLapsedException] (each after the outcome is recorded in [outcome]). The
     * settlement runs on core's runtime: cancelling the caller does not cancel it.
     */
    suspend fun finish(workSucceeded: Boolean = true): Outcome {
        val o = Outcome.parse(native { guard.finish(workSucceeded) })
        outcome = o
        if (!workSucceeded) return o
        when (o.kind) {
            OutcomeKind.MISSING_ACTUAL -> throw MissingActualException(
                o.message ?: "missing actual",
                o.reservationId,
                o.released,
                o.releaseError,
            )

            OutcomeKind.INVALID_ACTUAL -> throw InvalidActualException(o.message ?: "invalid actual", o.reservationId, o.released)

            OutcomeKind.HEARTBEAT_LAPSED -> throw HeartbeatLapsedException(o.message ?: "the heartbeat lapsed", o)

            else -> return o
        }
    }
}
