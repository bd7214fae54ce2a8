package dev.cycles.kotlin

import dev.cycles.kotlin.RecoverySupport.ACTION
import dev.cycles.kotlin.RecoverySupport.obj
import dev.cycles.kotlin.RecoverySupport.pythonSdkRecord
import dev.cycles.kotlin.RecoverySupport.recordFiles
import dev.cycles.kotlin.RecoverySupport.requests
import dev.cycles.kotlin.RecoverySupport.settlementRequests
import dev.cycles.kotlin.RecoverySupport.settlements
import dev.cycles.kotlin.RecoverySupport.write
import kotlinx.coroutines.CoroutineStart
import kotlinx.coroutines.launch
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withTimeout
import kotlinx.serialization.json.JsonObject
import org.junit.jupiter.api.AfterEach
import org.junit.jupiter.api.Assertions.assertArrayEquals
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertFalse
import org.junit.jupiter.api.Assertions.assertNotEquals
import org.junit.jupiter.api.Assertions.assertThrows
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.io.TempDir
import java.nio.file.Files
import java.nio.file.Path
import java.security.MessageDigest
import java.util.HexFormat
import java.util.concurrent.CopyOnWriteArrayList
import kotlin.time.Duration
import kotlin.time.Duration.Companion.hours
import kotlin.time.Duration.Companion.seconds

/**
 * Recovery conformance on journals written by others (CR-DURABLE-005, CR-DURABLE-007 of
 * ../shared/spec/scenarios.yaml): corrupt and unsupported records are quarantined while valid
 * ones still replay (in a restarted JVM; in the directory or, with
 * CYCLES_TEST_JOURNAL_STORE=redis, in Redis: [TestJournal]); file names are the sha256 of the
 * exact UTF-8 id, legacy names migrate without deleting a colliding record. Real files, a real
 * redis-server, real HTTP.
 */
class RecoveryJournalTest {
    private val server = LocalServer.start()
    private val journals = mutableListOf<TestJournal>()

    @TempDir
    lateinit var tmp: Path

    @AfterEach
    fun stop() {
        server.close()
        journals.forEach { it.close() }
    }

    private fun journal(name: String) = TestJournal(tmp.resolve(name)).also { journals += it }

    /**
     * CR-DURABLE-005: a corrupt, a version-2 and a valid (Python SDK) record; a fresh JVM
     * quarantines the two (kept, reported, never sent) and replays the valid one once.
     */
    @Test
    fun corruptAndUnsupportedRecordsAreQuarantinedAndValidRecordsStillReplay() = runBlocking {
        // The journal under test (the directory, or Redis: TestJournal), written as others would have.
        val j = journal("journal")
        val part = Journal.fingerprint(server.url, server.apiKey, server.tenant)
        val rid = CyclesClient.create(
            ClientOptions(baseUrl = server.url, apiKey = server.apiKey, tenant = server.tenant, journalEnabled = false),
        ).use { c -> RecoverySupport.reserveDirect(c, server.tenant, "d5-reserve") }
        val key = "d5-python-sdk-key"
        val valid = Journal.fileName(rid)
        val corrupt = Journal.fileName("rsv-corrupt")
        val future = Journal.fileName("rsv-future")
        val corruptBytes = """{"version": 1, "reserv""".toByteArray()
        val futureBytes = """{"version": 2, "reservation_id": "rsv-future", "payload": {}}""".toByteArray()
        j.put(server.url, server.apiKey, server.tenant, valid, pythonSdkRecord(rid, server.url, key, 300).toByteArray())
        j.put(server.url, server.apiKey, server.tenant, corrupt, corruptBytes)
        j.put(server.url, server.apiKey, server.tenant, future, futureBytes)
        for ((bytes, why) in listOf(corruptBytes to "corrupt", futureBytes to "unsupported")) {
            val bad = assertThrows(CyclesException::class.java) { Journal.parseRecord(bytes) }
            assertEquals("INVALID_ARGUMENT", bad.name)
            assertEquals(obj("""{"journal_error":"$why"}"""), bad.details)
        }
        assertEquals(listOf(rid), j.pendingIds(server.url, server.apiKey, server.tenant))

        val spec = j.spec(linkedMapOf("url" to server.url, "api_key" to server.apiKey, "tenant" to server.tenant, "mode" to "drain"))
        val result = RecoverySupport.Child(spec, tmp.resolve("restart.json")).finish()
        assertEquals(0, result.o("report")!!.list("remaining").size, result.toString())
        val events = result.list("events")
        val reported = events.filter { it.s("kind") == "journal_quarantined" }
        // corruption_is_reported: one event per quarantined record, naming it and its new name.
        assertEquals(setOf(corrupt, future), reported.map { TestJournal.name(it.s("file")!!) }.toSet(), result.toString())
        assertEquals(2, reported.size)
        val quarantined = j.quarantined()
        assertTrue(quarantined.all { it.partition == part }, quarantined.toString())
        val left = quarantined.map { it.name }
        for (e in reported) {
            assertEquals("quarantined", e.s("disposition"))
            val file = TestJournal.name(e.s("file")!!)
            val why = if (file == corrupt) "corrupt" else "unsupported"
            assertTrue(e.s("reason").toString().contains(why), e.toString())
            assertTrue(left.contains(TestJournal.name(e.s("quarantined_as")!!)), "$e $left")
        }
        // corrupt / unsupported quarantined: renamed, evidence kept byte for byte, never deleted.
        val qc = quarantined.filter { it.name.startsWith("$corrupt.corrupt-") }
        val qf = quarantined.filter { it.name.startsWith("$future.unsupported-") }
        assertEquals(1, qc.size, left.toString())
        assertEquals(1, qf.size, left.toString())
        assertArrayEquals(corruptBytes, qc[0].bytes)
        assertArrayEquals(futureBytes, qf[0].bytes)
        // other_valid_records_still_replay: committed once, stored key; no record is left.
        assertEquals(emptyList<String>(), j.records().map { it.toString() })
        assertEquals(listOf(rid), events.filter { it.s("kind") == "settlement_settled" }.map { it.s("reservation_id") })
        assertEquals(
            listOf("commitReservation:$key:200"),
            settlementRequests(server, rid, key).map { "${it.s("operation")}:${it.s("idempotency_key")}:${it.l("status")}" },
        )
        assertEquals("1,0", settlements(server, rid, key))
        assertEquals(emptyList<String>(), j.pendingIds(server.url, server.apiKey, server.tenant))
        assertTrue(j.dirUntouchedOnRedis, "a Redis run wrote into the directory")
        // Nothing was ever sent for the quarantined records (expected_requests: []).
        assertEquals(
            listOf(rid),
            requests(server).filter { it.s("operation") == "commitReservation" || it.s("operation") == "createEvent" }
                .map { it.s("reservation_id") },
        )
    }

    /**
     * CR-DURABLE-007 (names): v2- + lowercase sha256 hex of the exact, unnormalised UTF-8 id +
     * .json; ids a lossy scheme merges get distinct files.
     */
    @Test
    fun journalFileNamesAreSha256OfTheExactUtf8IdAndNeverShared() {
        val names = mutableSetOf<String>()
        for (rid in TRICKY_IDS) {
            val sha = MessageDigest.getInstance("SHA-256")
            val expected = "v2-" + HexFormat.of().formatHex(sha.digest(rid.toByteArray(Charsets.UTF_8))) + ".json"
            assertEquals(expected, Journal.fileName(rid), rid)
            names += expected
        }
        assertEquals(TRICKY_IDS.size, names.size, "distinct ids, distinct files")
        assertEquals("v2-e3edb9ca022de3c9c90c5667d47fa66448cee1f254e488a761313faee34141d7.json", Journal.fileName("rsv/a"))
        // The legacy scheme is lossy: these collide there, and only there.
        assertEquals(1, listOf("rsv/a", "rsv_a", "rsv.a", "rsv a").map { Journal.legacyFileName(it) }.distinct().size)
    }

    /**
     * CR-DURABLE-007 (legacy): a colliding legacy record of another id is neither read nor deleted
     * while R settles; a matching legacy record of R2 migrates and settles once. The directory's
     * alone (legacy file names do not exist in Redis; kotlin-redis-map.json maps the scenario to
     * JournalRedisTest's key test instead), so it runs on files whatever the store under test.
     */
    @Test
    fun legacyRecordMigratesToItsStandardNameWithoutDeletingACollidingRecord() = runBlocking {
        val d = tmp.resolve("journal")
        val part = d.resolve(Journal.fingerprint(server.url, server.apiKey, server.tenant))
        val got = CopyOnWriteArrayList<CyclesEvent>()
        val client = CyclesClient.create(
            ClientOptions(
                baseUrl = server.url,
                apiKey = server.apiKey,
                tenant = server.tenant,
                journalDir = d.toString(),
                maxAttempts = 1,
                replayInterval = 1.hours,
            ),
        )
        // Subscribed when launch returns (events(): the subscription precedes the first suspension).
        val collector = launch(start = CoroutineStart.UNDISPATCHED) { client.events().collect { got.add(it) } }
        val rid: String
        val collider: String
        val legacy: Path
        val cText: String
        val standard: Path
        val rid2: String
        val legacy2: Path
        try {
            val r = client.reserve(GuardSpec(ACTION, 1_000, idempotencyKey = "d7-r", heartbeat = false))
            rid = r.reservationId
            // C differs from R, yet the lossy legacy scheme names both the same.
            collider = rid.replaceFirst("_", ".")
            assertNotEquals(collider, rid)
            legacy = part.resolve(Journal.legacyFileName(rid))
            assertEquals(Journal.legacyFileName(collider), legacy.fileName.toString())
            assertEquals("$rid.json", legacy.fileName.toString())
            cText = pythonSdkRecord(collider, "http://127.0.0.1:9", "d7-collider-key", 111)
            write(legacy, cText)
            server.addFault(
                obj("""{"operation":"commitReservation","reservation_id":"$rid","times":1,"fault":{"kind":"server_error","status":503}}"""),
            )
            r.setActual(400)
            val s = r.finish().settlement!!
            assertEquals("pending", s.status)
            assertEquals(true, s.json.b("journaled"))
            standard = part.resolve(Journal.fileName(rid))
            assertEquals(listOf(legacy, standard).sorted(), recordFiles(d), "two ids, two files")
            val rec = Journal.parseRecord(Files.readAllBytes(standard))
            assertEquals(rid, rec.s("reservation_id"))
            assertEquals("d7-r:commit", rec.s("idempotency_key"))
            assertEquals(cText, Files.readString(legacy), "the colliding record is neither read nor touched")

            // A matching legacy record of a real reservation R2 (as an older SDK named it).
            rid2 = RecoverySupport.reserveDirect(client, server.tenant, "d7-r2")
            legacy2 = part.resolve(Journal.legacyFileName(rid2))
            write(legacy2, pythonSdkRecord(rid2, server.url, "d7-r2-key", 222))
            val pending = Journal.pending(d.toString(), server.url, server.apiKey, server.tenant)
                .map { it as JsonObject }.associateBy { it.s("reservation_id")!! }
            assertEquals(setOf(rid, collider, rid2), pending.keys)
            assertEquals(
                listOf(true, true, false),
                listOf(pending[collider]!!.b("legacy"), pending[rid2]!!.b("legacy"), pending[rid]!!.b("legacy")),
            )
            client.flush()
        } finally {
            client.closeAndDrain(Duration.ZERO) // C stays journaled
        }
        withTimeout(10.seconds) { collector.join() }
        // R settled once with ITS key (never C's); its standard record is gone.
        assertEquals("1,0", settlements(server, rid, "d7-r:commit"))
        assertFalse(Files.exists(standard))
        // R2 migrated, then settled once with the stored key; no file of it is left.
        assertEquals("1,0", settlements(server, rid2, "d7-r2-key"))
        assertFalse(Files.exists(legacy2) || Files.exists(part.resolve(Journal.fileName(rid2))))
        // C's colliding legacy record is still there, untouched, and still pending.
        assertEquals(cText, Files.readString(legacy), "a colliding legacy record is never deleted")
        assertEquals(listOf(legacy), recordFiles(d))
        val left = Journal.pending(d.toString(), server.url, server.apiKey, server.tenant).map { it as JsonObject }
        assertEquals(1, left.size)
        assertEquals(
            listOf(collider, true, legacy.fileName.toString()),
            listOf(left[0].s("reservation_id"), left[0].b("legacy"), Path.of(left[0].s("file")!!).fileName.toString()),
        )
        assertEquals(listOf(rid2), got.filter { it.kind == "journal_migrated" }.map { it.reservationId })
        assertEquals(emptyList<JsonObject>(), settlementRequests(server, collider, "d7-collider-key"), "never sent")
    }

    companion object {
        /** Ids a lossy name scheme would merge (JournalRedisTest's key test uses them too). */
        val TRICKY_IDS = listOf(
            "rsv/a", "rsv_a", "rsv.a", "rsv a", "rsv:a", "rsv%2Fa", "RSV/A", "rsv/a ", " rsv/a",
            "r\u00e9sum\u00e9", "re\u0301sume\u0301", "\u0440\u0441\u0432", "\u4e88\u7d04-1", "\uD83D\uDCB8", "rsv\\a", "../rsv",
            "a".repeat(
                300,
            ),
        )
    }
}
