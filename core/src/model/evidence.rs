//! Evidence consumer surface: signed envelopes and the signer key set. These schemas allow
//! extra members (`additionalProperties: true`), so every struct keeps them in `extra`,
//! which lets a verifier see the envelope exactly as served.

use serde::{Deserialize, Serialize};

use super::common::Metadata;

/// A signed CyclesEvidence envelope (`CyclesEvidenceEnvelope`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct EvidenceEnvelope {
    /// Schema version, `cycles-evidence/v0.1`.
    pub schema_version: String,
    /// decide, reserve, commit, release or error.
    pub artifact_type: String,
    /// Stable URI of the issuing server (includes `/v1`).
    pub server_id: String,
    /// Signer key identifier.
    pub signer_did: String,
    /// Issue time (epoch ms).
    pub issued_at_ms: i64,
    /// Trace id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_id: Option<String>,
    /// Attested payload (one key matching `artifact_type`).
    pub payload: serde_json::Value,
    /// sha256 content id.
    pub evidence_id: String,
    /// Ed25519 signature (hex).
    pub signature: String,
    /// Any further members, kept verbatim.
    #[serde(flatten)]
    pub extra: Metadata,
}

/// The signer key set (`CyclesEvidenceJwks`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct EvidenceJwks {
    /// The keys, including retired ones.
    pub keys: Vec<EvidenceJwk>,
    /// Any further members, kept verbatim.
    #[serde(flatten)]
    pub extra: Metadata,
}

/// One Ed25519 key with a validity window (`CyclesEvidenceJwk`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct EvidenceJwk {
    /// `OKP`.
    pub kty: String,
    /// `Ed25519`.
    pub crv: String,
    /// `EdDSA` when present.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alg: Option<String>,
    /// base64url public key.
    pub x: String,
    /// Key id.
    pub kid: String,
    /// Valid from (epoch ms, inclusive).
    pub cycles_nbf_ms: i64,
    /// Valid until (epoch ms, exclusive); absent or null means open-ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cycles_exp_ms: Option<i64>,
    /// Advisory status (`active` / `retired`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// Any further members, kept verbatim.
    #[serde(flatten)]
    pub extra: Metadata,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn explicit_nulls_on_optionals_decode_as_none() {
        let k: EvidenceJwks = serde_json::from_value(json!({"keys": [{
            "kty": "OKP", "crv": "Ed25519", "alg": null, "x": "x", "kid": "k",
            "cycles_nbf_ms": 0, "cycles_exp_ms": null, "status": null
        }]}))
        .unwrap();
        assert_eq!(
            (k.keys[0].alg.clone(), k.keys[0].cycles_exp_ms),
            (None, None)
        );
        let e: EvidenceEnvelope = serde_json::from_value(json!({
            "schema_version": "v", "artifact_type": "reserve", "server_id": "s",
            "signer_did": "d", "issued_at_ms": 1, "trace_id": null, "payload": {},
            "evidence_id": "e", "signature": "sig"
        }))
        .unwrap();
        assert_eq!(e.trace_id, None);
    }
}
