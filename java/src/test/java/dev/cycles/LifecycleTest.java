package dev.cycles;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** The guarded lifecycle over real HTTP: the ledger shows what was settled. */
class LifecycleTest {
    static final Action ACTION = Action.of("llm.completion", "openai:gpt-4o-mini");
    Fixture fx;

    @BeforeEach
    void start() {
        fx = new Fixture();
    }

    @AfterEach
    void stop() {
        fx.close();
    }

    @Test
    void guardedCommitsTheActualOfTheResult() {
        try (CyclesClient client = fx.client()) {
            Guarded<String> g = client.guarded(GuardSpec.of(ACTION, 1_000), reply -> 700L, () -> "answer");
            assertEquals("answer", g.value());
            Outcome o = g.outcome();
            assertEquals(Outcome.Kind.SETTLED, o.kind());
            assertEquals(700L, o.actual());
            assertEquals(Settlement.Status.COMMITTED, o.settlement().status());
            assertEquals(Amount.usdMicrocents(700), o.charged());
            Guarded<Integer> v = client.guarded(GuardSpec.of(ACTION, 900), 650, () -> 42);
            assertEquals(42, v.value());
        }
        assertEquals(List.of("reserve:1000", "commit:700", "reserve:900", "commit:650"), fx.ledger());
    }

    @Test
    void streamingReservationSettlesOnClose() {
        Reservation seen;
        try (CyclesClient client = fx.client()) {
            try (Reservation r = client.reserve(GuardSpec.of(ACTION, 5_000).idempotencyKey("java-stream-1"))) {
                seen = r;
                assertSame(r, Reservation.current().orElseThrow());
                for (int i = 0; i < 10; i++) {
                    r.addUsage(30);
                }
                assertEquals(300L, r.actual().getAsLong());
            }
            assertTrue(Reservation.current().isEmpty());
            Outcome o = seen.outcome().orElseThrow();
            assertEquals(Settlement.Status.COMMITTED, o.settlement().status());
            assertEquals(300L, o.charged().amount());
            // Finished: later usage is a use after close.
            assertThrows(ClientClosedException.class, () -> seen.addUsage(1));
            seen.close(); // idempotent
        }
        assertEquals(List.of("reserve:5000", "commit:300"), fx.ledger());
    }

    @Test
    void failedWorkReleasesAndRethrowsUnchanged() {
        try (CyclesClient client = fx.client()) {
            IOException thrown = new IOException("model down");
            IOException e = assertThrows(IOException.class, () -> client.guarded(GuardSpec.of(ACTION, 800), 10, () -> {
                throw thrown;
            }));
            assertSame(thrown, e);
        }
        assertEquals(List.of("reserve:800", "release:800"), fx.ledger());
    }

    /** Usage reported before the work failed was spent: fail() commits it, it does not release. */
    @Test
    void failedWorkCommitsTheUsageItReported() {
        Reservation seen;
        try (CyclesClient client = fx.client()) {
            try (Reservation r = client.reserve(GuardSpec.of(ACTION, 800))) {
                seen = r;
                r.addUsage(5);
                r.fail();
            }
            IOException thrown = new IOException("stream cut");
            IOException e = assertThrows(IOException.class, () -> client.guarded(GuardSpec.of(ACTION, 700), r -> {
                r.addUsage(7);
                throw thrown;
            }));
            assertSame(thrown, e);
        }
        Outcome o = seen.outcome().orElseThrow();
        assertEquals(Outcome.Kind.WORK_FAILED, o.kind());
        assertEquals(Settlement.Status.COMMITTED, o.settlement().status(), o.json());
        assertEquals(Amount.usdMicrocents(5), o.charged());
        assertEquals(List.of("reserve:800", "commit:5", "reserve:700", "commit:7"), fx.ledger());
    }

    @Test
    void missingActualIsReleasedAndNothingIsCommitted() {
        try (CyclesClient client = fx.client()) {
            dev.cycles.errors.MissingActualException e = assertThrows(dev.cycles.errors.MissingActualException.class,
                    () -> client.guarded(GuardSpec.of(ACTION, 100), r -> "no actual"));
            assertTrue(e.released(), e.getMessage());
        }
        assertEquals(List.of("reserve", "release"), fx.ledger().stream().map(e -> e.split(":")[0]).toList());
    }

    @Test
    void negativeActualIsReleasedAndTheExceptionSaysSo() {
        try (CyclesClient client = fx.client()) {
            dev.cycles.errors.InvalidArgumentException e = assertThrows(dev.cycles.errors.InvalidArgumentException.class,
                    () -> client.guarded(GuardSpec.of(ACTION, 100), r -> {
                        r.setActual(-5);
                        return "negative";
                    }));
            assertTrue(e.endedGuard(), e.getMessage());
            assertTrue(e.released(), e.getMessage());
            assertTrue(e.releaseError().isEmpty());
            String rid = e.reservationId().orElseThrow();
            assertTrue(e.getMessage().contains(rid), e.getMessage());
            // Any other argument error reserved nothing: no guard ended with it.
            dev.cycles.errors.InvalidArgumentException other = assertThrows(dev.cycles.errors.InvalidArgumentException.class,
                    () -> LocalServer.start("{\"budget\":[]}").close());
            assertFalse(other.endedGuard());
            assertFalse(other.released());
            assertTrue(other.reservationId().isEmpty());
        }
        assertEquals(List.of("reserve", "release"), fx.ledger().stream().map(e -> e.split(":")[0]).toList());
    }

    @Test
    void missingActualNamesItsReservation() {
        try (CyclesClient client = fx.client()) {
            dev.cycles.errors.MissingActualException e = assertThrows(dev.cycles.errors.MissingActualException.class,
                    () -> client.guarded(GuardSpec.of(ACTION, 100), r -> "no actual"));
            assertTrue(e.getMessage().contains(e.reservationId().orElseThrow()), e.getMessage());
        }
    }

    @Test
    void guardedAsyncSettlesWhatTheStageReported() throws Exception {
        ExecutorService pool = Executors.newFixedThreadPool(2);
        try (CyclesClient client = fx.client()) {
            CompletableFuture<Guarded<String>> f = client.guardedAsync(GuardSpec.of(ACTION, 2_000),
                    r -> CompletableFuture.supplyAsync(() -> {
                        r.setActual(1_234);
                        return "done";
                    }, pool));
            Guarded<String> g = f.get(30, TimeUnit.SECONDS);
            assertEquals("done", g.value());
            assertEquals(1_234L, g.outcome().charged().amount());
        } finally {
            pool.shutdownNow();
        }
        assertEquals(List.of("reserve:2000", "commit:1234"), fx.ledger());
    }

    @Test
    void currentReservationPropagatesOnlyWhenWrapped() throws Exception {
        ExecutorService pool = Executors.newSingleThreadExecutor();
        try (CyclesClient client = fx.client()) {
            client.guarded(GuardSpec.of(ACTION, 10), r -> {
                boolean plain = pool.submit(() -> Reservation.current().isPresent()).get();
                String wrapped = pool.submit(Reservation.propagate(
                        () -> Reservation.current().map(Reservation::reservationId).orElse("none"))).get();
                assertFalse(plain);
                assertEquals(r.reservationId(), wrapped);
                r.setActual(5);
                return null;
            });
        } finally {
            pool.shutdownNow();
        }
        assertEquals(List.of("reserve:10", "commit:5"), fx.ledger());
    }

    @Test
    void shortLeaseIsKeptAlive() throws Exception {
        Reservation seen;
        try (CyclesClient client = fx.builder().requestTimeout(Duration.ofMillis(500)).build()) {
            try (Reservation r = client.reserve(GuardSpec.of(ACTION, 1_000).ttlMs(3_500))) {
                seen = r;
                Thread.sleep(4_500);
                r.setActual(900);
            }
        }
        Outcome o = seen.outcome().orElseThrow();
        assertTrue(o.extensions() >= 1, "extensions " + o.extensions());
        // Committed, not recovered through an event: the reservation never expired.
        assertEquals(Settlement.Status.COMMITTED, o.settlement().status());
        assertTrue(fx.operations().stream().filter(op -> op.equals("extendReservation")).count() >= 1, fx.operations().toString());
    }

    @Test
    void aListenerAddedAfterTheFirstCallGetsEventsFromThenOn() throws Exception {
        List<CyclesEvent> got = new CopyOnWriteArrayList<>();
        try (CyclesClient client = fx.client()) {
            // No listener and the logger at its default: core builds no debug events.
            client.guarded(GuardSpec.of(ACTION, 100), 60, () -> "first");
            client.addListener(got::add);
            String rid = client.guarded(GuardSpec.of(ACTION, 100), 60, () -> "second").outcome().reservationId();
            long deadline = System.nanoTime() + 5_000_000_000L;
            while (got.stream().noneMatch(e -> e.kind().equals("settlement_settled")) && System.nanoTime() < deadline) {
                Thread.sleep(10);
            }
            CyclesEvent settled = got.stream().filter(e -> e.kind().equals("settlement_settled")).findFirst().orElseThrow();
            assertEquals(rid, settled.reservationId());
        }
    }

    @Test
    void eventsReachListenersInOrder() throws Exception {
        List<CyclesEvent> got = new CopyOnWriteArrayList<>();
        String rid;
        try (CyclesClient client = fx.builder().onEvent(got::add).build()) {
            rid = client.guarded(GuardSpec.of(ACTION, 100), 60, () -> "x").outcome().reservationId();
        }
        // close() delivered the last events before returning to the event thread; wait for it.
        long deadline = System.nanoTime() + 5_000_000_000L;
        while (got.stream().noneMatch(e -> e.kind().equals("settlement_settled")) && System.nanoTime() < deadline) {
            Thread.sleep(10);
        }
        CyclesEvent settled = got.stream().filter(e -> e.kind().equals("settlement_settled")).findFirst().orElseThrow();
        assertEquals(rid, settled.reservationId());
        assertEquals("debug", settled.level()); // a first-attempt commit is routine
        assertTrue(settled.json().contains("\"mode\":\"commit\""), settled.json());
    }

    @Test
    void commitOutageLeavesPendingThenDrainSettles() {
        try (CyclesClient client = fx.builder().settleMaxAttempts(2).replayInterval(Duration.ofHours(1)).build()) {
            fx.server.addFault("{\"operation\":\"commitReservation\",\"times\":0,\"fault\":{\"kind\":\"server_error\",\"status\":503}}");
            Guarded<String> g = client.guarded(GuardSpec.of(ACTION, 1_000), 640, () -> "x");
            Settlement s = g.outcome().settlement();
            assertEquals(Settlement.Status.PENDING, s.status());
            assertTrue(s.journaled());
            fx.server.clearFaults();
            DrainReport d = client.drain(Duration.ofSeconds(10));
            assertEquals(1, d.outcomes().size());
            assertEquals(Settlement.Status.COMMITTED, d.outcomes().get(0).settlement().status());
            assertTrue(d.remaining().isEmpty());
        }
        assertEquals(List.of("reserve:1000", "commit:640"), fx.ledger());
    }
}
