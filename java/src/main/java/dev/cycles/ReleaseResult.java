package dev.cycles;

import dev.cycles.internal.Json;
import java.util.List;
import java.util.Map;

/**
 * The result of {@code releaseReservation}.
 *
 * @param status the reservation's status ({@code RELEASED})
 * @param released what went back to the budget
 * @param balances balances after the release, when reported
 */
public record ReleaseResult(String status, Amount released, List<Balance> balances) {
    static ReleaseResult from(Map<String, Object> m) {
        return new ReleaseResult(Json.str(m, "status"), Amount.from(Json.obj(m, "released")), Balance.list(m, "balances"));
    }
}
