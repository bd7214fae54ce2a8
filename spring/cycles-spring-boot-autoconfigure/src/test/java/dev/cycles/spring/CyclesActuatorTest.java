package dev.cycles.spring;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import dev.cycles.LocalServer;
import dev.cycles.errors.BudgetExceededException;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.search.RequiredSearch;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/**
 * The health indicator through Boot's health endpoint, and the meters with Actuator's own metrics
 * auto-configuration binding them. Boot-neutral: the types of Actuator's packages are in
 * {@link BootActuator}, one per Boot line (src/test/boot3 here, spring/boot4-check for Boot 4).
 */
class CyclesActuatorTest {
    private static final String OUTAGE =
            "{\"operation\":\"commitReservation\",\"times\":0,\"fault\":{\"kind\":\"server_error\",\"status\":503}}";

    public static class Work {
        @Cycles(estimate = "#n", actual = "#n / 2", actionKind = "llm")
        public long spend(long n) {
            return n;
        }

        @Cycles(estimate = "100", actionKind = "llm")
        public long fail() {
            throw new IllegalStateException("down");
        }

        @Cycles(estimate = "100", ttlMs = 1200, actionKind = "slow")
        public long slow() throws InterruptedException {
            Thread.sleep(1500);
            return 1;
        }
    }

    @Configuration
    static class App {
        @Bean
        Work work() {
            return new Work();
        }
    }

    private Server server;

    @AfterEach
    void stop() {
        if (server != null) {
            server.close();
        }
    }

    private ApplicationContextRunner runner(String... more) {
        return new ApplicationContextRunner()
                .withConfiguration(AutoConfigurations.of(CyclesAutoConfiguration.class, CyclesActuatorAutoConfiguration.class))
                .withConfiguration(AutoConfigurations.of(BootActuator.AUTO_CONFIGURATIONS))
                .withPropertyValues("management.endpoint.health.show-details=always")
                .withUserConfiguration(App.class).withPropertyValues(server.properties(more));
    }

    private static double count(MeterRegistry m, String name, String... tags) {
        RequiredSearch s = m.get(name).tags(tags);
        return s.counter().count();
    }

    @Test
    void healthUpWithTheJournalsPendingSettlementsThenDown() {
        server = Server.start();
        // The journaled settlement cannot drain once the server is gone: a short drain bound.
        runner("cycles.settle-max-attempts=1", "cycles.replay-interval=1h", "cycles.close-timeout=200ms").run(ctx -> {
            assertThat(ctx).hasSingleBean(BootActuator.INDICATOR);
            assertEquals(BootActuator.INDICATOR, ctx.getBean("cyclesHealthIndicator").getClass());
            BootActuator.View up = BootActuator.health(ctx);
            assertEquals("UP", up.status());
            assertEquals(0, up.details().get("journal.pending"));
            assertEquals(server.server.url(), up.details().get("baseUrl"));

            server.server.addFault(OUTAGE);
            ctx.getBean(Work.class).spend(1000);
            BootActuator.View pending = BootActuator.health(ctx);
            assertEquals("UP", pending.status());
            assertEquals(1, pending.details().get("journal.pending"));
            assertThat((Long) pending.details().get("journal.oldestAgeMs")).isBetween(0L, 60_000L);
            MeterRegistry m = ctx.getBean(MeterRegistry.class);
            assertEquals(1.0, m.get("cycles.journal.pending").gauge().value());
            await().atMost(Duration.ofSeconds(5)).until(() -> m.find("cycles.settlements").tags("outcome", "pending").counter() != null);
            // At least once: the background replayer's first pass runs when the client starts,
            // and on a loaded machine it can start after the record was journaled and try it
            // again (one more attempt_failed and pending, seen in CI); the interval is 1 h after.
            assertThat(count(m, "cycles.settlements", "outcome", "pending", "mode", "none")).isGreaterThanOrEqualTo(1.0);
            assertThat(count(m, "cycles.settlements", "outcome", "attempt_failed", "mode", "commit")).isGreaterThanOrEqualTo(1.0);

            // A 5xx from the server: DOWN, with the status; the next read answers: UP again.
            server.server.addFault("{\"operation\":\"getBalances\",\"times\":1,\"fault\":{\"kind\":\"server_error\",\"status\":503}}");
            BootActuator.View failing = BootActuator.health(ctx);
            assertEquals("DOWN", failing.status());
            assertEquals(503, failing.details().get("httpStatus"));
            assertEquals("SERVER_ERROR", failing.details().get("error"));
            assertEquals("UP", BootActuator.health(ctx).status());

            // The server gone. Its stop closes kept-alive connections asynchronously (it awaits
            // only its accept loop), so a read right after may still be served: wait for DOWN.
            server.server.close();
            await().atMost(Duration.ofSeconds(5)).until(() -> "DOWN".equals(BootActuator.health(ctx).status()));
            assertThat(BootActuator.health(ctx).details().get("error").toString()).isNotEmpty();
        });
    }

    /**
     * {@code cycles.journal.url}: the client journals to Redis (the directory stays empty), the
     * health indicator and the gauge count what is pending there, and a Redis that goes away
     * makes the health DOWN with why, the gauge NaN.
     */
    @Test
    void healthOfARedisJournalCountsItsPendingSettlementsAndIsDownWithoutIt() throws Exception {
        server = Server.start();
        try (RedisProcess redis = new RedisProcess()) {
            runner("cycles.journal.url=" + redis.url, "cycles.settle-max-attempts=1", "cycles.replay-interval=1h",
                    "cycles.close-timeout=200ms").run(ctx -> {
                assertEquals(0, BootActuator.health(ctx).details().get("journal.pending"));
                server.server.addFault(OUTAGE);
                ctx.getBean(Work.class).spend(1000);
                BootActuator.View pending = BootActuator.health(ctx);
                assertEquals("UP", pending.status());
                assertEquals(1, pending.details().get("journal.pending"));
                try (Stream<Path> files = Files.walk(server.journal)) {
                    assertEquals(List.of(server.journal), files.toList(), "nothing was written to the directory");
                }
                MeterRegistry m = ctx.getBean(MeterRegistry.class);
                assertEquals(1.0, m.get("cycles.journal.pending").gauge().value());

                redis.kill();
                BootActuator.View down = BootActuator.health(ctx);
                assertEquals("DOWN", down.status());
                assertThat(down.details().get("journal.error").toString()).contains(redis.url.replace("/0", ""));
                assertThat(m.get("cycles.journal.pending").gauge().value()).isNaN();
            });
        }
    }

    @Test
    void metersOfReservationsLifecyclesAndSettlements() {
        server = new Server(LocalServer.builder().budget("tenant:acme", "USD_MICROCENTS", 2_500).start());
        runner().run(ctx -> {
            Work w = ctx.getBean(Work.class);
            w.spend(1000);
            w.spend(1000);
            assertThrows(IllegalStateException.class, w::fail);
            assertThrows(BudgetExceededException.class, () -> w.spend(5000));
            MeterRegistry m = ctx.getBean(MeterRegistry.class);
            assertEquals(3.0, count(m, "cycles.reservations", "decision", "ALLOW"));
            assertEquals(1.0, count(m, "cycles.reservations", "decision", "DENIED", "error", "BUDGET_EXCEEDED"));
            assertEquals(2, m.get("cycles.lifecycle").tags("outcome", "SETTLED", "action", "llm").timer().count());
            assertEquals(1, m.get("cycles.lifecycle").tags("outcome", "WORK_FAILED", "action", "llm").timer().count());
            await().atMost(Duration.ofSeconds(5)).until(() -> m.find("cycles.settlements").tags("outcome", "settled").counter() != null
                    && m.find("cycles.settlements").tags("outcome", "settled").counter().count() == 2.0);
        });
        assertEquals(List.of("reserve:1000", "commit:500", "reserve:1000", "commit:500", "reserve:100", "release:100"),
                server.ledger());
    }

    @Test
    void heartbeatFailuresCounted() {
        server = Server.start();
        runner().run(ctx -> {
            server.server.addFault("{\"operation\":\"extendReservation\",\"times\":0,\"fault\":{\"kind\":\"server_error\",\"status\":503}}");
            ctx.getBean(Work.class).slow();
            MeterRegistry m = ctx.getBean(MeterRegistry.class);
            await().atMost(Duration.ofSeconds(5)).until(() -> m.find("cycles.heartbeat.failures").counters().stream()
                    .mapToDouble(c -> c.count()).sum() >= 1.0);
        });
    }

    @Test
    void healthIndicatorCanBeTurnedOff() {
        server = Server.start();
        runner("management.health.cycles.enabled=false").run(ctx -> {
            assertThat(ctx).doesNotHaveBean("cyclesHealthIndicator");
            assertThat(ctx).doesNotHaveBean(BootActuator.INDICATOR);
            assertThat(ctx).hasSingleBean(CyclesMetrics.class);
        });
    }
}
