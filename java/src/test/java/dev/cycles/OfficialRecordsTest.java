package dev.cycles;

import static dev.cycles.RecoverySupport.readRecord;
import static dev.cycles.RecoverySupport.recordFiles;
import static dev.cycles.RecoverySupport.settlementRequests;
import static dev.cycles.RecoverySupport.settlements;
import static dev.cycles.RecoverySupport.write;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;

import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Records in the byte forms the official Cycles SDKs write (../shared/design/JOURNAL.md:
 * Python's spaced separators and {@code \\uXXXX} escapes without {@code mode}; TypeScript's
 * and Rust's compact JSON; an unknown extra key; bodies in a non-canonical key order) are
 * drained by a Java client: each applied once, and the commit on the wire is the body the
 * other SDK journaled, byte for byte (values, escapes, number text, key order; Python's
 * whitespace between tokens is the one thing core drops), per the server's request log.
 */
class OfficialRecordsTest {
    private final LocalServer server = LocalServer.start();
    @TempDir
    Path tmp;

    @AfterEach
    void stop() {
        server.close();
    }

    @Test
    void recordsInEveryOfficialSdkByteFormDrainOnceAndByteFaithfully() {
        Path d = tmp.resolve("journal");
        Path part = RecoverySupport.partition(d, server, server.apiKey(), server.tenant());
        List<String[]> cases = new ArrayList<>(); // rid, key, amount, the exact journaled commit body
        try (CyclesClient c = CyclesClient.builder().baseUrl(server.url()).apiKey(server.apiKey()).tenant(server.tenant())
                .journalEnabled(false).build()) {
            String py = RecoverySupport.reserveDirect(c, "off-py");
            String ts = RecoverySupport.reserveDirect(c, "off-ts");
            String rs = RecoverySupport.reserveDirect(c, "off-rs");
            // Python runcycles: ", " / ": " separators, \\u escapes, no mode.
            String pyBody = "{\"idempotency_key\": \"off-py-key\", \"actual\": {\"unit\": \"USD_MICROCENTS\", \"amount\": 310}, "
                    + "\"metadata\": {\"note\": \"caf\\u00e9\", \"big\": 12345678901234567890}}";
            write(part.resolve(Journal.fileName(py)), "{\"version\": 1, \"reservation_id\": \"" + py + "\", \"base_url\": \"" + server.url()
                    + "\", \"commit_body\": " + pyBody + ", \"event_fallback_body\": null, \"recorded_at_ms\": "
                    + System.currentTimeMillis() + ", \"not_before_ms\": null}");
            // TypeScript runcycles: compact, mode present, no base_url / recorded_at_ms (tolerated), key order actual-first.
            String tsBody = "{\"actual\":{\"amount\":320,\"unit\":\"USD_MICROCENTS\"},\"idempotency_key\":\"off-ts-key\","
                    + "\"metrics\":{\"tokens_input\":1}}";
            write(part.resolve(Journal.fileName(ts)), "{\"version\":1,\"reservation_id\":\"" + ts + "\",\"mode\":\"commit\","
                    + "\"commit_body\":" + tsBody + ",\"event_fallback_body\":null,\"not_before_ms\":null}");
            // Rust runcycles: compact, every field, an unknown extra key.
            String rsBody = "{\"idempotency_key\":\"off-rs-key\",\"actual\":{\"unit\":\"USD_MICROCENTS\",\"amount\":330},"
                    + "\"metadata\":{\"z\":1,\"a\":[true,null,\"\u00e9\"]}}";
            write(part.resolve(Journal.fileName(rs)), "{\"version\":1,\"reservation_id\":\"" + rs + "\",\"base_url\":\"" + server.url()
                    + "\",\"mode\":\"commit\",\"commit_body\":" + rsBody + ",\"event_fallback_body\":null,\"recorded_at_ms\":"
                    + System.currentTimeMillis() + ",\"not_before_ms\":null,\"x_future\":{\"k\":1}}");
            // Core keeps the body's values, escapes, number text and key order; only the
            // whitespace between tokens goes.
            String pyWire = "{\"idempotency_key\":\"off-py-key\",\"actual\":{\"unit\":\"USD_MICROCENTS\",\"amount\":310},"
                    + "\"metadata\":{\"note\":\"caf\\u00e9\",\"big\":12345678901234567890}}";
            cases.add(new String[] {py, "off-py-key", "310", pyWire});
            cases.add(new String[] {ts, "off-ts-key", "320", tsBody});
            cases.add(new String[] {rs, "off-rs-key", "330", rsBody});
        }
        for (String[] k : cases) {
            Map<String, Object> rec = readRecord(part.resolve(Journal.fileName(k[0])));
            assertNotNull(rec, k[0]);
            assertEquals(k[3], rec.get("commit_body"), "the record keeps the body's text");
        }
        try (CyclesClient c = CyclesClient.builder().baseUrl(server.url()).apiKey(server.apiKey()).tenant(server.tenant()).journalDir(d)
                .replayInterval(Duration.ofHours(1)).build()) {
            assertEquals(List.of(), c.drain(Duration.ofSeconds(20)).remaining());
        }
        for (String[] k : cases) {
            assertEquals("1,0", settlements(server, k[0], k[1]), k[1] + ": applied once");
            List<Map<String, Object>> reqs = settlementRequests(server, k[0], k[1]);
            assertEquals(1, reqs.size(), reqs.toString());
            assertEquals(200L, reqs.get(0).get("status"), k[1]);
            assertEquals(k[3], reqs.get(0).get("body"), k[1] + ": the commit is the journaled body byte for byte");
            assertEquals(List.of(Long.parseLong(k[2])), RecoverySupport.applied(server, "commit").stream()
                    .filter(e -> k[0].equals(e.get("reservation_id"))).map(e -> e.get("amount")).toList());
        }
        assertEquals(List.of(), recordFiles(d), "every record removed");
    }
}
