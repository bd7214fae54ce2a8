package dev.cycles.kotlin

import kotlinx.coroutines.runBlocking
import kotlinx.serialization.KSerializer
import kotlinx.serialization.json.Json
import kotlinx.serialization.json.JsonArray
import kotlinx.serialization.json.JsonElement
import kotlinx.serialization.json.JsonObject
import kotlinx.serialization.json.JsonPrimitive
import kotlinx.serialization.json.int
import kotlinx.serialization.json.jsonArray
import kotlinx.serialization.json.jsonObject
import kotlinx.serialization.json.jsonPrimitive
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import java.nio.file.Files
import java.nio.file.Path

/**
 * The shared per-operation test (`conformance/vectors/operations.json`, docs/bindings.md "Adding
 * an operation") through the Kotlin face's generated methods and classes against a fresh local
 * server: each step's wire-spelled arguments read into the operation's request class (and
 * written back the same, so no member is lost on the way), its result read into the result
 * class, the status and the expected members checked. Every operation of core's table has a
 * step.
 */
class OperationVectorsTest {
    private val saved = mutableMapOf<String, JsonElement>()

    private fun resolve(e: JsonElement): JsonElement = when (e) {
        is JsonPrimitive -> if (e.isString && e.content.startsWith("$")) saved.getValue(e.content.drop(1)) else e
        is JsonObject -> JsonObject(e.mapValues { resolve(it.value) })
        is JsonArray -> JsonArray(e.map { resolve(it) })
    }

    /** [args] as the request class, which must write back exactly [args]. */
    private fun <T> request(serializer: KSerializer<T>, args: JsonObject): T {
        val r = wireJson.decodeFromJsonElement(serializer, args)
        assertEquals(args, wireJson.encodeToJsonElement(serializer, r), "a member the request class does not carry")
        return r
    }

    private suspend fun run(c: CyclesClient, op: String, path: List<String>, a: JsonObject): Reply<Any> = when (op) {
        "createReservation" -> c.createReservation(request(CreateReservationRequest.serializer(), a))
        "getReservation" -> c.getReservation(path[0])
        "extendReservation" -> c.extendReservation(path[0], request(ExtendRequest.serializer(), a))
        "listReservations" -> c.listReservations(request(ReservationQuery.serializer(), a))
        "commitReservation" -> c.commitReservation(path[0], request(CommitRequest.serializer(), a))
        "releaseReservation" -> c.releaseReservation(path[0], request(ReleaseRequest.serializer(), a))
        "decide" -> c.decide(request(DecisionRequest.serializer(), a))
        "createEvent" -> c.createEvent(request(EventRequest.serializer(), a))
        "getBalances" -> c.getBalances(request(BalanceQuery.serializer(), a))
        "getEvidence" -> c.getEvidence(path[0])
        "getEvidenceJwks" -> c.getEvidenceJwks()
        else -> error("no Kotlin method for $op")
    }

    private fun member(o: JsonElement, dotted: String): JsonElement = dotted.split('.').fold(o) { at, k -> at.jsonObject.getValue(k) }

    @Test
    fun everyOperationThroughItsGeneratedMethod() = runBlocking {
        val dir = Path.of(System.getProperty("cycles.vectors.dir") ?: "../conformance/vectors")
        val doc = Json.parseToJsonElement(Files.readString(dir.resolve("operations.json"))).jsonObject
        val steps = doc.getValue("steps").jsonArray.map { it.jsonObject }
        assertEquals(resultSerializers.keys, steps.map { it.getValue("operation").jsonPrimitive.content }.toSet())
        Fixture().use { fx ->
            fx.client(fx.options().copy(journalEnabled = false)).use { client ->
                for (step in steps) {
                    val op = step.getValue("operation").jsonPrimitive.content
                    val path = (step["path"] as? JsonArray)?.map { resolve(it).jsonPrimitive.content } ?: emptyList()
                    val args = resolve(step["args"] ?: JsonObject(emptyMap())).jsonObject
                    val reply = run(client, op, path, args)

                    @Suppress("UNCHECKED_CAST")
                    val body = wireJson.encodeToJsonElement(resultSerializers.getValue(op) as KSerializer<Any>, reply.body)
                    val expect = step.getValue("expect").jsonObject
                    assertEquals(expect.getValue("status").jsonPrimitive.int, reply.status, op)
                    for ((k, v) in (expect["members"] as? JsonObject ?: JsonObject(emptyMap()))) {
                        assertEquals(resolve(v), body.jsonObject[k], "$op: $k")
                    }
                    for ((name, dotted) in (step["save"] as? JsonObject ?: JsonObject(emptyMap()))) {
                        saved[name] = member(body, dotted.jsonPrimitive.content)
                    }
                }
            }
        }
        assertTrue(saved.containsKey("evidence_id"))
    }
}
