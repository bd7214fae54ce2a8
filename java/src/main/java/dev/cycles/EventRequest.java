package dev.cycles;

import dev.cycles.internal.Json;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * A {@code createEvent} request: spend to account for without a reservation. Null members are
 * unset (the server's defaults).
 *
 * @param idempotencyKey the same key on every retry of this event
 * @param subject who spent (null: the client's tenant)
 * @param action what was done
 * @param actual what it cost
 * @param overagePolicy {@code REJECT}, {@code ALLOW_IF_AVAILABLE} or {@code ALLOW_WITH_OVERDRAFT}
 * @param metricsJson standard metrics as a JSON object, or null
 * @param clientTimeMs an advisory client timestamp (epoch ms), or null
 * @param metadataJson metadata as a JSON object, sent exactly as written, or null
 */
public record EventRequest(String idempotencyKey, Subject subject, Action action, Amount actual, String overagePolicy,
        String metricsJson, Long clientTimeMs, String metadataJson) {
    /**
     * @param idempotencyKey the idempotency key
     * @param subject who spent (null: the client's tenant)
     * @param action what was done
     * @param actual what it cost
     * @return the request with every optional member unset
     */
    public static EventRequest of(String idempotencyKey, Subject subject, Action action, Amount actual) {
        return new EventRequest(idempotencyKey, subject, action, actual, null, null, null, null);
    }

    /**
     * @param policy {@code REJECT}, {@code ALLOW_IF_AVAILABLE} or {@code ALLOW_WITH_OVERDRAFT}
     * @return this request with that overage policy
     */
    public EventRequest withOveragePolicy(String policy) {
        return new EventRequest(idempotencyKey, subject, action, actual, policy, metricsJson, clientTimeMs, metadataJson);
    }

    /**
     * @param json standard metrics as a JSON object
     * @return this request with those metrics
     */
    public EventRequest withMetricsJson(String json) {
        return new EventRequest(idempotencyKey, subject, action, actual, overagePolicy, json, clientTimeMs, metadataJson);
    }

    String toJson() {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("idempotency_key", idempotencyKey);
        // Left out when null: the bridge makes it the client's tenant.
        CreateReservationRequest.put(m, "subject", subject == null ? null : subject.toJson());
        m.put("action", action == null ? null : action.toJson());
        m.put("actual", actual == null ? null : actual.toJson());
        CreateReservationRequest.put(m, "overage_policy", overagePolicy);
        CreateReservationRequest.put(m, "metrics", metricsJson == null ? null : new Json.Raw(metricsJson));
        CreateReservationRequest.put(m, "client_time_ms", clientTimeMs);
        CreateReservationRequest.put(m, "metadata", metadataJson == null ? null : new Json.Raw(metadataJson));
        return Json.write(m);
    }
}
