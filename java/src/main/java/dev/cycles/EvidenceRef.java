package dev.cycles;

import dev.cycles.internal.Json;
import java.util.Map;

/**
 * A reference to a signed CyclesEvidence envelope the server issued for a decision, a
 * reservation, a settlement or an error; fetch it with {@link CyclesClient#getEvidence}.
 *
 * @param evidenceId the envelope's content id (sha256, 64 lowercase hex)
 * @param url the envelope's absolute URL
 */
public record EvidenceRef(String evidenceId, String url) {
    static EvidenceRef from(Map<String, Object> m) {
        return m == null ? null : new EvidenceRef(Json.str(m, "evidence_id"), Json.str(m, "cycles_evidence_url"));
    }
}
