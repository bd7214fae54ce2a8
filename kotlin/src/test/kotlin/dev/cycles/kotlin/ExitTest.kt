package dev.cycles.kotlin

import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import java.util.concurrent.TimeUnit

/**
 * A process exits by itself: nothing of ours (core's runtime threads, JNA's callback threads,
 * the event flow's reader) keeps a JVM alive. Each main runs in a plain child `java` (not
 * Surefire's fork, which exits by force) and must print its line and end within the limit.
 */
class ExitTest {
    private fun run(mainClass: String, want: String) {
        val cp = System.getProperty("surefire.test.class.path") ?: System.getProperty("java.class.path")
        val java = ProcessHandle.current().info().command().orElse("java")
        val p = ProcessBuilder(java, "-cp", cp, "-Djna.library.path=" + System.getProperty("jna.library.path"), mainClass)
            .redirectErrorStream(true).start()
        val exited = p.waitFor(LIMIT_S, TimeUnit.SECONDS)
        if (!exited) p.destroyForcibly()
        val out = p.inputStream.bufferedReader().readText()
        assertTrue(exited, "$mainClass did not exit within $LIMIT_S s; output:\n$out")
        assertEquals(0, p.exitValue(), out)
        assertTrue(out.lines().contains(want), "$mainClass printed:\n$out")
    }

    @Test
    fun theQuickStartOfDocsKotlinMdRunsAndExits() = run("QuickStartKt", "answer 42, charged 150000")

    @Test
    fun aProcessLeavingItsClientOpenExits() = run("dev.cycles.kotlin.ExitCheck", "main returned")

    private companion object {
        const val LIMIT_S = 30L
    }
}
