//! CyclesEvidence: content-addressed, Ed25519-signed envelopes and the JWKS that publishes
//! the verification key. The key comes from a fixed seed so envelopes are verifiable across
//! restarts and in cross-language tests.

use base64::Engine;
use ed25519_dalek::{Signer as _, SigningKey};
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

/// Fixed signing seed: this is a test server, the key is public knowledge by design.
const SEED: [u8; 32] = *b"cycles-local-server-evidence-key";
/// Key id served in the JWKS.
pub(crate) const KID: &str = "cycles-local-1";

/// Compact JSON with object keys sorted recursively (JCS for the integer-only values we emit).
pub fn canonical_json(v: &Value) -> String {
    let mut out = String::new();
    write_canonical(v, &mut out);
    out
}

fn write_canonical(v: &Value, out: &mut String) {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String((*k).clone()).to_string());
                out.push(':');
                write_canonical(&m[*k], out);
            }
            out.push('}');
        }
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(x, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// Signs envelopes and describes its key.
pub(crate) struct EvidenceSigner {
    key: SigningKey,
    server_id: String,
    nbf_ms: i64,
}

impl EvidenceSigner {
    pub fn new(server_id: String, nbf_ms: i64) -> Self {
        EvidenceSigner {
            key: SigningKey::from_bytes(&SEED),
            server_id,
            nbf_ms,
        }
    }

    /// Hex of the raw public key (the v0.1 raw-hex `signer_did`).
    pub fn signer_did(&self) -> String {
        hex::encode(self.key.verifying_key().as_bytes())
    }

    /// `{server_id}/evidence/{id}`.
    pub fn url(&self, id: &str) -> String {
        format!("{}/evidence/{}", self.server_id, id)
    }

    /// Build and sign an envelope; returns (evidence_id, envelope).
    pub fn issue(
        &self,
        artifact: &str,
        payload: Value,
        issued_at_ms: i64,
        trace_id: &str,
    ) -> (String, Value) {
        let mut p = Map::new();
        p.insert(artifact.to_string(), payload);
        let mut env = json!({
            "schema_version": "cycles-evidence/v0.1",
            "artifact_type": artifact,
            "server_id": self.server_id,
            "signer_did": self.signer_did(),
            "issued_at_ms": issued_at_ms,
            "trace_id": trace_id,
            "payload": Value::Object(p),
            "evidence_id": "",
            "signature": "",
        });
        let bytes = canonical_json(&env);
        let id = hex::encode(Sha256::digest(bytes.as_bytes()));
        let sig = hex::encode(self.key.sign(bytes.as_bytes()).to_bytes());
        env["evidence_id"] = Value::String(id.clone());
        env["signature"] = Value::String(sig);
        (id, env)
    }

    pub fn jwks(&self) -> Value {
        let x = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .encode(self.key.verifying_key().as_bytes());
        json!({"keys": [{
            "kty": "OKP", "crv": "Ed25519", "alg": "EdDSA", "x": x, "kid": KID,
            "cycles_nbf_ms": self.nbf_ms, "cycles_exp_ms": null, "status": "active"
        }]})
    }
}
