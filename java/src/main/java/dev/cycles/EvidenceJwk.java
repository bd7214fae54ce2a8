package dev.cycles;

import dev.cycles.internal.Json;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * One Ed25519 signer key with its validity window.
 *
 * @param kty {@code OKP}
 * @param crv {@code Ed25519}
 * @param alg {@code EdDSA}, when present
 * @param x the public key (base64url)
 * @param kid the key id
 * @param notBeforeMs valid from (epoch ms, inclusive)
 * @param expiresMs valid until (epoch ms, exclusive); null: open-ended
 * @param status the advisory status ({@code active}, {@code retired}), when present
 */
public record EvidenceJwk(String kty, String crv, String alg, String x, String kid, long notBeforeMs, Long expiresMs,
        String status) {
    @SuppressWarnings("unchecked")
    static List<EvidenceJwk> list(List<Object> keys) {
        List<EvidenceJwk> out = new ArrayList<>();
        if (keys != null) {
            for (Object o : keys) {
                Map<String, Object> m = (Map<String, Object>) o;
                out.add(new EvidenceJwk(Json.str(m, "kty"), Json.str(m, "crv"), Json.str(m, "alg"), Json.str(m, "x"),
                        Json.str(m, "kid"), Json.lng(m, "cycles_nbf_ms"), Json.lng(m, "cycles_exp_ms"), Json.str(m, "status")));
            }
        }
        return out;
    }
}
