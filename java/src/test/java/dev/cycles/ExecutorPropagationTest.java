package dev.cycles;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.Executor;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The current reservation across threads: explicit propagation into executors, nesting, and
 * settlement that does not depend on it (the server's ledger asserted each time).
 */
class ExecutorPropagationTest {
    static final Action ACTION = Action.of("llm.completion", "openai:gpt-4o-mini");
    Fixture fx;
    ExecutorService pool;

    @BeforeEach
    void start() {
        fx = new Fixture();
        pool = Executors.newSingleThreadExecutor();
    }

    @AfterEach
    void stop() {
        pool.shutdownNow();
        fx.close();
    }

    private static String currentId() {
        return Reservation.current().map(Reservation::reservationId).orElse("none");
    }

    /** What the pool's thread sees as current when given a plain (unwrapped) task. */
    private String poolSees() throws Exception {
        return pool.submit(ExecutorPropagationTest::currentId).get();
    }

    @Test
    void propagatingExecutorCarriesTheSubmittersReservation() throws Exception {
        Executor ex = Reservation.propagating(pool);
        try (CyclesClient client = fx.client()) {
            Guarded<String> g = client.guarded(GuardSpec.of(ACTION, 1_000), r -> {
                assertEquals(r.reservationId(), CompletableFuture.supplyAsync(ExecutorPropagationTest::currentId, ex).get());
                // Usage reported from the executor's thread through the propagated reservation.
                for (int i = 0; i < 3; i++) {
                    CompletableFuture.runAsync(() -> Reservation.current().orElseThrow().addUsage(7), ex).get();
                }
                // A continuation on the wrapped executor sees it too; the plain pool does not.
                String later = CompletableFuture.completedFuture("x").thenApplyAsync(x -> currentId(), ex).get();
                assertEquals(r.reservationId(), later);
                assertEquals("none", poolSees());
                return r.reservationId();
            });
            assertEquals(21L, g.outcome().actual());
            // Captured when submitted: outside any guard, the wrapped executor carries nothing.
            assertEquals("none", CompletableFuture.supplyAsync(ExecutorPropagationTest::currentId, ex).get());
        }
        assertEquals(List.of("reserve:1000", "commit:21"), fx.ledger());
        assertThrows(IllegalArgumentException.class, () -> Reservation.propagating(null));
    }

    @Test
    void nestingRestoresTheEnclosingReservation() throws Exception {
        try (CyclesClient client = fx.client()) {
            try (Reservation outer = client.reserve(GuardSpec.of(ACTION, 3_000))) {
                outer.setActual(300);
                try (Reservation inner = client.reserve(GuardSpec.of(ACTION, 2_000))) {
                    inner.setActual(200);
                    assertSame(inner, Reservation.current().orElseThrow());
                    // On the pool: the propagated inner, a reservation nested there, and back.
                    String trail = pool.submit(Reservation.propagate(() -> {
                        String seen = currentId();
                        try (Reservation there = client.reserve(GuardSpec.of(ACTION, 1_000))) {
                            there.setActual(100);
                            seen += "," + currentId().equals(there.reservationId());
                            // A propagated task run inline nests too.
                            Reservation.propagate(() -> assertSame(there, Reservation.current().orElseThrow())).run();
                            assertSame(there, Reservation.current().orElseThrow());
                        }
                        return seen + "," + currentId();
                    })).get();
                    assertEquals(inner.reservationId() + ",true," + inner.reservationId(), trail);
                    // The pool's thread is left as it was: nothing current.
                    assertEquals("none", poolSees());
                }
                assertSame(outer, Reservation.current().orElseThrow());
            }
            assertEquals(Optional.empty(), Reservation.current());
        }
        assertEquals(List.of("reserve:3000", "reserve:2000", "reserve:1000", "commit:100", "commit:200", "commit:300"),
                fx.ledger());
    }

    @Test
    void aReservationFinishedOnAnotherThreadSettlesOnce() throws Exception {
        try (CyclesClient client = fx.client()) {
            try (Reservation outer = client.reserve(GuardSpec.of(ACTION, 5_000))) {
                outer.setActual(50);
                Reservation r = client.reserve(GuardSpec.of(ACTION, 1_000));
                // The pool finishes it.
                Outcome there = pool.submit(Reservation.propagate(() -> {
                    Reservation mine = Reservation.current().orElseThrow();
                    mine.setActual(400);
                    mine.close();
                    return mine.outcome().orElseThrow();
                })).get();
                assertEquals(Settlement.Status.COMMITTED, there.settlement().status());
                // Finished elsewhere, it is no longer current here: the enclosing one is.
                assertSame(outer, Reservation.current().orElseThrow());
                r.close(); // idempotent: nothing more is sent
                assertSame(there, r.outcome().orElseThrow());
                assertSame(outer, Reservation.current().orElseThrow());

                // Two threads closing one reservation at once: it settles once, one outcome.
                Reservation raced = client.reserve(GuardSpec.of(ACTION, 1_000));
                raced.setActual(600);
                CyclicBarrier go = new CyclicBarrier(2);
                Future<Outcome> a = pool.submit(() -> {
                    go.await();
                    raced.close();
                    return raced.outcome().orElseThrow();
                });
                go.await();
                raced.close();
                assertSame(raced.outcome().orElseThrow(), a.get());
                assertSame(outer, Reservation.current().orElseThrow());
                String rid = raced.reservationId();
                assertEquals(1, RecoverySupport.requests(fx.server).stream()
                        .filter(q -> "commitReservation".equals(q.get("operation")) && rid.equals(q.get("reservation_id"))).count());
            }
            assertEquals(Optional.empty(), Reservation.current());
        }
        assertEquals(List.of("reserve:5000", "reserve:1000", "commit:400", "reserve:1000", "commit:600", "commit:50"), fx.ledger());
        assertTrue(fx.operations().stream().noneMatch("releaseReservation"::equals), fx.operations().toString());
    }
}
