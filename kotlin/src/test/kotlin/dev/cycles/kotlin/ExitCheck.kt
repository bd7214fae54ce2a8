package dev.cycles.kotlin

import kotlinx.coroutines.DelicateCoroutinesApi
import kotlinx.coroutines.GlobalScope
import kotlinx.coroutines.launch
import kotlinx.coroutines.runBlocking

/**
 * [ExitTest]'s child: a guarded action, a heartbeat, an event collector still running, the
 * client and the server never closed; main returns and the JVM must exit by itself.
 */
object ExitCheck {
    @OptIn(DelicateCoroutinesApi::class)
    @JvmStatic
    fun main(args: Array<String>) = runBlocking {
        val server = LocalServer.start()
        val client = CyclesClient.create(
            ClientOptions(baseUrl = server.url, apiKey = server.apiKey, tenant = server.tenant, journalEnabled = false),
        )
        GlobalScope.launch { client.events().collect { } }
        client.withReservation(GuardSpec(Action("llm.completion", "exit-check"), 100)) { setActual(10) }
        // A reservation left running: its heartbeat keeps going until the process ends.
        client.reserve(GuardSpec(Action("llm.completion", "exit-check"), 100))
        // Used last, so the server is not collected (and stopped by its cleaner) before here.
        check(server.isRunning)
        println("main returned")
    }
}
