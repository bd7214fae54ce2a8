package dev.cycles.kotlin

import dev.cycles.kotlin.Fixture.Companion.ACTION
import dev.cycles.kotlin.Fixture.Companion.eventually
import kotlinx.coroutines.CompletableDeferred
import kotlinx.coroutines.CoroutineStart
import kotlinx.coroutines.async
import kotlinx.coroutines.awaitCancellation
import kotlinx.coroutines.cancelAndJoin
import kotlinx.coroutines.flow.first
import kotlinx.coroutines.flow.toList
import kotlinx.coroutines.launch
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withTimeout
import kotlinx.serialization.json.buildJsonArray
import kotlinx.serialization.json.buildJsonObject
import kotlinx.serialization.json.jsonArray
import kotlinx.serialization.json.jsonObject
import kotlinx.serialization.json.jsonPrimitive
import kotlinx.serialization.json.put
import org.junit.jupiter.api.AfterEach
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertFalse
import org.junit.jupiter.api.Assertions.assertNull
import org.junit.jupiter.api.Assertions.assertSame
import org.junit.jupiter.api.Assertions.assertThrows
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.BeforeEach
import org.junit.jupiter.api.Test
import java.util.concurrent.CopyOnWriteArrayList
import kotlin.time.Duration.Companion.hours
import kotlin.time.Duration.Companion.milliseconds
import kotlin.time.Duration.Companion.seconds

/** Guarded actions against the local server's ledger: every way a guard ends, events, drains. */
class LifecycleTest {
    private lateinit var fx: Fixture

    @BeforeEach
    fun start() {
        fx = Fixture()
    }

    @AfterEach
    fun stop() = fx.close()

    private fun spec(estimate: Long) = GuardSpec(ACTION, estimate)

    @Test
    fun withReservationCommitsTheActualAndReturnsTheValue() = runBlocking {
        fx.client().use { client ->
            val answer = client.withReservation(spec(1_000)) {
                assertEquals(Decision.ALLOW, decision)
                assertNull(caps)
                setActual(700)
                "42"
            }
            assertEquals("42", answer)
        }
        assertEquals(listOf("reserve:1000", "commit:700"), fx.ledger())
    }

    @Test
    fun streamingUsageIsAddedAndTheOutcomeSaysWhatWasCharged() = runBlocking {
        fx.client().use { client ->
            val r = client.reserve(spec(5_000))
            assertEquals(BudgetUnit.USD_MICROCENTS, r.unit)
            repeat(3) { r.add(100) }
            assertEquals(300L, r.actual)
            val o = r.finish()
            assertEquals(OutcomeKind.SETTLED, o.kind)
            assertEquals("committed", o.settlement!!.status)
            assertEquals(300L, o.charged)
            assertSame(o, r.outcome)
            // A report after the end would never be settled: refused, not dropped.
            val late = assertThrows(CyclesException::class.java) { r.add(1) }
            assertEquals("INVALID_ARGUMENT", late.name)
        }
        assertEquals(listOf("reserve:5000", "commit:300"), fx.ledger())
    }

    @Test
    fun failedWorkReleasesAndRethrowsUnchanged() = runBlocking {
        val boom = IllegalStateException("boom")
        fx.client().use { client ->
            val thrown = assertThrows(IllegalStateException::class.java) {
                runBlocking { client.withReservation(spec(800)) { throw boom } }
            }
            assertSame(boom, thrown)
        }
        assertEquals(listOf("reserve:800", "release:800"), fx.ledger())
    }

    @Test
    fun partialUsageOfFailedWorkIsCommitted() = runBlocking {
        fx.client().use { client ->
            assertThrows(IllegalStateException::class.java) {
                runBlocking {
                    client.withReservation(spec(800)) {
                        add(5) // a stream that broke after some usage
                        throw IllegalStateException("stream cut")
                    }
                }
            }
        }
        assertEquals(listOf("reserve:800", "commit:5"), fx.ledger())
    }

    @Test
    fun deniedIsATypedErrorAndNothingRuns() = runBlocking {
        var ran = false
        fx.client().use { client ->
            val e = assertThrows(CyclesException::class.java) {
                runBlocking { client.withReservation(spec(Long.MAX_VALUE / 2)) { ran = true } }
            }
            assertEquals("BUDGET_EXCEEDED", e.name)
            assertEquals(409, e.httpStatus)
        }
        assertFalse(ran)
        assertEquals(emptyList<String>(), fx.ledger())
    }

    @Test
    fun missingActualIsReleasedAndRaised() = runBlocking {
        fx.client().use { client ->
            val e = assertThrows(MissingActualException::class.java) {
                runBlocking { client.withReservation(spec(900)) { "no actual" } }
            }
            assertEquals("MISSING_ACTUAL", e.name)
            assertTrue(e.released)
            assertTrue(e.message!!.contains(e.reservationId), e.message)
            val neg = assertThrows(InvalidActualException::class.java) {
                runBlocking { client.withReservation(spec(900)) { setActual(-5) } }
            }
            assertTrue(neg.released)
        }
        assertEquals(listOf("reserve", "release", "reserve", "release"), fx.ledger().map { it.substringBefore(':') })
    }

    @Test
    fun aCancelledCoroutineStillSettles() = runBlocking {
        fx.client().use { client ->
            val started = CompletableDeferred<Unit>()
            val job = launch {
                client.withReservation(spec(1_000)) {
                    setActual(250)
                    started.complete(Unit)
                    awaitCancellation()
                }
            }
            started.await()
            job.cancelAndJoin()
            // Cancelled before any usage: released.
            val bare = launch(start = CoroutineStart.UNDISPATCHED) { client.withReservation(spec(600)) { awaitCancellation() } }
            eventually("the second reservation") { fx.ledger().contains("reserve:600") }
            bare.cancelAndJoin()
            eventually("the second release") { fx.ledger().contains("release:600") }
            // The wait for a settlement cancelled: the settlement still completes on core's runtime.
            val r = client.reserve(spec(400))
            r.setActual(40)
            val finishing = async(start = CoroutineStart.UNDISPATCHED) { r.finish() }
            finishing.cancel()
            eventually("the third settlement") { fx.ledger().contains("commit:40") }
        }
        assertEquals(listOf("reserve:1000", "commit:250", "reserve:600", "release:600", "reserve:400", "commit:40"), fx.ledger())
    }

    @Test
    fun releaseEndsTheActionAndIsRefusedOnceUsageIsKnown() = runBlocking {
        fx.client().use { client ->
            val value = client.withReservation(spec(300)) {
                val o = release("not needed")
                assertEquals(OutcomeKind.RELEASED, o.kind)
                assertTrue(o.released)
                "done"
            }
            assertEquals("done", value)
            val r = client.reserve(spec(200))
            r.setActual(20)
            val e = assertThrows(CyclesException::class.java) { runBlocking { r.release() } }
            assertEquals("INVALID_ARGUMENT", e.name)
            assertFalse(r.isFinished)
            assertEquals(20L, r.finish().charged)
        }
        assertEquals(listOf("reserve:300", "release:300", "reserve:200", "commit:20"), fx.ledger())
    }

    @Test
    fun capsAndDecisionComeFromTheBudget() {
        val caps = buildJsonObject {
            put("max_tokens", 64)
            put("tool_denylist", buildJsonArray { add(kotlinx.serialization.json.JsonPrimitive("shell")) })
        }
        val config = buildJsonObject {
            put(
                "budgets",
                buildJsonArray {
                    add(
                        buildJsonObject {
                            put("scope", "tenant:acme")
                            put("unit", "TOKENS")
                            put("allocated", 1_000_000)
                        },
                    )
                    add(
                        buildJsonObject {
                            put("scope", "tenant:acme/workspace:capped")
                            put("unit", "TOKENS")
                            put("allocated", 1_000_000)
                            put("caps", caps)
                        },
                    )
                },
            )
        }
        Fixture(config).use { capped ->
            capped.client(capped.options().copy(defaultUnit = BudgetUnit.TOKENS)).use { client ->
                runBlocking {
                    val r = client.reserve(GuardSpec(ACTION, 10, subject = Subject(tenant = "acme", workspace = "capped")))
                    assertEquals(Decision.ALLOW_WITH_CAPS, r.decision)
                    assertEquals(BudgetUnit.TOKENS, r.unit)
                    assertEquals(64L, r.caps!!.maxTokens)
                    assertEquals(listOf("shell"), r.caps?.toolDenylist)
                    val plan = r.planCaps(
                        "chat_completions",
                        buildJsonObject {
                            put("model", "gpt-4o-mini")
                            put("max_tokens", 500)
                        },
                    )
                    assertTrue(plan.toString().contains("64"), plan.toString())
                    r.setActual(7)
                    assertEquals(7L, r.finish().charged)
                }
            }
        }
    }

    @Test
    fun eventsFlowWhileCollectedAndEndWithTheClient() = runBlocking {
        val client = fx.client()
        val got = CopyOnWriteArrayList<CyclesEvent>()
        // Subscribed when launch returns: events() subscribes before its first suspension.
        val collector = launch(start = CoroutineStart.UNDISPATCHED) { client.events().collect { got.add(it) } }
        val value = client.withReservation(spec(100)) {
            setActual(60)
            "x"
        }
        assertEquals("x", value)
        eventually("settlement_settled") { got.any { it.kind == "settlement_settled" } }
        val settled = got.first { it.kind == "settlement_settled" }
        assertEquals("debug", settled.level)
        assertEquals("commit", settled.json.str("mode"))
        // One collector at a time.
        assertThrows(IllegalStateException::class.java) { runBlocking { client.events().first() } }
        client.close()
        withTimeout(10.seconds) { collector.join() } // the flow completes once the client is closed
        assertTrue(client.isClosed)
        val closed = assertThrows(ClientClosedException::class.java) { runBlocking { client.reserve(spec(1)) } }
        assertEquals("RUNTIME", closed.name)
        // A closed client's flow is empty.
        assertEquals(emptyList<CyclesEvent>(), client.events().toList())
    }

    @Test
    fun aCommitOutageLeavesItPendingAndADrainSettlesIt() = runBlocking {
        fx.client(fx.options().copy(maxAttempts = 2, replayInterval = 1.hours)).use { client ->
            fx.server.addFault(
                kotlinx.serialization.json.Json.parseToJsonElement(
                    """{"operation":"commitReservation","times":0,"fault":{"kind":"server_error","status":503}}""",
                ) as kotlinx.serialization.json.JsonObject,
            )
            val r = client.reserve(spec(1_000))
            r.setActual(640)
            val o = r.finish()
            assertEquals("pending", o.settlement!!.status)
            assertTrue(o.settlement!!.json.bool("journaled"))
            // The journal holds it, under this identity and in the listing of every partition.
            val mine = Journal.pending(fx.journal.toString(), fx.server.url, fx.server.apiKey, fx.server.tenant)
            assertEquals(listOf(r.reservationId), mine.map { it.jsonObject.str("reservation_id") })
            assertEquals("commit", mine[0].jsonObject.str("mode"))
            assertEquals(mine, Journal.pending(fx.journal.toString()))
            assertEquals(0, Journal.pending(fx.journal.toString(), fx.server.url, "another-key", null).size)
            fx.server.clearFaults()
            val d = client.drain(10.seconds)
            assertEquals(1, d.outcomes.size)
            assertTrue(d.remaining.isEmpty())
            assertEquals(0, Journal.pending(fx.journal.toString()).size)
            // A Redis journal that cannot be reached is named, not listed as empty.
            val unreachable = assertThrows(CyclesException::class.java) { Journal.pending("redis://127.0.0.1:1/0") }
            assertEquals("INVALID_ARGUMENT", unreachable.name)
            assertTrue(unreachable.message!!.contains("127.0.0.1:1"), unreachable.message)
            val closing = client.closeAndDrain(100.milliseconds)
            assertTrue(closing!!.remaining.isEmpty())
        }
        assertEquals(listOf("reserve:1000", "commit:640"), fx.ledger())
    }
}
