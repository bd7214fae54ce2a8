package dev.cycles.spring;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/** A bad {@code @Cycles} fails the startup, naming the method, the attribute and the expression; no call needed. */
class CyclesStartupTest {
    private static Server server;

    @BeforeAll
    static void start() {
        server = Server.start();
    }

    @AfterAll
    static void stop() {
        server.close();
    }

    public static class BadSyntax {
        @Cycles(estimate = "#tokens *")
        public String call(int tokens) {
            return "";
        }
    }

    public static class UnknownParameter {
        @Cycles(estimate = "#tokns * 10")
        public String call(int tokens) {
            return "";
        }
    }

    public static class ResultInEstimate {
        @Cycles(estimate = "#result.length()")
        public String call(int tokens) {
            return "";
        }
    }

    public static class BadActualSyntax {
        @Cycles(estimate = "10", actual = "#result.(")
        public String call(int tokens) {
            return "";
        }
    }

    public static class BadSubjectExpression {
        @Cycles(estimate = "10", tenant = "#customer.tenant")
        public String call(int tokens) {
            return "";
        }
    }

    public static class DryRun {
        @Cycles(estimate = "10", dryRun = true)
        public String call() {
            return "";
        }
    }

    public static class DryRunAsync {
        @Cycles(estimate = "10", dryRun = true)
        public java.util.concurrent.CompletableFuture<Object> call() {
            return null;
        }
    }

    public static class DryRunMono {
        @Cycles(estimate = "10", dryRun = true)
        public reactor.core.publisher.Mono<Object> call() {
            return null;
        }
    }

    public static class BadDimension {
        @Cycles(estimate = "10", dimensions = {"cost_center"})
        public String call() {
            return "";
        }
    }

    public static class TwiceDimension {
        @Cycles(estimate = "10", dimensions = {"a=1", "a=2"})
        public String call() {
            return "";
        }
    }

    public static class BadDimensionExpression {
        @Cycles(estimate = "10", dimensions = {"project=#projct"})
        public String call(String project) {
            return "";
        }
    }

    public static class BlankTag {
        @Cycles(estimate = "10", actionTags = {"prod", " "})
        public String call() {
            return "";
        }
    }

    public static class BadPolicy {
        @Cycles(estimate = "10", heartbeatPolicy = "SOMETIMES")
        public String call() {
            return "";
        }
    }

    public static class NoEstimate {
        @Cycles(actual = "5")
        public String call() {
            return "";
        }
    }

    public static class Good {
        @Cycles(estimate = "#p0 + #a0 + #args[0] + #tokens", actual = "#result.length() + #target.hashCode() * 0")
        public String call(int tokens) {
            return "abc";
        }
    }

    private static void fails(Class<?> bean, String... message) {
        new ApplicationContextRunner().withConfiguration(AutoConfigurations.of(CyclesAutoConfiguration.class))
                .withPropertyValues(server.properties()).withBean(bean).run(ctx -> {
                    assertThat(ctx).hasFailed();
                    Throwable t = ctx.getStartupFailure();
                    while (t.getCause() != null && !(t instanceof IllegalStateException)) {
                        t = t.getCause();
                    }
                    assertThat(t).isInstanceOf(IllegalStateException.class);
                    assertThat(t.getMessage()).contains("@Cycles on " + bean.getName() + ".call").contains(message);
                });
    }

    @Test
    void invalidSpelFailsTheStartup() {
        fails(BadSyntax.class, "estimate \"#tokens *\" is not a SpEL expression");
        fails(BadActualSyntax.class, "actual \"#result.(\" is not a SpEL expression");
    }

    @Test
    void unknownVariablesFailTheStartup() {
        fails(UnknownParameter.class, "estimate \"#tokns * 10\" uses #tokns, which is not a parameter of the method");
        fails(ResultInEstimate.class, "uses #result", "in actual and metadata only");
        fails(BadSubjectExpression.class, "tenant \"#customer.tenant\" uses #customer");
    }

    @Test
    void unsupportedAndMissingAttributesFailTheStartup() {
        fails(DryRun.class, "DryRun.call: dryRun needs a return type that holds a dev.cycles.spring.DryRunResult, not java.lang.String");
        fails(DryRunAsync.class, "DryRunAsync.call: dryRun is not supported on the async return type java.util.concurrent.CompletableFuture");
        fails(DryRunMono.class, "DryRunMono.call: dryRun is not supported on the async return type reactor.core.publisher.Mono");
        fails(BadDimension.class, "dimensions entry \"cost_center\" is not key=value");
        fails(TwiceDimension.class, "dimensions has the key \"a\" twice");
        fails(BadDimensionExpression.class, "dimensions \"#projct\" uses #projct");
        fails(BlankTag.class, "actionTags has a blank tag");
        fails(BadPolicy.class, "heartbeatPolicy \"SOMETIMES\" is not WARN, FAIL_ON_FINALIZE or CANCEL");
        fails(NoEstimate.class, "an estimate is required");
    }

    @Test
    void everyVariableFormStarts() {
        new ApplicationContextRunner().withConfiguration(AutoConfigurations.of(CyclesAutoConfiguration.class))
                .withPropertyValues(server.properties()).withBean(Good.class).run(ctx -> {
                    assertThat(ctx).hasNotFailed();
                    assertThat(ctx.getBean(Good.class).call(2)).isEqualTo("abc");
                });
        assertThat(server.ledger()).endsWith("reserve:8", "commit:3");
    }
}
