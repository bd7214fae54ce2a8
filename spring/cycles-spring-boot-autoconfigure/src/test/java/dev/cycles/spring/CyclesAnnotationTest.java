package dev.cycles.spring;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;

import dev.cycles.LocalServer;
import dev.cycles.Reservation;
import dev.cycles.errors.BudgetExceededException;
import dev.cycles.errors.MissingActualException;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/** {@code @Cycles} on bean methods against the local server over HTTP, the ledger asserted. */
class CyclesAnnotationTest {
    /** The application's bean (a plain class: proxied with CGLIB). */
    public static class Llm {
        final AtomicInteger calls = new AtomicInteger();

        public record Reply(String text, long tokens) {}

        /** How often a guarded method body ran (a method: the CGLIB proxy's fields are not the bean's). */
        public int calls() {
            return calls.get();
        }

        @Cycles(estimate = "#maxTokens * 10", actual = "#result.tokens * 10")
        public Reply complete(String prompt, int maxTokens) {
            calls.incrementAndGet();
            return new Reply("answer to " + prompt, 42);
        }

        /** The official starter's shorthand: value, the actual the estimate. */
        @Cycles(value = "1000", actionKind = "llm.completion", actionName = "#model", tenant = "#tenant", workflow = "summaries")
        public String official(String model, String tenant) {
            calls.incrementAndGet();
            return model;
        }

        /** The official starter's dimensions (a SpEL value) and actionTags. */
        @Cycles(value = "300", actionKind = "llm.completion", actionName = "m", dimensions = {"cost_center=42", "project=#project"},
                actionTags = {"prod", "customer-facing"})
        public String tagged(String project) {
            calls.incrementAndGet();
            return project;
        }

        @Cycles(estimate = "800")
        public String failing() {
            calls.incrementAndGet();
            throw new IllegalStateException("model down");
        }

        /** Reports usage as it goes (a stream), then breaks. */
        @Cycles(estimate = "900")
        public String partial() {
            Reservation r = Reservation.current().orElseThrow();
            r.addUsage(5);
            r.addUsage(7);
            throw new IllegalStateException("stream broke");
        }

        /** Reports its own usage and returns: committed as reported, not the estimate. */
        @Cycles(estimate = "900")
        public String selfReported() {
            Reservation.current().orElseThrow().addUsage(33);
            return "ok";
        }

        @Cycles(estimate = "500", useEstimateIfActualNotProvided = false)
        public String noActual() {
            return "forgot";
        }

        @Cycles(estimate = "#n", actual = "#result.tokens", unit = "TOKENS")
        public CompletableFuture<Reply> async(long n, CompletableFuture<String> gate) {
            calls.incrementAndGet();
            return gate.thenApply(s -> new Reply(s, n / 2));
        }

        @Cycles(estimate = "600")
        public CompletableFuture<String> asyncPartial(CompletableFuture<String> gate) {
            Reservation r = Reservation.current().orElseThrow();
            return gate.thenApply(s -> {
                r.addUsage(11);
                throw new IllegalArgumentException("half way: " + s);
            });
        }
    }

    /** A bean whose @Cycles method calls another bean's: nested guarded actions. */
    public static class Agent {
        private final Llm llm;

        public Agent(Llm llm) {
            this.llm = llm;
        }

        @Cycles(estimate = "2000", actual = "#result.length()", metadata = "{'step': #step, 'tags': {'a', 'b'}}",
                actionKind = "agent.step")
        public String run(String step) {
            Reservation outer = Reservation.current().orElseThrow();
            String inner = llm.complete(step, 10).text();
            if (Reservation.current().orElseThrow() != outer) {
                throw new AssertionError("the outer reservation is not current after the inner call");
            }
            return inner;
        }
    }

    @Configuration
    static class App {
        @Bean
        Llm llm() {
            return new Llm();
        }

        @Bean
        Agent agent(Llm llm) {
            return new Agent(llm);
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
                .withUserConfiguration(App.class).withPropertyValues(server.properties());
    }

    @Test
    void committedWithTheActualOfTheResult() {
        server = Server.start();
        runner().run(ctx -> {
            Llm llm = ctx.getBean(Llm.class);
            assertThat(org.springframework.aop.support.AopUtils.isAopProxy(llm)).isTrue();
            assertEquals("answer to hi", llm.complete("hi", 100).text());
        });
        assertEquals(List.of("reserve:1000", "commit:420"), server.ledger());
    }

    @Test
    void officialAttributeNamesAndSpelSubject() {
        server = Server.start();
        runner().run(ctx -> assertEquals("gpt-4o-mini", ctx.getBean(Llm.class).official("gpt-4o-mini", server.server.tenant())));
        assertEquals(List.of("reserve:1000", "commit:1000"), server.ledger());
        @SuppressWarnings("unchecked")
        Map<String, Object> body = (Map<String, Object>) dev.cycles.internal.Json.parse(
                (String) server.requests("createReservation").get(0).get("body"));
        assertEquals(Map.of("kind", "llm.completion", "name", "gpt-4o-mini"), body.get("action"));
        assertEquals(Map.of("tenant", server.server.tenant(), "workflow", "summaries"), body.get("subject"));
    }

    @Test
    void dimensionsAndActionTagsReachTheRequest() {
        server = Server.start();
        runner().run(ctx -> assertEquals("alpha", ctx.getBean(Llm.class).tagged("alpha")));
        assertEquals(List.of("reserve:300", "commit:300"), server.ledger());
        @SuppressWarnings("unchecked")
        Map<String, Object> body = (Map<String, Object>) dev.cycles.internal.Json.parse(
                (String) server.requests("createReservation").get(0).get("body"));
        assertEquals(Map.of("kind", "llm.completion", "name", "m", "tags", List.of("prod", "customer-facing")), body.get("action"));
        // No other subject field set: the client's tenant, with the dimensions.
        assertEquals(Map.of("tenant", server.server.tenant(), "dimensions", Map.of("cost_center", "42", "project", "alpha")), body.get("subject"));
    }

    @Test
    void nestedActionsAndCommitMetadata() {
        server = Server.start();
        runner().run(ctx -> assertEquals("answer to plan", ctx.getBean(Agent.class).run("plan")));
        // The inner action settles first; the outer commits its own actual with the metadata.
        assertEquals(List.of("reserve:2000", "reserve:100", "commit:420", "commit:14"), server.ledger());
        @SuppressWarnings("unchecked")
        Map<String, Object> commit = (Map<String, Object>) dev.cycles.internal.Json.parse(
                (String) server.requests("commitReservation").get(1).get("body"));
        assertEquals(Map.of("step", "plan", "tags", List.of("a", "b")), commit.get("metadata"));
    }

    @Test
    void releasedWhenTheMethodThrows() {
        server = Server.start();
        runner().run(ctx -> {
            IllegalStateException e = assertThrows(IllegalStateException.class, () -> ctx.getBean(Llm.class).failing());
            assertEquals("model down", e.getMessage());
        });
        assertEquals(List.of("reserve:800", "release:800"), server.ledger());
    }

    @Test
    void partialUsageCommittedWhenTheMethodThrowsAfterReporting() {
        server = Server.start();
        runner().run(ctx -> {
            Llm llm = ctx.getBean(Llm.class);
            assertEquals("stream broke", assertThrows(IllegalStateException.class, llm::partial).getMessage());
            assertEquals("ok", llm.selfReported());
        });
        assertEquals(List.of("reserve:900", "commit:12", "reserve:900", "commit:33"), server.ledger());
    }

    @Test
    void deniedBeforeTheMethodRuns() {
        server = new Server(LocalServer.builder().budget("tenant:acme", "USD_MICROCENTS", 500).start());
        runner().run(ctx -> {
            Llm llm = ctx.getBean(Llm.class);
            BudgetExceededException e = assertThrows(BudgetExceededException.class, () -> llm.complete("hi", 100));
            assertEquals(409, e.httpStatus());
            assertEquals(0, llm.calls());
        });
        assertEquals(List.of(), server.ledger());
    }

    @Test
    void missingActualReleasedWithCoresError() {
        server = Server.start();
        runner().run(ctx -> {
            MissingActualException e = assertThrows(MissingActualException.class, () -> ctx.getBean(Llm.class).noActual());
            assertThat(e.released()).isTrue();
        });
        assertEquals(List.of("reserve:500", "release:500"), server.ledger());
    }

    /** A server with TOKENS and USD_MICROCENTS budgets for the tenant. */
    private static Server twoUnits() {
        return new Server(LocalServer.builder().budget("tenant:acme", "TOKENS", 1_000_000)
                .budget("tenant:acme", "USD_MICROCENTS", 1_000_000_000).start());
    }

    @Test
    void asyncCommittedWhenTheFutureCompletes() {
        server = twoUnits();
        runner().run(ctx -> {
            CompletableFuture<String> gate = new CompletableFuture<>();
            CompletableFuture<Llm.Reply> f = ctx.getBean(Llm.class).async(300, gate);
            assertThat(Reservation.current()).isEmpty();
            assertThat(f).isNotDone();
            assertEquals(List.of("reserve:300"), server.ledger());
            gate.complete("done");
            assertEquals(new Llm.Reply("done", 150), f.get());
        });
        assertEquals(List.of("reserve:300", "commit:150"), server.ledger());
    }

    @Test
    void asyncReleasedOnAFailedFutureAndPartialCommitted() throws Exception {
        server = twoUnits();
        runner().run(ctx -> {
            Llm llm = ctx.getBean(Llm.class);
            IllegalStateException boom = new IllegalStateException("provider 500");
            ExecutionException e = assertThrows(ExecutionException.class,
                    () -> llm.async(300, CompletableFuture.failedFuture(boom)).get());
            assertSame(boom, e.getCause());
            CompletableFuture<String> gate = new CompletableFuture<>();
            CompletableFuture<String> p = llm.asyncPartial(gate);
            gate.complete("x");
            ExecutionException e2 = assertThrows(ExecutionException.class, p::get);
            assertInstanceOf(IllegalArgumentException.class, e2.getCause());
            assertEquals("half way: x", e2.getCause().getMessage());
        });
        assertEquals(List.of("reserve:300", "release:300", "reserve:600", "commit:11"), server.ledger());
    }

    @Test
    void asyncDeniedAsTheFuturesFailure() {
        server = new Server(LocalServer.builder().budget("tenant:acme", "TOKENS", 100).start());
        runner().run(ctx -> {
            Llm llm = ctx.getBean(Llm.class);
            CompletableFuture<Llm.Reply> f = llm.async(300, CompletableFuture.completedFuture("never"));
            ExecutionException e = assertThrows(ExecutionException.class, f::get);
            assertInstanceOf(BudgetExceededException.class, e.getCause());
            assertEquals(0, llm.calls());
        });
        assertEquals(List.of(), server.ledger());
    }
}
