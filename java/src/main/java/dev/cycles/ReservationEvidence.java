package dev.cycles;

import dev.cycles.internal.Json;
import java.util.Map;

/**
 * The evidence of one reservation's operations. Members the server did not report are null.
 *
 * @param reserve the evidence of the reserve
 * @param commit the evidence of the commit (committed reservations)
 * @param release the evidence of the release (released reservations)
 */
public record ReservationEvidence(EvidenceRef reserve, EvidenceRef commit, EvidenceRef release) {
    static ReservationEvidence from(Map<String, Object> m) {
        return m == null ? null : new ReservationEvidence(EvidenceRef.from(Json.obj(m, "reserve")),
                EvidenceRef.from(Json.obj(m, "commit")), EvidenceRef.from(Json.obj(m, "release")));
    }
}
