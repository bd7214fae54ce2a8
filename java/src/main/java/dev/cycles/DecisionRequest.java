package dev.cycles;

import dev.cycles.internal.Json;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * A {@code decide} request: would this spend be allowed? Nothing is reserved.
 *
 * @param idempotencyKey the same key on every retry of this decision
 * @param subject who would spend (null: the client's tenant)
 * @param action what would be paid for
 * @param estimate the estimated amount
 * @param metadataJson metadata as a JSON object, sent exactly as written, or null
 */
public record DecisionRequest(String idempotencyKey, Subject subject, Action action, Amount estimate, String metadataJson) {
    /**
     * @param idempotencyKey the idempotency key
     * @param subject who would spend (null: the client's tenant)
     * @param action what would be paid for
     * @param estimate the estimated amount
     * @return the request without metadata
     */
    public static DecisionRequest of(String idempotencyKey, Subject subject, Action action, Amount estimate) {
        return new DecisionRequest(idempotencyKey, subject, action, estimate, null);
    }

    String toJson() {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("idempotency_key", idempotencyKey);
        // Left out when null: the bridge makes it the client's tenant.
        CreateReservationRequest.put(m, "subject", subject == null ? null : subject.toJson());
        m.put("action", action == null ? null : action.toJson());
        m.put("estimate", estimate == null ? null : estimate.toJson());
        CreateReservationRequest.put(m, "metadata", metadataJson == null ? null : new Json.Raw(metadataJson));
        return Json.write(m);
    }
}
