package dev.cycles;

import dev.cycles.internal.Json;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * A {@code commitReservation} request.
 *
 * @param idempotencyKey the same key on every retry of this commit
 * @param actual what the work really cost
 * @param metricsJson standard metrics as a JSON object, or null
 * @param metadataJson metadata as a JSON object (exact), or null
 */
public record CommitRequest(String idempotencyKey, Amount actual, String metricsJson, String metadataJson) {
    /**
     * @param idempotencyKey the idempotency key
     * @param actual what the work really cost
     * @return the request
     */
    public static CommitRequest of(String idempotencyKey, Amount actual) {
        return new CommitRequest(idempotencyKey, actual, null, null);
    }

    Map<String, Object> toJson() {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("idempotency_key", idempotencyKey);
        m.put("actual", actual == null ? null : actual.toJson());
        CreateReservationRequest.put(m, "metrics", metricsJson == null ? null : new Json.Raw(metricsJson));
        CreateReservationRequest.put(m, "metadata", metadataJson == null ? null : new Json.Raw(metadataJson));
        return m;
    }
}
