package dev.cycles.spring;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;
import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.cycles.LocalServer;
import dev.cycles.Reservation;
import dev.cycles.errors.BudgetExceededException;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.reactivestreams.Publisher;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.test.StepVerifier;

/** {@code @Cycles} on methods returning Reactor's Mono and Flux, the ledger asserted. */
class CyclesReactiveTest {
    public record Chunk(String text, long usage) {}

    public static class Streams {
        final AtomicInteger calls = new AtomicInteger();

        public int calls() {
            return calls.get();
        }

        @Cycles(estimate = "500", actual = "#result.length() * 10")
        public Mono<String> mono(String s) {
            calls.incrementAndGet();
            return Mono.just(s).delayElement(Duration.ofMillis(20));
        }

        @Cycles(estimate = "500")
        public Mono<String> monoFails() {
            return Mono.error(new IllegalStateException("provider 500"));
        }

        /** The final chunk carries the usage, as a model's stream does. */
        @Cycles(estimate = "900", actual = "#result.usage")
        public Flux<Chunk> stream() {
            calls.incrementAndGet();
            return Flux.just(new Chunk("a", 0), new Chunk("b", 0), new Chunk("", 37));
        }

        /** Usage reported per element through the reservation in the Reactor context. */
        @Cycles(estimate = "900")
        public Flux<Integer> counted(boolean breakAfter) {
            Flux<Integer> f = Flux.range(1, 3).concatMap(i -> Mono.deferContextual(cx -> {
                cx.get(Reservation.class).addUsage(i * 10);
                return Mono.just(i);
            }));
            return breakAfter ? f.concatWith(Mono.error(new IllegalStateException("stream broke"))) : f;
        }
    }

    public static class RawPublisher {
        @Cycles(estimate = "1")
        public Publisher<String> call() {
            return Mono.just("x");
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
                .withBean(Streams.class).withPropertyValues(server.properties());
    }

    @Test
    void monoCommittedOnSubscriptionAndReleasedOnError() {
        server = Server.start();
        runner().run(ctx -> {
            Streams s = ctx.getBean(Streams.class);
            Mono<String> m = s.mono("hello");
            assertEquals(List.of(), server.ledger());
            StepVerifier.create(m).expectNext("hello").verifyComplete();
            StepVerifier.create(s.monoFails()).expectErrorMessage("provider 500").verify();
        });
        assertEquals(List.of("reserve:500", "commit:50", "reserve:500", "release:500"), server.ledger());
    }

    @Test
    void monoDeniedBeforeTheMethodRuns() {
        server = new Server(LocalServer.builder().budget("tenant:acme", "USD_MICROCENTS", 100).start());
        runner().run(ctx -> {
            Streams s = ctx.getBean(Streams.class);
            StepVerifier.create(s.mono("x")).expectError(BudgetExceededException.class).verify();
            assertEquals(0, s.calls()); // the method is called only once the reservation is granted
        });
        assertEquals(List.of(), server.ledger());
    }

    @Test
    void fluxCommitsTheLastElementsUsageOrWhatWasReported() {
        server = Server.start();
        runner().run(ctx -> {
            Streams s = ctx.getBean(Streams.class);
            StepVerifier.create(s.stream()).expectNextCount(3).verifyComplete();
            StepVerifier.create(s.counted(false)).expectNext(1, 2, 3).verifyComplete();
        });
        assertEquals(List.of("reserve:900", "commit:37", "reserve:900", "commit:60"), server.ledger());
    }

    @Test
    void brokenOrCancelledFluxCommitsThePartialUsage() {
        server = Server.start();
        runner().run(ctx -> {
            Streams s = ctx.getBean(Streams.class);
            StepVerifier.create(s.counted(true)).expectNext(1, 2, 3).expectErrorMessage("stream broke").verify();
            StepVerifier.create(s.counted(false).take(1)).expectNext(1).verifyComplete();
            await().atMost(Duration.ofSeconds(5)).until(() -> server.ledger().size() == 4);
        });
        assertEquals(List.of("reserve:900", "commit:60", "reserve:900", "commit:10"), server.ledger());
    }

    @Test
    void otherPublishersFailTheStartup() {
        server = Server.start();
        new ApplicationContextRunner().withConfiguration(AutoConfigurations.of(CyclesAutoConfiguration.class))
                .withBean(RawPublisher.class).withPropertyValues(server.properties()).run(ctx -> {
                    assertThat(ctx).hasFailed();
                    Throwable t = ctx.getStartupFailure();
                    while (t.getCause() != null && !(t instanceof IllegalStateException)) {
                        t = t.getCause();
                    }
                    assertThat(t.getMessage()).contains("the reactive return type org.reactivestreams.Publisher is not supported");
                });
    }
}
