package dev.cycles.kotlin

import kotlinx.coroutines.CoroutineStart
import kotlinx.coroutines.launch
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withTimeout
import kotlinx.serialization.json.JsonArray
import java.nio.file.Files
import java.nio.file.Path
import java.nio.file.StandardCopyOption
import java.util.concurrent.CopyOnWriteArrayList
import kotlin.time.Duration
import kotlin.time.Duration.Companion.hours
import kotlin.time.Duration.Companion.seconds

/**
 * One process of a recovery test (started by [RecoverySupport.Child]; not a test class).
 * args[0] is a JSON spec; the process builds a FRESH client from it (nothing but the journal, on
 * disk or in Redis with `journal_url`, crosses from an earlier process), does one thing through
 * the public API, closes the client without draining (what is left stays journaled), and writes
 * its result JSON atomically to `spec.result`. A process the test SIGKILLs writes nothing.
 *
 * Modes: `settle` (reserve without heartbeat, set the actual, finish: the SDK journals, then
 * commits), `flush` (replay every pending record once), `drain` (replay until the journal is
 * empty or the timeout).
 */
object RecoveryChild {
    @JvmStatic
    fun main(args: Array<String>): Unit = runBlocking {
        val spec = RecoverySupport.obj(args[0])
        val client = CyclesClient.create(
            ClientOptions(
                baseUrl = spec.s("url"),
                apiKey = spec.s("api_key"),
                tenant = spec.s("tenant"),
                journalDir = spec.s("dir"),
                journalUrl = spec.s("journal_url"),
                maxAttempts = spec.l("max_attempts") ?: 5,
                // Later background passes would only add noise to what the test observes.
                replayInterval = 1.hours,
            ),
        )
        val events = CopyOnWriteArrayList<CyclesEvent>()
        // Subscribed when launch returns (events(): the subscription precedes the first suspension).
        val collector = launch(start = CoroutineStart.UNDISPATCHED) { client.events().collect { events.add(it) } }
        val resultPath = spec.s("result")!!
        spec.s("go")?.let { go ->
            // Ready first (the identity's fingerprint computed), then released together.
            Journal.fingerprint(spec.s("url")!!, spec.s("api_key")!!, spec.s("tenant"))
            Files.createFile(Path.of("$resultPath.ready"))
            while (!Files.exists(Path.of(go))) Thread.sleep(1)
        }
        val out = LinkedHashMap<String, Any?>()
        out["pid"] = ProcessHandle.current().pid()
        when (val mode = spec.s("mode")) {
            "settle" -> {
                val r = client.reserve(GuardSpec(RecoverySupport.ACTION, 1_000, idempotencyKey = spec.s("key"), heartbeat = false))
                r.setActual(spec.l("amount")!!)
                val s = r.finish().settlement
                out["settlement"] = RecoverySupport.toJson(
                    mapOf("reservation_id" to r.reservationId, "status" to s?.status, "journaled" to (s?.json?.b("journaled") == true)),
                )
            }

            "flush" -> out["report"] = client.flush().json

            "drain" -> out["report"] = client.drain(20.seconds).json

            else -> error("unknown mode $mode")
        }
        client.closeAndDrain(Duration.ZERO)
        // The flow ends once the client is closed, after the last events were read.
        withTimeout(10.seconds) { collector.join() }
        out["events"] = JsonArray(events.map { it.json })
        val tmp = Path.of("$resultPath.tmp")
        Files.writeString(tmp, RecoverySupport.toJson(out).toString())
        Files.move(tmp, Path.of(resultPath), StandardCopyOption.ATOMIC_MOVE)
    }
}
