//! `decide`: a non-persisting budget decision.

use serde::{Deserialize, Serialize};

use super::common::{Action, Amount, Caps, Decision, EvidenceRef, ReasonCode, Subject};
use super::json_object::JsonObject;

/// Body of `POST /v1/decide` (`DecisionRequest`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct DecisionRequest {
    /// Idempotency key (also sent as `X-Idempotency-Key`).
    pub idempotency_key: String,
    /// Who spends.
    pub subject: Subject,
    /// What is guarded.
    pub action: Action,
    /// Estimated amount.
    pub estimate: Amount,
    /// Free-form metadata, sent exactly as given (see [`JsonObject`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<JsonObject>,
}

impl DecisionRequest {
    /// A request with only the required fields set.
    pub fn new(
        idempotency_key: impl Into<String>,
        subject: Subject,
        action: Action,
        estimate: Amount,
    ) -> Self {
        DecisionRequest {
            idempotency_key: idempotency_key.into(),
            subject,
            action,
            estimate,
            metadata: None,
        }
    }
}

/// Success body of `decide` (`DecisionResponse`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct DecisionResponse {
    /// The decision.
    pub decision: Decision,
    /// Present only with ALLOW_WITH_CAPS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caps: Option<Caps>,
    /// Reason for DENY (open string).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason_code: Option<ReasonCode>,
    /// Suggested wait before retrying.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_ms: Option<i64>,
    /// Canonical scopes impacted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affected_scopes: Option<Vec<String>>,
    /// Evidence reference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cycles_evidence: Option<EvidenceRef>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn explicit_nulls_on_optionals_decode_as_none() {
        let d: DecisionResponse = serde_json::from_value(json!({
            "decision": "DENY", "caps": null, "reason_code": "BUDGET_EXCEEDED",
            "retry_after_ms": null, "affected_scopes": null, "cycles_evidence": null
        }))
        .unwrap();
        assert_eq!(d.reason_code.unwrap(), ReasonCode::BUDGET_EXCEEDED);
        assert_eq!((d.caps, d.affected_scopes), (None, None));
        assert!(serde_json::from_value::<DecisionResponse>(json!({"decision": null})).is_err());
    }
}
