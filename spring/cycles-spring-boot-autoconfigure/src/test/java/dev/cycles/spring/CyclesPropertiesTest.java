package dev.cycles.spring;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;

import dev.cycles.Action;
import dev.cycles.CyclesClient;
import dev.cycles.DrainReport;
import dev.cycles.GuardSpec;
import dev.cycles.Settlement;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.context.properties.bind.BindException;
import org.springframework.boot.context.properties.source.InvalidConfigurationPropertyValueException;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/** The CyclesClient bean from cycles.* (ours and the official starter's names), startup failures, the shutdown drain. */
class CyclesPropertiesTest {
    private static final Action ACTION = Action.of("llm.completion", "test");
    private Server server;

    @AfterEach
    void stop() {
        if (server != null) {
            server.close();
        }
    }

    private static ApplicationContextRunner runner() {
        return new ApplicationContextRunner().withConfiguration(AutoConfigurations.of(CyclesAutoConfiguration.class));
    }

    @Test
    void clientFromOurProperties() {
        server = Server.start();
        runner().withPropertyValues(server.properties("cycles.request-timeout=3s", "cycles.connect-timeout=1s",
                "cycles.settle-max-attempts=2", "cycles.close-timeout=2s", "cycles.default-unit=USD_MICROCENTS")).run(ctx -> {
            CyclesClient c = ctx.getBean(CyclesClient.class);
            assertEquals(server.server.url(), c.baseUrl());
            assertEquals("acme", c.tenant());
            assertEquals(Duration.ofSeconds(2), ctx.getBean(CyclesShutdown.class).timeout());
            c.guarded(GuardSpec.of(ACTION, 700), 500, () -> "ok");
        });
        assertEquals(List.of("reserve:700", "commit:500"), server.ledger());
    }

    @Test
    void clientFromTheOfficialStartersNames() {
        server = Server.start();
        // An application.yml written for the official starter, unchanged.
        runner().withPropertyValues("cycles.base-url=" + server.server.url(), "cycles.api-key=" + server.server.apiKey(),
                "cycles.tenant=acme", "cycles.http.connect-timeout=2s", "cycles.http.read-timeout=5s",
                "cycles.retry.enabled=true", "cycles.retry.max-attempts=5", "cycles.retry.initial-delay=500ms",
                "cycles.retry.multiplier=2.0", "cycles.retry.max-delay=30s", "cycles.retry.flush-timeout=3s",
                "cycles.journal.enabled=true", "cycles.journal.dir=" + server.journal).run(ctx -> {
            assertThat(ctx).hasNotFailed();
            assertEquals(Duration.ofSeconds(3), ctx.getBean(CyclesShutdown.class).timeout());
            ctx.getBean(CyclesClient.class).guarded(GuardSpec.of(ACTION, 900), 100, () -> "ok");
        });
        assertEquals(List.of("reserve:900", "commit:100"), server.ledger());
    }

    @Test
    void officialRetryDisabledMeansOneSettleAttempt() {
        server = Server.start();
        runner().withPropertyValues(server.properties("cycles.retry.enabled=false", "cycles.replay-interval=1h")).run(ctx -> {
            server.server.addFault("{\"operation\":\"commitReservation\",\"times\":0,\"fault\":{\"kind\":\"server_error\",\"status\":503}}");
            var g = ctx.getBean(CyclesClient.class).guarded(GuardSpec.of(ACTION, 800), 300, () -> "done");
            assertEquals(Settlement.Status.PENDING, g.outcome().settlement().status());
            assertEquals(1, server.requests("commitReservation").size());
            server.server.clearFaults();
        });
        failsNaming(runner().withPropertyValues("cycles.base-url=http://127.0.0.1:9", "cycles.api-key=k",
                "cycles.retry.enabled=false", "cycles.retry.max-attempts=3"), "cycles.retry.enabled", "cycles.retry.max-attempts is set too");
    }

    @Test
    void theDrainIsBoundedBySpringsShutdownPhase() {
        server = Server.start();
        runner().withPropertyValues(server.properties("cycles.close-timeout=2m", "spring.lifecycle.timeout-per-shutdown-phase=7s"))
                .run(ctx -> assertEquals(Duration.ofSeconds(7), ctx.getBean(CyclesShutdown.class).timeout()));
        runner().withPropertyValues(server.properties("cycles.close-timeout=40s"))
                .run(ctx -> assertEquals(Duration.ofSeconds(30), ctx.getBean(CyclesShutdown.class).timeout()));
    }

    @Test
    void anApplicationsOwnClientWins() {
        server = Server.start();
        runner().withUserConfiguration(OwnClient.class).withPropertyValues("cycles.base-url=ftp://ignored").run(ctx -> {
            assertThat(ctx).hasNotFailed();
            assertEquals("http://127.0.0.1:9", ctx.getBean(CyclesClient.class).baseUrl());
        });
    }

    @Configuration
    static class OwnClient {
        @Bean
        CyclesClient myClient() {
            return CyclesClient.builder().baseUrl("http://127.0.0.1:9").apiKey("k").journalEnabled(false).build();
        }
    }

    /** The startup failure's property error, with the name and the core's message. */
    private static void failsNaming(ApplicationContextRunner r, String property, String message) {
        r.run(ctx -> {
            assertThat(ctx).hasFailed();
            Throwable t = ctx.getStartupFailure();
            while (t != null && !(t instanceof InvalidConfigurationPropertyValueException)) {
                t = t.getCause();
            }
            assertNotNull(t, () -> "no property error in " + ctx.getStartupFailure());
            InvalidConfigurationPropertyValueException e = (InvalidConfigurationPropertyValueException) t;
            assertEquals(property, e.getName());
            assertThat(e.getMessage()).contains(message);
        });
    }

    @Test
    void badPropertiesFailTheStartupNamingTheProperty() {
        failsNaming(runner().withPropertyValues("cycles.base-url=ftp://x", "cycles.api-key=k"), "cycles.base-url",
                "base URL must use http or https");
        failsNaming(runner().withPropertyValues("cycles.api-key=k"), "cycles.base-url", "base_url is required");
        failsNaming(runner().withPropertyValues("cycles.base-url=http://127.0.0.1:9"), "cycles.api-key", "api_key is required");
        failsNaming(runner().withPropertyValues("cycles.base-url=http://127.0.0.1:9", "cycles.api-key=k",
                "cycles.default-unit=EUROS"), "cycles.default-unit", "not \"EUROS\"");
        // The official starter's name, as the application set it.
        failsNaming(runner().withPropertyValues("cycles.base-url=http://127.0.0.1:9", "cycles.api-key=k",
                "cycles.http.connect-timeout=0s"), "cycles.http.connect-timeout", "the connect timeout must be greater than 0");
        failsNaming(runner().withPropertyValues("cycles.base-url=http://127.0.0.1:9", "cycles.api-key=k",
                "cycles.retry.max-attempts=0"), "cycles.retry.max-attempts", "settle max_attempts must be at least 1");
        failsNaming(runner().withPropertyValues("cycles.base-url=http://127.0.0.1:9", "cycles.api-key=k",
                "cycles.request-timeout=-5ms"), "cycles.request-timeout", "request_timeout_ms must be an integer");
        failsNaming(runner().withPropertyValues("cycles.base-url=http://127.0.0.1:9", "cycles.api-key=k",
                "cycles.request-timeout=2s", "cycles.http.read-timeout=5s"), "cycles.http.read-timeout",
                "set either cycles.request-timeout or cycles.http.read-timeout");
    }

    @Test
    void unbindableValueFailsNamingTheProperty() {
        runner().withPropertyValues("cycles.base-url=http://127.0.0.1:9", "cycles.api-key=k", "cycles.request-timeout=soon")
                .run(ctx -> {
                    assertThat(ctx).hasFailed();
                    Throwable t = ctx.getStartupFailure();
                    while (t != null && !(t instanceof BindException)) {
                        t = t.getCause();
                    }
                    assertNotNull(t);
                    assertEquals("cycles.request-timeout", ((BindException) t).getProperty().getName().toString());
                    assertEquals("soon", ((BindException) t).getProperty().getValue());
                });
    }

    @Test
    void shutdownDrainsWhatAnOutageLeftOnceTheServerIsBack() {
        server = Server.start();
        CyclesShutdown[] shutdown = new CyclesShutdown[1];
        runner().withPropertyValues(server.properties("cycles.settle-max-attempts=1", "cycles.replay-interval=1h"))
                .run(ctx -> {
                    shutdown[0] = ctx.getBean(CyclesShutdown.class);
                    server.server.addFault("{\"operation\":\"commitReservation\",\"times\":0,\"fault\":{\"kind\":\"server_error\",\"status\":503}}");
                    var g = ctx.getBean(CyclesClient.class).guarded(GuardSpec.of(ACTION, 800), 300, () -> "done");
                    assertEquals(Settlement.Status.PENDING, g.outcome().settlement().status());
                    assertEquals(List.of("reserve:800"), server.ledger());
                    server.server.clearFaults();
                });
        DrainReport r = shutdown[0].lastReport();
        assertEquals(1, r.outcomes().size());
        assertEquals(Settlement.Status.COMMITTED, r.outcomes().get(0).settlement().status());
        assertEquals(List.of(), r.remaining());
        assertEquals(List.of("reserve:800", "commit:300"), server.ledger());
    }

    @Test
    void shutdownReportsWhatIsLeftDuringAnOutage() {
        server = Server.start();
        CyclesShutdown[] shutdown = new CyclesShutdown[1];
        String[] id = new String[1];
        runner().withPropertyValues(server.properties("cycles.settle-max-attempts=1", "cycles.replay-interval=1h",
                "cycles.close-timeout=300ms")).run(ctx -> {
                    shutdown[0] = ctx.getBean(CyclesShutdown.class);
                    server.server.addFault("{\"operation\":\"commitReservation\",\"times\":0,\"fault\":{\"kind\":\"server_error\",\"status\":503}}");
                    var g = ctx.getBean(CyclesClient.class).guarded(GuardSpec.of(ACTION, 800), 300, () -> "done");
                    id[0] = g.outcome().reservationId();
                });
        DrainReport r = shutdown[0].lastReport();
        assertEquals(List.of(id[0]), r.remaining().stream().map(DrainReport.Pending::reservationId).toList());
        assertEquals(List.of("reserve:800"), server.ledger());
    }
}
