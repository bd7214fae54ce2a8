package dev.cycles.kotlin

import kotlinx.serialization.json.Json
import kotlinx.serialization.json.JsonObject
import kotlinx.serialization.json.JsonPrimitive
import kotlinx.serialization.json.buildJsonObject
import kotlinx.serialization.json.jsonObject
import kotlinx.serialization.json.jsonPrimitive
import kotlinx.serialization.json.put
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertFalse
import org.junit.jupiter.api.Assertions.assertNull
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test

/**
 * The generated models (`Models.kt`, from core's types) read what a newer server sends: members
 * they do not know are ignored (by the classes themselves, whatever the `Json` instance says),
 * open enums keep a value they do not know, the evidence models keep every member; requests
 * leave unset members out.
 */
class ModelsTest {
    /** A strict `Json`: the classes' own `JsonIgnoreUnknownKeys` is what lets unknown members pass. */
    private val strict = Json

    @Test
    fun unknownMembersAndEnumValuesAreRead() {
        val body = """{"decision":"ALLOW_LATER","reservation_id":"r1","affected_scopes":["tenant:acme"],
            "reserved":{"unit":"GALLONS","amount":5,"precision":2},"a_newer_member":{"x":[1,2]},
            "caps":{"max_tokens":3,"a_newer_cap":true},"reason_code":"SOMETHING_NEW"}"""
        for (json in listOf(strict, wireJson)) {
            val r = json.decodeFromString(ReservationResult.serializer(), body)
            assertEquals(Decision("ALLOW_LATER"), r.decision)
            assertFalse(r.decision.isKnown)
            assertEquals("ALLOW_LATER", r.decision.value)
            assertEquals("ALLOW_LATER", r.decision.toString())
            assertEquals(Amount(BudgetUnit("GALLONS"), 5), r.reserved)
            assertFalse(r.reserved!!.unit.isKnown)
            assertEquals(3L, r.caps!!.maxTokens)
            assertEquals("SOMETHING_NEW", r.reasonCode!!.value)
            assertNull(r.cyclesEvidence)
            assertEquals(listOf("tenant:acme"), r.affectedScopes)
        }
        assertTrue(Decision.ALLOW.isKnown)
        assertEquals(listOf(Decision.ALLOW, Decision.ALLOW_WITH_CAPS, Decision.DENY), Decision.known)
        assertEquals(Decision.ALLOW, strict.decodeFromString(Decision.serializer(), "\"ALLOW\""))
    }

    @Test
    fun evidenceKeepsEveryMemberAndWritesItBack() {
        val jwk = """{"kty":"OKP","crv":"Ed25519","alg":"EdDSA","x":"abc","kid":"k1","cycles_nbf_ms":1,"use":"sig"}"""
        val keys = strict.decodeFromString(EvidenceJwks.serializer(), """{"keys":[$jwk],"a_newer_member":7}""")
        assertEquals("k1", keys.keys[0].kid)
        assertEquals(1L, keys.keys[0].cyclesNbfMs)
        assertEquals("sig", keys.keys[0].json["use"]!!.jsonPrimitive.content)
        assertEquals(JsonPrimitive(7), keys.json["a_newer_member"])
        val back = strict.encodeToJsonElement(EvidenceJwks.serializer(), keys).jsonObject
        assertEquals(Json.parseToJsonElement(jwk), back["keys"]!!.let { (it as kotlinx.serialization.json.JsonArray)[0] })
        assertEquals(JsonPrimitive(7), back["a_newer_member"])
        // The known members as they are now: a copy that unsets one leaves it out.
        val retired = keys.keys[0].copy(status = "retired", alg = null)
        val written = strict.encodeToJsonElement(EvidenceJwk.serializer(), retired).jsonObject
        assertEquals("retired", written["status"]!!.jsonPrimitive.content)
        assertNull(written["alg"])
        assertEquals("sig", written["use"]!!.jsonPrimitive.content)
        // Built in code, `json` empty: the known members alone.
        val made = EvidenceRef(evidenceId = "e1", cyclesEvidenceUrl = "https://x/e1")
        assertEquals(made, strict.decodeFromString(EvidenceRef.serializer(), strict.encodeToString(EvidenceRef.serializer(), made)))
    }

    @Test
    fun requestsLeaveUnsetMembersOut() {
        val commit = CommitRequest(
            idempotencyKey = "k",
            actual = Amount(BudgetUnit.TOKENS, 5),
            metrics = StandardMetrics(latencyMs = 12, custom = buildJsonObject { put("my_key", "v") }),
        )
        assertEquals(
            Json.parseToJsonElement(
                """{"idempotency_key":"k","actual":{"unit":"TOKENS","amount":5},"metrics":{"latency_ms":12,"custom":{"my_key":"v"}}}""",
            ),
            wireJson.encodeToJsonElement(CommitRequest.serializer(), commit),
        )
        val query = wireJson.encodeToJsonElement(
            ReservationQuery.serializer(),
            ReservationQuery(status = ReservationStatus.ACTIVE, include = listOf(ListInclude.METADATA, ListInclude("a_newer_one"))),
        )
        assertEquals(Json.parseToJsonElement("""{"status":"ACTIVE","include":["metadata","a_newer_one"]}"""), query)
        assertEquals(JsonObject(emptyMap()), wireJson.encodeToJsonElement(ReservationQuery.serializer(), ReservationQuery()))
    }
}
