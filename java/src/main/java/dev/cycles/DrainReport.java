package dev.cycles;

import dev.cycles.internal.Json;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * What a flush, drain or close did with pending settlements.
 *
 * @param settled the settlements replayed, each with its reservation id
 * @param remaining reservation ids still pending (journaled for a later replay)
 * @param quarantined records set aside as unusable
 * @param json the whole report as JSON
 */
public record DrainReport(List<Settled> settled, List<String> remaining, int quarantined, String json) {
    /**
     * One replayed settlement.
     *
     * @param reservationId the reservation
     * @param settlement what became of it
     */
    public record Settled(String reservationId, Settlement settlement) {}

    @SuppressWarnings("unchecked")
    static DrainReport parse(String json) {
        if (json == null) {
            return new DrainReport(List.of(), List.of(), 0, null);
        }
        Map<String, Object> m = Json.object(json);
        List<Settled> s = new ArrayList<>();
        for (Object o : Json.list(m, "outcomes")) {
            Map<String, Object> e = (Map<String, Object>) o;
            s.add(new Settled(Json.str(e, "reservation_id"), Settlement.from(Json.obj(e, "settlement"))));
        }
        List<String> r = new ArrayList<>();
        for (Object o : Json.list(m, "remaining")) {
            r.add(Json.str((Map<String, Object>) o, "reservation_id"));
        }
        List<Object> q = Json.list(m, "quarantined");
        return new DrainReport(s, r, q == null ? 0 : q.size(), json);
    }
}
