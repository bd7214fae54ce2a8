package dev.cycles.spring;

import static org.junit.jupiter.api.Assertions.assertNotNull;

import java.util.Map;
import org.springframework.boot.health.actuate.endpoint.HealthDescriptor;
import org.springframework.boot.health.actuate.endpoint.HealthEndpoint;
import org.springframework.boot.health.actuate.endpoint.IndicatedHealthDescriptor;
import org.springframework.boot.health.autoconfigure.actuate.endpoint.HealthEndpointAutoConfiguration;
import org.springframework.boot.health.autoconfigure.contributor.HealthContributorAutoConfiguration;
import org.springframework.boot.health.autoconfigure.registry.HealthContributorRegistryAutoConfiguration;
import org.springframework.boot.micrometer.metrics.autoconfigure.CompositeMeterRegistryAutoConfiguration;
import org.springframework.boot.micrometer.metrics.autoconfigure.MetricsAutoConfiguration;
import org.springframework.boot.micrometer.metrics.autoconfigure.export.simple.SimpleMetricsExportAutoConfiguration;
import org.springframework.context.ApplicationContext;

/**
 * Spring Boot 4's Actuator types for {@link CyclesActuatorTest} (the auto-configuration's test,
 * compiled here against Boot 4.0.7): health in {@code spring-boot-health}, metrics in
 * {@code spring-boot-micrometer-metrics}.
 */
final class BootActuator {
    /** Actuator's own metrics and health endpoint auto-configurations. */
    static final Class<?>[] AUTO_CONFIGURATIONS = {MetricsAutoConfiguration.class, SimpleMetricsExportAutoConfiguration.class,
            CompositeMeterRegistryAutoConfiguration.class, HealthContributorAutoConfiguration.class,
            HealthContributorRegistryAutoConfiguration.class, HealthEndpointAutoConfiguration.class};

    /** The indicator this Boot line gets. */
    static final Class<?> INDICATOR = CyclesBoot4HealthIndicator.class;

    /** A health descriptor's status code and details. */
    record View(String status, Map<String, Object> details) {}

    private BootActuator() {}

    /** {@code /actuator/health/cycles}, read through Boot's health endpoint. */
    static View health(ApplicationContext ctx) {
        HealthDescriptor d = ctx.getBean(HealthEndpoint.class).healthForPath("cycles");
        assertNotNull(d, "the health endpoint has no component cycles");
        IndicatedHealthDescriptor h = (IndicatedHealthDescriptor) d;
        return new View(h.getStatus().getCode(), h.getDetails());
    }
}
