package dev.cycles.kotlin

import kotlinx.serialization.json.Json
import kotlinx.serialization.json.JsonArray
import kotlinx.serialization.json.JsonElement
import kotlinx.serialization.json.JsonNull
import kotlinx.serialization.json.JsonObject
import kotlinx.serialization.json.JsonPrimitive
import kotlinx.serialization.json.booleanOrNull
import kotlinx.serialization.json.contentOrNull
import kotlinx.serialization.json.longOrNull
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertFalse
import org.junit.jupiter.api.Assertions.assertTrue
import java.io.File
import java.nio.file.Files
import java.nio.file.Path
import java.nio.file.StandardCopyOption
import java.util.concurrent.TimeUnit

/**
 * Helpers of the recovery conformance tests (Recovery*Test): request and ledger filters over
 * the local server's logs, JSON access, and [RecoveryChild] JVM processes. Nothing here stands
 * in for the server: every request goes over real HTTP.
 */
object RecoverySupport {
    val ACTION = Action("llm.completion", "test-model")

    /** A JSON object literal. */
    fun obj(text: String): JsonObject = Json.parseToJsonElement(text) as JsonObject

    fun fault(server: LocalServer, op: String, fault: String) = server.addFault(obj("""{"operation":"$op","times":1,"fault":$fault}"""))

    fun requests(s: LocalServer): List<JsonObject> = s.requests().map { it as JsonObject }

    fun ledger(s: LocalServer): List<JsonObject> = s.ledger().map { it as JsonObject }

    fun operations(s: LocalServer): List<String?> = requests(s).map { it.s("operation") }

    /** The idempotency keys of the server's ledger entries, in order. */
    fun keys(s: LocalServer): List<String?> = ledger(s).map { it.s("idempotency_key") }

    /** Commits of [rid] and events carrying [key], in arrival order. */
    fun settlementRequests(s: LocalServer, rid: String, key: String): List<JsonObject> = requests(s).filter {
        (it.s("operation") == "commitReservation" && it.s("reservation_id") == rid) ||
            (it.s("operation") == "createEvent" && it.s("idempotency_key") == key)
    }

    /** "commits,events": applied commits of [rid], applied events with [key]. */
    fun settlements(s: LocalServer, rid: String, key: String): String {
        val l = ledger(s)
        val commits = l.count { it.s("kind") == "commit" && it.s("reservation_id") == rid }
        val events = l.count { it.s("kind") == "event" && it.s("idempotency_key") == key }
        return "$commits,$events"
    }

    fun applied(s: LocalServer, kind: String): List<JsonObject> = ledger(s).filter { it.s("kind") == kind }

    fun noRelease(s: LocalServer) =
        assertFalse(operations(s).contains("releaseReservation"), "nothing releases a settled reservation: ${operations(s)}")

    /** Record files (standard or legacy `*.json`) of every partition, sorted; a file that vanished while listed is skipped. */
    fun recordFiles(dir: Path): List<Path> {
        if (!Files.exists(dir)) return emptyList()
        return dir.toFile().walkTopDown().filter { it.isFile && it.name.endsWith(".json") }.map { it.toPath() }.sorted().toList()
    }

    /** A record as the official Python SDK writes it (spaced separators, no `mode`). */
    fun pythonSdkRecord(rid: String, baseUrl: String, key: String, amount: Long): String =
        """{"version": 1, "reservation_id": "$rid", "base_url": "$baseUrl", """ +
            """"commit_body": {"idempotency_key": "$key", "actual": {"unit": "USD_MICROCENTS", """ +
            """"amount": $amount}, "metadata": {"note": "caf\u00e9"}}, """ +
            """"event_fallback_body": null, "recorded_at_ms": ${System.currentTimeMillis()}, "not_before_ms": null}"""

    /**
     * Writes [text] to [p] whole, as another SDK's atomic write would (a background replay
     * scanning the directory must never read it half-written); the staged name ends in `.tmp`,
     * which the journal's scan skips.
     */
    fun write(p: Path, text: String) {
        Files.createDirectories(p.parent)
        val staged = p.resolveSibling("${p.fileName}.staged.tmp")
        Files.writeString(staged, text)
        Files.move(staged, p, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING)
    }

    /** A reservation made by a plain operation (no guard): its id. */
    suspend fun reserveDirect(c: CyclesClient, tenant: String, key: String): String = c.createReservation(
        CreateReservationRequest(
            idempotencyKey = key,
            subject = Subject(tenant = tenant),
            action = Action("llm.completion", "test-model"),
            estimate = Amount(BudgetUnit.USD_MICROCENTS, 1000),
        ),
    ).body.reservationId!!

    /** Polls [cond] every 2 ms for up to [ms]. */
    fun waitFor(ms: Long, cond: () -> Boolean): Boolean {
        val end = System.nanoTime() + ms * 1_000_000
        while (System.nanoTime() < end) {
            if (cond()) return true
            Thread.sleep(2)
        }
        return cond()
    }

    /** A [RecoveryChild] JVM: a fresh process, nothing shared but the journal (on disk, or in Redis). */
    class Child(spec: Map<String, Any?>, val result: Path) {
        val process: Process

        init {
            val full = LinkedHashMap(spec)
            full["result"] = result.toString()
            // The test JVM's own classpath (Surefire's, or the JUnit console launcher's) and library path.
            val cp = System.getProperty("surefire.test.class.path") ?: System.getProperty("java.class.path")
            val java = Path.of(System.getProperty("java.home"), "bin", "java").toString()
            process = ProcessBuilder(
                java,
                "-cp",
                cp,
                "-Djna.library.path=" + System.getProperty("jna.library.path"),
                "dev.cycles.kotlin.RecoveryChild",
                toJson(full).toString(),
            ).redirectOutput(ProcessBuilder.Redirect.INHERIT).redirectError(ProcessBuilder.Redirect.INHERIT).start()
        }

        /** Waits for a clean exit and returns the result the child wrote. */
        fun finish(): JsonObject {
            assertTrue(process.waitFor(60, TimeUnit.SECONDS), "child did not finish")
            assertEquals(0, process.exitValue(), "child exit status")
            return obj(Files.readString(result))
        }

        /** SIGKILLs the child (destroyForcibly is SIGKILL on Unix) and reaps it. */
        fun kill() {
            process.destroyForcibly()
            assertTrue(process.waitFor(20, TimeUnit.SECONDS))
            assertEquals(137, process.exitValue(), "killed by SIGKILL")
            assertFalse(Files.exists(result), "a killed child wrote no result")
        }

        /** Whether it built its client and waits for the go file. */
        val ready: Boolean get() = File("$result.ready").exists()
    }

    /** A map of plain values as JSON (strings, numbers, booleans, null). */
    fun toJson(m: Map<String, Any?>): JsonObject = JsonObject(
        m.mapValues { (_, v) ->
            when (v) {
                null -> JsonNull
                is String -> JsonPrimitive(v)
                is Number -> JsonPrimitive(v)
                is Boolean -> JsonPrimitive(v)
                is JsonElement -> v
                else -> error("not a JSON value: $v")
            }
        },
    )
}

// JSON access of the tests (the library's own helpers are internal).

/** A string member, or null (absent, `null`). */
fun JsonObject.s(name: String): String? = (this[name] as? JsonPrimitive)?.contentOrNull

/** An integer member, or null. */
fun JsonObject.l(name: String): Long? = (this[name] as? JsonPrimitive)?.longOrNull

/** A boolean member, or null. */
fun JsonObject.b(name: String): Boolean? = (this[name] as? JsonPrimitive)?.booleanOrNull

/** An object member, or null. */
fun JsonObject.o(name: String): JsonObject? = this[name] as? JsonObject

/** An array member's objects (empty when absent). */
fun JsonObject.list(name: String): List<JsonObject> = (this[name] as? JsonArray)?.map { it as JsonObject } ?: emptyList()
