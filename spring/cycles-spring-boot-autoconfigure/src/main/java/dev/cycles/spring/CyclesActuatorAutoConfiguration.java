package dev.cycles.spring;

import dev.cycles.CyclesClient;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnProperty;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/**
 * The health indicator ({@code management.health.cycles.enabled}, default on) when Spring Boot
 * Actuator is on the class path, and the meters when Micrometer is: Boot binds the
 * {@link CyclesMetrics} binder to its registries.
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
            return new CyclesHealthIndicator(client, new JournalStatus(properties));
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
