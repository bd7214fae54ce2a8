package dev.cycles.kotlin

import kotlinx.serialization.json.JsonArray
import kotlinx.serialization.json.JsonElement
import kotlinx.serialization.json.JsonObject
import dev.cycles.kotlin.ffi.FallbackPlanner as NativeFallback
import dev.cycles.kotlin.ffi.PrimaryPlanner as NativePrimary

/**
 * Core's pure heartbeat math (the spec's formulas; no clock, no I/O) in the shared vectors'
 * encoding: durations are JSON integers or `"infinite"`.
 */
object Timing {
    /** One function by name (`schedule`, `lead_floor`, ..., `extend_timeout`; docs/c.md). */
    fun call(name: String, args: JsonObject): JsonElement = json(native { dev.cycles.kotlin.ffi.timingCall(name, args.toString()) })

    /** The normative planner ([derive]: the enforced timeout derived from short leases). */
    class PrimaryPlanner(requestTimeout: JsonElement, derive: Boolean = false) {
        private val p = native { NativePrimary(requestTimeout.toString(), derive) }

        /** One step (`at_us`, `remaining_ttl_ms` / `rtt_ms`, or a `failure`): the decision. */
        fun step(step: JsonObject): JsonObject = jsonObject(native { p.step(step.toString()) })

        /** The enforced timeout of the next attempt. */
        fun attemptTimeout(): JsonElement = json(p.attemptTimeout())
    }

    /** The fallback planner for servers without `remaining_ttl_ms`. */
    class FallbackPlanner(requestedTtlMs: Long, reserveReceivedUs: Long, expiresAtMs: Long) {
        private val p = NativeFallback(requestedTtlMs.toULong(), reserveReceivedUs.toULong(), expiresAtMs)

        /** The first beat's decision ([prime]: extend at once). */
        fun firstBeat(prime: Boolean): JsonObject = jsonObject(p.firstBeat(prime))

        /** One step (`at_us`, `expires_at_ms`, or a `failure`): the decision. */
        fun step(step: JsonObject): JsonObject = jsonObject(native { p.step(step.toString()) })

        /** The current regime's name. */
        val regime: String get() = p.regime()

        /** The lower bound of the lead at [nowUs] (null past 64 bits). */
        fun leadMinMs(nowUs: Long): Long? = p.leadMinMs(nowUs.toULong())
    }
}

/** Core's journal helpers: names, the identity partition, record parsing, the pending scan. */
object Journal {
    /** The identity partition (16 hex digits) of (base URL, API key, tenant). */
    fun fingerprint(baseUrl: String, apiKey: String, tenant: String?): String =
        dev.cycles.kotlin.ffi.journalFingerprint(baseUrl, apiKey, tenant)

    /** The record file name (v2) of a reservation. */
    fun fileName(reservationId: String): String = dev.cycles.kotlin.ffi.journalFileName(reservationId)

    /** The legacy (pre-v2) record file name of a reservation. */
    fun legacyFileName(reservationId: String): String = dev.cycles.kotlin.ffi.journalLegacyFileName(reservationId)

    /**
     * A record file's bytes parsed (`reservation_id`, `mode`, `commit_body`, ...); a file that
     * is not a usable record throws `INVALID_ARGUMENT` with `details.journal_error`.
     */
    fun parseRecord(data: ByteArray): JsonObject = jsonObject(native { dev.cycles.kotlin.ffi.journalParseRecord(data) })

    /**
     * The valid pending records of [journal] (a directory, or a `redis://` URL as
     * [ClientOptions.journalUrl] takes it): of one identity, or of all (both null). A journal
     * that cannot be read throws `INVALID_ARGUMENT` saying why.
     */
    fun pending(journal: String, baseUrl: String? = null, apiKey: String? = null, tenant: String? = null): JsonArray =
        jsonArray(native { dev.cycles.kotlin.ffi.journalPending(journal, baseUrl, apiKey, tenant) })
}

/** Core's pure pricing (estimate, price table, caps, actual), JSON in and out. */
object Pricing {
    /** One function by name (`estimate`, `actual`, `plan_caps`, ...; docs/integrations.md). */
    fun call(name: String, args: JsonObject): JsonElement = json(native { dev.cycles.kotlin.ffi.pricingCall(name, args.toString()) })
}

/** Captured responses decoded through core's response path, without a network. */
object Captured {
    /**
     * The reply core would return for this exchange, or the [CyclesException] it would throw.
     * [operationId] is the spec's (`getReservation`); null only for a non-2xx status.
     */
    fun decode(operationId: String?, status: Int, headers: JsonObject?, body: ByteArray): Reply<JsonElement> =
        Reply.parse(native { dev.cycles.kotlin.ffi.decodeCaptured(operationId, status.toUShort(), headers?.toString(), body) })
}
