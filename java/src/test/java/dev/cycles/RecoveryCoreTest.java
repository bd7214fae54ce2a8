package dev.cycles;

import static dev.cycles.RecoverySupport.ACTION;
import static dev.cycles.RecoverySupport.applied;
import static dev.cycles.RecoverySupport.keys;
import static dev.cycles.RecoverySupport.noRelease;
import static dev.cycles.RecoverySupport.operations;
import static dev.cycles.RecoverySupport.requests;
import static dev.cycles.RecoverySupport.settlementRequests;
import static dev.cycles.RecoverySupport.settlements;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.cycles.errors.MissingActualException;
import dev.cycles.internal.Json;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Recovery conformance, core and boundary scenarios (CR-CORE-001..004, CR-BOUNDARY-001 of
 * ../shared/spec/scenarios.yaml) through the public Java API against the in-process local
 * server over real HTTP. conformance/adapters/jvm-map.json names these tests; each asserts its
 * scenario's expected requests and assertions. The journal is a {@link TestJournal}: the
 * directory, or Redis with CYCLES_TEST_JOURNAL_STORE=redis (jvm-redis-map.json).
 */
class RecoveryCoreTest {
    private static final String[] MALFORMED = {"missing_required_field", "wrong_status_code", "not_json", "wrong_field_type"};
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

    private CyclesClient.Builder client(TestJournal j) {
        return j.configure(CyclesClient.builder().baseUrl(server.url()).apiKey(server.apiKey()).tenant(server.tenant())
                .replayInterval(Duration.ofHours(1)));
    }

    /** Nothing journaled is left, and a Redis run wrote nothing into the directory. */
    private static void journalEmpty(TestJournal j, String what) {
        assertEquals(List.of(), j.records(), what);
        assertEquals(List.of(), j.quarantined(), what);
        assertTrue(j.dirUntouchedOnRedis(), what + ": the unused directory was written");
    }

    private void fault(String op, String fault) {
        server.addFault("{\"operation\":\"" + op + "\",\"times\":1,\"fault\":" + fault + "}");
    }

    /** CR-CORE-001: the commit is applied and its response dropped; the retry reuses the key; applied once. */
    @Test
    void lostCommitResponseIsRetriedWithTheSameKeyAndAppliedOnce() {
        fault("commitReservation", "{\"kind\":\"drop_response_after_apply\"}");
        TestJournal j = journal("journal");
        Reservation kept;
        try (CyclesClient c = client(j).build()) {
            try (Reservation r = c.reserve(GuardSpec.of(ACTION, 1_000).idempotencyKey("core-1").heartbeat(false))) {
                kept = r;
                r.setActual(400);
            }
        }
        String rid = kept.reservationId();
        String key = "core-1:commit";
        Settlement s = kept.outcome().orElseThrow().settlement();
        assertEquals(Settlement.Status.COMMITTED, s.status());
        assertEquals(400L, s.charged().amount());
        List<Map<String, Object>> reqs = settlementRequests(server, rid, key);
        // expected_requests: commit, commit_same_key
        assertEquals(List.of("commitReservation", "commitReservation"), reqs.stream().map(q -> q.get("operation")).toList());
        assertEquals(List.of(key, key), reqs.stream().map(q -> q.get("idempotency_key")).toList(), "the retry uses the original key");
        assertNull(reqs.get(0).get("status"));
        assertEquals("drop_response_after_apply", reqs.get(0).get("fault"));
        assertEquals(200L, reqs.get(1).get("status"));
        assertEquals(Boolean.TRUE, reqs.get(1).get("replay"), "the retry got the original result");
        assertEquals("1,0", settlements(server, rid, key), "settled at most once");
        assertEquals(List.of(400L), applied(server, "commit").stream().map(e -> e.get("amount")).toList());
        journalEmpty(j, "the record is removed after success");
        noRelease(server);
    }

    /** CR-CORE-002: expired before the commit; commit 410, then ONE event with the same key carrying the original subject, action, actual. */
    @Test
    void expiredCommitFallsBackToOneEventWithTheOriginalSubjectActionAndActual() throws Exception {
        List<CyclesEvent> got = new CopyOnWriteArrayList<>();
        TestJournal j = journal("journal");
        Reservation kept;
        try (CyclesClient c = client(j).onEvent(got::add).build()) {
            try (Reservation r = c.reserve(GuardSpec.of(ACTION, 1_000).subject(Subject.tenant(server.tenant()))
                    .idempotencyKey("core-2").heartbeat(false))) {
                kept = r;
                r.setActual(400);
                r.setMetricsJson("{\"tokens_input\":12,\"tokens_output\":34}");
                r.setMetadataJson("{\"run\":\"r-7\"}");
                server.advanceClock(200_000); // past expires_at + grace while the work ran
            }
        }
        String rid = kept.reservationId();
        String key = "core-2:commit";
        // Events reach the listener on the client's event thread; close() flushed them to it.
        RecoverySupport.waitFor(5_000, () -> got.stream().anyMatch(e -> "settlement_settled".equals(e.kind())));
        assertEquals(Settlement.Status.RECOVERED_VIA_EVENT, kept.outcome().orElseThrow().settlement().status());
        List<Map<String, Object>> reqs = settlementRequests(server, rid, key);
        // expected_requests: commit, event_same_key
        assertEquals(List.of("commitReservation:410", "createEvent:201"),
                reqs.stream().map(q -> q.get("operation") + ":" + q.get("status")).toList());
        assertTrue(reqs.stream().allMatch(q -> key.equals(q.get("idempotency_key"))));
        // The bytes sent (the server's request log keeps each body exactly as received).
        Map<String, Object> commit = Json.object((String) reqs.get(0).get("body"));
        Map<String, Object> event = Json.object((String) reqs.get(1).get("body"));
        Map<String, Object> actual = Map.of("unit", "USD_MICROCENTS", "amount", 400L);
        assertEquals(actual, commit.get("actual"));
        assertEquals(key, event.get("idempotency_key"));
        assertEquals(Map.of("tenant", server.tenant()), event.get("subject"));
        assertEquals(Map.of("kind", "llm.completion", "name", "test-model"), event.get("action"));
        assertEquals(actual, event.get("actual"), "the known actual, unchanged");
        assertEquals(Map.of("tokens_input", 12L, "tokens_output", 34L), event.get("metrics"));
        assertEquals(commit.get("metrics"), event.get("metrics"));
        @SuppressWarnings("unchecked")
        Map<String, Object> meta = (Map<String, Object>) event.get("metadata");
        assertEquals("r-7", meta.get("run"));
        assertEquals(rid, meta.get("recovered_reservation_id"));
        assertEquals("commit_after_reservation_expired", meta.get("recovery_reason"));
        List<Map<String, Object>> events = applied(server, "event");
        assertEquals(1, events.size());
        assertEquals(List.of(key, server.tenant(), "USD_MICROCENTS", 400L), List.of(events.get(0).get("idempotency_key"),
                events.get(0).get("tenant"), events.get(0).get("unit"), events.get(0).get("amount")));
        assertEquals(List.of(), applied(server, "commit"));
        journalEmpty(j, "the record is removed after the event");
        assertTrue(got.stream().anyMatch(e -> "settlement_mode_switched".equals(e.kind()) && rid.equals(e.reservationId())),
                got.toString());
        List<String> settled = got.stream().filter(e -> "settlement_settled".equals(e.kind()))
                .map(e -> e.reservationId() + ":" + Json.object(e.json()).get("mode")).toList();
        assertEquals(List.of(rid + ":event"), settled);
        noRelease(server);
    }

    /** CR-CORE-003: the first extension dies with a reset; reported with the reservation and a retry disposition, retried with the same key, the work runs on (warn) and is committed. */
    @Test
    void heartbeatTransportFailureIsObservableAndNonFatal() throws Exception {
        fault("extendReservation", "{\"kind\":\"connection_reset\"}");
        List<CyclesEvent> got = new CopyOnWriteArrayList<>();
        long ttl = 3_500;
        Guarded<Integer> g;
        TestJournal j = journal("journal");
        try (CyclesClient c = client(j).requestTimeout(Duration.ofMillis(500)).onEvent(got::add).build()) {
            g = c.guarded(GuardSpec.of(ACTION, 1_000).ttlMs(ttl).idempotencyKey("core-3").policy(HeartbeatPolicy.WARN),
                    (Integer v) -> v * 10L, () -> {
                        long start = System.nanoTime();
                        // The work outlives its original TTL and the first (failed) extension.
                        while ((System.nanoTime() - start) / 1_000_000 < ttl + 300
                                || got.stream().noneMatch(e -> "heartbeat_extended".equals(e.kind()))) {
                            assertTrue((System.nanoTime() - start) / 1_000_000 < 10_000, "no successful extension");
                            Thread.sleep(20);
                        }
                        Reservation r = Reservation.current().orElseThrow();
                        assertFalse(r.isCancelled(), "warn policy never cancels the work");
                        return 70;
                    });
        }
        assertEquals(70, g.value(), "guarded_action_continues_under_warn_policy");
        CyclesEvent f = got.stream().filter(e -> "heartbeat_failed".equals(e.kind())).findFirst().orElseThrow(() -> new AssertionError(
                "the failure is an event: " + got));
        String rid = f.reservationId();
        assertTrue(rid.startsWith("rsv_"), rid);
        Map<String, Object> fj = Json.object(f.json());
        assertEquals("TRANSPORT_RESET", fj.get("error_kind"), f.json());
        assertEquals("retry", fj.get("disposition"), f.json());
        assertNotNull(fj.get("retry_in_ms"), f.json());
        // expected_requests: extend, extend_same_key, commit
        List<Map<String, Object>> all = requests(server);
        List<Map<String, Object>> ext = all.stream().filter(q -> "extendReservation".equals(q.get("operation"))).toList();
        assertTrue(ext.size() >= 2, all.toString());
        assertEquals(ext.get(0).get("idempotency_key"), ext.get(1).get("idempotency_key"));
        assertNull(ext.get(0).get("status"));
        assertEquals(200L, ext.get(1).get("status"));
        Map<String, Object> last = all.get(all.size() - 1);
        assertEquals(List.of("commitReservation", "core-3:commit"), List.of(last.get("operation"), last.get("idempotency_key")));
        assertEquals("1,0", settlements(server, rid, "core-3:commit"));
        assertEquals(List.of(700L), applied(server, "commit").stream().map(e -> e.get("amount")).toList());
        journalEmpty(j, "the record is removed after the commit");
        noRelease(server);
    }

    private void protocolInvalidRound(String shape, boolean viaEvent) {
        String what = shape + " viaEvent=" + viaEvent;
        TestJournal d = journal(shape + "-" + viaEvent);
        String op = viaEvent ? "createEvent" : "commitReservation";
        fault(op, "{\"kind\":\"malformed_success\",\"shape\":\"" + shape + "\"}");
        String base = "core-4-" + shape + "-" + viaEvent;
        String key = base + ":commit";
        String once = viaEvent ? "0,1" : "1,0";
        Reservation kept;
        CyclesClient oneTry = client(d).settleMaxAttempts(viaEvent ? 2 : 1).build();
        try (Reservation r = oneTry.reserve(GuardSpec.of(ACTION, 1_000).idempotencyKey(base).heartbeat(false))) {
            kept = r;
            r.setActual(400);
            if (viaEvent) {
                server.advanceClock(200_000);
            }
        }
        String rid = kept.reservationId();
        Settlement s = kept.outcome().orElseThrow().settlement();
        // Applied by the server, but not schema-valid: NOT a success.
        assertEquals(Settlement.Status.PENDING, s.status(), what);
        assertTrue(s.journaled(), what);
        assertEquals(once, settlements(server, rid, key), what + ": the server applied it");
        Map<String, Object> rec = d.readRecord(server, rid);
        assertNotNull(rec, what + ": record retained");
        assertEquals(key, rec.get("idempotency_key"), what + ": with the original key");
        assertEquals(viaEvent ? "event" : "commit", rec.get("mode"), what + " " + rec);
        oneTry.close(Duration.ZERO);
        // A fresh client replays the record with the SAME key; only the valid answer ends it.
        try (CyclesClient fresh = client(d).build()) {
            DrainReport report = fresh.drain(Duration.ofSeconds(10));
            assertEquals(List.of(), report.remaining(), what);
        }
        journalEmpty(d, what + ": removed after schema-valid success");
        List<Map<String, Object>> reqs = settlementRequests(server, rid, key).stream().filter(q -> op.equals(q.get("operation"))).toList();
        assertEquals(2, reqs.size(), what + " " + reqs);
        assertTrue(reqs.stream().allMatch(q -> key.equals(q.get("idempotency_key"))), what);
        assertEquals("malformed_success", reqs.get(0).get("fault"), what);
        assertEquals(viaEvent ? 201L : 200L, reqs.get(1).get("status"), what);
        assertEquals(Boolean.TRUE, reqs.get(1).get("replay"), what + ": the retry got the original result");
        assertEquals(once, settlements(server, rid, key), what + ": settled at most once");
    }

    /** CR-CORE-004 (commit): every protocol-invalid 2xx of an applied commit leaves it pending with record and key; the replay's valid 200 ends it. */
    @Test
    void protocolInvalidCommitSuccessStaysAmbiguousAndIsRetriedWithItsKey() {
        for (String shape : MALFORMED) {
            protocolInvalidRound(shape, false);
        }
    }

    /** CR-CORE-004 (fallback event): the same for an expired reservation's event (201 expected). */
    @Test
    void protocolInvalidEventSuccessStaysAmbiguousAndIsRetriedWithItsKey() {
        for (String shape : MALFORMED) {
            protocolInvalidRound(shape, true);
        }
    }

    /** The guarded action's own failure; it must come out unchanged. */
    static final class ProviderDown extends Exception {
        private static final long serialVersionUID = 1L;

        ProviderDown(String m) {
            super(m);
        }
    }

    /**
     * CR-BOUNDARY-001: no actual: no commit or event; the reservation is released in the same
     * call (exactly one {@code {key}:release}, the ledger {@code reserve, release}) and
     * MissingActualException says so; a failing work's own exception propagates (released);
     * nothing journaled.
     */
    @Test
    void missingActualReleasesWithoutSettlement() throws Exception {
        TestJournal j = journal("journal");
        try (CyclesClient c = client(j).build()) {
            Reservation kept = c.reserve(GuardSpec.of(ACTION, 1_000).idempotencyKey("boundary-1").heartbeat(false));
            MissingActualException e = assertThrows(MissingActualException.class, kept::close);
            assertTrue(e.released(), e.getMessage());
            assertTrue(e.releaseError().isEmpty());
            Outcome o = kept.outcome().orElseThrow();
            assertEquals(Outcome.Kind.MISSING_ACTUAL, o.kind());
            assertEquals(e.getMessage(), Json.str(Json.object(o.json()), "message"), "core's message, not reworded");
            assertTrue(e.getMessage().contains(kept.reservationId()), e.getMessage());
            assertTrue(o.released());
            assertEquals(kept.reservationId(), o.reservationId());
            assertNull(o.settlement(), "nothing settled");
            assertNull(o.actual());
            assertEquals(List.of("createReservation", "releaseReservation"), operations(server));
            assertEquals(List.of("boundary-1", "boundary-1:release"), keys(server));
            assertThrows(MissingActualException.class,
                    () -> c.guarded(GuardSpec.of(ACTION, 1_000).heartbeat(false), r -> "done"));
            ProviderDown down = assertThrows(ProviderDown.class,
                    () -> c.guarded(GuardSpec.of(ACTION, 1_000).heartbeat(false), 5L, () -> {
                        throw new ProviderDown("provider down");
                    }));
            assertEquals("provider down", down.getMessage());
        }
        List<String> ops = operations(server);
        assertFalse(ops.contains("commitReservation") || ops.contains("createEvent"), ops.toString());
        assertEquals(3, ops.stream().filter("releaseReservation"::equals).count(), "every action is released: " + ops);
        assertEquals(List.of("reserve", "release", "reserve", "release", "reserve", "release"),
                RecoverySupport.ledger(server).stream().map(e -> e.get("kind")).toList());
        journalEmpty(j, "nothing journaled without an actual");
        assertEquals(List.of(), j.pendingIds(server.url(), server.apiKey(), server.tenant()));
    }

    /**
     * try-with-resources cannot see the block's exception: close() finds no actual, releases
     * the reservation (ledger) and its MissingActualException is suppressed under the
     * original exception, which propagates.
     */
    @Test
    void tryWithResourcesThatThrowsReleases() {
        RuntimeException boom = new RuntimeException("boom");
        TestJournal j = journal("journal");
        try (CyclesClient c = client(j).build()) {
            RuntimeException out = assertThrows(RuntimeException.class, () -> {
                try (Reservation r = c.reserve(GuardSpec.of(ACTION, 1_000).idempotencyKey("twr-1").heartbeat(false))) {
                    assertNotNull(r.reservationId()); // the work starts, then fails
                    throw boom;
                }
            });
            assertSame(boom, out);
            assertEquals(1, out.getSuppressed().length);
            MissingActualException m = (MissingActualException) out.getSuppressed()[0];
            assertTrue(m.released());
        }
        assertEquals(List.of("twr-1", "twr-1:release"), keys(server));
        assertEquals(List.of("reserve", "release"), RecoverySupport.ledger(server).stream().map(e -> e.get("kind")).toList());
        journalEmpty(j, "nothing journaled without an actual");
    }
}
