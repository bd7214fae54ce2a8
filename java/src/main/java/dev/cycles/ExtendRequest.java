package dev.cycles;

import dev.cycles.internal.Json;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * An {@code extendReservation} request (the guarded lifecycle's heartbeat sends these itself).
 *
 * @param idempotencyKey the same key on every retry of this extension
 * @param extendByMs how far to move the expiry, in milliseconds
 * @param metadataJson metadata as a JSON object (exact), or null
 */
public record ExtendRequest(String idempotencyKey, long extendByMs, String metadataJson) {
    /**
     * @param idempotencyKey the idempotency key
     * @param extendByMs milliseconds to extend by
     * @return the request
     */
    public static ExtendRequest of(String idempotencyKey, long extendByMs) {
        return new ExtendRequest(idempotencyKey, extendByMs, null);
    }

    Map<String, Object> toJson() {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("idempotency_key", idempotencyKey);
        m.put("extend_by_ms", extendByMs);
        CreateReservationRequest.put(m, "metadata", metadataJson == null ? null : new Json.Raw(metadataJson));
        return m;
    }
}
