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

/** Every runtime operation over real HTTP against the local server (both modes), with typical errors. */
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

    private fun create(key: String, estimate: Long) = buildJsonObject {
        put("idempotency_key", key)
        put("subject", ACME.toJson())
        put("action", ACTION.toJson())
        put("estimate", amount(estimate))
    }

    private fun keyed(key: String, vararg members: Pair<String, JsonObject>) = buildJsonObject {
        put("idempotency_key", key)
        for ((k, v) in members) put(k, v)
    }

    @Test
    fun reserveExtendCommitAndRead() = runBlocking {
        val created = client.createReservation(create("kt-ops-1", 1_000))
        assertEquals(200, created.status)
        assertNotNull(created.requestId)
        val id = created.json.str("reservation_id")!!
        assertEquals("ALLOW", created.json.str("decision"))
        val extended = client.extendReservation(id, buildJsonObject {
            put("idempotency_key", "kt-ops-1-extend")
            put("extend_by_ms", 10_000)
        })
        assertEquals(id, extended.json.str("reservation_id") ?: id)
        val committed = client.commitReservation(id, keyed("kt-ops-1-commit", "actual" to amount(700)))
        assertEquals("COMMITTED", committed.json.str("status"))
        assertEquals(700L, committed.json.obj("charged")!!.long("amount"))
        val read = client.getReservation(id)
        assertEquals("COMMITTED", read.json.str("status"))
        assertEquals(listOf("reserve:1000", "commit:700"), fx.ledger().filter { it.endsWith(":1000") || it.endsWith(":700") })
    }

    @Test
    fun releaseGivesTheEstimateBack() = runBlocking {
        val id = client.createReservation(create("kt-ops-2", 500)).json.str("reservation_id")!!
        val released = client.releaseReservation(id, buildJsonObject { put("idempotency_key", "kt-ops-2-release") })
        assertEquals("RELEASED", released.json.str("status"))
        assertTrue(fx.ledger().contains("release:500"), fx.ledger().toString())
    }

    @Test
    fun decideAllowsAndDeniesWithoutPersisting() = runBlocking {
        val ok = client.decide(create("kt-dec-1", 5))
        assertEquals("ALLOW", ok.json.str("decision"))
        assertEquals(64, ok.json.obj("cycles_evidence")!!.str("evidence_id")!!.length)
        val deny = client.decide(create("kt-dec-2", Long.MAX_VALUE / 2))
        assertEquals("DENY", deny.json.str("decision"))
        assertEquals("BUDGET_EXCEEDED", deny.json.str("reason_code"))
        assertTrue(fx.ledger().none { it.startsWith("reserve:${Long.MAX_VALUE / 2}") })
    }

    @Test
    fun createEventChargesDirectly() = runBlocking {
        val e = client.createEvent(buildJsonObject {
            put("idempotency_key", "kt-evt-1")
            put("subject", ACME.toJson())
            put("action", ACTION.toJson())
            put("actual", amount(42))
        })
        assertEquals("APPLIED", e.json.str("status"))
        assertTrue(fx.ledger().contains("event:42"), fx.ledger().toString())
    }

    @Test
    fun balancesListsAndEvidence() = runBlocking {
        client.createReservation(create("kt-list-1", 10))
        client.createReservation(create("kt-list-2", 11))
        val balances = client.getBalances(buildJsonObject { put("tenant", "acme") })
        assertTrue(balances.json["balances"]!!.jsonArray.isNotEmpty())
        val page = client.listReservations(buildJsonObject { put("tenant", "acme"); put("limit", 1) })
        assertEquals(1, page.json["reservations"]!!.jsonArray.size)
        val all = client.listReservationsAll(buildJsonObject { put("tenant", "acme"); put("limit", 1) })
        assertTrue(all.size >= 2, "rows: ${all.size}")
        val decided = client.decide(create("kt-evi-1", 5))
        val evidenceId = decided.json.obj("cycles_evidence")!!.str("evidence_id")!!
        val evidence = client.getEvidence(evidenceId)
        assertEquals(200, evidence.status)
        val jwks = client.getEvidenceJwks()
        assertTrue(jwks.json["keys"]!!.jsonArray.isNotEmpty())
        assertEquals("OKP", jwks.json["keys"]!!.jsonArray[0].jsonObject["kty"]!!.jsonPrimitive.content)
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
