package dev.cycles.kotlin

import kotlinx.serialization.KSerializer
import kotlinx.serialization.json.JsonArray
import kotlinx.serialization.json.JsonElement
import kotlinx.serialization.json.JsonObject

/** The least level of the events a collector sees (core's levels). */
typealias EventLevel = dev.cycles.kotlin.ffi.EventLevel

/**
 * One operation's reply: the schema-valid success [body] as core decoded it (the spec's
 * response model, explicit nulls read as absent: a generated result class, or JSON from
 * [CyclesClient.call]) and the transport's facts.
 */
data class Reply<out T>(
    val status: Int,
    val requestId: String?,
    val traceId: String?,
    /** The attempt's round trip in microseconds (0 for a decoded capture). */
    val rttUs: Long,
    val body: T,
) {
    internal companion object {
        fun parse(text: String): Reply<JsonElement> = parse(jsonObject(text)) { it }

        fun <T> parse(text: String, result: KSerializer<T>): Reply<T> =
            parse(jsonObject(text)) { wireJson.decodeFromJsonElement(result, it) }

        private fun <T> parse(o: JsonObject, body: (JsonElement) -> T): Reply<T> = Reply(
            (o.long("status") ?: 0).toInt(),
            o.str("request_id"),
            o.str("trace_id"),
            o.long("rtt_us") ?: 0,
            body(o["body"]!!),
        )
    }
}

/** How a guarded action ended (docs/lifecycle.md has the one table every language follows). */
enum class OutcomeKind {
    /** The actual was settled (see [Outcome.settlement]). */
    SETTLED,

    /** The work failed: known usage settled, else the estimate released. */
    WORK_FAILED,

    /** Succeeded without an actual: nothing committed, the estimate released. */
    MISSING_ACTUAL,

    /** A negative actual: nothing committed, the estimate released. */
    INVALID_ACTUAL,

    /** Ended early by [Reservation.release]. */
    RELEASED,

    /** Settled, but the heartbeat lapsed (policy `FAIL_ON_FINALIZE`). */
    HEARTBEAT_LAPSED,
}

/** A settlement: `committed`, `recovered_via_event`, `pending` or `rejected`. */
data class Settlement(
    val status: String,
    /** The amount applied to the budget (committed or recovered), else null. */
    val charged: Long?,
    /** The unit of [charged]. */
    val unit: BudgetUnit?,
    /** Everything core said (`body`, `reason`, `journaled`, `journal_error`, ...). */
    val json: JsonObject,
) {
    internal companion object {
        fun of(o: JsonObject?): Settlement? = o?.let {
            val charged = it.obj("charged")
            Settlement(it.str("status") ?: "", charged?.long("amount"), charged?.str("unit")?.let(::BudgetUnit), it)
        }
    }
}

/** The outcome of a guarded action (the bridge's finished JSON, typed where it is read). */
data class Outcome(
    val kind: OutcomeKind,
    val reservationId: String,
    /** The actual settled or refused, when there was one. */
    val actual: Long?,
    val settlement: Settlement?,
    /** Whether the estimate was given back. */
    val released: Boolean,
    /** Core's message for the missing- and invalid-actual and lapsed outcomes. */
    val message: String?,
    val json: JsonObject,
) {
    /** The amount the server applied, or null when nothing was. */
    val charged: Long? get() = settlement?.charged

    /** Why the release failed, as `[kind, message]`, when it did. */
    val releaseError: List<String>?
        get() = json.obj("release_error")?.let { listOfNotNull(it.str("error_kind"), it.str("message")) }

    internal companion object {
        fun parse(text: String): Outcome {
            val o = jsonObject(text)
            return Outcome(
                OutcomeKind.valueOf(o.str("outcome")!!.uppercase()),
                o.str("reservation_id") ?: "",
                o.long("actual"),
                Settlement.of(o.obj("settlement")),
                o.bool("released"),
                o.str("message"),
                o,
            )
        }
    }
}

/** What a flush, drain or close did: settlements made, records left, quarantined files. */
data class DrainReport(val json: JsonObject) {
    /** `{reservation_id, settlement}` of each record settled or rejected. */
    val outcomes: JsonArray get() = json.arr("outcomes")

    /** Records still pending. */
    val remaining: JsonArray get() = json.arr("remaining")

    /** Files set aside as corrupt. */
    val quarantined: JsonArray get() = json.arr("quarantined")

    /** Pending settlements the journal could not take (only in this process's memory). */
    val unjournaled: JsonArray get() = json.arr("unjournaled")

    internal companion object {
        fun parse(text: String) = DrainReport(jsonObject(text))
    }
}

/** One event of core's stream (docs/events.md): `kind`, `level`, `reservation_id`, `message`, ... */
data class CyclesEvent(val kind: String, val level: String, val reservationId: String, val message: String, val json: JsonObject) {
    internal companion object {
        fun parse(text: String): CyclesEvent {
            val o = jsonObject(text)
            return CyclesEvent(o.str("kind") ?: "", o.str("level") ?: "", o.str("reservation_id") ?: "", o.str("message") ?: "", o)
        }
    }
}
