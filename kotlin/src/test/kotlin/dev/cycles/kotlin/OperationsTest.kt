package dev.cycles.kotlin

import dev.cycles.kotlin.Fixture.Companion.ACME
import dev.cycles.kotlin.Fixture.Companion.ACTION
import dev.cycles.kotlin.Fixture.Companion.amount
import kotlinx.coroutines.runBlocking
import kotlinx.serialization.json.JsonObject
import kotlinx.serialization.json.buildJsonObject
import kotlinx.serialization.json.jsonArray
import kotlinx.serialization.json.jsonObject
import kotlinx.serialization.json.jsonPrimitive
import kotlinx.serialization.json.put
import org.junit.jupiter.api.AfterAll
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertNotNull
import org.junit.jupiter.api.Assertions.assertThrows
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.BeforeAll
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.TestInstance

/**
 * Every runtime operation over real HTTP against the local server (both modes), typed requests
 * and results (the generated classes), the JSON escape hatch, typical errors.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class OperationsTest {
    private lateinit var fx: Fixture
    private lateinit var client: CyclesClient

    @BeforeAll
    fun start() {
        fx = Fixture()
        client = fx.client()
    }

    @AfterAll
    fun stop() {
        client.close()
        fx.close()
    }

    private fun create(key: String, estimate: Long) =
        CreateReservationRequest(idempotencyKey = key, subject = ACME, action = ACTION, estimate = amount(estimate))

    private fun decision(key: String, estimate: Long) =
        DecisionRequest(idempotencyKey = key, subject = ACME, action = ACTION, estimate = amount(estimate))

    @Test
    fun reserveExtendCommitAndRead() = runBlocking {
        val created = client.createReservation(create("kt-ops-1", 1_000))
        assertEquals(200, created.status)
        assertNotNull(created.requestId)
        val id = created.body.reservationId!!
        assertEquals(Decision.ALLOW, created.body.decision)
        assertEquals(amount(1_000), created.body.reserved)
        val expiresAtMs = created.body.expiresAtMs!!
        val extended = client.extendReservation(id, ExtendRequest(idempotencyKey = "kt-ops-1-extend", extendByMs = 10_000))
        assertEquals(ReservationStatus.ACTIVE, extended.body.status)
        assertTrue(extended.body.expiresAtMs > expiresAtMs, "${extended.body.expiresAtMs} > $expiresAtMs")
        val committed = client.commitReservation(id, CommitRequest(idempotencyKey = "kt-ops-1-commit", actual = amount(700)))
        assertEquals(ReservationStatus.COMMITTED, committed.body.status)
        assertEquals(amount(700), committed.body.charged)
        val read = client.getReservation(id)
        assertEquals(ReservationStatus.COMMITTED, read.body.status)
        assertEquals(id, read.body.reservationId)
        assertEquals(ACTION, read.body.action)
        assertEquals("acme", read.body.subject.tenant)
        assertEquals(listOf("reserve:1000", "commit:700"), fx.ledger().filter { it.endsWith(":1000") || it.endsWith(":700") })
    }

    @Test
    fun releaseGivesTheEstimateBack() = runBlocking {
        val id = client.createReservation(create("kt-ops-2", 500)).body.reservationId!!
        val released = client.releaseReservation(id, ReleaseRequest(idempotencyKey = "kt-ops-2-release"))
        assertEquals(ReservationStatus.RELEASED, released.body.status)
        assertEquals(amount(500), released.body.released)
        assertTrue(fx.ledger().contains("release:500"), fx.ledger().toString())
    }

    @Test
    fun decideAllowsAndDeniesWithoutPersisting() = runBlocking {
        val ok = client.decide(decision("kt-dec-1", 5))
        assertEquals(Decision.ALLOW, ok.body.decision)
        assertEquals(64, ok.body.cyclesEvidence!!.evidenceId.length)
        val deny = client.decide(decision("kt-dec-2", Long.MAX_VALUE / 2))
        assertEquals(Decision.DENY, deny.body.decision)
        assertEquals(ReasonCode.BUDGET_EXCEEDED, deny.body.reasonCode)
        assertTrue(deny.body.reasonCode!!.isKnown)
        assertTrue(fx.ledger().none { it.startsWith("reserve:${Long.MAX_VALUE / 2}") })
    }

    @Test
    fun createEventChargesDirectly() = runBlocking {
        val e = client.createEvent(
            EventRequest(
                idempotencyKey = "kt-evt-1",
                subject = ACME,
                action = ACTION,
                actual = amount(42),
                metrics = StandardMetrics(tokensInput = 3, custom = buildJsonObject { put("k", "v") }),
            ),
        )
        assertEquals(201, e.status)
        assertEquals(EventStatus.APPLIED, e.body.status)
        assertTrue(e.body.eventId.isNotEmpty())
        assertTrue(fx.ledger().contains("event:42"), fx.ledger().toString())
    }

    @Test
    fun balancesListsAndEvidence() = runBlocking {
        client.createReservation(create("kt-list-1", 10))
        client.createReservation(create("kt-list-2", 11))
        val balances = client.getBalances(BalanceQuery(tenant = "acme"))
        assertTrue(balances.body.balances.isNotEmpty())
        assertEquals(BudgetUnit.USD_MICROCENTS, balances.body.balances[0].remaining.unit)
        val page = client.listReservations(ReservationQuery(tenant = "acme", limit = 1))
        assertEquals(1, page.body.reservations.size)
        assertEquals(true, page.body.hasMore)
        val all = client.listReservationsAll(ReservationQuery(tenant = "acme", limit = 1))
        assertTrue(all.size >= 2, "rows: ${all.size}")
        assertEquals(2, client.listReservationsAll(ReservationQuery(tenant = "acme", limit = 1), maxPages = 2).size)
        val withMetadata = client.listReservations(ReservationQuery(tenant = "acme", include = listOf(ListInclude.METADATA)))
        assertTrue(withMetadata.body.reservations.isNotEmpty())
        val decided = client.decide(decision("kt-evi-1", 5))
        val evidenceId = decided.body.cyclesEvidence!!.evidenceId
        val evidence = client.getEvidence(evidenceId)
        assertEquals(200, evidence.status)
        assertEquals(evidenceId, evidence.body.evidenceId)
        assertEquals(evidence.body.evidenceId, evidence.body.json["evidence_id"]!!.jsonPrimitive.content)
        val jwks = client.getEvidenceJwks()
        assertTrue(jwks.body.keys.isNotEmpty())
        assertEquals("OKP", jwks.body.keys[0].json["kty"]!!.jsonPrimitive.content)
        assertEquals(jwks.body.keys.size, jwks.body.json["keys"]!!.jsonArray.size)
    }

    /** [CyclesClient.call] is the same operation over JSON: the body as core decoded it. */
    @Test
    fun callIsTheSameOperationOverJson() = runBlocking {
        val id = client.createReservation(create("kt-raw-1", 5)).body.reservationId!!
        val raw = client.call("get_reservation", buildJsonObject { put("reservation_id", id) })
        val typed = client.getReservation(id)
        assertEquals(raw.body, wireJson.encodeToJsonElement(ReservationDetail.serializer(), typed.body))
        assertEquals(id, raw.body.jsonObject["reservation_id"]!!.jsonPrimitive.content)
    }

    @Test
    fun errorsAreTypedWithTheServersFields() = runBlocking {
        val notFound = assertThrows(CyclesException::class.java) { runBlocking { client.getReservation("rsv_nope") } }
        assertEquals("NOT_FOUND", notFound.name)
        assertEquals(404, notFound.httpStatus)
        assertEquals("NOT_FOUND", notFound.errorCode)
        assertNotNull(notFound.requestId)
        assertEquals(CyclesException.errorCodes["NOT_FOUND"], notFound.code)
        val denied = assertThrows(CyclesException::class.java) {
            runBlocking { client.createReservation(create("kt-deny-1", Long.MAX_VALUE / 2)) }
        }
        assertEquals("BUDGET_EXCEEDED", denied.name)
        assertEquals(409, denied.httpStatus)
        val bad = assertThrows(CyclesException::class.java) { runBlocking { client.call("no_such_op", JsonObject(emptyMap())) } }
        assertEquals("INVALID_ARGUMENT", bad.name)
        assertTrue(bad.message!!.contains("unknown operation"), bad.message)
        val missing = assertThrows(CyclesException::class.java) {
            runBlocking { client.call("get_reservation", JsonObject(emptyMap())) }
        }
        assertEquals("missing argument reservation_id", missing.message)
    }
}
