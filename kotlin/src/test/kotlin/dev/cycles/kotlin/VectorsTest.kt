package dev.cycles.kotlin

import kotlinx.serialization.json.Json
import kotlinx.serialization.json.JsonArray
import kotlinx.serialization.json.JsonElement
import kotlinx.serialization.json.JsonNull
import kotlinx.serialization.json.JsonObject
import kotlinx.serialization.json.JsonPrimitive
import kotlinx.serialization.json.boolean
import kotlinx.serialization.json.buildJsonObject
import kotlinx.serialization.json.jsonArray
import kotlinx.serialization.json.jsonObject
import kotlinx.serialization.json.jsonPrimitive
import kotlinx.serialization.json.long
import kotlinx.serialization.json.put
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertNotNull
import org.junit.jupiter.api.Assertions.assertThrows
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import java.nio.file.Files
import java.nio.file.Path

/**
 * Every case of conformance/vectors/heartbeat.json, journal.json and pricing.json through
 * [Timing], [Journal] and [Pricing], compared exactly; the number of cases run is asserted
 * against the files (a section added to a file fails here until it has a test).
 */
class VectorsTest {
    private fun load(name: String): JsonObject {
        val dir = Path.of(System.getProperty("cycles.vectors.dir") ?: "../conformance/vectors")
        return Json.parseToJsonElement(Files.readString(dir.resolve(name))) as JsonObject
    }

    private fun name(c: JsonObject) = (c["name"] as? JsonPrimitive)?.content ?: "?"

    /** JSON numbers compared by value (`1` and `1.0` differ in text only). */
    private fun same(what: String, want: JsonElement?, got: JsonElement?) = assertEquals(norm(want), norm(got), what)

    private fun norm(e: JsonElement?): Any? = when (e) {
        null, JsonNull -> null
        is JsonObject -> e.mapValues { norm(it.value) }
        is JsonArray -> e.map { norm(it) }
        is JsonPrimitive -> if (e.isString) e.content else e.content.toBigDecimalOrNull()?.stripTrailingZeros() ?: e.content
    }

    private fun section(doc: JsonObject, s: String, f: (JsonObject) -> Unit): Int {
        val cases = doc[s]?.jsonArray
        assertNotNull(cases, "section $s missing")
        assertTrue(cases!!.isNotEmpty(), "section $s empty")
        cases.forEach { f(it.jsonObject) }
        return cases.size
    }

    private fun decision(c: String, want: JsonObject, got: JsonObject) {
        val we = want["extend"]
        if (we != null) {
            val ge = got["extend"]?.jsonObject ?: error("$c: want extend, got $got")
            same("$c delay_ms", we.jsonObject["delay_ms"], ge["delay_ms"])
            same("$c key", we.jsonObject["key"], ge["key"])
            return
        }
        same("$c stop", want["stop"], got["stop"])
        want["code"]?.let { same("$c code", it, got["code"]) }
        want["status"]?.let { same("$c status", it, got["status"]) }
    }

    @Test
    fun heartbeatVectors() {
        val doc = load("heartbeat.json")
        assertEquals("cycles-heartbeat-vectors", doc["format"]!!.jsonPrimitive.content)
        val known = setOf(
            "format", "version", "about", "schedule", "retry_after", "retry", "planner", "fallback", "extend_timeout",
            "planner_derived",
        )
        assertEquals(known, doc.keys, "heartbeat.json's sections")
        var ran = 0
        val want = section(doc, "schedule") { c ->
            val s = Timing.call("schedule", c["input"]!!.jsonObject).jsonObject
            for (k in listOf("lead_floor_ms", "attempt_budget_ms", "safety_margin_ms", "retry_reserve_ms", "next_delay_ms")) {
                same("${name(c)} $k", c["expect"]!!.jsonObject[k], s[k])
            }
            ran++
        } + section(doc, "retry_after") { c ->
            val r = Timing.call("parse_retry_after", buildJsonObject { put("raw", c["raw"]!!) }).jsonObject
            same("${c["raw"]} kind", c["kind"], r["kind"])
            same("${c["raw"]} ms", c["ms"], r["ms"])
            ran++
        } + section(doc, "retry") { c ->
            val input = c["input"]!!.jsonObject
            val e = c["expect"]!!.jsonObject
            val est = Timing.call(
                "current_lead_estimate",
                buildJsonObject {
                    put("last_lead_floor_ms", input["last_lead_floor_ms"]!!)
                    put("elapsed_ms", input["elapsed_ms"]!!)
                },
            )
            same("${name(c)} estimate", e["current_lead_estimate_ms"], est)
            val window = Timing.call(
                "retry_window",
                buildJsonObject {
                    put("current_lead_estimate_ms", est)
                    put("attempt_budget_ms", input["attempt_budget_ms"]!!)
                    put("safety_margin_ms", input["safety_margin_ms"]!!)
                },
            )
            same("${name(c)} window", e["retry_window_ms"], window)
            val wantDelay = e["transient_retry_delay_ms"]
            if (wantDelay == null || wantDelay is JsonNull) {
                assertTrue(window.toString().trim('"').startsWith("-"), "${name(c)}: a null delay needs a negative window, got $window")
            } else {
                val d = Timing.call(
                    "transient_retry_delay",
                    buildJsonObject {
                        put("current_lead_estimate_ms", est)
                        put("retry_window_ms", window)
                    },
                )
                same("${name(c)} delay", wantDelay, d)
            }
            ran++
        } + section(doc, "planner") { c ->
            planner(c, derived = false)
            ran++
        } +
            section(doc, "fallback") { c ->
                fallback(c)
                ran++
            } +
            section(doc, "extend_timeout") { c ->
                val t = Timing.call("extend_timeout", c["input"]!!.jsonObject).jsonObject
                for (k in listOf(
                    "source",
                    "timeout_ms",
                    "min_lead_floor_ms",
                    "max_keeping_timeout_ms",
                    "target_timeout_ms",
                    "attempt_cutoff_ms",
                )) {
                    same("${name(c)} $k", c["expect"]!!.jsonObject[k], t[k])
                }
                ran++
            } + section(doc, "planner_derived") { c ->
                planner(c, derived = true)
                ran++
            }
        assertEquals(want, ran)
        println("heartbeat vectors: $ran cases")
    }

    private fun planner(c: JsonObject, derived: Boolean) {
        val steps = c["steps"]!!.jsonArray
        val expect = c["expect"]!!.jsonArray
        assertEquals(steps.size, expect.size, "${name(c)}: steps and expectations")
        val p = Timing.PrimaryPlanner(c[if (derived) "configured_timeout_ms" else "request_timeout_ms"]!!, derived)
        steps.forEachIndexed { i, s ->
            decision(name(c), expect[i].jsonObject, p.step(s.jsonObject))
            if (derived) same("${name(c)} attempt_timeout_ms", expect[i].jsonObject["attempt_timeout_ms"], p.attemptTimeout())
        }
    }

    private fun fallback(c: JsonObject) {
        val create = c["create"]!!.jsonObject
        val e = c["expect"]!!.jsonObject
        val steps = c["steps"]!!.jsonArray
        val decisions = e["decisions"]!!.jsonArray
        val regimes = e["regimes"]?.jsonArray
        val p = Timing.FallbackPlanner(
            c["requested_ttl_ms"]!!.jsonPrimitive.long,
            create["at_us"]!!.jsonPrimitive.long,
            create["expires_at_ms"]!!.jsonPrimitive.long,
        )
        decision(name(c), e["first_beat"]!!.jsonObject, p.firstBeat(c["prime"]!!.jsonPrimitive.boolean))
        assertEquals(steps.size, decisions.size, "${name(c)}: steps and decisions")
        var lastAt = create["at_us"]!!.jsonPrimitive.long
        steps.forEachIndexed { i, s ->
            lastAt = s.jsonObject["at_us"]!!.jsonPrimitive.long
            decision(name(c), decisions[i].jsonObject, p.step(s.jsonObject))
            if (regimes != null && i < regimes.size) assertEquals(regimes[i].jsonPrimitive.content, p.regime, "${name(c)} regime")
        }
        e["final_lead_min_ms"]?.let { assertEquals(it.jsonPrimitive.long, p.leadMinMs(lastAt), "${name(c)} final lead") }
    }

    @Test
    fun journalVectors() {
        val doc = load("journal.json")
        assertEquals(4, doc.size, "journal.json's sections")
        var ran = 0
        val want = section(doc, "partition") { c ->
            val t = c["tenant"]?.takeIf { it !is JsonNull }?.jsonPrimitive?.content
            assertEquals(
                c["fp16"]!!.jsonPrimitive.content,
                Journal.fingerprint(c["base_url"]!!.jsonPrimitive.content, c["api_key"]!!.jsonPrimitive.content, t),
            )
            ran++
        } + section(doc, "file_names") { c ->
            val rid = c["reservation_id"]!!.jsonPrimitive.content
            assertEquals(c["standard"]!!.jsonPrimitive.content, Journal.fileName(rid), rid)
            assertEquals(c["legacy"]!!.jsonPrimitive.content, Journal.legacyFileName(rid), rid)
            ran++
        } + section(doc, "records") { c ->
            record(c)
            ran++
        }
        assertEquals(want, ran)
        println("journal vectors: $ran cases")
    }

    private fun record(c: JsonObject) {
        val e = c["expect"]!!.jsonObject
        val bytes = c["text"]!!.jsonPrimitive.content.toByteArray(Charsets.UTF_8)
        if (!e["ok"]!!.jsonPrimitive.boolean) {
            val err = assertThrows(CyclesException::class.java) { Journal.parseRecord(bytes) }
            assertEquals("INVALID_ARGUMENT", err.name, name(c))
            val kind = e["error"]!!.jsonPrimitive.content
            assertEquals(buildJsonObject { put("journal_error", kind) }, err.details, name(c))
            assertTrue(err.message!!.startsWith("$kind record: "), "${name(c)}: ${err.message}")
            return
        }
        val r = Journal.parseRecord(bytes)
        for (k in listOf("reservation_id", "base_url", "mode", "idempotency_key", "recorded_at_ms", "not_before_ms", "extra_keys")) {
            same("${name(c)} $k", e[k], r[k])
        }
        assertEquals("1", r["version"]!!.jsonPrimitive.content)
        same("${name(c)} commit_body_wire", e["commit_body_wire"], r["commit_body"])
        same("${name(c)} event_fallback_body_wire", e["event_fallback_body_wire"], r["event_fallback_body"])
        for (b in listOf("commit_body", "event_fallback_body")) {
            val want = e[b] ?: continue
            val got = r[b]
            if (want is JsonNull) {
                assertTrue(got == null || got is JsonNull, "${name(c)}: $b not null")
            } else {
                same("${name(c)} $b", want, Json.parseToJsonElement(got!!.jsonPrimitive.content))
            }
        }
    }

    @Test
    fun pricingVectors() {
        val doc = load("pricing.json")
        assertEquals("cycles-pricing-vectors", doc["format"]!!.jsonPrimitive.content)
        val functions = doc["functions"]!!.jsonObject
        var ran = 0
        var want = 0
        for ((fn, cases) in functions) {
            assertTrue(cases.jsonArray.isNotEmpty(), "pricing section $fn is empty")
            for (c in cases.jsonArray.map { it.jsonObject }) {
                want++
                val expect = c["expect"]
                val error = c["error"]?.jsonObject
                assertTrue((expect == null) != (error == null), "$fn ${name(c)}: exactly one of expect and error")
                if (expect != null) {
                    same("$fn ${name(c)}", expect, Pricing.call(fn, c["input"]!!.jsonObject))
                } else {
                    val err = assertThrows(CyclesException::class.java) { Pricing.call(fn, c["input"]!!.jsonObject) }
                    assertEquals(error!!["kind"]!!.jsonPrimitive.content, err.name, "$fn ${name(c)}")
                    val part = error["message_contains"]!!.jsonPrimitive.content
                    assertTrue(err.message!!.contains(part), "$fn ${name(c)}: ${err.message} lacks $part")
                }
                ran++
            }
        }
        assertEquals(18, functions.size, "pricing functions")
        assertEquals(want, ran)
        assertTrue(ran > 100, "pricing cases: $ran")
        println("pricing vectors: $ran cases")
    }
}
