package dev.cycles.kotlin

import kotlin.time.Duration
import kotlinx.serialization.json.JsonArray
import kotlinx.serialization.json.JsonObject
import kotlinx.serialization.json.JsonPrimitive
import kotlinx.serialization.json.buildJsonObject
import kotlinx.serialization.json.put

/** What is being done: `kind` (`llm.completion`) and `name` (`openai:gpt-4o-mini`). */
data class Action(val kind: String, val name: String, val tags: List<String>? = null) {
    internal fun toJson(): JsonObject = buildJsonObject {
        put("kind", kind)
        put("name", name)
        tags?.let { t -> put("tags", JsonArray(t.map { JsonPrimitive(it) })) }
    }
}

/** Who is charged; members left `null` are not sent. */
data class Subject(
    val tenant: String? = null,
    val workspace: String? = null,
    val app: String? = null,
    val workflow: String? = null,
    val agent: String? = null,
    val toolset: String? = null,
    val dimensions: Map<String, String>? = null,
) {
    internal fun toJson(): JsonObject = buildJsonObject {
        tenant?.let { put("tenant", it) }
        workspace?.let { put("workspace", it) }
        app?.let { put("app", it) }
        workflow?.let { put("workflow", it) }
        agent?.let { put("agent", it) }
        toolset?.let { put("toolset", it) }
        dimensions?.let { d -> put("dimensions", JsonObject(d.mapValues { JsonPrimitive(it.value) })) }
    }
}

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
    val unit: String? = null,
    val subject: Subject? = null,
    val idempotencyKey: String? = null,
    val ttl: Duration? = null,
    val gracePeriod: Duration? = null,
    val overagePolicy: String? = null,
    /** Sent with the reservation exactly as given. */
    val metadata: JsonObject? = null,
    val heartbeat: Boolean = true,
    val policy: HeartbeatPolicy = HeartbeatPolicy.WARN,
) {
    internal fun toJson(): JsonObject = buildJsonObject {
        idempotencyKey?.let { put("idempotency_key", it) }
        subject?.let { put("subject", it.toJson()) }
        put("action", action.toJson())
        put("estimate", estimate)
        unit?.let { put("unit", it) }
        ttl?.let { put("ttl_ms", it.inWholeMilliseconds) }
        gracePeriod?.let { put("grace_period_ms", it.inWholeMilliseconds) }
        overagePolicy?.let { put("overage_policy", it) }
        metadata?.let { put("metadata", it) }
        put("heartbeat", heartbeat)
        put("policy", policy.wire)
    }
}
