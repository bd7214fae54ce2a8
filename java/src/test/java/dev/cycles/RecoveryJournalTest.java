package dev.cycles;

import static dev.cycles.RecoverySupport.ACTION;
import static dev.cycles.RecoverySupport.pythonSdkRecord;
import static dev.cycles.RecoverySupport.readRecord;
import static dev.cycles.RecoverySupport.recordFiles;
import static dev.cycles.RecoverySupport.requests;
import static dev.cycles.RecoverySupport.settlementRequests;
import static dev.cycles.RecoverySupport.settlements;
import static dev.cycles.RecoverySupport.write;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.cycles.errors.InvalidArgumentException;
import dev.cycles.internal.Json;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Recovery conformance on journals written by others (CR-DURABLE-005, CR-DURABLE-007 of
 * ../shared/spec/scenarios.yaml): corrupt and unsupported records are quarantined while valid
 * ones still replay (in a restarted JVM; in the directory or, with
 * CYCLES_TEST_JOURNAL_STORE=redis, in Redis: {@link TestJournal}); file names are the sha256 of
 * the exact UTF-8 id, legacy names migrate without deleting a colliding record. Real files, a
 * real redis-server, real HTTP.
 */
class RecoveryJournalTest {
    private final LocalServer server = LocalServer.start();
    private final List<TestJournal> journals = new ArrayList<>();
    @TempDir
    Path tmp;

    @AfterEach
    void stop() {
        server.close();
        journals.forEach(TestJournal::close);
    }

    /** The journal under test at {@code tmp/name} (closed after the test). */
    private TestJournal journal(String name) {
        TestJournal j = new TestJournal(tmp.resolve(name));
        journals.add(j);
        return j;
    }

    @SuppressWarnings("unchecked")
    private static List<Map<String, Object>> list(String json) {
        List<Map<String, Object>> out = new ArrayList<>();
        for (Object o : (List<Object>) Json.parse(json)) {
            out.add((Map<String, Object>) o);
        }
        return out;
    }

    /** CR-DURABLE-005: a corrupt, a version-2 and a valid (Python SDK) record; a fresh JVM quarantines the two (kept, reported, never sent) and replays the valid one once. */
    @Test
    void corruptAndUnsupportedRecordsAreQuarantinedAndValidRecordsStillReplay() throws Exception {
        // The journal under test (the directory, or Redis: TestJournal), written as others would have.
        TestJournal j = journal("journal");
        String part = Journal.fingerprint(server.url(), server.apiKey(), server.tenant());
        String rid;
        try (CyclesClient c = CyclesClient.builder().baseUrl(server.url()).apiKey(server.apiKey()).tenant(server.tenant())
                .journalEnabled(false).build()) {
            rid = RecoverySupport.reserveDirect(c, "d5-reserve");
        }
        String key = "d5-python-sdk-key";
        String valid = Journal.fileName(rid);
        String corrupt = Journal.fileName("rsv-corrupt");
        String future = Journal.fileName("rsv-future");
        byte[] corruptBytes = "{\"version\": 1, \"reserv".getBytes(StandardCharsets.UTF_8);
        byte[] futureBytes = "{\"version\": 2, \"reservation_id\": \"rsv-future\", \"payload\": {}}".getBytes(StandardCharsets.UTF_8);
        j.put(server.url(), server.apiKey(), server.tenant(), valid,
                pythonSdkRecord(rid, server.url(), key, 300).getBytes(StandardCharsets.UTF_8));
        j.put(server.url(), server.apiKey(), server.tenant(), corrupt, corruptBytes);
        j.put(server.url(), server.apiKey(), server.tenant(), future, futureBytes);
        for (Object[] pe : new Object[][] {{corruptBytes, "corrupt"}, {futureBytes, "unsupported"}}) {
            InvalidArgumentException bad = assertThrows(InvalidArgumentException.class, () -> Journal.parseRecord((byte[]) pe[0]));
            assertEquals(Map.of("journal_error", pe[1]), Json.object(bad.details().orElseThrow()));
        }
        assertEquals(List.of(rid), j.pendingIds(server.url(), server.apiKey(), server.tenant()));

        Map<String, Object> spec = j.spec(new HashMap<>(Map.of("url", server.url(), "api_key", server.apiKey(),
                "tenant", server.tenant(), "mode", "drain")));
        Map<String, Object> result = new RecoverySupport.Child(spec, tmp.resolve("restart.json")).finish();
        @SuppressWarnings("unchecked")
        Map<String, Object> report = (Map<String, Object>) result.get("report");
        assertEquals(List.of(), report.get("remaining"), result.toString());
        @SuppressWarnings("unchecked")
        List<Map<String, Object>> events = (List<Map<String, Object>>) (List<?>) result.get("events");
        List<Map<String, Object>> reported = events.stream().filter(e -> "journal_quarantined".equals(e.get("kind"))).toList();
        // corruption_is_reported: one event per quarantined record, naming it and its new name.
        assertEquals(Set.of(corrupt, future),
                new HashSet<>(reported.stream().map(e -> TestJournal.name((String) e.get("file"))).toList()), result.toString());
        assertEquals(2, reported.size());
        List<TestJournal.Entry> quarantined = j.quarantined();
        assertTrue(quarantined.stream().allMatch(e -> e.partition().equals(part)), quarantined.toString());
        List<String> left = quarantined.stream().map(TestJournal.Entry::name).toList();
        for (Map<String, Object> e : reported) {
            assertEquals("quarantined", e.get("disposition"));
            String file = TestJournal.name((String) e.get("file"));
            String why = file.equals(corrupt) ? "corrupt" : "unsupported";
            assertTrue(String.valueOf(e.get("reason")).contains(why), e.toString());
            assertTrue(left.contains(TestJournal.name((String) e.get("quarantined_as"))), e + " " + left);
        }
        // corrupt / unsupported quarantined: renamed, evidence kept byte for byte, never deleted.
        List<TestJournal.Entry> qc = quarantined.stream().filter(e -> e.name().startsWith(corrupt + ".corrupt-")).toList();
        List<TestJournal.Entry> qf = quarantined.stream().filter(e -> e.name().startsWith(future + ".unsupported-")).toList();
        assertEquals(1, qc.size(), left.toString());
        assertEquals(1, qf.size(), left.toString());
        assertArrayEquals(corruptBytes, qc.get(0).bytes());
        assertArrayEquals(futureBytes, qf.get(0).bytes());
        // other_valid_records_still_replay: committed once, stored key; no record is left (the
        // valid one removed, the two others only under their quarantine names).
        assertEquals(List.of(), j.records());
        assertEquals(List.of(rid), events.stream().filter(e -> "settlement_settled".equals(e.get("kind"))).map(e -> e.get("reservation_id")).toList());
        assertEquals(List.of("commitReservation:" + key + ":200"), settlementRequests(server, rid, key).stream()
                .map(r -> r.get("operation") + ":" + r.get("idempotency_key") + ":" + r.get("status")).toList());
        assertEquals("1,0", settlements(server, rid, key));
        assertEquals(List.of(), j.pendingIds(server.url(), server.apiKey(), server.tenant()));
        assertTrue(j.dirUntouchedOnRedis(), "a Redis run wrote into the directory");
        // Nothing was ever sent for the quarantined records (expected_requests: []).
        assertEquals(List.of(rid), requests(server).stream()
                .filter(r -> "commitReservation".equals(r.get("operation")) || "createEvent".equals(r.get("operation")))
                .map(r -> r.get("reservation_id")).toList());
    }

    /** Ids a lossy name scheme would merge (JournalRedisTest's key test uses them too). */
    static final String[] TRICKY_IDS = {"rsv/a", "rsv_a", "rsv.a", "rsv a", "rsv:a", "rsv%2Fa", "RSV/A", "rsv/a ", " rsv/a",
        "r\u00e9sum\u00e9", "re\u0301sume\u0301", "\u0440\u0441\u0432", "\u4e88\u7d04-1", "\uD83D\uDCB8", "rsv\\a", "../rsv", "a".repeat(300)};

    /** CR-DURABLE-007 (names): v2- + lowercase sha256 hex of the exact, unnormalised UTF-8 id + .json; ids a lossy scheme merges get distinct files. */
    @Test
    void journalFileNamesAreSha256OfTheExactUtf8IdAndNeverShared() throws Exception {
        Set<String> names = new HashSet<>();
        MessageDigest sha = MessageDigest.getInstance("SHA-256");
        for (String rid : TRICKY_IDS) {
            String expected = "v2-" + HexFormat.of().formatHex(sha.digest(rid.getBytes(StandardCharsets.UTF_8))) + ".json";
            assertEquals(expected, Journal.fileName(rid), rid);
            names.add(expected);
        }
        assertEquals(TRICKY_IDS.length, names.size(), "distinct ids, distinct files");
        assertEquals("v2-e3edb9ca022de3c9c90c5667d47fa66448cee1f254e488a761313faee34141d7.json", Journal.fileName("rsv/a"));
        // The legacy scheme is lossy: these collide there, and only there.
        assertEquals(1, Stream.of("rsv/a", "rsv_a", "rsv.a", "rsv a").map(Journal::legacyFileName).distinct().count());
    }

    /**
     * CR-DURABLE-007 (legacy): a colliding legacy record of another id is neither read nor deleted
     * while R settles; a matching legacy record of R2 migrates and settles once. The directory's
     * alone (legacy file names do not exist in Redis; jvm-redis-map.json maps the scenario to
     * JournalRedisTest's key test instead), so it runs on files whatever the store under test.
     */
    @Test
    void legacyRecordMigratesToItsStandardNameWithoutDeletingACollidingRecord() throws Exception {
        Path d = tmp.resolve("journal");
        Path part = RecoverySupport.partition(d, server, server.apiKey(), server.tenant());
        List<CyclesEvent> got = new CopyOnWriteArrayList<>();
        CyclesClient client = CyclesClient.builder().baseUrl(server.url()).apiKey(server.apiKey()).tenant(server.tenant()).journalDir(d)
                .onEvent(got::add).settleMaxAttempts(1).replayInterval(Duration.ofHours(1)).build();
        String rid;
        String collider;
        Path legacy;
        String cText;
        Path standard;
        String rid2;
        Path legacy2;
        Reservation kept;
        try {
            try (Reservation r = client.reserve(GuardSpec.of(ACTION, 1_000).idempotencyKey("d7-r").heartbeat(false))) {
                kept = r;
                rid = r.reservationId();
                // C differs from R, yet the lossy legacy scheme names both the same.
                collider = rid.replaceFirst("_", ".");
                assertNotEquals(collider, rid);
                legacy = part.resolve(Journal.legacyFileName(rid));
                assertEquals(Journal.legacyFileName(collider), legacy.getFileName().toString());
                assertEquals(rid + ".json", legacy.getFileName().toString());
                cText = pythonSdkRecord(collider, "http://127.0.0.1:9", "d7-collider-key", 111);
                write(legacy, cText);
                server.addFault("{\"operation\":\"commitReservation\",\"reservation_id\":\"" + rid
                        + "\",\"times\":1,\"fault\":{\"kind\":\"server_error\",\"status\":503}}");
                r.setActual(400);
            }
            Settlement s = kept.outcome().orElseThrow().settlement();
            assertEquals(Settlement.Status.PENDING, s.status());
            assertTrue(s.journaled());
            standard = part.resolve(Journal.fileName(rid));
            assertEquals(Stream.of(legacy, standard).sorted().toList(), recordFiles(d), "two ids, two files");
            Map<String, Object> rec = readRecord(standard);
            assertEquals(rid, rec.get("reservation_id"));
            assertEquals("d7-r:commit", rec.get("idempotency_key"));
            assertEquals(cText, Files.readString(legacy), "the colliding record is neither read nor touched");

            // A matching legacy record of a real reservation R2 (as an older SDK named it).
            rid2 = RecoverySupport.reserveDirect(client, "d7-r2");
            legacy2 = part.resolve(Journal.legacyFileName(rid2));
            write(legacy2, pythonSdkRecord(rid2, server.url(), "d7-r2-key", 222));
            Map<String, Map<String, Object>> pending = new HashMap<>();
            for (Map<String, Object> p : list(Journal.pending(d, server.url(), server.apiKey(), server.tenant()))) {
                pending.put((String) p.get("reservation_id"), p);
            }
            assertEquals(Set.of(rid, collider, rid2), pending.keySet());
            assertEquals(List.of(true, true, false), List.of(pending.get(collider).get("legacy"), pending.get(rid2).get("legacy"),
                    pending.get(rid).get("legacy")));
            client.flush();
        } finally {
            client.close(Duration.ZERO); // C stays journaled
        }
        // R settled once with ITS key (never C's); its standard record is gone.
        assertEquals("1,0", settlements(server, rid, "d7-r:commit"));
        assertFalse(Files.exists(standard));
        // R2 migrated, then settled once with the stored key; no file of it is left.
        assertEquals("1,0", settlements(server, rid2, "d7-r2-key"));
        assertFalse(Files.exists(legacy2) || Files.exists(part.resolve(Journal.fileName(rid2))));
        // C's colliding legacy record is still there, untouched, and still pending.
        assertEquals(cText, Files.readString(legacy), "a colliding legacy record is never deleted");
        assertEquals(List.of(legacy), recordFiles(d));
        List<Map<String, Object>> left = list(Journal.pending(d, server.url(), server.apiKey(), server.tenant()));
        assertEquals(1, left.size());
        assertEquals(List.of(collider, true, legacy.getFileName().toString()),
                List.of(left.get(0).get("reservation_id"), left.get(0).get("legacy"), Path.of((String) left.get(0).get("file")).getFileName().toString()));
        RecoverySupport.waitFor(5_000, () -> got.stream().anyMatch(e -> "journal_migrated".equals(e.kind())));
        assertEquals(List.of(rid2), got.stream().filter(e -> "journal_migrated".equals(e.kind())).map(CyclesEvent::reservationId).toList());
        assertEquals(List.of(), settlementRequests(server, collider, "d7-collider-key"), "never sent");
    }
}
