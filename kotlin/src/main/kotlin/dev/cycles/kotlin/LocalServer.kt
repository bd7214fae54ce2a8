package dev.cycles.kotlin

import kotlinx.serialization.json.JsonArray
import kotlinx.serialization.json.JsonObject
import kotlin.time.Duration
import dev.cycles.kotlin.ffi.LocalServer as NativeServer

/**
 * A local Cycles server on 127.0.0.1 for tests (the conformance server: budgets, TTL regimes,
 * fault injection, the ledger). `use { }` stops it.
 */
class LocalServer private constructor(private val native: NativeServer) : AutoCloseable {
    /** Servers. */
    companion object {
        /** Starts one (a `ServerConfig` JSON; null: one tenant `acme` with a budget). */
        fun start(config: JsonObject? = null): LocalServer = LocalServer(native { NativeServer.start(config?.toString()) })
    }

    /** `http://127.0.0.1:PORT`. */
    val url: String = native.url()

    /** The first tenant's API key. */
    val apiKey: String = native.apiKey()

    /** The first tenant. */
    val tenant: String = native.tenant()

    /** Whether it was not stopped. */
    val isRunning: Boolean get() = native.isRunning()

    /** Adds a fault rule (conformance/server/README.md). */
    fun addFault(rule: JsonObject) = native { native.addFault(rule.toString()) }

    /** Removes every fault rule. */
    fun clearFaults() = native { native.clearFaults() }

    /** Every applied mutation. */
    fun ledger(): JsonArray = jsonArray(native { native.ledgerJson() })

    /** Every request received. */
    fun requests(): JsonArray = jsonArray(native { native.requestsJson() })

    /** Moves the server's clock forward. */
    fun advanceClock(by: Duration) = native { native.advanceClock(by.inWholeMilliseconds.toULong()) }

    /** The server's clock (epoch ms). */
    val nowMs: Long get() = native { native.nowMs() }

    /** Opens or closes a tenant. */
    fun setTenantClosed(tenant: String, closed: Boolean) = native { native.setTenantClosed(tenant, closed) }

    /** Stops the server (idempotent). */
    override fun close() = native { native.stop() }
}
