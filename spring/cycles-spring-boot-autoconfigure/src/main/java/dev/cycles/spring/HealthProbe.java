package dev.cycles.spring;

import dev.cycles.BalanceQuery;
import dev.cycles.CyclesClient;
import dev.cycles.CyclesException;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * The health check itself, free of Spring Boot's types so that the indicator of each Boot line
 * ({@link CyclesHealthIndicator} on Boot 3's health contract, {@link CyclesBoot4HealthIndicator}
 * on Boot 4's) reports the same status and details: UP when the server answers a balance read
 * of the client's tenant (a 4xx other than 401/403 is an answer too), DOWN when it does not or
 * refuses the key, or when the journal cannot be read ({@code journal.error} says why).
 */
final class HealthProbe {
    /** @param up the status @param details in the order they are reported */
    record Result(boolean up, Map<String, Object> details) {}

    private final CyclesClient client;
    private final JournalStatus journal;

    HealthProbe(CyclesClient client, JournalStatus journal) {
        this.client = client;
        this.journal = journal;
    }

    Result check() {
        Map<String, Object> d = new LinkedHashMap<>();
        d.put("baseUrl", client.baseUrl());
        boolean journalReadable = true;
        if (journal.enabled()) {
            try {
                JournalStatus.Depth depth = journal.depth();
                d.put("journal.pending", depth.count());
                if (depth.oldestMs() != null) {
                    d.put("journal.oldestAgeMs", Math.max(0, System.currentTimeMillis() - depth.oldestMs()));
                }
            } catch (CyclesException e) {
                // A journal that cannot be read (its Redis down) cannot take a settlement the
                // server did not: DOWN, with why.
                journalReadable = false;
                d.put("journal.error", String.valueOf(e.getMessage()));
            }
        }
        try {
            client.getBalances(BalanceQuery.tenant(client.tenant()));
            return new Result(journalReadable, d);
        } catch (CyclesException e) {
            int status = e.httpStatusIfAny().orElse(-1);
            d.put("error", e.errorName());
            d.put("message", String.valueOf(e.getMessage()));
            if (status > 0) {
                d.put("httpStatus", status);
            }
            return new Result(journalReadable && status >= 400 && status < 500 && status != 401 && status != 403, d);
        }
    }
}
