package dev.cycles;

import dev.cycles.internal.Json;
import java.util.List;
import java.util.Map;

/**
 * The result of {@code createReservation}.
 *
 * @param decision {@code ALLOW}, {@code ALLOW_WITH_CAPS} or {@code DENY}
 * @param reservationId the reservation, when one was made
 * @param reserved what was reserved
 * @param expiresAtMs when the lease expires (server clock, epoch ms)
 * @param remainingTtlMs the lease left when the server answered
 * @param scopePath the scope charged
 * @param affectedScopes every scope the reservation touches
 * @param balances balances after the reservation, when reported
 * @param reasonCode why, for a denial
 * @param retryAfterMs when to try again, for a denial
 * @param evidence the signed evidence of the reservation, when the server issues evidence
 * @param caps the constraints of an {@code ALLOW_WITH_CAPS} decision, else null
 */
public record ReservationResult(String decision, String reservationId, Amount reserved, Long expiresAtMs, Long remainingTtlMs,
        String scopePath, List<String> affectedScopes, List<Balance> balances, String reasonCode, Long retryAfterMs, EvidenceRef evidence,
        Caps caps) {
    @SuppressWarnings("unchecked")
    static ReservationResult from(Map<String, Object> m) {
        return new ReservationResult(Json.str(m, "decision"), Json.str(m, "reservation_id"), Amount.from(Json.obj(m, "reserved")),
                Json.lng(m, "expires_at_ms"), Json.lng(m, "remaining_ttl_ms"), Json.str(m, "scope_path"),
                (List<String>) (List<?>) Json.list(m, "affected_scopes"), Balance.list(m, "balances"),
                Json.str(m, "reason_code"), Json.lng(m, "retry_after_ms"),
                EvidenceRef.from(Json.obj(m, "cycles_evidence")), Caps.from(Json.obj(m, "caps")));
    }
}
