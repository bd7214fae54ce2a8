package dev.cycles;

import dev.cycles.internal.Json;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * A {@code createReservation} request. Null members are unset (the server's defaults).
 *
 * @param idempotencyKey the same key on every retry of this reservation
 * @param subject who spends (null: the client's tenant)
 * @param action what is paid for
 * @param estimate what to reserve
 * @param ttlMs the lease in milliseconds
 * @param gracePeriodMs the grace period after expiry in milliseconds
 * @param overagePolicy {@code REJECT}, {@code ALLOW_IF_AVAILABLE} or {@code ALLOW_WITH_OVERDRAFT}
 * @param dryRun evaluate without reserving
 * @param metadataJson metadata as a JSON object, sent exactly as written
 */
public record CreateReservationRequest(String idempotencyKey, Subject subject, Action action, Amount estimate, Long ttlMs,
        Long gracePeriodMs, String overagePolicy, Boolean dryRun, String metadataJson) {
    /**
     * @param idempotencyKey the idempotency key
     * @param subject who spends (null: the client's tenant)
     * @param action what is paid for
     * @param estimate what to reserve
     * @return the request with every optional member unset
     */
    public static CreateReservationRequest of(String idempotencyKey, Subject subject, Action action, Amount estimate) {
        return new CreateReservationRequest(idempotencyKey, subject, action, estimate, null, null, null, null, null);
    }

    /**
     * @param ttl the lease in milliseconds
     * @return this request with that lease
     */
    public CreateReservationRequest withTtlMs(long ttl) {
        return new CreateReservationRequest(idempotencyKey, subject, action, estimate, ttl, gracePeriodMs, overagePolicy,
                dryRun, metadataJson);
    }

    String toJson() {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("idempotency_key", idempotencyKey);
        // Left out when null: the bridge makes it the client's tenant.
        put(m, "subject", subject == null ? null : subject.toJson());
        m.put("action", action == null ? null : action.toJson());
        m.put("estimate", estimate == null ? null : estimate.toJson());
        put(m, "ttl_ms", ttlMs);
        put(m, "grace_period_ms", gracePeriodMs);
        put(m, "overage_policy", overagePolicy);
        put(m, "dry_run", dryRun);
        put(m, "metadata", metadataJson == null ? null : new Json.Raw(metadataJson));
        return Json.write(m);
    }

    static void put(Map<String, Object> m, String k, Object v) {
        if (v != null) {
            m.put(k, v);
        }
    }
}
