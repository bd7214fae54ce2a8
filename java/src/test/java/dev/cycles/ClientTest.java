package dev.cycles;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.cycles.errors.ApiException;
import dev.cycles.errors.BudgetExceededException;
import dev.cycles.errors.InvalidArgumentException;
import dev.cycles.errors.NotFoundException;
import dev.cycles.errors.ReservationFinalizedException;
import dev.cycles.errors.TransportConnectException;
import dev.cycles.errors.TransportException;
import dev.cycles.internal.Json;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** The runtime operations over real HTTP against the local server, and their errors. */
class ClientTest {
    static Fixture fx;
    static CyclesClient client;
    static final Action ACTION = Action.of("llm.completion", "openai:gpt-4o-mini");

    @BeforeAll
    static void start() {
        fx = new Fixture();
        client = fx.client();
    }

    @AfterAll
    static void stop() {
        client.close();
        fx.close();
    }

    static CreateReservationRequest create(String key, long amount) {
        return CreateReservationRequest.of(key, Subject.tenant("acme").withAgent("summarizer"), ACTION,
                Amount.usdMicrocents(amount)).withTtlMs(30_000);
    }

    @Test
    void createGetExtendCommit() {
        Response<ReservationResult> created = client.createReservation(create("java-op-1", 500));
        assertEquals(200, created.status());
        assertNotNull(created.requestId());
        ReservationResult r = created.body();
        assertEquals("ALLOW", r.decision());
        assertEquals(Amount.usdMicrocents(500), r.reserved());
        assertTrue(r.remainingTtlMs() > 0 && r.remainingTtlMs() <= 30_000, "remaining " + r.remainingTtlMs());
        assertTrue(r.affectedScopes().contains("tenant:acme"), r.affectedScopes().toString());

        ReservationDetail d = client.getReservation(r.reservationId()).body();
        assertEquals(ReservationStatus.ACTIVE, d.status());
        assertEquals(ACTION, d.action());
        assertEquals("summarizer", d.subject().agent());
        assertEquals(Amount.usdMicrocents(500), d.reserved());

        ExtendResult x = client.extendReservation(r.reservationId(), ExtendRequest.of("java-op-1-x", 10_000)).body();
        assertEquals(ReservationStatus.ACTIVE, x.status());
        assertTrue(x.expiresAtMs() > d.expiresAtMs(), "extended");

        CommitResult c = client.commitReservation(r.reservationId(), CommitRequest.of("java-op-1-c", Amount.usdMicrocents(420)))
                .body();
        assertEquals(ReservationStatus.COMMITTED, c.status());
        assertEquals(Amount.usdMicrocents(420), c.charged());
        assertEquals(ReservationStatus.COMMITTED, client.getReservation(r.reservationId()).body().status());
        assertEquals(420L, client.getReservation(r.reservationId()).body().committed().amount());
    }

    @Test
    void releaseAndBalances() {
        ReservationResult r = client.createReservation(create("java-op-2", 700)).body();
        ReleaseResult rel = client.releaseReservation(r.reservationId(), new ReleaseRequest("java-op-2-r", "not needed")).body();
        assertEquals(ReservationStatus.RELEASED, rel.status());
        assertEquals(Amount.usdMicrocents(700), rel.released());
        Balances b = client.getBalances(BalanceQuery.tenant("acme")).body();
        assertFalse(b.balances().isEmpty());
        Balance tenant = b.balances().stream().filter(x -> x.scopePath().equals("tenant:acme")).findFirst().orElseThrow();
        assertEquals("USD_MICROCENTS", tenant.remaining().unit());
        assertTrue(tenant.remaining().amount() > 0);
    }

    @Test
    void asyncVariantsCompleteOffTheNativeThreads() throws Exception {
        CompletableFuture<Response<ReservationResult>> f = client.createReservationAsync(create("java-op-3", 300));
        String[] thread = new String[1];
        ReservationResult r = f.thenApply(x -> {
            thread[0] = Thread.currentThread().getName();
            return x.body();
        }).get();
        assertEquals("ALLOW", r.decision());
        assertFalse(thread[0].startsWith("cycles-core"), thread[0]);
        assertFalse(thread[0].equals("cycles-completions"), thread[0]);
        CommitResult c = client.commitReservationAsync(r.reservationId(), CommitRequest.of("java-op-3-c", Amount.usdMicrocents(1)))
                .get().body();
        assertEquals(Amount.usdMicrocents(1), c.charged());
        assertEquals(ReservationStatus.COMMITTED, client.getReservationAsync(r.reservationId()).get().body().status());
    }

    @Test
    void manyConcurrentFutures() {
        List<CompletableFuture<Response<Balances>>> fs = new java.util.ArrayList<>();
        for (int i = 0; i < 500; i++) {
            fs.add(client.getBalancesAsync(BalanceQuery.tenant("acme")));
        }
        CompletableFuture.allOf(fs.toArray(new CompletableFuture<?>[0])).join();
        for (CompletableFuture<Response<Balances>> f : fs) {
            assertEquals(200, f.join().status());
        }
    }

    @Test
    void notFoundCarriesTheServerFacts() {
        NotFoundException e = assertThrows(NotFoundException.class, () -> client.getReservation("rsv_missing"));
        assertEquals("NOT_FOUND", e.errorName());
        assertEquals(103, e.code());
        assertEquals(404, e.httpStatus());
        assertEquals("NOT_FOUND", e.serverErrorCode().orElseThrow());
        assertTrue(e.requestId().isPresent());
        assertFalse(e.isRetryable());
        assertTrue(e instanceof ApiException);
        assertFalse(e.getMessage().contains(fx.server.apiKey()));
    }

    @Test
    void asyncErrorsAreTheSameTypes() {
        CompletionException e = assertThrows(CompletionException.class, () -> client.getReservationAsync("rsv_missing").join());
        assertTrue(e.getCause() instanceof NotFoundException, String.valueOf(e.getCause()));
    }

    @Test
    void budgetExceeded() {
        BudgetExceededException e = assertThrows(BudgetExceededException.class,
                () -> client.createReservation(create("java-op-4", Long.MAX_VALUE / 2)));
        assertEquals(409, e.httpStatus());
        assertEquals("BUDGET_EXCEEDED", e.errorName());
        // A plain int, through the group class too (issue 28: %d of an OptionalInt threw).
        ApiException api = e;
        assertEquals("HTTP 409", String.format("HTTP %d", api.httpStatus()));
        assertEquals(409, e.httpStatusIfAny().orElseThrow());
    }

    @Test
    void commitTwiceWithAnotherKeyIsFinalized() {
        ReservationResult r = client.createReservation(create("java-op-5", 10)).body();
        client.commitReservation(r.reservationId(), CommitRequest.of("java-op-5-c", Amount.usdMicrocents(5)));
        ReservationFinalizedException e = assertThrows(ReservationFinalizedException.class,
                () -> client.commitReservation(r.reservationId(), CommitRequest.of("java-op-5-c2", Amount.usdMicrocents(5))));
        assertEquals(409, e.httpStatus());
    }

    @Test
    void badArgumentsAreInvalidArgument() {
        InvalidArgumentException e = assertThrows(InvalidArgumentException.class, () -> client.call("nope", "{}"));
        assertEquals("unknown operation \"nope\"", e.getMessage());
        InvalidArgumentException m = assertThrows(InvalidArgumentException.class,
                () -> client.call("get_reservation", "{}"));
        assertTrue(m.getMessage().contains("reservation_id"), m.getMessage());
        // A settle override of 0 fails at build(), not at the first guarded call: core's rule
        // (CONFIG, as in Rust); a value that is no count at all is the bridge's.
        dev.cycles.errors.ConfigException z = assertThrows(dev.cycles.errors.ConfigException.class,
                () -> CyclesClient.builder().baseUrl("http://127.0.0.1:1").apiKey("k").settleMaxAttempts(0).build());
        assertEquals("settle max_attempts must be at least 1", z.getMessage());
        InvalidArgumentException n = assertThrows(InvalidArgumentException.class,
                () -> CyclesClient.builder().baseUrl("http://127.0.0.1:1").apiKey("k").settleMaxAttempts(-1).build());
        assertEquals("settle_max_attempts must be an integer from 0 to 4294967295, not -1", n.getMessage());
        assertThrows(dev.cycles.errors.ConfigException.class,
                () -> CyclesClient.builder().baseUrl("http://127.0.0.1:1").apiKey("k")
                        .replayInterval(Duration.ZERO).build());
        dev.cycles.errors.ConfigException b = assertThrows(dev.cycles.errors.ConfigException.class,
                () -> CyclesClient.builder().baseUrl("http://127.0.0.1:1").apiKey("k").maxResponseBytes(0).build());
        assertEquals("max_response_bytes must be at least 1", b.getMessage());
        InvalidArgumentException nb = assertThrows(InvalidArgumentException.class,
                () -> CyclesClient.builder().baseUrl("http://127.0.0.1:1").apiKey("k").maxResponseBytes(-1).build());
        assertEquals("max_response_bytes must be an integer from 0 to 4294967295, not -1", nb.getMessage());
        // A Redis journal URL core cannot use is refused at build(), with what is wrong.
        dev.cycles.errors.ConfigException j = assertThrows(dev.cycles.errors.ConfigException.class,
                () -> CyclesClient.builder().baseUrl("http://127.0.0.1:1").apiKey("k")
                        .journalUrl("redis://127.0.0.1:6379/0?durability=sometimes").build());
        assertTrue(j.getMessage().contains("durability \"sometimes\""), j.getMessage());
    }

    @Test
    void jsonEscapeHatch() {
        Response<String> r = client.call("decide", Json.write(java.util.Map.of("idempotency_key", "java-op-6", "subject",
                java.util.Map.of("tenant", "acme"), "action", java.util.Map.of("kind", "llm.completion", "name", "x"), "estimate",
                java.util.Map.of("unit", "USD_MICROCENTS", "amount", 5))));
        assertEquals(200, r.status());
        assertEquals("ALLOW", Json.object(r.body()).get("decision"));
    }

    @Test
    void connectFailureIsRetryableTransport() {
        try (CyclesClient dead = CyclesClient.builder().baseUrl("http://127.0.0.1:1").apiKey("k").tenant("acme")
                .journalEnabled(false).connectTimeout(Duration.ofSeconds(2)).build()) {
            TransportConnectException e = assertThrows(TransportConnectException.class, () -> dead.getReservation("rsv_x"));
            assertTrue(e.isRetryable());
            assertTrue(e instanceof TransportException);
            assertEquals("TRANSPORT_CONNECT", e.errorName());
            // No response was received: no status, and the class has no plain accessor.
            assertTrue(e.httpStatusIfAny().isEmpty());
        }
    }
}
