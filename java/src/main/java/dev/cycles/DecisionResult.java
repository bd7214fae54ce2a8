package dev.cycles;

import dev.cycles.internal.Json;
import java.util.List;
import java.util.Map;

/**
 * The result of {@code decide}.
 *
 * @param decision {@code ALLOW}, {@code ALLOW_WITH_CAPS} or {@code DENY}
 * @param caps the constraints, with {@code ALLOW_WITH_CAPS} only
 * @param reasonCode why, for a denial (an open set: {@code BUDGET_EXCEEDED}, {@code BUDGET_FROZEN}, ...)
 * @param retryAfterMs when to try again, when the server suggests it
 * @param affectedScopes every scope the spend would touch, when reported
 * @param evidence the signed evidence of this decision, when the server issues evidence
 */
public record DecisionResult(String decision, Caps caps, String reasonCode, Long retryAfterMs, List<String> affectedScopes,
        EvidenceRef evidence) {
    @SuppressWarnings("unchecked")
    static DecisionResult from(Map<String, Object> m) {
        return new DecisionResult(Json.str(m, "decision"), Caps.from(Json.obj(m, "caps")), Json.str(m, "reason_code"),
                Json.lng(m, "retry_after_ms"), (List<String>) (List<?>) Json.list(m, "affected_scopes"),
                EvidenceRef.from(Json.obj(m, "cycles_evidence")));
    }
}
