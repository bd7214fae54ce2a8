package dev.cycles;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.cycles.errors.InvalidArgumentException;
import dev.cycles.internal.Json;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * {@link Reservation#planCaps}: the core's caps rewrite of a provider request under the
 * caps a local server's budget grants (max tokens 64, {@code shell} denied), and its
 * {@code caps_applied} event on the client's listener; the same call under {@code ALLOW}
 * changes nothing and says nothing.
 */
class CapsPlanTest {
    static final Action ACTION = Action.of("llm.completion", "test-model");
    LocalServer server;
    CyclesClient client;
    final LinkedBlockingQueue<CyclesEvent> events = new LinkedBlockingQueue<>();

    @BeforeEach
    void start() {
        server = LocalServer.builder().budget("tenant:acme", Unit.TOKENS, 1_000_000)
                .budget("tenant:acme/workspace:capped", Unit.TOKENS, 1_000_000, new Caps(64L, null, null, List.of("shell"), null))
                .budget("tenant:acme/workspace:zero", Unit.TOKENS, 1_000_000, new Caps(0L, null, null, null, null)).start();
        client = CyclesClient.builder().baseUrl(server.url()).apiKey(server.apiKey()).tenant(server.tenant())
                .journalEnabled(false).defaultUnit(Unit.TOKENS).onEvent(events::add).build();
    }

    @AfterEach
    void stop() {
        client.close();
        server.close();
    }

    GuardSpec in(String workspace) {
        return GuardSpec.of(ACTION, 10).subject(new Subject("acme", workspace, null, null, null, null));
    }

    /** The next event of {@code kind}, skipping the others; null when none comes within 5 s. */
    CyclesEvent next(String kind) throws InterruptedException {
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
        for (long left; (left = end - System.nanoTime()) > 0;) {
            CyclesEvent e = events.poll(left, TimeUnit.NANOSECONDS);
            if (e != null && kind.equals(e.kind())) {
                return e;
            }
        }
        return null;
    }

    static Map<String, Object> tool(String name) {
        return Map.of("name", name);
    }

    @Test
    @SuppressWarnings("unchecked")
    void capsLowerTheBoundRemoveToolsAndAreReported() throws Exception {
        Map<String, Object> body = new LinkedHashMap<>();
        body.put("model", "m");
        body.put("max_tokens", 500);
        body.put("tools", List.of(tool("search"), tool("shell")));
        body.put("tool_choice", Map.of("type", "tool", "name", "shell"));
        try (Reservation r = client.reserve(in("capped"))) {
            CapsPlan plan = r.planCaps(CapsPlan.Api.MESSAGES, body);
            assertEquals(500L, plan.boundFrom());
            assertEquals(64L, plan.boundTo());
            assertTrue(plan.send());
            assertTrue(plan.changed());
            assertEquals(List.of("shell"), plan.removedTools());
            assertEquals(List.of("tool_choice"), plan.unset());
            Map<String, Object> sent = plan.apply(body);
            assertEquals(64L, ((Number) sent.get("max_tokens")).longValue());
            assertEquals(List.of("search"), ((List<Map<String, Object>>) sent.get("tools")).stream().map(t -> t.get("name")).toList());
            assertFalse(sent.containsKey("tool_choice"));
            assertEquals("m", sent.get("model"));
            assertEquals(500, body.get("max_tokens"), "apply copies");

            CyclesEvent e = next("caps_applied");
            assertNotNull(e, "no caps_applied event");
            assertEquals(r.reservationId(), e.reservationId());
            Map<String, Object> j = Json.object(e.json());
            assertEquals("messages", j.get("api"));
            assertEquals(500L, Json.lng(j, "bound_from"));
            assertEquals(64L, Json.lng(j, "bound_to"));
            assertEquals(List.of("shell"), j.get("removed_tools"));
            assertEquals(Boolean.TRUE, j.get("send"));

            // Chat Completions: a request without a bound gets the API's first field; JSON text in.
            CapsPlan cc = r.planCaps(CapsPlan.Api.CHAT_COMPLETIONS, "{\"messages\":[]}");
            assertNull(cc.boundFrom());
            assertEquals(Map.of("max_completion_tokens", 64L), Map.of("max_completion_tokens",
                    ((Number) cc.set().get("max_completion_tokens")).longValue()));
            assertEquals(1, cc.set().size());
            r.setActual(3);
        }
        assertThrows(UnsupportedOperationException.class, () -> new CapsPlan(null, null, Map.of(), List.of(), List.of(), true, false)
                .set().put("x", 1));
    }

    @Test
    void aCapOfZeroSaysDoNotSend() throws Exception {
        try (Reservation r = client.reserve(in("zero"))) {
            CapsPlan plan = r.planCaps(CapsPlan.Api.MESSAGES, Map.of("max_tokens", 100));
            assertFalse(plan.send());
            assertEquals(0L, plan.boundTo());
            CyclesEvent e = next("caps_applied");
            assertNotNull(e, "no caps_applied event");
            assertEquals(Boolean.FALSE, Json.object(e.json()).get("send"));
            // Core's refusal: released with its reason, the exception every language throws.
            dev.cycles.errors.CallNotSentException no = r.refuseCall(null);
            assertTrue(no instanceof dev.cycles.errors.BudgetExceededException);
            assertEquals(104, no.code());
            assertEquals("BUDGET_EXCEEDED", no.errorName());
            assertTrue(no.released());
            assertTrue(no.releaseError().isEmpty());
            assertEquals(r.reservationId(), no.reservationId());
            assertEquals("caps lower the output bound to 0, which messages does not accept: the call was not sent, "
                    + "nothing was charged to reservation " + r.reservationId() + ", and the reservation was released",
                    no.getMessage());
            assertEquals(Outcome.Kind.RELEASED, r.outcome().orElseThrow().kind());
        }
        List<?> ledger = (List<?>) Json.parse(server.ledgerJson());
        assertEquals(List.of("reserve", "release"), ledger.stream().map(o -> ((Map<?, ?>) o).get("kind")).toList());
    }

    @Test
    void underAllowNothingChangesAndBadInputIsRefused() throws Exception {
        Reservation r = client.reserve(GuardSpec.of(ACTION, 10));
        CapsPlan plan = r.planCaps(CapsPlan.Api.MESSAGES, Map.of("max_tokens", 100, "tools", List.of(tool("shell"))));
        assertEquals(new CapsPlan(100L, null, Map.of(), List.of(), List.of(), true, false), plan);
        assertThrows(InvalidArgumentException.class, () -> r.planCaps(CapsPlan.Api.MESSAGES, Map.of("max_tokens", "many")));
        assertThrows(InvalidArgumentException.class, () -> r.planCaps(CapsPlan.Api.MESSAGES, "not json"));
        assertThrows(IllegalArgumentException.class, () -> r.planCaps(null, Map.of()));
        // No plan said not to send: nothing to refuse, and the action goes on.
        assertThrows(InvalidArgumentException.class, () -> r.refuseCall(null));
        r.setActual(1);
        r.close();
        // Finished: the action is gone (the closed error, as every call on a finished handle).
        assertThrows(ClientClosedException.class, () -> r.planCaps(CapsPlan.Api.MESSAGES, Map.of()));
        // Events come in order: none before the commit's settlement means none at all.
        List<String> kinds = new java.util.ArrayList<>();
        for (CyclesEvent e; (e = events.poll(5, TimeUnit.SECONDS)) != null;) {
            kinds.add(e.kind());
            if (e.kind().equals("settlement_settled")) {
                break;
            }
        }
        assertEquals("settlement_settled", kinds.get(kinds.size() - 1), kinds.toString());
        assertFalse(kinds.contains("caps_applied"), "a plan that changed nothing was reported: " + kinds);
    }
}
