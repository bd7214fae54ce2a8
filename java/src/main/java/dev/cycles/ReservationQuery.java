package dev.cycles;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A {@code listReservations} query. Null members are unset; timestamps are ISO 8601 text
 * ({@code 2025-01-31T12:00:00Z}).
 *
 * @param idempotencyKey the reservation's creation idempotency key (to recover a lost reservation)
 * @param status {@code ACTIVE}, {@code COMMITTED}, {@code RELEASED} or {@code EXPIRED}
 * @param subject the subject filter (its tenant is validated against the API key's)
 * @param from created at or after
 * @param to created at or before
 * @param expiresFrom expires at or after
 * @param expiresTo expires at or before
 * @param finalizedFrom finalized at or after
 * @param finalizedTo finalized at or before
 * @param sortBy the sort key, e.g. {@code created_at_ms}
 * @param sortDir {@code asc} or {@code desc}
 * @param include projections: {@code metadata}, {@code committed_metadata}, {@code evidence}
 * @param limit the page size (1..200)
 * @param cursor the previous page's {@link ReservationPage#nextCursor}
 */
public record ReservationQuery(String idempotencyKey, String status, Subject subject, String from, String to,
        String expiresFrom, String expiresTo, String finalizedFrom, String finalizedTo, String sortBy, String sortDir,
        List<String> include, Integer limit, String cursor) {
    /**
     * @param subject the subject filter
     * @return the reservations of that subject
     */
    public static ReservationQuery of(Subject subject) {
        return new ReservationQuery(null, null, subject, null, null, null, null, null, null, null, null, null, null, null);
    }

    /**
     * @param tenant the tenant
     * @return the reservations of that tenant
     */
    public static ReservationQuery tenant(String tenant) {
        return of(Subject.tenant(tenant));
    }

    /**
     * @param s the status
     * @return this query with that status filter
     */
    public ReservationQuery withStatus(String s) {
        return new ReservationQuery(idempotencyKey, s, subject, from, to, expiresFrom, expiresTo, finalizedFrom, finalizedTo,
                sortBy, sortDir, include, limit, cursor);
    }

    /**
     * @param key the creation idempotency key
     * @return this query with that key filter
     */
    public ReservationQuery withIdempotencyKey(String key) {
        return new ReservationQuery(key, status, subject, from, to, expiresFrom, expiresTo, finalizedFrom, finalizedTo, sortBy,
                sortDir, include, limit, cursor);
    }

    /**
     * @param by the sort key
     * @param dir {@code asc} or {@code desc}
     * @return this query with that order
     */
    public ReservationQuery withSort(String by, String dir) {
        return new ReservationQuery(idempotencyKey, status, subject, from, to, expiresFrom, expiresTo, finalizedFrom,
                finalizedTo, by, dir, include, limit, cursor);
    }

    /**
     * @param projections {@code metadata}, {@code committed_metadata}, {@code evidence}
     * @return this query with those projections
     */
    public ReservationQuery withInclude(List<String> projections) {
        return new ReservationQuery(idempotencyKey, status, subject, from, to, expiresFrom, expiresTo, finalizedFrom,
                finalizedTo, sortBy, sortDir, List.copyOf(projections), limit, cursor);
    }

    /**
     * @param n the page size
     * @return this query with that page size
     */
    public ReservationQuery withLimit(int n) {
        return new ReservationQuery(idempotencyKey, status, subject, from, to, expiresFrom, expiresTo, finalizedFrom,
                finalizedTo, sortBy, sortDir, include, n, cursor);
    }

    /**
     * @param c the previous page's cursor
     * @return this query for the next page
     */
    public ReservationQuery withCursor(String c) {
        return new ReservationQuery(idempotencyKey, status, subject, from, to, expiresFrom, expiresTo, finalizedFrom,
                finalizedTo, sortBy, sortDir, include, limit, c);
    }

    Map<String, Object> toJson() {
        Map<String, Object> m = new LinkedHashMap<>();
        CreateReservationRequest.put(m, "idempotency_key", idempotencyKey);
        CreateReservationRequest.put(m, "status", status);
        if (subject != null) {
            m.putAll(subject.toJson());
        }
        String[] k = {"from", "to", "expires_from", "expires_to", "finalized_from", "finalized_to", "sort_by", "sort_dir"};
        String[] v = {from, to, expiresFrom, expiresTo, finalizedFrom, finalizedTo, sortBy, sortDir};
        for (int i = 0; i < k.length; i++) {
            CreateReservationRequest.put(m, k[i], v[i]);
        }
        CreateReservationRequest.put(m, "include", include);
        CreateReservationRequest.put(m, "limit", limit);
        CreateReservationRequest.put(m, "cursor", cursor);
        return m;
    }
}
