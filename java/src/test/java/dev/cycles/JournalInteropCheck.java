package dev.cycles;

import static dev.cycles.RecoverySupport.readRecord;
import static dev.cycles.RecoverySupport.recordFiles;
import static dev.cycles.RecoverySupport.settlementRequests;
import static dev.cycles.RecoverySupport.settlements;
import static dev.cycles.RecoverySupport.waitFor;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Journal interop between the JVM binding, the Rust CLI ({@code cycles journal drain/replay})
 * and the Python wheel, against a local server in this JVM over real HTTP: Java writes (a child
 * JVM whose commit the server failed; it exits, or is SIGKILLed with the record on disk) and
 * Rust or Python drains; Python writes and Java drains; Rust rewrites a record (its replay met a
 * 429 and persisted the floor) and Java drains. Each record is applied exactly once and the
 * drainer's commit is byte for byte the body the writer journaled (the server's request log).
 *
 * <p>Not in the default Surefire includes (it needs the CLI and a Python venv with the wheel):
 * java/scripts/test.sh runs it with {@code -Dtest=JournalInteropCheck -Dcycles.cli=PATH
 * -Dcycles.python=PATH}; a missing tool FAILS, naming the path.
 */
class JournalInteropCheck {
    private static final String PY_WRITE = String.join("\n",
            "import sys, cycles",
            "url, key, tenant, d, k = sys.argv[1:6]",
            "c = cycles.Client(url, key, tenant=tenant, journal_dir=d, settle_max_attempts=1, replay_interval=3600)",
            "with c.reserve(1000, action={'kind': 'llm.completion', 'name': 'test-model'}, idempotency_key=k,",
            "               heartbeat=False) as r:",
            "    r.set_actual(321)",
            "    r.set_metadata({'note': 'caf\\u00e9', 'big': 12345678901234567890})",
            "assert r.settlement.status == 'pending', r.settlement",
            "c.close(timeout=0)", "");
    private static final String PY_DRAIN = String.join("\n",
            "import sys, cycles",
            "url, key, tenant, d = sys.argv[1:5]",
            "c = cycles.Client(url, key, tenant=tenant, journal_dir=d, replay_interval=3600)",
            "r = c.drain(20.0)",
            "c.close(timeout=0)",
            "assert r.remaining == (), r", "");

    private LocalServer server;
    private String cli;
    private String python;
    private final List<RecoverySupport.Child> children = new ArrayList<>();
    @TempDir
    Path tmp;

    private static String tool(String prop) {
        String p = System.getProperty(prop);
        if (p == null || !Files.isExecutable(Path.of(p))) {
            fail("-D" + prop + " must name an executable (java/scripts/test.sh passes it), got " + p);
        }
        return p;
    }

    @BeforeEach
    void start() {
        cli = tool("cycles.cli");
        python = tool("cycles.python");
        server = LocalServer.start();
    }

    @AfterEach
    void stop() {
        children.forEach(c -> c.process.destroyForcibly());
        server.close();
    }

    private void run(String... argv) throws Exception {
        Process p = new ProcessBuilder(argv).redirectOutput(ProcessBuilder.Redirect.INHERIT)
                .redirectError(ProcessBuilder.Redirect.INHERIT).start();
        assertTrue(p.waitFor(60, TimeUnit.SECONDS), String.join(" ", argv) + " did not finish");
        assertEquals(0, p.exitValue(), String.join(" ", argv));
    }

    private void failNextCommit(int status) {
        server.addFault("{\"operation\":\"commitReservation\",\"times\":1,\"fault\":{\"kind\":\"server_error\",\"status\":" + status + "}}");
    }

    private int commits() {
        return (int) RecoverySupport.operations(server).stream().filter("commitReservation"::equals).count();
    }

    /** A child JVM settles {@code key}; the server fails the commit; it exits (or is SIGKILLed with the record on disk). */
    private void javaWrites(Path dir, String key, boolean killed) throws Exception {
        Map<String, Object> spec = new java.util.HashMap<>(Map.of("url", server.url(), "api_key", server.apiKey(), "tenant",
                server.tenant(), "dir", dir.toString(), "mode", "settle", "key", key, "amount", 400, "max_attempts", killed ? 5 : 1));
        if (!killed) {
            failNextCommit(500);
            Map<String, Object> r = new RecoverySupport.Child(spec, tmp.resolve(key + ".json")).finish();
            @SuppressWarnings("unchecked")
            Map<String, Object> s = (Map<String, Object>) r.get("settlement");
            assertEquals("PENDING", s.get("status"), r.toString());
            return;
        }
        // Killed: the server holds the (unapplied) commit; SIGKILL once the record is on disk.
        server.addFault("{\"operation\":\"commitReservation\",\"times\":1,\"fault\":{\"kind\":\"delay\",\"ms\":3000}}");
        int before = commits();
        RecoverySupport.Child c = new RecoverySupport.Child(spec, tmp.resolve(key + ".json"));
        children.add(c);
        assertTrue(waitFor(20_000, () -> recordFiles(dir).size() == 1 && commits() > before), "the record");
        c.kill();
        Thread.sleep(3_200); // the held commit ends at the server, unapplied
    }

    private void pythonRun(String script, Path dir, String key) throws Exception {
        run(python, "-I", "-c", script, server.url(), server.apiKey(), server.tenant(), dir.toString(), key);
    }

    private void rustDrains(Path dir) throws Exception {
        run(cli, "journal", "drain", "--dir", dir.toString(), "--base-url", server.url(), "--api-key", server.apiKey(), "--tenant",
                server.tenant(), "--deadline-ms", "20000");
    }

    private void javaDrains(Path dir) {
        try (CyclesClient c = CyclesClient.builder().baseUrl(server.url()).apiKey(server.apiKey()).tenant(server.tenant())
                .journalDir(dir).replayInterval(Duration.ofHours(1)).build()) {
            assertEquals(List.of(), c.drain(Duration.ofSeconds(20)).remaining());
        }
    }

    private String ridOf(String key) {
        return RecoverySupport.ledger(server).stream()
                .filter(e -> "reserve".equals(e.get("kind")) && key.equals(e.get("idempotency_key")))
                .map(e -> (String) e.get("reservation_id")).findFirst().orElseThrow(() -> new AssertionError("no reservation for " + key));
    }

    private String journaledBody(Path dir, String rid) {
        Map<String, Object> rec = readRecord(RecoverySupport.recordPath(dir, server, rid));
        assertNotNull(rec, "a pending record");
        return (String) rec.get("commit_body");
    }

    /** After the drain: applied once, the drained commit carried the journaled bytes, no record. */
    private void appliedOnce(String what, Path dir, String rid, String key, String body, long amount) {
        assertEquals("1,0", settlements(server, rid, key), what + ": applied once");
        List<Map<String, Object>> reqs = settlementRequests(server, rid, key);
        assertTrue(reqs.size() >= 2, what + ": " + reqs);
        Map<String, Object> last = reqs.get(reqs.size() - 1);
        assertEquals(200L, last.get("status"), what);
        assertEquals(key, last.get("idempotency_key"), what);
        assertEquals(body, last.get("body"), what + ": the drained commit is the journaled body byte for byte");
        assertEquals(List.of(amount), RecoverySupport.applied(server, "commit").stream().filter(e -> rid.equals(e.get("reservation_id")))
                .map(e -> e.get("amount")).toList(), what);
        assertEquals(List.of(), recordFiles(dir), what + ": the record is removed");
    }

    @Test
    void javaWritesRustAndPythonDrain() throws Exception {
        String[][] matrix = {{"rust", "false"}, {"rust", "true"}, {"python", "false"}, {"python", "true"}};
        int i = 0;
        for (String[] m : matrix) {
            Path dir = tmp.resolve("j" + i);
            String key = "interop-" + i++;
            boolean killed = Boolean.parseBoolean(m[1]);
            javaWrites(dir, key, killed);
            String rid = ridOf(key);
            String body = journaledBody(dir, rid);
            if (m[0].equals("rust")) {
                rustDrains(dir);
            } else {
                pythonRun(PY_DRAIN, dir, key);
            }
            appliedOnce("java writes" + (killed ? " (SIGKILLed)" : "") + ", " + m[0] + " drains", dir, rid, key + ":commit", body, 400);
        }
    }

    @Test
    void pythonWritesJavaDrains() throws Exception {
        Path dir = tmp.resolve("py");
        failNextCommit(500);
        pythonRun(PY_WRITE, dir, "interop-py");
        String rid = ridOf("interop-py");
        String body = journaledBody(dir, rid);
        assertTrue(body.contains("12345678901234567890"), "big integer kept: " + body);
        javaDrains(dir);
        appliedOnce("python writes, java drains", dir, rid, "interop-py:commit", body, 321);
    }

    @Test
    void rustRewritesJavaDrains() throws Exception {
        Path dir = tmp.resolve("rust");
        javaWrites(dir, "interop-rust", false);
        String rid = ridOf("interop-rust");
        String before = journaledBody(dir, rid);
        // Every commit of this replay is rate-limited, so it ends with the floor persisted.
        server.addFault("{\"operation\":\"commitReservation\",\"times\":0,\"fault\":{\"kind\":\"rate_limited\",\"retry_after\":\"1\"}}");
        Process p = new ProcessBuilder(cli, "journal", "replay", "--dir", dir.toString(), "--base-url", server.url(), "--api-key",
                server.apiKey(), "--tenant", server.tenant()).redirectOutput(ProcessBuilder.Redirect.INHERIT)
                .redirectError(ProcessBuilder.Redirect.INHERIT).start();
        assertTrue(p.waitFor(60, TimeUnit.SECONDS));
        assertEquals(1, p.exitValue(), "the replay leaves the record pending (exit 1)");
        assertNotNull(readRecord(RecoverySupport.recordPath(dir, server, rid)).get("not_before_ms"), "Rust wrote the floor into the record");
        server.clearFaults();
        javaDrains(dir);
        appliedOnce("rust rewrites (429 floor), java drains", dir, rid, "interop-rust:commit", before, 400);
    }
}
