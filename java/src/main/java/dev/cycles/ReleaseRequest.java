package dev.cycles;

import java.util.LinkedHashMap;
import java.util.Map;

/**
 * A {@code releaseReservation} request.
 *
 * @param idempotencyKey the same key on every retry of this release
 * @param reason why, or null
 */
public record ReleaseRequest(String idempotencyKey, String reason) {
    /**
     * @param idempotencyKey the idempotency key
     * @return the request without a reason
     */
    public static ReleaseRequest of(String idempotencyKey) {
        return new ReleaseRequest(idempotencyKey, null);
    }

    Map<String, Object> toJson() {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("idempotency_key", idempotencyKey);
        CreateReservationRequest.put(m, "reason", reason);
        return m;
    }
}
