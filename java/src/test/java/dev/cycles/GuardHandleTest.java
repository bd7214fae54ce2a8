package dev.cycles;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.cycles.errors.InvalidArgumentException;
import dev.cycles.internal.Json;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The guard handle's decision, caps and explicit release, the client's default unit and the
 * bridge's spec defaults, and idempotency keys a header cannot carry: against a local server
 * whose {@code workspace:capped} budget grants caps, checked on its ledger.
 */
class GuardHandleTest {
    static final Action ACTION = Action.of("llm.completion", "test-model");
    static final Caps CAPS = new Caps(64L, null, null, List.of("shell"), null);
    LocalServer server;
    Path journal;

    @BeforeEach
    void start() throws Exception {
        server = LocalServer.builder().budget("tenant:acme", "TOKENS", 1_000_000)
                .budget("tenant:acme/workspace:capped", "TOKENS", 1_000_000, CAPS).start();
        journal = Files.createTempDirectory("cycles-jvm-handle-");
    }

    @AfterEach
    void stop() {
        server.close();
        Fixture.deleteTree(journal);
    }

    CyclesClient client() {
        return CyclesClient.builder().baseUrl(server.url()).apiKey(server.apiKey()).tenant(server.tenant())
                .journalDir(journal).defaultUnit("TOKENS").build();
    }

    /** The ledger as (kind, idempotency key, unit, amount) maps. */
    @SuppressWarnings("unchecked")
    List<Map<String, Object>> ledger() {
        return (List<Map<String, Object>>) (List<?>) Json.parse(server.ledgerJson());
    }

    List<String> kinds() {
        List<String> out = new ArrayList<>();
        for (Map<String, Object> e : ledger()) {
            out.add((String) e.get("kind"));
        }
        return out;
    }

    List<String> keys() {
        List<String> out = new ArrayList<>();
        for (Map<String, Object> e : ledger()) {
            out.add((String) e.get("idempotency_key"));
        }
        return out;
    }

    @Test
    void allowHasNoCaps() {
        try (CyclesClient c = client(); Reservation r = c.reserve(GuardSpec.of(ACTION, 10).idempotencyKey("allow-1"))) {
            assertEquals(Reservation.Decision.ALLOW, r.decision());
            assertTrue(r.caps().isEmpty());
            r.setActual(3);
        }
        assertEquals(List.of("reserve", "commit"), kinds());
    }

    @Test
    void capsComeFromTheBudget() {
        try (CyclesClient c = client();
                Reservation r = c.reserve(GuardSpec.of(ACTION, 10).idempotencyKey("caps-1")
                        .subject(new Subject("acme", "capped", null, null, null, null)))) {
            assertEquals(Reservation.Decision.ALLOW_WITH_CAPS, r.decision());
            // The guard's narrow enum beside the open enum's constants: the same wire names.
            assertEquals(Decision.ALLOW_WITH_CAPS, r.decision().name());
            Caps caps = r.caps().orElseThrow();
            assertEquals(64L, caps.maxTokens());
            assertEquals(List.of("shell"), caps.toolDenylist());
            assertNull(caps.maxStepsRemaining());
            // The generated request part: an unset list is null, a set one a read-only copy.
            assertNull(caps.toolAllowlist());
            assertThrows(UnsupportedOperationException.class, () -> caps.toolDenylist().add("x"));
            r.setActual(1);
        }
        assertEquals(List.of("reserve", "commit"), kinds());
    }

    @Test
    void releaseEndsTheActionAndCloseDoesNothing() {
        try (CyclesClient c = client()) {
            Reservation r = c.reserve(GuardSpec.of(ACTION, 10).idempotencyKey("rel-1"));
            Outcome o = r.release("not needed");
            assertEquals(Outcome.Kind.RELEASED, o.kind());
            assertTrue(o.released());
            assertNull(o.settlement());
            assertEquals(o, r.outcome().orElseThrow());
            r.close(); // nothing more
            assertTrue(Reservation.current().isEmpty());
        }
        assertEquals(List.of("reserve", "release"), kinds());
        assertEquals(List.of("rel-1", "rel-1:release"), keys());
    }

    @Test
    void releaseIsRefusedWhileUsageIsKnownAndTheActionGoesOn() {
        try (CyclesClient c = client(); Reservation r = c.reserve(GuardSpec.of(ACTION, 10).idempotencyKey("ref-1"))) {
            r.addUsage(5);
            assertThrows(InvalidArgumentException.class, r::release);
            r.addUsage(2);
            assertTrue(r.outcome().isEmpty());
        }
        assertEquals(List.of("reserve", "commit"), kinds());
        assertEquals(7L, ((Number) ledger().get(1).get("amount")).longValue());
    }

    /** The protocol's Subject.dimensions and Action.tags: sent as given, and read back from the server. */
    @Test
    @SuppressWarnings("unchecked")
    void dimensionsAndTagsReachTheServerAndComeBack() {
        Map<String, String> dims = new java.util.LinkedHashMap<>();
        dims.put("cost_center", "42");
        dims.put("project", "alpha");
        Subject subject = Subject.tenant("acme").withDimensions(dims);
        Action action = ACTION.withTags(List.of("prod", "customer-facing"));
        assertEquals(new Subject("acme", null, null, null, null, null), Subject.tenant("acme"));
        String id;
        try (CyclesClient c = client(); Reservation r = c.reserve(GuardSpec.of(action, 10).subject(subject).idempotencyKey("dims-1"))) {
            id = r.reservationId();
            ReservationDetail d = c.getReservation(id).body();
            assertEquals(subject, d.subject());
            assertEquals(action, d.action());
            r.setActual(2);
        }
        String body = null;
        for (Object o : (List<?>) Json.parse(server.requestsJson())) {
            Map<String, Object> q = (Map<String, Object>) o;
            if ("createReservation".equals(q.get("operation"))) {
                body = (String) q.get("body");
            }
        }
        assertTrue(body.contains("\"dimensions\":{\"cost_center\":\"42\",\"project\":\"alpha\"}"), body);
        assertTrue(body.contains("\"tags\":[\"prod\",\"customer-facing\"]"), body);
        assertThrows(UnsupportedOperationException.class, () -> subject.dimensions().put("x", "y"));
    }

    /** Only action and estimate: the bridge fills the key, the subject (tenant) and the unit (the client's default). */
    @Test
    void theBridgeFillsTheSpecDefaults() {
        String key;
        try (CyclesClient c = client(); Reservation r = c.reserve(GuardSpec.of(ACTION, 10))) {
            r.setActual(4);
            key = (String) ledger().get(0).get("idempotency_key");
        }
        assertTrue(key.startsWith("cycles-"), key);
        assertEquals(List.of("reserve", "commit"), kinds());
        for (Map<String, Object> e : ledger()) {
            assertEquals("TOKENS", e.get("unit"), e.toString());
        }
    }

    @Test
    void anUnknownDefaultUnitIsAConfigError() {
        CyclesException e = assertThrows(CyclesException.class, () -> CyclesClient.builder().baseUrl(server.url())
                .apiKey(server.apiKey()).tenant("acme").defaultUnit("TOKEN").build());
        assertEquals("CONFIG", e.errorName(), e.getMessage());
    }

    /** Keys an HTTP header cannot carry byte for byte go in the body only, exactly. */
    @Test
    void keysAHeaderCannotCarry() {
        List<String> keys = List.of(" padded ", "trail ", "kéy", "漢字-😀");
        try (CyclesClient c = client()) {
            for (String k : keys) {
                Guarded<String> g = c.guarded(GuardSpec.of(ACTION, 10).idempotencyKey(k), 2, () -> "ok");
                assertEquals(Outcome.Kind.SETTLED, g.outcome().kind(), g.outcome().json());
            }
        }
        List<String> want = new ArrayList<>();
        for (String k : keys) {
            want.add(k);
            want.add(k + ":commit");
        }
        assertEquals(want, keys());
        assertFalse(kinds().contains("release"));
    }
}
