package dev.cycles;

import dev.cycles.internal.Json;
import java.util.List;
import java.util.Map;

/**
 * One reservation: the result of {@code getReservation} and a row of {@code listReservations}
 * (where {@code metadataJson}, {@code committedMetadataJson} and {@code evidence} are present only
 * when asked for through {@link ReservationQuery#withInclude}).
 *
 * @param reservationId the reservation
 * @param status {@code ACTIVE}, {@code COMMITTED}, {@code RELEASED} or {@code EXPIRED}
 * @param idempotencyKey the reservation's idempotency key, when reported
 * @param subject who spends
 * @param action what is paid for
 * @param reserved what was reserved
 * @param committed what was committed, once committed
 * @param createdAtMs creation time (epoch ms)
 * @param expiresAtMs expiry (epoch ms)
 * @param finalizedAtMs when it was committed or released
 * @param scopePath the scope charged
 * @param affectedScopes every scope it touches
 * @param metadataJson the reserve-time metadata as JSON text, when reported
 * @param committedMetadataJson the commit-time metadata as JSON text, when reported
 * @param evidence the evidence of its reserve, commit and release, when reported
 */
public record ReservationDetail(String reservationId, String status, String idempotencyKey, Subject subject, Action action,
        Amount reserved, Amount committed, long createdAtMs, long expiresAtMs, Long finalizedAtMs, String scopePath,
        List<String> affectedScopes, String metadataJson, String committedMetadataJson, ReservationEvidence evidence) {
    @SuppressWarnings("unchecked")
    static ReservationDetail from(Map<String, Object> m) {
        return new ReservationDetail(Json.str(m, "reservation_id"), Json.str(m, "status"), Json.str(m, "idempotency_key"),
                Subject.from(Json.obj(m, "subject")), Action.from(Json.obj(m, "action")), Amount.from(Json.obj(m, "reserved")),
                Amount.from(Json.obj(m, "committed")), Json.lng(m, "created_at_ms"), Json.lng(m, "expires_at_ms"),
                Json.lng(m, "finalized_at_ms"), Json.str(m, "scope_path"),
                (List<String>) (List<?>) Json.list(m, "affected_scopes"), jsonOrNull(m.get("metadata")),
                jsonOrNull(m.get("committed_metadata")), ReservationEvidence.from(Json.obj(m, "evidence")));
    }

    @SuppressWarnings("unchecked")
    static List<ReservationDetail> list(List<Object> rows) {
        List<ReservationDetail> out = new java.util.ArrayList<>();
        if (rows != null) {
            for (Object o : rows) {
                out.add(from((Map<String, Object>) o));
            }
        }
        return out;
    }

    private static String jsonOrNull(Object v) {
        return v == null ? null : Json.write(v);
    }
}
