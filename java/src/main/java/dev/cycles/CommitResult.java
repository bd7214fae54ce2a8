package dev.cycles;

import dev.cycles.internal.Json;
import java.util.List;
import java.util.Map;

/**
 * The result of {@code commitReservation}.
 *
 * @param status the reservation's status ({@code COMMITTED})
 * @param charged what the server applied
 * @param released what went back to the budget, when reported
 * @param balances balances after the commit, when reported
 * @param evidence the signed evidence of the commit, when the server issues evidence
 */
public record CommitResult(String status, Amount charged, Amount released, List<Balance> balances, EvidenceRef evidence) {
    static CommitResult from(Map<String, Object> m) {
        return new CommitResult(Json.str(m, "status"), Amount.from(Json.obj(m, "charged")), Amount.from(Json.obj(m, "released")),
                Balance.list(m, "balances"), EvidenceRef.from(Json.obj(m, "cycles_evidence")));
    }
}
