package dev.cycles.spring;

import static org.junit.jupiter.api.Assertions.assertNotNull;

import java.util.Map;
import org.springframework.boot.actuate.autoconfigure.health.HealthContributorAutoConfiguration;
import org.springframework.boot.actuate.autoconfigure.health.HealthEndpointAutoConfiguration;
import org.springframework.boot.actuate.autoconfigure.metrics.CompositeMeterRegistryAutoConfiguration;
import org.springframework.boot.actuate.autoconfigure.metrics.MetricsAutoConfiguration;
import org.springframework.boot.actuate.autoconfigure.metrics.export.simple.SimpleMetricsExportAutoConfiguration;
import org.springframework.boot.actuate.health.Health;
import org.springframework.boot.actuate.health.HealthComponent;
import org.springframework.boot.actuate.health.HealthEndpoint;
import org.springframework.context.ApplicationContext;

/**
 * Spring Boot 3's Actuator types for {@link CyclesActuatorTest}; spring/boot4-check compiles the
 * same test with its Boot 4 counterpart (Boot 4 moved health and metrics to other packages).
 */
final class BootActuator {
    /** Actuator's own metrics and health endpoint auto-configurations. */
    static final Class<?>[] AUTO_CONFIGURATIONS = {MetricsAutoConfiguration.class, SimpleMetricsExportAutoConfiguration.class,
            CompositeMeterRegistryAutoConfiguration.class, HealthContributorAutoConfiguration.class,
            HealthEndpointAutoConfiguration.class};

    /** The indicator this Boot line gets. */
    static final Class<?> INDICATOR = CyclesHealthIndicator.class;

    /** A health component's status code and details. */
    record View(String status, Map<String, Object> details) {}

    private BootActuator() {}

    /** {@code /actuator/health/cycles}, read through Boot's health endpoint. */
    static View health(ApplicationContext ctx) {
        HealthComponent c = ctx.getBean(HealthEndpoint.class).healthForPath("cycles");
        assertNotNull(c, "the health endpoint has no component cycles");
        Health h = (Health) c;
        return new View(h.getStatus().getCode(), h.getDetails());
    }
}
