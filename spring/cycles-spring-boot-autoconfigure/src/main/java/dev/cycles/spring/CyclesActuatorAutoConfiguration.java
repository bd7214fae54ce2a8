package dev.cycles.spring;

import dev.cycles.CyclesClient;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnProperty;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/**
 * The health indicator ({@code management.health.cycles.enabled}, default on) when Spring Boot
 * Actuator is on the class path, and the meters when Micrometer is: Boot binds the
 * {@link CyclesMetrics} binder to its registries. The indicator is one bean,
 * {@code cyclesHealthIndicator}, of the health contract of the Boot line present: Boot 3's
 * ({@code org.springframework.boot.actuate.health}, {@link CyclesHealthIndicator}) or Boot 4's
 * ({@code org.springframework.boot.health.contributor}, {@link CyclesBoot4HealthIndicator}); each
 * nested configuration names its classes by string, so the other line's never load.
 */
@AutoConfiguration(after = CyclesAutoConfiguration.class)
@ConditionalOnBean(CyclesClient.class)
public class CyclesActuatorAutoConfiguration {
    @Configuration(proxyBeanMethods = false)
    @ConditionalOnClass(name = "org.springframework.boot.actuate.health.HealthIndicator")
    @ConditionalOnProperty(name = "management.health.cycles.enabled", matchIfMissing = true)
    static class Health {
        @Bean
        @ConditionalOnMissingBean(name = "cyclesHealthIndicator")
        CyclesHealthIndicator cyclesHealthIndicator(CyclesClient client, CyclesProperties properties) {
            return new CyclesHealthIndicator(new HealthProbe(client, new JournalStatus(properties)));
        }
    }

    @Configuration(proxyBeanMethods = false)
    @ConditionalOnClass(name = "org.springframework.boot.health.contributor.HealthIndicator")
    @ConditionalOnMissingClass("org.springframework.boot.actuate.health.HealthIndicator")
    @ConditionalOnProperty(name = "management.health.cycles.enabled", matchIfMissing = true)
    static class Boot4Health {
        @Bean
        @ConditionalOnMissingBean(name = "cyclesHealthIndicator")
        CyclesBoot4HealthIndicator cyclesHealthIndicator(CyclesClient client, CyclesProperties properties) {
            return new CyclesBoot4HealthIndicator(new HealthProbe(client, new JournalStatus(properties)));
        }
    }

    @Configuration(proxyBeanMethods = false)
    @ConditionalOnClass(name = "io.micrometer.core.instrument.MeterRegistry")
    static class Metrics {
        @Bean
        @ConditionalOnMissingBean
        CyclesMetrics cyclesMetrics(CyclesClient client, CyclesProperties properties) {
            return new CyclesMetrics(client, new JournalStatus(properties));
        }
    }
}
