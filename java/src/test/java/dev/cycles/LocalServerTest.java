package dev.cycles;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.cycles.errors.BudgetExceededException;
import dev.cycles.errors.InvalidArgumentException;
import dev.cycles.errors.TenantClosedException;
import java.io.IOException;
import java.net.ServerSocket;
import java.util.List;
import org.junit.jupiter.api.Test;

/** {@link LocalServer}'s typed configuration and its strict raw JSON, over real HTTP. */
class LocalServerTest {
    static final Action ACTION = Action.of("llm.completion", "openai:gpt-4o-mini");

    private static CyclesClient client(LocalServer s, String apiKey, String tenant) {
        return CyclesClient.builder().baseUrl(s.url()).apiKey(apiKey).tenant(tenant).journalEnabled(false).build();
    }

    /** The docs/jvm.md example: a budget of 1 000 takes a 600 estimate, not a second one. */
    @Test
    void aSmallBudgetDeniesWhatItCannotCover() {
        try (LocalServer server = LocalServer.builder().budget("tenant:acme", "USD_MICROCENTS", 1_000).start();
             CyclesClient client = CyclesClient.builder().baseUrl(server.url()).apiKey(server.apiKey())
                     .tenant(server.tenant()).journalEnabled(false).build()) {
            Guarded<String> g = client.guarded(GuardSpec.of(ACTION, 600), 600, () -> "fits");
            assertEquals(Settlement.Status.COMMITTED, g.outcome().settlement().status());
            BudgetExceededException e = assertThrows(BudgetExceededException.class,
                    () -> client.guarded(GuardSpec.of(ACTION, 600), 600, () -> "too much"));
            assertEquals(409, e.httpStatus());
            Balance b = client.getBalances(BalanceQuery.tenant("acme")).body().balances().get(0);
            assertEquals(Amount.usdMicrocents(1_000), b.allocated());
            assertEquals(Amount.usdMicrocents(400), b.remaining());
        }
    }

    /** Every setting of the builder at once: the server starts (no key it does not know) and behaves so. */
    @Test
    void everyBuilderSettingReachesTheServer() throws IOException {
        int port;
        try (ServerSocket probe = new ServerSocket(0)) {
            port = probe.getLocalPort();
        }
        LocalServer.Builder b = LocalServer.builder().port(port).tenant("t1", "k1", "k1b").closedTenant("gone", "k2")
                .adminApiKey(null).budget("tenant:t1", "TOKENS", 50).budget("tenant:gone", "TOKENS", 50, 10,
                        LocalServer.BudgetStatus.FROZEN)
                .emitRemainingTtl(false).extendGrantCap(2_000).initialTtlCapMs(30_000).maxExtensions(3)
                .idempotencyCompare(LocalServer.IdempotencyCompare.CANONICAL).evidence(false).mode(LocalServer.Mode.REFERENCE);
        assertEquals("{\"bind\":\"127.0.0.1:" + port + "\",\"admin_api_key\":null,\"idempotency_compare\":\"canonical\","
                + "\"evidence\":false,\"mode\":\"reference\",\"tenants\":[{\"id\":\"t1\",\"api_keys\":[\"k1\",\"k1b\"],"
                + "\"closed\":false},{\"id\":\"gone\",\"api_keys\":[\"k2\"],\"closed\":true}],\"budgets\":[{\"scope\":\"tenant:t1\","
                + "\"unit\":\"TOKENS\",\"allocated\":50,\"overdraft_limit\":0,\"status\":\"ACTIVE\"},{\"scope\":\"tenant:gone\","
                + "\"unit\":\"TOKENS\",\"allocated\":50,\"overdraft_limit\":10,\"status\":\"FROZEN\"}],\"regime\":"
                + "{\"emit_remaining_ttl\":false,\"extend\":{\"kind\":\"grant_cap\",\"max_grant_ms\":2000},"
                + "\"initial_ttl_cap_ms\":30000,\"max_extensions\":3}}", b.configJson());
        try (LocalServer server = b.start()) {
            assertEquals("http://127.0.0.1:" + port, server.url());
            assertEquals("t1", server.tenant());
            assertEquals("k1", server.apiKey());
            try (CyclesClient t1 = client(server, "k1b", "t1")) {
                CreateReservationRequest req = CreateReservationRequest.of("lst-1", Subject.tenant("t1"), ACTION,
                        new Amount("TOKENS", 40)).withTtlMs(60_000);
                ReservationResult r = t1.createReservation(req).body();
                assertNull(r.cyclesEvidence(), "evidence(false)");
                // initialTtlCapMs(30 000) capped the 60 s asked for; emitRemainingTtl(false) left it out.
                assertNull(r.remainingTtlMs());
                long ttl = r.expiresAtMs() - System.currentTimeMillis();
                assertTrue(ttl <= 31_000 && ttl > 20_000, "ttl " + ttl);
                assertThrows(BudgetExceededException.class, () -> t1.createReservation(CreateReservationRequest.of("lst-2",
                        Subject.tenant("t1"), ACTION, new Amount("TOKENS", 40))));
            }
            try (CyclesClient gone = client(server, "k2", "gone")) {
                assertThrows(TenantClosedException.class, () -> gone.createReservation(CreateReservationRequest.of("lst-3",
                        Subject.tenant("gone"), ACTION, new Amount("TOKENS", 1))));
            }
        }
        assertEquals("{\"regime\":{\"extend\":{\"kind\":\"additive\"},\"max_extensions\":null}}",
                LocalServer.builder().extendAdditive().unlimitedExtensions().configJson());
        assertEquals("{\"regime\":{\"extend\":{\"kind\":\"max_lead\",\"max_lead_ms\":5}}}",
                LocalServer.builder().extendMaxLead(5).configJson());
        assertEquals("{}", LocalServer.builder().configJson());
    }

    /** Raw JSON is still accepted, but a key the config does not have is an error naming it, not ignored. */
    @Test
    void unknownKeysInRawJsonAreInvalidArgument() {
        for (String[] c : List.of(new String[] {"{\"budget\":[{\"allocated\":5}]}", "budget"},
                new String[] {"{\"budgets\":[{\"scope\":\"tenant:acme\",\"alocated\":5}]}", "alocated"},
                new String[] {"{\"regime\":{\"max_extension\":1}}", "max_extension"})) {
            InvalidArgumentException e = assertThrows(InvalidArgumentException.class, () -> LocalServer.start(c[0]).close());
            assertTrue(e.getMessage().contains(c[1]), e.getMessage());
        }
        // A budget missing a required field would be the default's: refused, naming it.
        InvalidArgumentException m = assertThrows(InvalidArgumentException.class,
                () -> LocalServer.start("{\"budgets\":[{\"scope\":\"tenant:acme\",\"allocated\":5}]}").close());
        assertTrue(m.getMessage().startsWith("invalid server config: budgets[0]: missing field `unit`"), m.getMessage());
        InvalidArgumentException t = assertThrows(InvalidArgumentException.class,
                () -> LocalServer.start("{\"evidence\":\"yes\"}").close());
        assertTrue(t.getMessage().startsWith("invalid server config"), t.getMessage());
        try (LocalServer server = LocalServer.start("{\"budgets\":[{\"scope\":\"tenant:acme\",\"unit\":\"USD_MICROCENTS\",\"allocated\":5}]}")) {
            InvalidArgumentException f = assertThrows(InvalidArgumentException.class, () -> server.addFault(
                    "{\"operation\":\"commitReservation\",\"time\":1,\"fault\":{\"kind\":\"connection_reset\"}}"));
            assertTrue(f.getMessage().contains("time"), f.getMessage());
            server.addFault("{\"operation\":\"commitReservation\",\"times\":1,\"fault\":{\"kind\":\"connection_reset\"}}");
        }
    }
}
