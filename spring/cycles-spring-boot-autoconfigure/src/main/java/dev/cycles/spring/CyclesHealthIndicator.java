package dev.cycles.spring;

import dev.cycles.BalanceQuery;
import dev.cycles.CyclesClient;
import dev.cycles.CyclesException;
import org.springframework.boot.actuate.health.AbstractHealthIndicator;
import org.springframework.boot.actuate.health.Health;

/**
 * {@code /actuator/health/cycles}: UP when the server answers (a balance read of the client's
 * tenant; a 4xx other than 401/403 is an answer too), DOWN with the error's kind when it does not
 * or refuses the key; details: the server's base URL and, with the journal on, its pending
 * settlements ({@code journal.pending}) and the oldest one's age ({@code journal.oldestAgeMs}).
 */
public class CyclesHealthIndicator extends AbstractHealthIndicator {
    private final CyclesClient client;
    private final JournalStatus journal;

    CyclesHealthIndicator(CyclesClient client, JournalStatus journal) {
        super("Cycles health check failed");
        this.client = client;
        this.journal = journal;
    }

    @Override
    protected void doHealthCheck(Health.Builder b) {
        b.withDetail("baseUrl", client.baseUrl());
        if (journal.enabled()) {
            JournalStatus.Depth d = journal.depth();
            b.withDetail("journal.pending", d.count());
            if (d.oldestMs() != null) {
                b.withDetail("journal.oldestAgeMs", Math.max(0, System.currentTimeMillis() - d.oldestMs()));
            }
        }
        try {
            client.getBalances(BalanceQuery.tenant(client.tenant()));
            b.up();
        } catch (CyclesException e) {
            int status = e.httpStatusIfAny().orElse(-1);
            b.withDetail("error", e.errorName()).withDetail("message", String.valueOf(e.getMessage()));
            if (status >= 400 && status < 500 && status != 401 && status != 403) {
                b.up().withDetail("httpStatus", status);
            } else {
                if (status > 0) {
                    b.withDetail("httpStatus", status);
                }
                b.down();
            }
        }
    }
}
