package dev.cycles.kotlin

import kotlinx.serialization.json.JsonObject
import kotlinx.serialization.json.buildJsonObject
import kotlinx.serialization.json.put
import kotlin.time.Duration

/**
 * What a [CyclesClient] is built with; `null` is core's default. The bridge checks every
 * value and names a bad one as spelled here (`requestTimeoutMs must be an integer from 0 to
 * 4294967295, not -1`); what core validates (a zero timeout) is a `CONFIG` error.
 */
data class ClientOptions(
    /** The server (`http://host:port`); required unless taken from the environment. */
    val baseUrl: String? = null,
    /** The API key; required unless taken from the environment. */
    val apiKey: String? = null,
    /** The tenant: the subject of a guarded action that names none. */
    val tenant: String? = null,
    /** The unit of bare estimates (default [BudgetUnit.USD_MICROCENTS]). */
    val defaultUnit: BudgetUnit? = null,
    /** One request's bound. */
    val requestTimeout: Duration? = null,
    /** One connection's bound. */
    val connectTimeout: Duration? = null,
    /** The settlement journal's directory. */
    val journalDir: String? = null,
    /** A Redis journal (`redis://...`) instead of the directory. */
    val journalUrl: String? = null,
    /** `false`: no journal (settlements live only in memory). */
    val journalEnabled: Boolean? = null,
    /** Requests in flight at once. */
    val maxConcurrentRequests: Long? = null,
    /** The most bytes one response body may hold. */
    val maxResponseBytes: Long? = null,
    /** Settle attempts before a settlement stays pending. */
    val maxAttempts: Long? = null,
    /** How often the background replay runs. */
    val replayInterval: Duration? = null,
    /** How long [CyclesClient.close] drains pending settlements (default 5 s). */
    val closeTimeout: Duration? = null,
) {
    /** The options as the bridge's JSON (camelCase, milliseconds). */
    internal fun toJson(): JsonObject = buildJsonObject {
        baseUrl?.let { put("baseUrl", it) }
        apiKey?.let { put("apiKey", it) }
        tenant?.let { put("tenant", it) }
        defaultUnit?.let { put("defaultUnit", it.value) }
        requestTimeout?.let { put("requestTimeoutMs", it.inWholeMilliseconds) }
        connectTimeout?.let { put("connectTimeoutMs", it.inWholeMilliseconds) }
        journalDir?.let { put("journalDir", it) }
        journalUrl?.let { put("journalUrl", it) }
        journalEnabled?.let { put("journalEnabled", it) }
        maxConcurrentRequests?.let { put("maxConcurrentRequests", it) }
        maxResponseBytes?.let { put("maxResponseBytes", it) }
        maxAttempts?.let { put("maxAttempts", it) }
        replayInterval?.let { put("replayIntervalMs", it.inWholeMilliseconds) }
        closeTimeout?.let { put("closeTimeoutMs", it.inWholeMilliseconds) }
    }
}
