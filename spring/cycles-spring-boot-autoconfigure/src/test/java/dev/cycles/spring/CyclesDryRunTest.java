package dev.cycles.spring;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import dev.cycles.Caps;
import dev.cycles.LocalServer;
import dev.cycles.errors.BudgetExceededException;
import dev.cycles.internal.Json;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;

/**
 * {@code @Cycles(dryRun = true)} against the local server over HTTP: the method never runs, the
 * reservation request goes out with {@code dry_run: true}, the ledger stays empty.
 */
class CyclesDryRunTest {
    /** The application's bean; {@link #calls} counts method bodies that ran (none should). */
    public static class Planner {
        final AtomicInteger calls = new AtomicInteger();

        public int calls() {
            return calls.get();
        }

        @Cycles(estimate = "#maxTokens * 10", actionKind = "llm.completion", actionName = "#model", workflow = "#flow",
                dryRun = true)
        public DryRunResult evaluate(String model, int maxTokens, String flow) {
            calls.incrementAndGet();
            throw new AssertionError("a dry-run method ran");
        }

        /** A supertype of the result is accepted too. */
        @Cycles(value = "1000", dryRun = true)
        public Object loose() {
            calls.incrementAndGet();
            throw new AssertionError("a dry-run method ran");
        }
    }

    private Server server;

    @AfterEach
    void stop() {
        if (server != null) {
            server.close();
        }
    }

    private ApplicationContextRunner runner() {
        return new ApplicationContextRunner().withConfiguration(AutoConfigurations.of(CyclesAutoConfiguration.class))
                .withBean(Planner.class).withPropertyValues(server.properties());
    }

    @SuppressWarnings("unchecked")
    private Map<String, Object> body(int i) {
        return (Map<String, Object>) Json.parse((String) server.requests("createReservation").get(i).get("body"));
    }

    @Test
    void allowReturnsTheEvaluationAndHoldsNothing() {
        server = Server.start();
        runner().run(ctx -> {
            assertThat(ctx).hasNotFailed();
            Planner p = ctx.getBean(Planner.class);
            DryRunResult r = p.evaluate("gpt-4o-mini", 70, "summaries");
            assertEquals("ALLOW", r.decision());
            assertThat(r.caps()).isNull();
            assertThat(r.affectedScopes()).contains("tenant:" + server.server.tenant());
            assertThat(r.scopePath()).isNotBlank();
            Object loose = p.loose();
            assertThat(loose).isInstanceOf(DryRunResult.class);
            assertEquals("ALLOW", ((DryRunResult) loose).decision());
            assertEquals(0, p.calls());
        });
        assertEquals(List.of(), server.ledger());
        Map<String, Object> b = body(0);
        assertEquals(Boolean.TRUE, b.get("dry_run"));
        assertEquals(Map.of("unit", "USD_MICROCENTS", "amount", 700L), normal(b.get("estimate")));
        assertEquals(Map.of("kind", "llm.completion", "name", "gpt-4o-mini"), b.get("action"));
        assertEquals(Map.of("tenant", server.server.tenant(), "workflow", "summaries"), b.get("subject"));
        assertEquals(Boolean.TRUE, body(1).get("dry_run"));
        assertEquals(2, server.requests("createReservation").size());
    }

    @Test
    void allowWithCapsCarriesTheCaps() {
        server = new Server(LocalServer.builder()
                .budget("tenant:acme", "USD_MICROCENTS", 1_000_000, new Caps(256L, null, null, List.of("shell"), null)).start());
        runner().run(ctx -> {
            Planner p = ctx.getBean(Planner.class);
            DryRunResult r = p.evaluate("m", 10, "w");
            assertEquals("ALLOW_WITH_CAPS", r.decision());
            assertThat(r.isAllowedWithCaps()).isTrue();
            assertEquals(256L, r.caps().maxTokens());
            assertEquals(List.of("shell"), r.caps().toolDenylist());
            assertEquals(0, p.calls());
        });
        assertEquals(List.of(), server.ledger());
        assertEquals(Boolean.TRUE, body(0).get("dry_run"));
    }

    @Test
    void denialThrowsTheBudgetErrorBeforeTheMethod() {
        server = new Server(LocalServer.builder().budget("tenant:acme", "USD_MICROCENTS", 500).start());
        runner().run(ctx -> {
            Planner p = ctx.getBean(Planner.class);
            BudgetExceededException e = assertThrows(BudgetExceededException.class, () -> p.evaluate("m", 100, "w"));
            assertThat(e.getMessage()).contains("evaluate").contains("denied");
            assertEquals(0, p.calls());
        });
        assertEquals(List.of(), server.ledger());
        assertEquals(Boolean.TRUE, body(0).get("dry_run"));
        assertEquals(Map.of("unit", "USD_MICROCENTS", "amount", 1000L), normal(body(0).get("estimate")));
    }

    /** JSON numbers as longs, whatever width the parser chose. */
    @SuppressWarnings("unchecked")
    private static Map<String, Object> normal(Object o) {
        Map<String, Object> m = new java.util.LinkedHashMap<>((Map<String, Object>) o);
        m.replaceAll((k, v) -> v instanceof Number n ? (Object) n.longValue() : v);
        return m;
    }
}
