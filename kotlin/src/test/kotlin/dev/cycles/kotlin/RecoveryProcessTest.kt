package dev.cycles.kotlin

import dev.cycles.kotlin.RecoverySupport.fault
import dev.cycles.kotlin.RecoverySupport.noRelease
import dev.cycles.kotlin.RecoverySupport.obj
import dev.cycles.kotlin.RecoverySupport.requests
import dev.cycles.kotlin.RecoverySupport.settlementRequests
import dev.cycles.kotlin.RecoverySupport.settlements
import dev.cycles.kotlin.RecoverySupport.waitFor
import kotlinx.serialization.json.JsonObject
import org.junit.jupiter.api.AfterEach
import org.junit.jupiter.api.Assertions.assertArrayEquals
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertFalse
import org.junit.jupiter.api.Assertions.assertNotNull
import org.junit.jupiter.api.Assertions.assertNull
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.io.TempDir
import java.nio.file.Files
import java.nio.file.Path
import kotlin.time.Duration.Companion.seconds

/**
 * Recovery conformance across real JVM processes (CR-DURABLE-001..004 and 006 of
 * ../shared/spec/scenarios.yaml): [RecoveryChild] JVMs settle through the public Kotlin API,
 * are SIGKILLed mid-settlement and restarted with nothing but the journal, against a local
 * server in this (the test's) JVM, whose ledger and request log outlive every kill. The journal
 * is a [TestJournal]: a directory, or with CYCLES_TEST_JOURNAL_STORE=redis a Redis the test
 * starts (one Redis shared by every process of a test; two for the two hosts' copies).
 */
class RecoveryProcessTest {
    private lateinit var server: LocalServer
    private val children = mutableListOf<RecoverySupport.Child>()
    private val journals = mutableListOf<TestJournal>()
    private val shared: TestJournal by lazy { journal("journal") }

    @TempDir
    lateinit var tmp: Path

    @AfterEach
    fun stop() {
        children.forEach { it.process.destroyForcibly() }
        if (::server.isInitialized) server.close()
        journals.forEach { it.close() }
    }

    /** The journal under test at `tmp/name` (closed after the test). */
    private fun journal(name: String) = TestJournal(tmp.resolve(name)).also { journals += it }

    /** The journal every process of the test shares. */
    private fun j() = shared

    private fun spawn(name: String, vararg kv: Pair<String, Any?>) = spawnOn(j(), name, *kv)

    /** A [RecoveryChild] journaling in [journal], its spec's other members [kv]. */
    private fun spawnOn(journal: TestJournal, name: String, vararg kv: Pair<String, Any?>): RecoverySupport.Child {
        val spec = linkedMapOf<String, Any?>("url" to server.url, "api_key" to server.apiKey, "tenant" to server.tenant)
        journal.spec(spec)
        spec.putAll(kv)
        return RecoverySupport.Child(spec, tmp.resolve("$name.json")).also { children += it }
    }

    /** [rid]'s record in the shared journal (the server's identity), parsed, or null. */
    private fun record(rid: String): JsonObject? = j().readRecord(server, rid)

    /** Nothing is left in the journal, and a Redis run wrote nothing into the directory. */
    private fun journalEmpty(journal: TestJournal, what: String) {
        assertEquals(emptyList<String>(), journal.records().map { it.toString() }, what)
        assertEquals(emptyList<String>(), journal.quarantined().map { it.toString() }, what)
        assertTrue(journal.dirUntouchedOnRedis, "$what: the unused directory was written")
    }

    private fun events(result: JsonObject, kind: String) = result.list("events").filter { it.s("kind") == kind }

    private fun remaining(result: JsonObject) = result.o("report")!!.list("remaining")

    private fun settlementField(result: JsonObject, field: String) = result.o("settlement")!!.s(field)

    private fun first(op: String, from: Int, rid: String?): JsonObject? {
        val all = requests(server)
        return all.drop(from).firstOrNull { it.s("operation") == op && (rid == null || it.s("reservation_id") == rid) }
    }

    private fun awaitRequest(op: String, from: Int): JsonObject {
        assertTrue(waitFor(20_000) { first(op, from, null) != null }, "no $op reached the server")
        return first(op, from, null)!!
    }

    private fun killedInFlight(fault: String, holdMs: Long, n: Int) {
        val key = "d1-$n:commit"
        fault(server, "commitReservation", fault)
        val before = requests(server).size
        val p1 = spawn("p1-$n", "mode" to "settle", "key" to "d1-$n", "amount" to 400)
        // Process 1 journals, then sends the first commit; the server holds it; SIGKILL in flight.
        val req = awaitRequest("commitReservation", before)
        val rid = req.s("reservation_id")!!
        val bytes = j().recordOf(server.url, server.apiKey, server.tenant, rid)
        assertNotNull(bytes, "the record is in the journal while the first commit is in flight: ${j().records()}")
        val rec = Journal.parseRecord(bytes!!)
        assertNull(first("commitReservation", before, rid)!!.l("status"), "the commit is still in flight")
        p1.kill()
        val killed = System.nanoTime()
        assertEquals(rid, rec.s("reservation_id"))
        assertEquals("commit", rec.s("mode"))
        assertEquals(key, rec.s("idempotency_key"))
        assertTrue(rec.l("recorded_at_ms")!! <= req.l("received_at_ms")!!, "journal write precedes the first settlement request")
        assertEquals(listOf(Journal.fileName(rid)), j().records().map { it.name })
        assertArrayEquals(bytes, j().recordOf(server.url, server.apiKey, server.tenant, rid), "the record survives the kill byte for byte")

        // Process 2: a fresh JVM with the journal only.
        val lastSeq = requests(server).last().l("seq")!!
        val r2 = spawn("p2-$n", "mode" to "drain").finish()
        assertEquals(0, remaining(r2).size, r2.toString())
        assertEquals(listOf(rid), events(r2, "settlement_settled").map { it.s("reservation_id") })
        assertNull(record(rid), "successful replay removes the record")
        journalEmpty(j(), "nothing left in the journal")
        // Let the held first request end at the server, so a late apply would show.
        val left = holdMs - (System.nanoTime() - killed) / 1_000_000
        Thread.sleep(maxOf(0, left) + 200)
        val reqs = settlementRequests(server, rid, key)
        assertTrue(reqs.size >= 2, reqs.toString())
        assertTrue(reqs.all { it.s("operation") == "commitReservation" && it.s("idempotency_key") == key })
        assertTrue(reqs.drop(1).all { it.l("seq")!! > lastSeq }, "later commits came from the restart")
        assertEquals("1,0", settlements(server, rid, key), "settled at most once")
    }

    /**
     * CR-DURABLE-001: journaled before it leaves; SIGKILL in flight (held after and before apply);
     * a fresh JVM replays once with the same key.
     */
    @Test
    fun firstCommitIsJournaledBeforeItLeavesAndReplayedAfterSigkill() {
        server = LocalServer.start()
        killedInFlight("""{"kind":"delay_after_apply","ms":1500}""", 1_500, 1)
        killedInFlight("""{"kind":"delay","ms":1500}""", 1_500, 2)
        noRelease(server)
    }

    /**
     * CR-DURABLE-002: a replayed commit gets 410; event mode is persisted before the event leaves;
     * SIGKILL; the next JVM sends only the event (same key).
     */
    @Test
    fun replayedExpiredCommitSwitchesDurablyToEventModeAcrossSigkill() {
        server = LocalServer.start()
        val key = "d2:commit"
        fault(server, "commitReservation", """{"kind":"server_error","status":500}""")
        val r1 = spawn("p1", "mode" to "settle", "key" to "d2", "amount" to 400, "max_attempts" to 1).finish()
        assertEquals("pending", settlementField(r1, "status"), r1.toString())
        val rid = settlementField(r1, "reservation_id")!!
        assertEquals("commit", record(rid)!!.s("mode"), "the journal contains the commit")
        assertEquals(1, settlementRequests(server, rid, key).size)

        server.advanceClock(200.seconds)
        fault(server, "createEvent", """{"kind":"delay_after_apply","ms":1000}""")
        val p2 = spawn("p2", "mode" to "drain")
        assertTrue(waitFor(20_000) { settlementRequests(server, rid, key).any { it.s("operation") == "createEvent" } })
        val switched = record(rid)
        assertNotNull(switched, "the record is present while the event is in flight")
        p2.kill()
        val event = settlementRequests(server, rid, key).first { it.s("operation") == "createEvent" }
        assertNull(event.l("status"), "the event was in flight")
        assertEquals("event", switched!!.s("mode"), "event mode is persisted before the event attempt")
        assertEquals(key, switched.s("idempotency_key"))
        // The event's body, its exact text as core journaled it.
        val fallback = obj(switched.s("event_fallback_body") ?: error("no event_fallback_body: $switched"))
        assertEquals(key, fallback.s("idempotency_key"))
        var reqs = settlementRequests(server, rid, key)
        assertEquals(
            listOf("commitReservation:500", "commitReservation:410"),
            reqs.take(2).map {
                "${it.s("operation")}:${it.l("status")}"
            },
        )
        assertEquals(3, reqs.size, reqs.toString())
        assertEquals("event", record(rid)!!.s("mode"), "the switch survives the kill")

        val r3 = spawn("p3", "mode" to "drain").finish()
        assertEquals(0, remaining(r3).size, r3.toString())
        assertEquals(listOf("event"), events(r3, "settlement_settled").map { it.s("mode") })
        assertNull(record(rid), "successful event removes the record")
        journalEmpty(j(), "nothing left in the journal")
        reqs = settlementRequests(server, rid, key)
        assertTrue(reqs.size >= 4, reqs.toString())
        assertTrue(reqs.drop(2).all { it.s("operation") == "createEvent" }, "only events after the switch")
        assertTrue(reqs.all { it.s("idempotency_key") == key })
        assertEquals("0,1", settlements(server, rid, key), "settled once, by the event")
        assertEquals(listOf(400L), RecoverySupport.applied(server, "event").map { it.l("amount") })
        noRelease(server)
    }

    /**
     * CR-DURABLE-003: a 429 Retry-After: 3 floor is persisted; SIGKILL; a JVM before the floor
     * sends nothing; the next retries at or after it, same key.
     */
    @Test
    fun rateLimitFloorSurvivesSigkillAndRestart() {
        server = LocalServer.start()
        val key = "d3:commit"
        fault(server, "commitReservation", """{"kind":"rate_limited","retry_after":"3"}""")
        val p1 = spawn("p1", "mode" to "settle", "key" to "d3", "amount" to 400)
        val rid = awaitRequest("commitReservation", 0).s("reservation_id")!!
        // Kill as soon as the floor is journaled (the child then waits inline for it).
        assertTrue(waitFor(20_000) { record(rid)?.l("not_before_ms") != null }, "the persisted floor")
        p1.kill()
        var reqs = settlementRequests(server, rid, key)
        assertEquals(1, reqs.size)
        assertEquals(429L, reqs[0].l("status"))
        val nb = record(rid)!!.l("not_before_ms")!!
        assertTrue(nb >= reqs[0].l("received_at_ms")!! + 3_000, "the floor honours Retry-After")

        val r2 = spawn("p2", "mode" to "flush").finish()
        assertTrue(System.currentTimeMillis() < nb, "this check ran before the floor")
        assertEquals(listOf(rid), remaining(r2).map { it.s("reservation_id") }, r2.toString())
        assertEquals(1, settlementRequests(server, rid, key).size, "nothing sent before the floor")

        val r3 = spawn("p3", "mode" to "drain").finish()
        assertEquals(0, remaining(r3).size, r3.toString())
        assertNull(record(rid), "successful replay removes the record")
        journalEmpty(j(), "nothing left in the journal")
        reqs = settlementRequests(server, rid, key)
        assertEquals(2, reqs.size, reqs.toString())
        assertTrue(reqs[1].l("received_at_ms")!! >= nb, "no retry before the persisted not_before")
        assertEquals(200L, reqs[1].l("status"))
        assertTrue(reqs.all { it.s("idempotency_key") == key })
        assertEquals("1,0", settlements(server, rid, key))
    }

    /**
     * CR-DURABLE-004: a record written with old-key + tenant is settled (same key) by a JVM with
     * only new-key + tenant; no file holds a key; new-key without tenant is another partition.
     */
    @Test
    fun tenantJournalSurvivesApiKeyRotationAcrossProcesses() {
        server = LocalServer.start(obj("""{"tenants":[{"id":"acme","api_keys":["old-key","new-key"]}]}"""))
        val key = "d4:commit"
        fault(server, "commitReservation", """{"kind":"server_error","status":500}""")
        val r1 = spawn(
            "p1",
            "api_key" to "old-key",
            "tenant" to "acme",
            "mode" to "settle",
            "key" to "d4",
            "amount" to 400,
            "max_attempts" to 1,
        ).finish()
        assertEquals("pending", settlementField(r1, "status"), r1.toString())
        val rid = settlementField(r1, "reservation_id")!!
        val records = j().records()
        assertFalse(records.isEmpty())
        for (e in records) {
            assertFalse(e.text.contains("old-key") || e.text.contains("new-key"), "API key stored in $e")
            assertFalse(e.toString().contains("old-key") || e.toString().contains("new-key"), e.toString())
        }
        if (j().url == null) {
            // Nor in any other file of the directory.
            for (f in j().dir.toFile().walkTopDown().filter { it.isFile }) {
                val data = f.readText()
                assertFalse(data.contains("old-key") || data.contains("new-key"), "API key stored in $f")
            }
        }
        assertEquals(Journal.fingerprint(server.url, "old-key", "acme"), Journal.fingerprint(server.url, "new-key", "acme"))
        assertNotNull(j().recordOf(server.url, "new-key", "acme", rid), "the tenant partition does not depend on the key")

        val other = spawn("p-other", "api_key" to "new-key", "tenant" to null, "mode" to "flush").finish()
        assertEquals(0, remaining(other).size, other.toString())
        assertEquals(0, events(other, "settlement_settled").size)
        assertEquals(1, settlementRequests(server, rid, key).size)

        val r2 = spawn("p2", "api_key" to "new-key", "tenant" to "acme", "mode" to "drain").finish()
        assertEquals(0, remaining(r2).size, r2.toString())
        assertEquals(listOf(rid), events(r2, "settlement_settled").map { it.s("reservation_id") })
        assertNull(j().recordOf(server.url, "new-key", "acme", rid))
        journalEmpty(j(), "nothing left in the journal")
        assertEquals(
            listOf("commitReservation:$key:500", "commitReservation:$key:200"),
            settlementRequests(server, rid, key).map { "${it.s("operation")}:${it.s("idempotency_key")}:${it.l("status")}" },
        )
        assertEquals("1,0", settlements(server, rid, key))
    }

    private fun releaseTogether(workers: List<RecoverySupport.Child>, go: Path) {
        // Released only once every worker has built its client: they then race for real.
        assertTrue(waitFor(30_000) { workers.all { it.ready } }, "workers ready")
        Files.createFile(go)
    }

    /**
     * CR-DURABLE-006 (shared journal): two JVMs replay one record at once while the server holds
     * the commit; the record lock lets one send it; committed once.
     */
    @Test
    fun twoProcessesReplayingOneJournalSettleTheRecordOnce() {
        server = LocalServer.start()
        val key = "d6a:commit"
        fault(server, "commitReservation", """{"kind":"server_error","status":500}""")
        val r0 = spawn("p0", "mode" to "settle", "key" to "d6a", "amount" to 300, "max_attempts" to 1).finish()
        val rid = settlementField(r0, "reservation_id")!!
        assertNotNull(record(rid), "the journal contains the commit")
        fault(server, "commitReservation", """{"kind":"delay","ms":400}""")
        val go = tmp.resolve("go-a")
        val workers = listOf(spawn("w0", "mode" to "drain", "go" to go.toString()), spawn("w1", "mode" to "drain", "go" to go.toString()))
        releaseTogether(workers, go)
        val results = workers.map { it.finish() }
        assertEquals(1, results.sumOf { events(it, "settlement_settled").size }, results.toString())
        val reqs = settlementRequests(server, rid, key)
        assertEquals(listOf(key, key), reqs.map { it.s("idempotency_key") }, reqs.toString())
        assertEquals(200L, reqs[1].l("status"))
        assertEquals("1,0", settlements(server, rid, key), "settled at most once")
        assertNull(record(rid), "the terminal record is removed")
        journalEmpty(j(), "nothing left in the journal")
    }

    /**
     * CR-DURABLE-006 (copies, no shared lock): two JVMs each holding a copy commit concurrently
     * with the same key; applied once, both records removed.
     */
    @Test
    fun twoProcessesWithCopiesOfOneRecordCommitConcurrentlyOnce() {
        server = LocalServer.start()
        val key = "d6b:commit"
        fault(server, "commitReservation", """{"kind":"server_error","status":500}""")
        val r0 = spawn("p0", "mode" to "settle", "key" to "d6b", "amount" to 300, "max_attempts" to 1).finish()
        val rid = settlementField(r0, "reservation_id")!!
        val src = j().recordOf(server.url, server.apiKey, server.tenant, rid)
        assertNotNull(src, "the journal contains the commit")
        // Two hosts' journals (two directories, or two Redis), each with a copy of the record.
        val hosts = listOf(journal("host-a"), journal("host-b"))
        for (h in hosts) h.put(server.url, server.apiKey, server.tenant, Journal.fileName(rid), src!!)
        fault(server, "commitReservation", """{"kind":"hold","ms":10000}""")
        val go = tmp.resolve("go-b")
        val workers = listOf(
            spawnOn(hosts[0], "h0", "mode" to "drain", "go" to go.toString()),
            spawnOn(hosts[1], "h1", "mode" to "drain", "go" to go.toString()),
        )
        releaseTogether(workers, go)
        for (w in workers) {
            val r = w.finish()
            assertEquals(0, remaining(r).size, r.toString())
            assertEquals(listOf(rid), events(r, "settlement_settled").map { it.s("reservation_id") }, r.toString())
        }
        val reqs = settlementRequests(server, rid, key).drop(1) // after process 0's 500
        assertEquals(2, reqs.size, reqs.toString())
        assertTrue(reqs.all { it.s("idempotency_key") == key && it.l("status") == 200L })
        val gap = reqs[1].l("received_mono_us")!! - reqs[0].l("received_mono_us")!!
        assertTrue(gap < 10_000_000, "the second commit arrived while the first was held ($gap us)")
        assertEquals(1, reqs.count { it.b("replay") == true }, "one applied, one replayed")
        assertEquals("1,0", settlements(server, rid, key), "applied once")
        for (h in hosts) journalEmpty(h, "both terminal records removed")
    }
}
