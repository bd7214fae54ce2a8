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
 * @param evidence the signed evidence of the release, when the server issues evidence
 */
public record ReleaseResult(String status, Amount released, List<Balance> balances, EvidenceRef evidence) {
    static ReleaseResult from(Map<String, Object> m) {
        return new ReleaseResult(Json.str(m, "status"), Amount.from(Json.obj(m, "released")), Balance.list(m, "balances"),
                EvidenceRef.from(Json.obj(m, "cycles_evidence")));
    }
}
