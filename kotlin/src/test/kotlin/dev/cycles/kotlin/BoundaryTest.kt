package dev.cycles.kotlin

import kotlinx.coroutines.runBlocking
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertFalse
import org.junit.jupiter.api.Assertions.assertThrows
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import kotlin.time.Duration.Companion.milliseconds

/** The boundary: core's error table, bad options named as Kotlin spells them, panics as INTERNAL, closed clients. */
class BoundaryTest {
    @Test
    fun theErrorTableIsCores() {
        val codes = CyclesException.errorCodes
        assertEquals(4, codes["INTERNAL"])
        assertEquals(5, codes["MISSING_ACTUAL"])
        assertTrue(codes.size > 20, codes.toString())
        assertEquals(codes.values.toSet().size, codes.size, "codes are unique")
    }

    @Test
    fun badOptionsAreNamedAsKotlinSpellsThem() {
        val noUrl = assertThrows(CyclesException::class.java) { CyclesClient.create(ClientOptions(apiKey = "k")) }
        assertEquals("INVALID_ARGUMENT", noUrl.name)
        assertEquals("baseUrl is required", noUrl.message)
        val negative = assertThrows(CyclesException::class.java) {
            CyclesClient.create(ClientOptions(baseUrl = "http://127.0.0.1:9", apiKey = "k", requestTimeout = (-1).milliseconds))
        }
        assertEquals("requestTimeoutMs must be an integer from 0 to 4294967295, not -1", negative.message)
        val zero = assertThrows(CyclesException::class.java) {
            CyclesClient.create(ClientOptions(baseUrl = "http://127.0.0.1:9", apiKey = "k", requestTimeout = 0.milliseconds))
        }
        assertEquals("CONFIG", zero.name)
    }

    @Test
    fun panicsSurfaceAsInternalErrors() {
        val here =
            assertThrows(dev.cycles.kotlin.ffi.CyclesNativeException.Failure::class.java) { dev.cycles.kotlin.ffi.debugPanic("on purpose") }
        assertEquals("INTERNAL", here.name)
        assertTrue(here.reason.contains("on purpose"), here.reason)
        val async = assertThrows(dev.cycles.kotlin.ffi.CyclesNativeException.Failure::class.java) {
            runBlocking { dev.cycles.kotlin.ffi.debugPanicAsync("in a task") }
        }
        assertEquals("INTERNAL", async.name)
        assertTrue(async.reason.contains("in a task"), async.reason)
    }

    @Test
    fun aClosedClientSaysSo() = runBlocking {
        Fixture().use { fx ->
            val client = fx.client()
            assertFalse(client.isClosed)
            assertEquals(fx.server.url, client.info.str("base_url"))
            assertFalse(client.info.toString().contains(fx.server.apiKey), "never the key")
            assertEquals(null, client.closeAndDrain()) // no guarded action ever ran
            client.close() // idempotent
            assertTrue(client.isClosed)
            val e = assertThrows(ClientClosedException::class.java) { runBlocking { client.getReservation("rsv_1") } }
            assertEquals("RUNTIME", e.name)
            assertEquals("the client is closed", e.message)
        }
    }

    @Test
    fun aLocalServerRefusesUnknownConfigAndStops() {
        val bad = assertThrows(CyclesException::class.java) {
            LocalServer.start(
                kotlinx.serialization.json.buildJsonObject {
                    put("budgetz", kotlinx.serialization.json.JsonArray(emptyList()))
                },
            )
        }
        assertEquals("INVALID_ARGUMENT", bad.name)
        assertTrue(bad.message!!.startsWith("invalid server config: "), bad.message)
        val s = LocalServer.start()
        assertTrue(s.isRunning)
        assertTrue(s.nowMs > 0)
        s.close()
        assertFalse(s.isRunning)
        s.close() // idempotent
    }
}
