package dev.cycles;

import dev.cycles.internal.Json;
import java.util.List;
import java.util.Map;

/**
 * The result of {@code extendReservation}.
 *
 * @param status the reservation's status ({@code ACTIVE})
 * @param expiresAtMs the new expiry (server clock, epoch ms)
 * @param remainingTtlMs the lease left when the server answered, when reported
 * @param balances balances, when reported
 */
public record ExtendResult(String status, long expiresAtMs, Long remainingTtlMs, List<Balance> balances) {
    static ExtendResult from(Map<String, Object> m) {
        return new ExtendResult(Json.str(m, "status"), Json.lng(m, "expires_at_ms"), Json.lng(m, "remaining_ttl_ms"),
                Balance.list(m, "balances"));
    }
}
