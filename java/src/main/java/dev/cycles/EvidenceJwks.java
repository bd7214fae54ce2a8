package dev.cycles;

import dev.cycles.internal.Json;
import java.util.List;
import java.util.Map;

/**
 * The server's evidence signer key set ({@code getEvidenceJwks}), retired keys included.
 *
 * @param keys the keys
 * @param json the whole key set as JSON text (every member, also unknown ones)
 */
public record EvidenceJwks(List<EvidenceJwk> keys, String json) {
    static EvidenceJwks from(Map<String, Object> m) {
        return new EvidenceJwks(EvidenceJwk.list(Json.list(m, "keys")), Json.write(m));
    }
}
