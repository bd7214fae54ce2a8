package dev.cycles;

import static dev.cycles.RecoverySupport.noRelease;
import static dev.cycles.RecoverySupport.requests;
import static dev.cycles.RecoverySupport.settlementRequests;
import static dev.cycles.RecoverySupport.settlements;
import static dev.cycles.RecoverySupport.waitFor;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.cycles.internal.Json;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Recovery conformance across real JVM processes (CR-DURABLE-001..004 and 006 of
 * ../shared/spec/scenarios.yaml): {@link RecoveryChild} JVMs settle through the public API,
 * are SIGKILLed mid-settlement and restarted with nothing but the journal, against a local
 * server in this (the test's) JVM, whose ledger and request log outlive every kill. The journal
 * is a {@link TestJournal}: a directory, or with CYCLES_TEST_JOURNAL_STORE=redis a Redis the
 * test starts (one Redis shared by every process of a test; two for the two hosts' copies).
 */
class RecoveryProcessTest {
    private LocalServer server;
    private final List<RecoverySupport.Child> children = new ArrayList<>();
    private final List<TestJournal> journals = new ArrayList<>();
    private TestJournal shared;
    @TempDir
    Path tmp;

    @AfterEach
    void stop() {
        for (RecoverySupport.Child c : children) {
            c.process.destroyForcibly();
        }
        if (server != null) {
            server.close();
        }
        journals.forEach(TestJournal::close);
    }

    /** The journal under test at {@code tmp/name} (closed after the test). */
    private TestJournal journal(String name) {
        TestJournal j = new TestJournal(tmp.resolve(name));
        journals.add(j);
        return j;
    }

    /** The journal every process of the test shares (made at first use). */
    private TestJournal j() {
        if (shared == null) {
            shared = journal("journal");
        }
        return shared;
    }

    private RecoverySupport.Child spawn(String name, Object... kv) {
        return spawnOn(j(), name, kv);
    }

    /** A {@link RecoveryChild} journaling in {@code journal}, its spec's other members {@code kv}. */
    private RecoverySupport.Child spawnOn(TestJournal journal, String name, Object... kv) {
        Map<String, Object> spec = new LinkedHashMap<>();
        spec.put("url", server.url());
        spec.put("api_key", server.apiKey());
        spec.put("tenant", server.tenant());
        journal.spec(spec);
        for (int i = 0; i < kv.length; i += 2) {
            spec.put((String) kv[i], kv[i + 1]);
        }
        RecoverySupport.Child c = new RecoverySupport.Child(spec, tmp.resolve(name + ".json"));
        children.add(c);
        return c;
    }

    private void fault(String op, String fault) {
        server.addFault("{\"operation\":\"" + op + "\",\"times\":1,\"fault\":" + fault + "}");
    }

    /** {@code rid}'s record in the shared journal (the server's identity), parsed, or null. */
    private Map<String, Object> record(String rid) {
        return j().readRecord(server, rid);
    }

    /** Nothing is left in the journal, and a Redis run wrote nothing into the directory. */
    private static void journalEmpty(TestJournal journal, String what) {
        assertEquals(List.of(), journal.records(), what);
        assertEquals(List.of(), journal.quarantined(), what);
        assertTrue(journal.dirUntouchedOnRedis(), what + ": the unused directory was written");
    }

    @SuppressWarnings("unchecked")
    private static List<Map<String, Object>> events(Map<String, Object> result, String kind) {
        List<Map<String, Object>> out = new ArrayList<>();
        for (Object o : (List<Object>) result.get("events")) {
            Map<String, Object> e = (Map<String, Object>) o;
            if (kind.equals(e.get("kind"))) {
                out.add(e);
            }
        }
        return out;
    }

    @SuppressWarnings("unchecked")
    private static List<Object> remaining(Map<String, Object> result) {
        return (List<Object>) ((Map<String, Object>) result.get("report")).get("remaining");
    }

    @SuppressWarnings("unchecked")
    private static Object settlementField(Map<String, Object> result, String field) {
        return ((Map<String, Object>) result.get("settlement")).get(field);
    }

    private static String commitKey(Map<String, Object> rec) {
        return (String) rec.get("idempotency_key");
    }

    private Map<String, Object> first(String op, int from, String rid) {
        List<Map<String, Object>> all = requests(server);
        for (Map<String, Object> r : all.subList(Math.min(from, all.size()), all.size())) {
            if (op.equals(r.get("operation")) && (rid == null || rid.equals(r.get("reservation_id")))) {
                return r;
            }
        }
        return null;
    }

    private Map<String, Object> awaitRequest(String op, int from) throws InterruptedException {
        assertTrue(waitFor(20_000, () -> first(op, from, null) != null), "no " + op + " reached the server");
        return first(op, from, null);
    }

    private void killedInFlight(String fault, long holdMs, int n) throws Exception {
        String key = "d1-" + n + ":commit";
        fault("commitReservation", fault);
        int before = requests(server).size();
        RecoverySupport.Child p1 = spawn("p1-" + n, "mode", "settle", "key", "d1-" + n, "amount", 400);
        // Process 1 journals, then sends the first commit; the server holds it; SIGKILL in flight.
        Map<String, Object> req = awaitRequest("commitReservation", before);
        String rid = (String) req.get("reservation_id");
        byte[] bytes = j().recordOf(server.url(), server.apiKey(), server.tenant(), rid);
        assertNotNull(bytes, "the record is in the journal while the first commit is in flight: " + j().records());
        Map<String, Object> rec = Json.object(Journal.parseRecord(bytes));
        assertNull(first("commitReservation", before, rid).get("status"), "the commit is still in flight");
        p1.kill();
        long killed = System.nanoTime();
        assertEquals(rid, rec.get("reservation_id"));
        assertEquals("commit", rec.get("mode"));
        assertEquals(key, commitKey(rec));
        assertTrue(((Number) rec.get("recorded_at_ms")).longValue() <= ((Number) req.get("received_at_ms")).longValue(),
                "journal write precedes the first settlement request");
        assertEquals(List.of(Journal.fileName(rid)), j().records().stream().map(TestJournal.Entry::name).toList());
        assertArrayEquals(bytes, j().recordOf(server.url(), server.apiKey(), server.tenant(), rid),
                "the record survives the kill byte for byte");

        // Process 2: a fresh JVM with the journal only.
        long lastSeq = ((Number) requests(server).get(requests(server).size() - 1).get("seq")).longValue();
        Map<String, Object> r2 = spawn("p2-" + n, "mode", "drain").finish();
        assertEquals(List.of(), remaining(r2), r2.toString());
        assertEquals(List.of(rid), events(r2, "settlement_settled").stream().map(e -> e.get("reservation_id")).toList());
        assertNull(record(rid), "successful replay removes the record");
        journalEmpty(j(), "nothing left in the journal");
        // Let the held first request end at the server, so a late apply would show.
        long left = holdMs - (System.nanoTime() - killed) / 1_000_000;
        Thread.sleep(Math.max(0, left) + 200);
        List<Map<String, Object>> reqs = settlementRequests(server, rid, key);
        assertTrue(reqs.size() >= 2, reqs.toString());
        assertTrue(reqs.stream().allMatch(r -> "commitReservation".equals(r.get("operation")) && key.equals(r.get("idempotency_key"))));
        assertTrue(reqs.subList(1, reqs.size()).stream().allMatch(r -> ((Number) r.get("seq")).longValue() > lastSeq),
                "later commits came from the restart");
        assertEquals("1,0", settlements(server, rid, key), "settled at most once");
    }

    /** CR-DURABLE-001: journaled before it leaves; SIGKILL in flight (held after and before apply); a fresh JVM replays once with the same key. */
    @Test
    void firstCommitIsJournaledBeforeItLeavesAndReplayedAfterSigkill() throws Exception {
        server = LocalServer.start();
        killedInFlight("{\"kind\":\"delay_after_apply\",\"ms\":1500}", 1_500, 1);
        killedInFlight("{\"kind\":\"delay\",\"ms\":1500}", 1_500, 2);
        noRelease(server);
    }

    /** CR-DURABLE-002: a replayed commit gets 410; event mode is on disk before the event leaves; SIGKILL; the next JVM sends only the event (same key). */
    @Test
    void replayedExpiredCommitSwitchesDurablyToEventModeAcrossSigkill() throws Exception {
        server = LocalServer.start();
        String key = "d2:commit";
        fault("commitReservation", "{\"kind\":\"server_error\",\"status\":500}");
        Map<String, Object> r1 = spawn("p1", "mode", "settle", "key", "d2", "amount", 400, "max_attempts", 1).finish();
        assertEquals("PENDING", settlementField(r1, "status"), r1.toString());
        String rid = (String) settlementField(r1, "reservation_id");
        assertEquals("commit", record(rid).get("mode"), "the journal contains the commit");
        assertEquals(1, settlementRequests(server, rid, key).size());

        server.advanceClock(200_000);
        fault("createEvent", "{\"kind\":\"delay_after_apply\",\"ms\":1000}");
        RecoverySupport.Child p2 = spawn("p2", "mode", "drain");
        assertTrue(waitFor(20_000, () -> settlementRequests(server, rid, key).stream().anyMatch(r -> "createEvent".equals(r.get("operation")))));
        Map<String, Object> switched = record(rid);
        assertNotNull(switched, "the record is present while the event is in flight");
        p2.kill();
        Map<String, Object> event = settlementRequests(server, rid, key).stream().filter(r -> "createEvent".equals(r.get("operation")))
                .findFirst().orElseThrow();
        assertNull(event.get("status"), "the event was in flight");
        assertEquals("event", switched.get("mode"), "event mode is persisted before the event attempt");
        assertEquals(key, commitKey(switched));
        assertNotNull(switched.get("event_fallback_body"));
        List<Map<String, Object>> reqs = settlementRequests(server, rid, key);
        assertEquals(List.of("commitReservation:500", "commitReservation:410"),
                reqs.subList(0, 2).stream().map(r -> r.get("operation") + ":" + r.get("status")).toList());
        assertEquals(3, reqs.size(), reqs.toString());
        assertEquals("event", record(rid).get("mode"), "the switch survives the kill");

        Map<String, Object> r3 = spawn("p3", "mode", "drain").finish();
        assertEquals(List.of(), remaining(r3), r3.toString());
        assertEquals(List.of("event"), events(r3, "settlement_settled").stream().map(e -> e.get("mode")).toList());
        assertNull(record(rid), "successful event removes the record");
        journalEmpty(j(), "nothing left in the journal");
        reqs = settlementRequests(server, rid, key);
        assertTrue(reqs.size() >= 4, reqs.toString());
        assertTrue(reqs.subList(2, reqs.size()).stream().allMatch(r -> "createEvent".equals(r.get("operation"))), "only events after the switch");
        assertTrue(reqs.stream().allMatch(r -> key.equals(r.get("idempotency_key"))));
        assertEquals("0,1", settlements(server, rid, key), "settled once, by the event");
        assertEquals(List.of(400L), RecoverySupport.applied(server, "event").stream().map(e -> e.get("amount")).toList());
        noRelease(server);
    }

    /** CR-DURABLE-003: a 429 Retry-After: 3 floor is persisted; SIGKILL; a JVM before the floor sends nothing; the next retries at or after it, same key. */
    @Test
    void rateLimitFloorSurvivesSigkillAndRestart() throws Exception {
        server = LocalServer.start();
        String key = "d3:commit";
        fault("commitReservation", "{\"kind\":\"rate_limited\",\"retry_after\":\"3\"}");
        RecoverySupport.Child p1 = spawn("p1", "mode", "settle", "key", "d3", "amount", 400);
        String rid = (String) awaitRequest("commitReservation", 0).get("reservation_id");
        // Kill as soon as the floor is journaled (the child then waits inline for it).
        assertTrue(waitFor(20_000, () -> {
            Map<String, Object> r = record(rid);
            return r != null && r.get("not_before_ms") != null;
        }), "the persisted floor");
        p1.kill();
        List<Map<String, Object>> reqs = settlementRequests(server, rid, key);
        assertEquals(1, reqs.size());
        assertEquals(429L, reqs.get(0).get("status"));
        long nb = ((Number) record(rid).get("not_before_ms")).longValue();
        assertTrue(nb >= ((Number) reqs.get(0).get("received_at_ms")).longValue() + 3_000, "the floor honours Retry-After");

        Map<String, Object> r2 = spawn("p2", "mode", "flush").finish();
        assertTrue(System.currentTimeMillis() < nb, "this check ran before the floor");
        assertEquals(List.of(rid), remaining(r2).stream().map(o -> o instanceof Map<?, ?> m ? m.get("reservation_id") : o).toList(), r2.toString());
        assertEquals(1, settlementRequests(server, rid, key).size(), "nothing sent before the floor");

        Map<String, Object> r3 = spawn("p3", "mode", "drain").finish();
        assertEquals(List.of(), remaining(r3), r3.toString());
        assertNull(record(rid), "successful replay removes the record");
        journalEmpty(j(), "nothing left in the journal");
        reqs = settlementRequests(server, rid, key);
        assertEquals(2, reqs.size(), reqs.toString());
        assertTrue(((Number) reqs.get(1).get("received_at_ms")).longValue() >= nb, "no retry before the persisted not_before");
        assertEquals(200L, reqs.get(1).get("status"));
        assertTrue(reqs.stream().allMatch(r -> key.equals(r.get("idempotency_key"))));
        assertEquals("1,0", settlements(server, rid, key));
    }

    /** CR-DURABLE-004: a record written with old-key + tenant is settled (same key) by a JVM with only new-key + tenant; no file holds a key; new-key without tenant is another partition. */
    @Test
    void tenantJournalSurvivesApiKeyRotationAcrossProcesses() throws Exception {
        server = LocalServer.start("{\"tenants\":[{\"id\":\"acme\",\"api_keys\":[\"old-key\",\"new-key\"]}]}");
        String key = "d4:commit";
        fault("commitReservation", "{\"kind\":\"server_error\",\"status\":500}");
        Map<String, Object> r1 = spawn("p1", "api_key", "old-key", "tenant", "acme", "mode", "settle", "key", "d4", "amount", 400,
                "max_attempts", 1).finish();
        assertEquals("PENDING", settlementField(r1, "status"), r1.toString());
        String rid = (String) settlementField(r1, "reservation_id");
        List<TestJournal.Entry> records = j().records();
        assertFalse(records.isEmpty());
        for (TestJournal.Entry e : records) {
            assertFalse(e.text().contains("old-key") || e.text().contains("new-key"), "API key stored in " + e);
            assertFalse(e.toString().contains("old-key") || e.toString().contains("new-key"), e.toString());
        }
        if (j().url() == null) {
            // Nor in any other file of the directory.
            List<Path> files;
            try (Stream<Path> all = Files.walk(j().dir())) {
                files = all.filter(Files::isRegularFile).toList();
            }
            for (Path f : files) {
                String data = Files.readString(f);
                assertFalse(data.contains("old-key") || data.contains("new-key"), "API key stored in " + f);
            }
        }
        assertEquals(Journal.fingerprint(server.url(), "old-key", "acme"), Journal.fingerprint(server.url(), "new-key", "acme"));
        assertNotNull(j().recordOf(server.url(), "new-key", "acme", rid), "the tenant partition does not depend on the key");

        Map<String, Object> other = spawn("p-other", "api_key", "new-key", "tenant", null, "mode", "flush").finish();
        assertEquals(List.of(), remaining(other), other.toString());
        assertEquals(List.of(), events(other, "settlement_settled"));
        assertEquals(1, settlementRequests(server, rid, key).size());

        Map<String, Object> r2 = spawn("p2", "api_key", "new-key", "tenant", "acme", "mode", "drain").finish();
        assertEquals(List.of(), remaining(r2), r2.toString());
        assertEquals(List.of(rid), events(r2, "settlement_settled").stream().map(e -> e.get("reservation_id")).toList());
        assertNull(j().recordOf(server.url(), "new-key", "acme", rid));
        journalEmpty(j(), "nothing left in the journal");
        assertEquals(List.of("commitReservation:" + key + ":500", "commitReservation:" + key + ":200"),
                settlementRequests(server, rid, key).stream().map(r -> r.get("operation") + ":" + r.get("idempotency_key") + ":" + r.get("status"))
                        .toList());
        assertEquals("1,0", settlements(server, rid, key));
    }

    private void releaseTogether(List<RecoverySupport.Child> workers, Path go) throws Exception {
        // Released only once every worker has built its client: they then race for real.
        assertTrue(waitFor(30_000, () -> workers.stream().allMatch(w -> Files.exists(Path.of(w.result + ".ready")))), "workers ready");
        Files.createFile(go);
    }

    /** CR-DURABLE-006 (shared journal): two JVMs replay one record at once while the server holds the commit; the record lock lets one send it; committed once. */
    @Test
    void twoProcessesReplayingOneJournalSettleTheRecordOnce() throws Exception {
        server = LocalServer.start();
        String key = "d6a:commit";
        fault("commitReservation", "{\"kind\":\"server_error\",\"status\":500}");
        Map<String, Object> r0 = spawn("p0", "mode", "settle", "key", "d6a", "amount", 300, "max_attempts", 1).finish();
        String rid = (String) settlementField(r0, "reservation_id");
        assertNotNull(record(rid), "the journal contains the commit");
        fault("commitReservation", "{\"kind\":\"delay\",\"ms\":400}");
        Path go = tmp.resolve("go-a");
        List<RecoverySupport.Child> workers = List.of(spawn("w0", "mode", "drain", "go", go.toString()),
                spawn("w1", "mode", "drain", "go", go.toString()));
        releaseTogether(workers, go);
        List<Map<String, Object>> results = new ArrayList<>();
        for (RecoverySupport.Child w : workers) {
            results.add(w.finish());
        }
        long settled = results.stream().mapToLong(r -> events(r, "settlement_settled").size()).sum();
        assertEquals(1, settled, results.toString());
        List<Map<String, Object>> reqs = settlementRequests(server, rid, key);
        assertEquals(List.of(key, key), reqs.stream().map(r -> r.get("idempotency_key")).toList(), reqs.toString());
        assertEquals(200L, reqs.get(1).get("status"));
        assertEquals("1,0", settlements(server, rid, key), "settled at most once");
        assertNull(record(rid), "the terminal record is removed");
        journalEmpty(j(), "nothing left in the journal");
    }

    /** CR-DURABLE-006 (copies, no shared lock): two JVMs each holding a copy commit concurrently with the same key; applied once, both records removed. */
    @Test
    void twoProcessesWithCopiesOfOneRecordCommitConcurrentlyOnce() throws Exception {
        server = LocalServer.start();
        String key = "d6b:commit";
        fault("commitReservation", "{\"kind\":\"server_error\",\"status\":500}");
        Map<String, Object> r0 = spawn("p0", "mode", "settle", "key", "d6b", "amount", 300, "max_attempts", 1).finish();
        String rid = (String) settlementField(r0, "reservation_id");
        byte[] src = j().recordOf(server.url(), server.apiKey(), server.tenant(), rid);
        assertNotNull(src, "the journal contains the commit");
        // Two hosts' journals (two directories, or two Redis), each with a copy of the record.
        List<TestJournal> hosts = List.of(journal("host-a"), journal("host-b"));
        for (TestJournal h : hosts) {
            h.put(server.url(), server.apiKey(), server.tenant(), Journal.fileName(rid), src);
        }
        fault("commitReservation", "{\"kind\":\"hold\",\"ms\":10000}");
        Path go = tmp.resolve("go-b");
        List<RecoverySupport.Child> workers = List.of(spawnOn(hosts.get(0), "h0", "mode", "drain", "go", go.toString()),
                spawnOn(hosts.get(1), "h1", "mode", "drain", "go", go.toString()));
        releaseTogether(workers, go);
        for (RecoverySupport.Child w : workers) {
            Map<String, Object> r = w.finish();
            assertEquals(List.of(), remaining(r), r.toString());
            assertEquals(List.of(rid), events(r, "settlement_settled").stream().map(e -> e.get("reservation_id")).toList(), r.toString());
        }
        List<Map<String, Object>> all = settlementRequests(server, rid, key);
        List<Map<String, Object>> reqs = all.subList(1, all.size()); // after process 0's 500
        assertEquals(2, reqs.size(), reqs.toString());
        assertTrue(reqs.stream().allMatch(r -> key.equals(r.get("idempotency_key")) && Long.valueOf(200).equals(r.get("status"))));
        long gap = ((Number) reqs.get(1).get("received_mono_us")).longValue() - ((Number) reqs.get(0).get("received_mono_us")).longValue();
        assertTrue(gap < 10_000_000, "the second commit arrived while the first was held (" + gap + " us)");
        assertEquals(1, reqs.stream().filter(r -> Boolean.TRUE.equals(r.get("replay"))).count(), "one applied, one replayed");
        assertEquals("1,0", settlements(server, rid, key), "applied once");
        for (TestJournal h : hosts) {
            journalEmpty(h, "both terminal records removed");
        }
    }
}
