package dev.cycles.kotlin

import dev.cycles.kotlin.RecoverySupport.ACTION
import dev.cycles.kotlin.RecoverySupport.applied
import dev.cycles.kotlin.RecoverySupport.fault
import dev.cycles.kotlin.RecoverySupport.keys
import dev.cycles.kotlin.RecoverySupport.noRelease
import dev.cycles.kotlin.RecoverySupport.obj
import dev.cycles.kotlin.RecoverySupport.operations
import dev.cycles.kotlin.RecoverySupport.requests
import dev.cycles.kotlin.RecoverySupport.settlementRequests
import dev.cycles.kotlin.RecoverySupport.settlements
import kotlinx.coroutines.CoroutineScope
import kotlinx.coroutines.CoroutineStart
import kotlinx.coroutines.Job
import kotlinx.coroutines.delay
import kotlinx.coroutines.launch
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withTimeout
import kotlinx.serialization.json.JsonObject
import org.junit.jupiter.api.AfterEach
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertFalse
import org.junit.jupiter.api.Assertions.assertNotNull
import org.junit.jupiter.api.Assertions.assertNull
import org.junit.jupiter.api.Assertions.assertSame
import org.junit.jupiter.api.Assertions.assertThrows
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.io.TempDir
import java.nio.file.Path
import java.util.concurrent.CopyOnWriteArrayList
import kotlin.time.Duration
import kotlin.time.Duration.Companion.hours
import kotlin.time.Duration.Companion.milliseconds
import kotlin.time.Duration.Companion.seconds

/**
 * Recovery conformance, core and boundary scenarios (CR-CORE-001..004, CR-BOUNDARY-001 of
 * ../shared/spec/scenarios.yaml) through the public Kotlin API against the local server over
 * real HTTP. conformance/adapters/kotlin-map.json names these tests; each asserts its
 * scenario's expected requests and assertions. The journal is a [TestJournal]: the directory,
 * or Redis with CYCLES_TEST_JOURNAL_STORE=redis (kotlin-redis-map.json).
 */
class RecoveryCoreTest {
    private val server = LocalServer.start()
    private val journals = mutableListOf<TestJournal>()

    @TempDir
    lateinit var tmp: Path

    @AfterEach
    fun stop() {
        server.close()
        journals.forEach { it.close() }
    }

    /** The journal under test at `tmp/name` (closed after the test). */
    private fun journal(name: String) = TestJournal(tmp.resolve(name)).also { journals += it }

    private fun client(j: TestJournal, maxAttempts: Long? = null, requestTimeout: Duration? = null) = CyclesClient.create(
        j.configure(
            ClientOptions(
                baseUrl = server.url,
                apiKey = server.apiKey,
                tenant = server.tenant,
                replayInterval = 1.hours,
                maxAttempts = maxAttempts,
                requestTimeout = requestTimeout,
            ),
        ),
    )

    /** Collects [client]'s events into [into] until it is closed. */
    private suspend fun CoroutineScope.collect(client: CyclesClient, into: MutableList<CyclesEvent>): Job {
        // Subscribed when launch returns (events(): the subscription precedes the first suspension).
        return launch(start = CoroutineStart.UNDISPATCHED) { client.events().collect { into.add(it) } }
    }

    /** Nothing journaled is left, and a Redis run wrote nothing into the directory. */
    private fun journalEmpty(j: TestJournal, what: String) {
        assertEquals(emptyList<String>(), j.records().map { it.toString() }, what)
        assertEquals(emptyList<String>(), j.quarantined().map { it.toString() }, what)
        assertTrue(j.dirUntouchedOnRedis, "$what: the unused directory was written")
    }

    /** CR-CORE-001: the commit is applied and its response dropped; the retry reuses the key; applied once. */
    @Test
    fun lostCommitResponseIsRetriedWithTheSameKeyAndAppliedOnce() = runBlocking {
        fault(server, "commitReservation", """{"kind":"drop_response_after_apply"}""")
        val j = journal("journal")
        val kept: Reservation
        client(j).use { c ->
            kept = c.reserve(GuardSpec(ACTION, 1_000, idempotencyKey = "core-1", heartbeat = false))
            kept.setActual(400)
            kept.finish()
        }
        val rid = kept.reservationId
        val key = "core-1:commit"
        val s = kept.outcome!!.settlement!!
        assertEquals("committed", s.status)
        assertEquals(400L, s.charged)
        val reqs = settlementRequests(server, rid, key)
        // expected_requests: commit, commit_same_key
        assertEquals(listOf("commitReservation", "commitReservation"), reqs.map { it.s("operation") })
        assertEquals(listOf(key, key), reqs.map { it.s("idempotency_key") }, "the retry uses the original key")
        assertNull(reqs[0].l("status"))
        assertEquals("drop_response_after_apply", reqs[0].s("fault"))
        assertEquals(200L, reqs[1].l("status"))
        assertEquals(true, reqs[1].b("replay"), "the retry got the original result")
        assertEquals("1,0", settlements(server, rid, key), "settled at most once")
        assertEquals(listOf(400L), applied(server, "commit").map { it.l("amount") })
        journalEmpty(j, "the record is removed after success")
        noRelease(server)
    }

    /**
     * CR-CORE-002: expired before the commit; commit 410, then ONE event with the same key carrying
     * the original subject, action, actual.
     */
    @Test
    fun expiredCommitFallsBackToOneEventWithTheOriginalSubjectActionAndActual() = runBlocking {
        val got = CopyOnWriteArrayList<CyclesEvent>()
        val j = journal("journal")
        val kept: Reservation
        val c = client(j)
        val collector = collect(c, got)
        c.use {
            kept =
                c.reserve(GuardSpec(ACTION, 1_000, subject = Subject(tenant = server.tenant), idempotencyKey = "core-2", heartbeat = false))
            kept.setActual(400)
            kept.setMetrics(obj("""{"tokens_input":12,"tokens_output":34}"""))
            kept.setMetadata(obj("""{"run":"r-7"}"""))
            server.advanceClock(200.seconds) // past expires_at + grace while the work ran
            kept.finish()
        }
        withTimeout(10.seconds) { collector.join() } // the flow ends with the client, every event read
        val rid = kept.reservationId
        val key = "core-2:commit"
        assertEquals("recovered_via_event", kept.outcome!!.settlement!!.status)
        val reqs = settlementRequests(server, rid, key)
        // expected_requests: commit, event_same_key
        assertEquals(listOf("commitReservation:410", "createEvent:201"), reqs.map { "${it.s("operation")}:${it.l("status")}" })
        assertTrue(reqs.all { it.s("idempotency_key") == key })
        // The bytes sent (the server's request log keeps each body exactly as received).
        val commit = obj(reqs[0].s("body")!!)
        val event = obj(reqs[1].s("body")!!)
        val actual = obj("""{"unit":"USD_MICROCENTS","amount":400}""")
        assertEquals(actual, commit["actual"])
        assertEquals(key, event.s("idempotency_key"))
        assertEquals(obj("""{"tenant":"${server.tenant}"}"""), event["subject"])
        assertEquals(obj("""{"kind":"llm.completion","name":"test-model"}"""), event["action"])
        assertEquals(actual, event["actual"], "the known actual, unchanged")
        assertEquals(obj("""{"tokens_input":12,"tokens_output":34}"""), event["metrics"])
        assertEquals(commit["metrics"], event["metrics"])
        val meta = event.o("metadata")!!
        assertEquals("r-7", meta.s("run"))
        assertEquals(rid, meta.s("recovered_reservation_id"))
        assertEquals("commit_after_reservation_expired", meta.s("recovery_reason"))
        val events = applied(server, "event")
        assertEquals(1, events.size)
        assertEquals(
            listOf(key, server.tenant, "USD_MICROCENTS", "400"),
            listOf(events[0].s("idempotency_key"), events[0].s("tenant"), events[0].s("unit"), events[0].s("amount")),
        )
        assertEquals(emptyList<JsonObject>(), applied(server, "commit"))
        journalEmpty(j, "the record is removed after the event")
        assertTrue(got.any { it.kind == "settlement_mode_switched" && it.reservationId == rid }, got.toString())
        assertEquals(
            listOf("$rid:event"),
            got.filter {
                it.kind == "settlement_settled"
            }.map { "${it.reservationId}:${it.json.s("mode")}" },
        )
        noRelease(server)
    }

    /**
     * CR-CORE-003: the first extension dies with a reset; reported with the reservation and a retry
     * disposition, retried with the same key, the work runs on (warn) and is committed.
     */
    @Test
    fun heartbeatTransportFailureIsObservableAndNonFatal() = runBlocking {
        fault(server, "extendReservation", """{"kind":"connection_reset"}""")
        val got = CopyOnWriteArrayList<CyclesEvent>()
        val ttl = 3_500L
        val j = journal("journal")
        val c = client(j, requestTimeout = 500.milliseconds)
        val collector = collect(c, got)
        val value = c.use {
            c.withReservation(GuardSpec(ACTION, 1_000, ttl = ttl.milliseconds, idempotencyKey = "core-3", policy = HeartbeatPolicy.WARN)) {
                val start = System.nanoTime()
                // The work outlives its original TTL and the first (failed) extension.
                while ((System.nanoTime() - start) / 1_000_000 < ttl + 300 || got.none { it.kind == "heartbeat_extended" }) {
                    assertTrue((System.nanoTime() - start) / 1_000_000 < 10_000, "no successful extension")
                    delay(20)
                }
                assertFalse(isCancelled, "warn policy never cancels the work")
                setActual(700)
                70
            }
        }
        withTimeout(10.seconds) { collector.join() }
        assertEquals(70, value, "guarded_action_continues_under_warn_policy")
        val f = got.firstOrNull { it.kind == "heartbeat_failed" } ?: throw AssertionError("the failure is an event: $got")
        val rid = f.reservationId
        assertTrue(rid.startsWith("rsv_"), rid)
        assertEquals("TRANSPORT_RESET", f.json.s("error_kind"), f.json.toString())
        assertEquals("retry", f.json.s("disposition"), f.json.toString())
        assertNotNull(f.json.l("retry_in_ms"), f.json.toString())
        // expected_requests: extend, extend_same_key, commit
        val all = requests(server)
        val ext = all.filter { it.s("operation") == "extendReservation" }
        assertTrue(ext.size >= 2, all.toString())
        assertEquals(ext[0].s("idempotency_key"), ext[1].s("idempotency_key"))
        assertNull(ext[0].l("status"))
        assertEquals(200L, ext[1].l("status"))
        val last = all.last()
        assertEquals(listOf("commitReservation", "core-3:commit"), listOf(last.s("operation"), last.s("idempotency_key")))
        assertEquals("1,0", settlements(server, rid, "core-3:commit"))
        assertEquals(listOf(700L), applied(server, "commit").map { it.l("amount") })
        journalEmpty(j, "the record is removed after the commit")
        noRelease(server)
    }

    private suspend fun protocolInvalidRound(shape: String, viaEvent: Boolean) {
        val what = "$shape viaEvent=$viaEvent"
        val d = journal("$shape-$viaEvent")
        val op = if (viaEvent) "createEvent" else "commitReservation"
        fault(server, op, """{"kind":"malformed_success","shape":"$shape"}""")
        val base = "core-4-$shape-$viaEvent"
        val key = "$base:commit"
        val once = if (viaEvent) "0,1" else "1,0"
        val oneTry = client(d, maxAttempts = if (viaEvent) 2 else 1)
        val kept = oneTry.reserve(GuardSpec(ACTION, 1_000, idempotencyKey = base, heartbeat = false))
        kept.setActual(400)
        if (viaEvent) server.advanceClock(200.seconds)
        val s = kept.finish().settlement!!
        val rid = kept.reservationId
        // Applied by the server, but not schema-valid: NOT a success.
        assertEquals("pending", s.status, what)
        assertEquals(true, s.json.b("journaled"), what)
        assertEquals(once, settlements(server, rid, key), "$what: the server applied it")
        val rec = d.readRecord(server, rid)
        assertNotNull(rec, "$what: record retained")
        assertEquals(key, rec!!.s("idempotency_key"), "$what: with the original key")
        assertEquals(if (viaEvent) "event" else "commit", rec.s("mode"), "$what $rec")
        oneTry.closeAndDrain(Duration.ZERO)
        // A fresh client replays the record with the SAME key; only the valid answer ends it.
        client(d).use { fresh ->
            val report = fresh.drain(10.seconds)
            assertEquals(0, report.remaining.size, what)
        }
        journalEmpty(d, "$what: removed after schema-valid success")
        val reqs = settlementRequests(server, rid, key).filter { it.s("operation") == op }
        assertEquals(2, reqs.size, "$what $reqs")
        assertTrue(reqs.all { it.s("idempotency_key") == key }, what)
        assertEquals("malformed_success", reqs[0].s("fault"), what)
        assertEquals(if (viaEvent) 201L else 200L, reqs[1].l("status"), what)
        assertEquals(true, reqs[1].b("replay"), "$what: the retry got the original result")
        assertEquals(once, settlements(server, rid, key), "$what: settled at most once")
    }

    /**
     * CR-CORE-004 (commit): every protocol-invalid 2xx of an applied commit leaves it pending with
     * record and key; the replay's valid 200 ends it.
     */
    @Test
    fun protocolInvalidCommitSuccessStaysAmbiguousAndIsRetriedWithItsKey() = runBlocking {
        for (shape in MALFORMED) protocolInvalidRound(shape, false)
    }

    /** CR-CORE-004 (fallback event): the same for an expired reservation's event (201 expected). */
    @Test
    fun protocolInvalidEventSuccessStaysAmbiguousAndIsRetriedWithItsKey() = runBlocking {
        for (shape in MALFORMED) protocolInvalidRound(shape, true)
    }

    /** The guarded action's own failure; it must come out unchanged. */
    class ProviderDown(message: String) : Exception(message)

    /**
     * CR-BOUNDARY-001: no actual: no commit or event; the reservation is released in the same
     * call (exactly one `{key}:release`, the ledger `reserve, release`) and
     * MissingActualException says so; a failing work's own exception propagates (released);
     * nothing journaled.
     */
    @Test
    fun missingActualReleasesWithoutSettlement() = runBlocking {
        val j = journal("journal")
        client(j).use { c ->
            val kept = c.reserve(GuardSpec(ACTION, 1_000, idempotencyKey = "boundary-1", heartbeat = false))
            val e = assertThrows(MissingActualException::class.java) { runBlocking { kept.finish() } }
            assertTrue(e.released, e.message)
            assertNull(e.releaseError)
            val o = kept.outcome!!
            assertEquals(OutcomeKind.MISSING_ACTUAL, o.kind)
            assertEquals(e.message, o.message, "core's message, not reworded")
            assertTrue(e.message!!.contains(kept.reservationId), e.message)
            assertTrue(o.released)
            assertEquals(kept.reservationId, o.reservationId)
            assertNull(o.settlement, "nothing settled")
            assertNull(o.actual)
            assertEquals(listOf("createReservation", "releaseReservation"), operations(server))
            assertEquals(listOf("boundary-1", "boundary-1:release"), keys(server))
            assertThrows(MissingActualException::class.java) {
                runBlocking { c.withReservation(GuardSpec(ACTION, 1_000, heartbeat = false)) { "done" } }
            }
            val down = assertThrows(ProviderDown::class.java) {
                runBlocking { c.withReservation(GuardSpec(ACTION, 1_000, heartbeat = false)) { throw ProviderDown("provider down") } }
            }
            assertEquals("provider down", down.message)
        }
        val ops = operations(server)
        assertFalse(ops.contains("commitReservation") || ops.contains("createEvent"), ops.toString())
        assertEquals(3, ops.count { it == "releaseReservation" }, "every action is released: $ops")
        assertEquals(
            listOf("reserve", "release", "reserve", "release", "reserve", "release"),
            RecoverySupport.ledger(server).map { it.s("kind") },
        )
        journalEmpty(j, "nothing journaled without an actual")
        assertEquals(emptyList<String>(), j.pendingIds(server.url, server.apiKey, server.tenant))
    }

    /**
     * A `withReservation` block that throws without an actual: the reservation is released
     * (ledger), nothing is settled or journaled, and the block's exception propagates unchanged
     * with nothing suppressed under it.
     */
    @Test
    fun withReservationThatThrowsReleases() = runBlocking {
        val boom = RuntimeException("boom")
        val j = journal("journal")
        client(j).use { c ->
            val out = assertThrows(RuntimeException::class.java) {
                runBlocking {
                    c.withReservation(GuardSpec(ACTION, 1_000, idempotencyKey = "twr-1", heartbeat = false)) {
                        assertNotNull(reservationId) // the work starts, then fails
                        throw boom
                    }
                }
            }
            assertSame(boom, out)
            assertEquals(0, out.suppressed.size, out.suppressed.toList().toString())
        }
        assertEquals(listOf("twr-1", "twr-1:release"), keys(server))
        assertEquals(listOf("reserve", "release"), RecoverySupport.ledger(server).map { it.s("kind") })
        journalEmpty(j, "nothing journaled without an actual")
    }

    private companion object {
        val MALFORMED = listOf("missing_required_field", "wrong_status_code", "not_json", "wrong_field_type")
    }
}
