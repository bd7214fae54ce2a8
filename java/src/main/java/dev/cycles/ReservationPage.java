package dev.cycles;

import dev.cycles.internal.Json;
import java.util.List;
import java.util.Map;

/**
 * The result of {@code listReservations}: one page.
 *
 * @param reservations the rows of this page
 * @param nextCursor the cursor of the next page (pass it to {@link ReservationQuery#withCursor}), when there is one
 * @param hasMore whether more rows may follow, when reported
 */
public record ReservationPage(List<ReservationDetail> reservations, String nextCursor, Boolean hasMore) {
    static ReservationPage from(Map<String, Object> m) {
        return new ReservationPage(ReservationDetail.list(Json.list(m, "reservations")), Json.str(m, "next_cursor"),
                Json.bool(m, "has_more"));
    }
}
