package dev.cycles.spring;

import org.springframework.boot.actuate.health.AbstractHealthIndicator;
import org.springframework.boot.actuate.health.Health;

/**
 * {@code /actuator/health/cycles} on Spring Boot 3 ({@code org.springframework.boot.actuate.health}):
 * UP when the server answers (a balance read of the client's tenant; a 4xx other than 401/403
 * is an answer too), DOWN with the error's kind when it does not or refuses the key; details:
 * the server's base URL and, with the journal on, its pending settlements
 * ({@code journal.pending}) and the oldest one's age ({@code journal.oldestAgeMs}). On Spring
 * Boot 4 the same check is {@link CyclesBoot4HealthIndicator}.
 */
public class CyclesHealthIndicator extends AbstractHealthIndicator {
    private final HealthProbe probe;

    CyclesHealthIndicator(HealthProbe probe) {
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
