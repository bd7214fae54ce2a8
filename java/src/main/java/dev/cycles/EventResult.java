package dev.cycles;

import dev.cycles.internal.Json;
import java.util.List;
import java.util.Map;

/**
 * The result of {@code createEvent}.
 *
 * @param status {@code APPLIED}
 * @param eventId the server's event id
 * @param charged what was applied, when the server reports it (e.g. capped)
 * @param balances balances after the event, when reported (empty otherwise)
 */
public record EventResult(String status, String eventId, Amount charged, List<Balance> balances) {
    static EventResult from(Map<String, Object> m) {
        return new EventResult(Json.str(m, "status"), Json.str(m, "event_id"), Amount.from(Json.obj(m, "charged")),
                Balance.list(m, "balances"));
    }
}
