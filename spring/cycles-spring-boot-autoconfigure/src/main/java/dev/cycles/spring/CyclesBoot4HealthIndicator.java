package dev.cycles.spring;

import org.springframework.boot.health.contributor.AbstractHealthIndicator;
import org.springframework.boot.health.contributor.Health;

/**
 * {@code /actuator/health/cycles} on Spring Boot 4, whose health contract moved to
 * {@code org.springframework.boot.health.contributor} (module {@code spring-boot-health}): the
 * check and details of {@link CyclesHealthIndicator}. Compiled against Boot 4's
 * {@code spring-boot-health}, an optional dependency of this jar; only created when that
 * contract is on the class path and Boot 3's is not ({@link CyclesActuatorAutoConfiguration}).
 */
public class CyclesBoot4HealthIndicator extends AbstractHealthIndicator {
    private final HealthProbe probe;

    CyclesBoot4HealthIndicator(HealthProbe probe) {
        super("Cycles health check failed");
        this.probe = probe;
    }

    @Override
    protected void doHealthCheck(Health.Builder b) {
        HealthProbe.Result r = probe.check();
        b.withDetails(r.details());
        if (r.up()) {
            b.up();
        } else {
            b.down();
        }
    }
}
