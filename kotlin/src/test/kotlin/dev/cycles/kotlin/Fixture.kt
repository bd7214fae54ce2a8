package dev.cycles.kotlin

import kotlinx.serialization.json.JsonObject
import kotlinx.serialization.json.jsonObject
import kotlinx.serialization.json.jsonPrimitive
import java.nio.file.Files
import java.nio.file.Path

/**
 * A local server (spec mode, or the real server's serialisation with
 * `-Dcycles.test.server.mode=reference`), a journal directory, and clients of both.
 */
class Fixture(config: JsonObject? = null) : AutoCloseable {
    val server: LocalServer
    val journal: Path = Files.createTempDirectory("cycles-kotlin-test-")

    init {
        val reference = System.getProperty("cycles.test.server.mode") == "reference"
        val base = config ?: JsonObject(emptyMap())
        server =
            LocalServer.start(
                if (reference) JsonObject(base + ("mode" to kotlinx.serialization.json.JsonPrimitive("reference"))) else config,
            )
    }

    fun options(): ClientOptions =
        ClientOptions(baseUrl = server.url, apiKey = server.apiKey, tenant = server.tenant, journalDir = journal.toString())

    fun client(options: ClientOptions = options()): CyclesClient = CyclesClient.create(options)

    /** The ledger as `kind:amount` strings, e.g. `reserve:1000`. */
    fun ledger(): List<String> = server.ledger().map {
        val e = it.jsonObject
        "${e["kind"]!!.jsonPrimitive.content}:${e["amount"]!!.jsonPrimitive.content}"
    }

    /** The operations the server received, in order. */
    fun operations(): List<String> = server.requests().map { it.jsonObject["operation"]!!.jsonPrimitive.content }

    override fun close() {
        server.close()
        journal.toFile().deleteRecursively()
    }

    companion object {
        val ACTION = Action("llm.completion", "openai:gpt-4o-mini")
        val ACME = Subject(tenant = "acme")

        fun amount(n: Long, unit: BudgetUnit = BudgetUnit.USD_MICROCENTS) = Amount(unit, n)

        /** Waits up to 10 s for [ok], letting the caller's other coroutines run meanwhile. */
        suspend fun eventually(what: String, ok: () -> Boolean) {
            val deadline = System.nanoTime() + 10_000_000_000L
            while (!ok()) {
                check(System.nanoTime() < deadline) { "timed out waiting for $what" }
                kotlinx.coroutines.delay(20)
            }
        }
    }
}
