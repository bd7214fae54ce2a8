package dev.cycles.kotlin

import dev.cycles.kotlin.RecoverySupport.obj
import kotlinx.coroutines.runBlocking
import kotlinx.serialization.json.JsonObject
import kotlinx.serialization.json.JsonPrimitive
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.io.TempDir
import java.nio.file.Files
import java.nio.file.Path
import kotlin.time.Duration.Companion.hours
import kotlin.time.Duration.Companion.seconds

/**
 * `journalUrl`: the settlement journal in Redis (core's Redis store), against a real
 * `redis-server` and the local server: records are keyed by the file store's names of their
 * exact ids (CR-DURABLE-007 of the Redis claim, kotlin-redis-map.json), and what one client
 * could not settle is drained by another that shares nothing with it but Redis, once.
 */
class JournalRedisTest {
    @TempDir
    lateinit var tmp: Path

    private fun recordFiles(dir: Path): Long =
        if (!Files.exists(dir)) 0 else dir.toFile().walkTopDown().count { it.name.matches(Regex("v2-[0-9a-f]{64}\\.json")) }.toLong()

    /**
     * CR-DURABLE-007 on Redis (legacy file names do not exist there): each record's key ends in
     * the file store's name for the exact id (`v2-<sha256>.json`), ids that differ only in ways a
     * lossy scheme would erase never share a key, each key holds its own id's record, and
     * another client's drain reads each back as its own and settles it once.
     */
    @Test
    fun redisRecordKeysAreTheFileNamesOfTheExactIds() = runBlocking {
        val ids = RecoveryJournalTest.TRICKY_IDS
        TestRedis(true, tmp.resolve("redis").also { Files.createDirectories(it) }).use { redis ->
            Fixture().use { fx ->
                val options = fx.options().copy(journalUrl = redis.url, replayInterval = 1.hours)
                // Every first commit fails: each settlement stays journaled under its id.
                fx.server.addFault(obj("""{"operation":"commitReservation","times":0,"fault":{"kind":"server_error","status":503}}"""))
                CyclesClient.create(options.copy(maxAttempts = 1)).use { c ->
                    for (id in ids) {
                        fx.server.addFault(
                            obj(
                                """{"operation":"createReservation","times":1,"fault":{"kind":"reservation_id","id":${JsonPrimitive(
                                    id,
                                )}}}""",
                            ),
                        )
                        val r = c.reserve(GuardSpec(RecoverySupport.ACTION, 1_000, heartbeat = false))
                        r.setActual(640)
                        val o = r.finish()
                        assertEquals(id, o.reservationId)
                        assertEquals("pending", o.settlement!!.status, id)
                        assertEquals(true, o.settlement!!.json.b("journaled"), id)
                    }
                }
                val part = Journal.fingerprint(fx.server.url, fx.server.apiKey, fx.server.tenant)
                val keys = (redis.cli(null, "KEYS", "cycles:journal:*:r:*") as List<*>).map { it as String }.sorted()
                val want = ids.map { "cycles:journal:{$part}:r:${Journal.fileName(it)}" }.sorted()
                assertEquals(want, keys, "one key per id, named as the file store names it")
                for (id in ids) {
                    val text = redis.cli(null, "GET", "cycles:journal:{$part}:r:${Journal.fileName(id)}") as String
                    assertEquals(
                        id,
                        Journal.parseRecord(text.toByteArray()).s("reservation_id"),
                        "the record under ${Journal.fileName(id)}",
                    )
                }
                assertEquals(0L, recordFiles(fx.journal), "nothing was written to the directory")

                fx.server.clearFaults()
                CyclesClient.create(options).use { other ->
                    val d = other.drain(20.seconds)
                    assertTrue(d.remaining.isEmpty(), d.json.toString())
                    val outcomes = d.outcomes.map { it as JsonObject }
                    assertEquals(ids.sorted(), outcomes.map { it.s("reservation_id")!! }.sorted(), d.json.toString())
                    // The server refuses the 300-character id's commit (the spec allows 128): a
                    // terminal rejection, whose record goes all the same.
                    for (o in outcomes) {
                        val id = o.s("reservation_id")!!
                        assertEquals(if (id.length > 128) "rejected" else "committed", o.o("settlement")!!.s("status"), id)
                    }
                }
                assertEquals(emptyList<Any>(), redis.cli(null, "KEYS", "cycles:journal:*:r:*"), "every record removed")
                val accepted = ids.count { it.length <= 128 }
                assertEquals(accepted, fx.ledger().count { it == "commit:640" }, fx.ledger().toString())
            }
        }
    }
}
