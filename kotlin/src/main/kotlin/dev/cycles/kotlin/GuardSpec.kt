package dev.cycles.kotlin

import kotlinx.serialization.json.JsonObject
import kotlinx.serialization.json.buildJsonObject
import kotlinx.serialization.json.put
import kotlin.time.Duration

/** What the heartbeat does when it cannot keep the lease alive. */
enum class HeartbeatPolicy(internal val wire: String) {
    /** Report it as an event; settle as usual. */
    WARN("warn"),

    /** Settle, then raise [HeartbeatLapsedException]. */
    FAIL_ON_FINALIZE("fail_on_finalize"),

    /** Mark the work cancelled ([Reservation.isCancelled]). */
    CANCEL("cancel"),
}

/**
 * A guarded action: only [action] and [estimate] are required. A bare estimate is in [unit],
 * else the client's default unit; the subject defaults to the client's tenant and the
 * idempotency key to a fresh one (the bridge's rules, as in every language).
 */
data class GuardSpec(
    val action: Action,
    val estimate: Long,
    val unit: BudgetUnit? = null,
    val subject: Subject? = null,
    val idempotencyKey: String? = null,
    val ttl: Duration? = null,
    val gracePeriod: Duration? = null,
    val overagePolicy: OveragePolicy? = null,
    /** Sent with the reservation exactly as given. */
    val metadata: JsonObject? = null,
    val heartbeat: Boolean = true,
    val policy: HeartbeatPolicy = HeartbeatPolicy.WARN,
) {
    internal fun toJson(): JsonObject = buildJsonObject {
        idempotencyKey?.let { put("idempotency_key", it) }
        subject?.let { put("subject", wireJson.encodeToJsonElement(Subject.serializer(), it)) }
        put("action", wireJson.encodeToJsonElement(Action.serializer(), action))
        put("estimate", estimate)
        unit?.let { put("unit", it.value) }
        ttl?.let { put("ttl_ms", it.inWholeMilliseconds) }
        gracePeriod?.let { put("grace_period_ms", it.inWholeMilliseconds) }
        overagePolicy?.let { put("overage_policy", it.value) }
        metadata?.let { put("metadata", it) }
        put("heartbeat", heartbeat)
        put("policy", policy.wire)
    }
}
