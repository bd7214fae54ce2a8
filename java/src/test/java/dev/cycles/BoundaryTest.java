package dev.cycles;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.cycles.errors.InternalException;
import dev.cycles.internal.Completions;
import dev.cycles.internal.Native;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import org.junit.jupiter.api.Test;

/** The native boundary: panics, use after close, the error table, the Cleaner. */
class BoundaryTest {
    @Test
    void panicIsInternalSync() {
        InternalException e = assertThrows(InternalException.class, () -> Native.debugPanic("sync boom", 0));
        assertEquals(4, e.code());
        assertEquals("INTERNAL", e.errorName());
        assertTrue(e.getMessage().endsWith(": sync boom"), e.getMessage());
    }

    @Test
    void panicIsInternalAsync() {
        CompletableFuture<String> f = new CompletableFuture<>();
        Native.debugPanic("async boom", Completions.register(f));
        CompletionException e = assertThrows(CompletionException.class, f::join);
        InternalException i = (InternalException) e.getCause();
        assertTrue(i.getMessage().endsWith(": async boom"), i.getMessage());
    }

    @Test
    void useAfterCloseThrowsIllegalState() {
        try (Fixture fx = new Fixture()) {
            CyclesClient client = fx.client();
            assertFalse(client.isClosed());
            client.close();
            assertTrue(client.isClosed());
            client.close(); // idempotent
            IllegalStateException e = assertThrows(IllegalStateException.class, () -> client.getReservation("rsv_1"));
            assertTrue(e instanceof ClientClosedException);
            assertEquals("RUNTIME", ((ClientClosedException) e).errorName());
            assertThrows(ClientClosedException.class,
                    () -> client.reserve(GuardSpec.of(Action.of("llm.completion", "x"), 1)));
            CompletionException async = assertThrows(CompletionException.class,
                    () -> client.getReservationAsync("rsv_1").join());
            assertTrue(async.getCause() instanceof ClientClosedException, String.valueOf(async.getCause()));
            // A stale id is the closed error too, never a crash.
            assertThrows(ClientClosedException.class, () -> Native.clientCall(Long.MAX_VALUE, "get_evidence_jwks", "{}"));
        }
    }

    @Test
    void errorTableHasADedicatedClassForEveryKind() throws Exception {
        Map<String, Integer> codes = CyclesException.errorCodes();
        assertTrue(codes.size() > 30, codes.toString());
        for (Map.Entry<String, Integer> e : codes.entrySet()) {
            Class<?> c = Class.forName(CyclesException.className(e.getKey()));
            assertTrue(CyclesException.class.isAssignableFrom(c), c.getName());
            assertNotEquals(CyclesException.class, c);
        }
        assertEquals(4, codes.get("INTERNAL"));
    }

    @Test
    void cleanerFreesUnclosedClients() throws Exception {
        try (Fixture fx = new Fixture()) {
            // Earlier tests' garbage is freed first: the Cleaner freeing it while this test
            // counts made the count fall short of before + 20 (seen once in CI).
            long before = settledLiveHandles();
            List<CyclesClient> clients = new ArrayList<>();
            for (int i = 0; i < 20; i++) {
                clients.add(fx.client()); // never closed
            }
            // The 20 hold 20 handles. Counted from this peak, not from `before`: a handle of an
            // earlier test can still be freed late (its last reference held by a thread that
            // ended after the baseline settled), which made `before + 20` fall short by one.
            long peak = Native.liveHandles();
            assertTrue(peak >= 20, "live " + peak + " with 20 clients open");
            clients = null; // unreachable from here on: only the Cleaner can free them
            long deadline = System.nanoTime() + 10_000_000_000L;
            while (Native.liveHandles() > Math.min(before, peak - 20) && System.nanoTime() < deadline) {
                System.gc();
                Thread.sleep(20);
            }
            long after = Native.liveHandles();
            assertTrue(after <= before && after <= peak - 20,
                "live " + after + ": before " + before + ", with the 20 clients " + peak);
        }
    }

    /** The live native handles once garbage collection stops freeing any (bounded: 10 s). */
    private static long settledLiveHandles() throws InterruptedException {
        long deadline = System.nanoTime() + 10_000_000_000L;
        long last = Native.liveHandles();
        int steady = 0;
        while (steady < 5 && System.nanoTime() < deadline) {
            System.gc();
            Thread.sleep(20);
            long now = Native.liveHandles();
            steady = now == last ? steady + 1 : 0;
            last = now;
        }
        return last;
    }
}
