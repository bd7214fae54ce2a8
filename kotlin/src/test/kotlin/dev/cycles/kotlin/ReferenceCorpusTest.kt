package dev.cycles.kotlin

import kotlinx.serialization.KSerializer
import kotlinx.serialization.json.Json
import kotlinx.serialization.json.JsonArray
import kotlinx.serialization.json.JsonElement
import kotlinx.serialization.json.JsonNull
import kotlinx.serialization.json.JsonObject
import kotlinx.serialization.json.JsonPrimitive
import kotlinx.serialization.json.int
import kotlinx.serialization.json.jsonObject
import kotlinx.serialization.json.jsonPrimitive
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertNotNull
import org.junit.jupiter.api.Assertions.assertThrows
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Assertions.fail
import org.junit.jupiter.api.Test
import java.nio.file.Files
import java.nio.file.Path

/**
 * The captured reference-server corpus (217 exchanges, ../shared/fixtures/reference-server)
 * through [Captured.decode], the client's own response path: every 2xx decodes to exactly what
 * the server sent less its explicit nulls, and into its operation's generated result class
 * with every member kept (written back, the same JSON); every error throws [CyclesException]
 * with every field. A missing corpus FAILS, naming the path.
 */
class ReferenceCorpusTest {
    private data class Exchange(val name: String, val operation: String?, val status: Int, val headers: JsonObject, val body: String) {
        fun header(n: String): String? = headers.entries.firstOrNull { it.key.equals(n, ignoreCase = true) }?.value?.jsonPrimitive?.content
    }

    private fun load(): List<Exchange> {
        val p = Path.of(
            System.getProperty("cycles.reference.corpus") ?: "../../shared/fixtures/reference-server/exchanges.jsonl",
        ).toAbsolutePath().normalize()
        if (!Files.isRegularFile(
                p,
            )
        ) {
            fail<Unit>("the reference-server corpus is missing: $p does not exist (shared/fixtures/reference-server/exchanges.jsonl)")
        }
        return Files.readAllLines(p).filter { it.isNotBlank() }.map { line ->
            val x = Json.parseToJsonElement(line).jsonObject
            val r = x["response"]!!.jsonObject
            Exchange(
                x["name"]!!.jsonPrimitive.content,
                x["operation"]?.takeIf { it !is JsonNull }?.jsonPrimitive?.content,
                r["status"]!!.jsonPrimitive.int,
                r["headers"]!!.jsonObject,
                r["body"]!!.jsonPrimitive.content,
            )
        }
    }

    private fun withoutNulls(e: JsonElement): JsonElement = when (e) {
        is JsonObject -> JsonObject(e.filterValues { it !is JsonNull }.mapValues { withoutNulls(it.value) })
        is JsonArray -> JsonArray(e.map { withoutNulls(it) })
        else -> e
    }

    private fun countNulls(e: JsonElement): Int = when (e) {
        JsonNull -> 1
        is JsonObject -> e.values.sumOf { countNulls(it) }
        is JsonArray -> e.sumOf { countNulls(it) }
        else -> 0
    }

    private fun checkSuccess(x: Exchange): Int {
        assertNotNull(x.operation, "${x.name}: a 2xx belongs to an operation")
        val r = Captured.decode(x.operation, x.status, x.headers, x.body.toByteArray())
        assertEquals(x.status, r.status, x.name)
        assertEquals(x.header("X-Request-Id"), r.requestId, x.name)
        assertEquals(x.header("X-Cycles-Trace-Id"), r.traceId, x.name)
        assertEquals(0L, r.rttUs, x.name)
        val raw = Json.parseToJsonElement(x.body)
        assertEquals(withoutNulls(raw), r.body, "${x.name}: the decoded body differs from what the server sent")
        // The typed reply: the operation's generated result class, with every member the server
        // sent (written back, it is the same JSON: nothing dropped, nothing renamed).
        @Suppress("UNCHECKED_CAST")
        val result = resultSerializers[x.operation] as KSerializer<Any>
        val typed = Reply.parse(reply(r), result)
        assertEquals(result.descriptor.serialName.substringAfterLast('.'), typed.body::class.simpleName, x.name)
        assertEquals(withoutNulls(raw), wireJson.encodeToJsonElement(result, typed.body), "${x.name}: the typed body differs")
        typedBodies++
        return countNulls(raw)
    }

    private var typedBodies = 0

    /** A reply as the bridge writes it, for the typed path ([Reply.parse] with a result class). */
    private fun reply(r: Reply<JsonElement>): String = JsonObject(
        mapOf(
            "status" to JsonPrimitive(r.status),
            "request_id" to JsonPrimitive(r.requestId),
            "trace_id" to JsonPrimitive(r.traceId),
            "rtt_us" to JsonPrimitive(r.rttUs),
            "body" to r.body,
        ),
    ).toString()

    private fun checkError(x: Exchange) {
        val e =
            assertThrows(CyclesException::class.java, { Captured.decode(x.operation, x.status, x.headers, x.body.toByteArray()) }, x.name)
        val body = runCatching { Json.parseToJsonElement(x.body) as? JsonObject }.getOrNull()
        val code = (body?.get("error") as? JsonPrimitive)?.content
        val kind = when {
            x.status == 429 -> "RATE_LIMITED"
            x.status >= 500 -> "SERVER_ERROR"
            code != null -> code.also { assertTrue(CyclesException.errorCodes.containsKey(it), "${x.name}: $it") }
            else -> "INVALID_REQUEST".also { assertEquals(400, x.status, x.name) }
        }
        assertEquals(kind, e.name, "${x.name}: $e")
        assertEquals(x.status, e.httpStatus, x.name)
        assertEquals(code, e.errorCode, x.name)
        val m = (body?.get("message") as? JsonPrimitive)?.content
        if (m != null) assertEquals(m, e.message, x.name) else assertTrue(e.message!!.contains("non-JSON"), "${x.name}: $e")
        assertEquals(x.header("X-Request-Id"), e.requestId, x.name)
        assertEquals(x.header("X-Cycles-Trace-Id"), e.traceId, x.name)
        if (body != null) {
            assertEquals((body["request_id"] as? JsonPrimitive)?.content, e.requestId, x.name)
            assertEquals((body["trace_id"] as? JsonPrimitive)?.content, e.traceId, x.name)
        }
        assertEquals(body?.get("details")?.takeIf { it !is JsonNull }, e.details, x.name)
        val ra = x.header("Retry-After")
        assertEquals(ra, e.retryAfterRaw, x.name)
        assertEquals(ra?.toLong(), e.retryAfterSeconds, x.name)
        assertEquals(x.status == 429 || x.status >= 500, e.retryable, x.name)
        assertTrue(!e.toString().contains("<api-key>"), "never the key")
    }

    @Test
    fun everyReferenceExchangeDecodesLikeTheClient() {
        val corpus = load()
        assertEquals(217, corpus.size, "exchanges in the corpus")
        var ok = 0
        var failed = 0
        var nulls = 0
        var bodiesWithNulls = 0
        val ops = sortedSetOf<String>()
        for (x in corpus) {
            x.operation?.let { ops.add(it) }
            if (x.status in 200..299) {
                val n = checkSuccess(x)
                nulls += n
                if (n > 0) bodiesWithNulls++
                ok++
            } else {
                checkError(x)
                failed++
            }
        }
        assertEquals(217, ok + failed)
        assertEquals(109, ok, "2xx exchanges")
        assertEquals(11, ops.size, "all operations covered: $ops")
        assertEquals(resultSerializers.keys, ops, "a result class for every operation")
        assertEquals(109, typedBodies, "2xx bodies read into their result classes")
        assertEquals(34, bodiesWithNulls, "bodies with explicit nulls")
        assertTrue(nulls > 100, "$nulls nulls")
        println("reference corpus: $ok successes, $failed errors")
    }

    @Test
    fun badInputIsATypedError() {
        val noOp = assertThrows(CyclesException::class.java) { Captured.decode(null, 200, null, ByteArray(0)) }
        assertEquals("INVALID_ARGUMENT", noOp.name)
        val badHeaders = assertThrows(CyclesException::class.java) {
            Captured.decode("getReservation", 200, JsonObject(mapOf("a" to JsonPrimitive(1))), ByteArray(0))
        }
        assertEquals("headers must be a JSON object of string values", badHeaders.message)
    }
}
