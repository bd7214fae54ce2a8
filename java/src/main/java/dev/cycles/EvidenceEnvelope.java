package dev.cycles;

import dev.cycles.internal.Json;
import java.util.Map;

/**
 * A signed CyclesEvidence envelope ({@code getEvidence}). The SDK does not verify the
 * signature; {@code json} is the envelope as core decoded it (every member, also unknown ones),
 * for a verifier.
 *
 * @param schemaVersion the schema version, e.g. {@code cycles-evidence/v0.1}
 * @param artifactType {@code decide}, {@code reserve}, {@code commit}, {@code release} or {@code error}
 * @param serverId the issuing server's URI
 * @param signerDid the signer key's identifier
 * @param issuedAtMs issue time (epoch ms)
 * @param traceId the trace id, when present
 * @param payloadJson the attested payload as JSON text
 * @param evidenceId the content id (sha256)
 * @param signature the Ed25519 signature (hex)
 * @param json the whole envelope as JSON text
 */
public record EvidenceEnvelope(String schemaVersion, String artifactType, String serverId, String signerDid, long issuedAtMs,
        String traceId, String payloadJson, String evidenceId, String signature, String json) {
    static EvidenceEnvelope from(Map<String, Object> m) {
        return new EvidenceEnvelope(Json.str(m, "schema_version"), Json.str(m, "artifact_type"), Json.str(m, "server_id"),
                Json.str(m, "signer_did"), Json.lng(m, "issued_at_ms"), Json.str(m, "trace_id"), Json.write(m.get("payload")),
                Json.str(m, "evidence_id"), Json.str(m, "signature"), Json.write(m));
    }
}
