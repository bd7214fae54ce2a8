// The Kotlin face's `load` op (conformance/matrix/PROTOCOL.md; scripts/load.sh): its own file,
// as the JVM face's Work.java, so Face.kt gains only the dispatch line.

import dev.cycles.kotlin.Action
import dev.cycles.kotlin.BudgetUnit
import dev.cycles.kotlin.CyclesClient
import dev.cycles.kotlin.CyclesException
import dev.cycles.kotlin.GuardSpec
import dev.cycles.kotlin.Reservation
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.launch
import kotlinx.coroutines.withContext
import kotlinx.serialization.json.JsonObject
import kotlinx.serialization.json.JsonPrimitive
import java.util.concurrent.ConcurrentHashMap
import java.util.concurrent.atomic.AtomicInteger
import kotlin.time.Duration

/**
 * The load run: `count` guarded actions at once on ONE client of the tenant, default unit and
 * journal (every other option its default), a coroutine each on [Dispatchers.Default] (the
 * Kotlin idiom: no thread per action), each [CyclesClient.withReservation] of the bare
 * estimate 5 under the key `P-i` whose block sets the actual 3. Counted by the settlement's
 * status, or `error:NAME` when the guarded call raised; the client is then closed without a
 * drain, so what could not settle stays journaled for the orchestrator's `drain`.
 */
suspend fun load(r: JsonObject): JsonObject {
    val count = amount(r["count"], "count")
    val prefix = r.str("key_prefix")!!
    val outcomes = ConcurrentHashMap<String, AtomicInteger>()
    val client = CyclesClient.create(options(r).copy(defaultUnit = r.str("default_unit")?.let(::BudgetUnit)))
    try {
        // withContext returns when every child coroutine has ended (structured concurrency).
        withContext(Dispatchers.Default) {
            for (i in 0 until count) {
                launch {
                    val spec = GuardSpec(Action("llm.completion", "load"), 5, idempotencyKey = "$prefix-$i")
                    val name = try {
                        var held: Reservation? = null
                        client.withReservation(spec) {
                            held = this
                            setActual(3)
                        }
                        val o = held!!.outcome!!
                        o.settlement?.status ?: o.kind.name.lowercase()
                    } catch (e: CyclesException) {
                        "error:${e.name}"
                    }
                    outcomes.computeIfAbsent(name) { AtomicInteger() }.incrementAndGet()
                }
            }
        }
    } finally {
        client.closeAndDrain(Duration.ZERO)
    }
    return obj("outcomes" to JsonObject(outcomes.toSortedMap().mapValues { JsonPrimitive(it.value.get()) }))
}
