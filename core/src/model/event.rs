//! `createEvent`: post-only accounting without a reservation (also the settlement path
//! after a commit hits `RESERVATION_EXPIRED`).

use serde::{Deserialize, Serialize};

use super::common::{
    Action, Amount, Balance, EventStatus, OveragePolicy, StandardMetrics, Subject,
};
use super::json_object::JsonObject;

/// Body of `POST /v1/events` (`EventCreateRequest`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct EventCreateRequest {
    /// Idempotency key (also sent as `X-Idempotency-Key`).
    pub idempotency_key: String,
    /// Who spent.
    pub subject: Subject,
    /// What was done.
    pub action: Action,
    /// Actual amount.
    pub actual: Amount,
    /// Overage policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overage_policy: Option<OveragePolicy>,
    /// Standard metrics.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics: Option<StandardMetrics>,
    /// Advisory client timestamp (ms); never used by the server for decisions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_time_ms: Option<i64>,
    /// Free-form metadata, sent exactly as given (see [`JsonObject`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<JsonObject>,
}

impl EventCreateRequest {
    /// A request with only the required fields set.
    pub fn new(
        idempotency_key: impl Into<String>,
        subject: Subject,
        action: Action,
        actual: Amount,
    ) -> Self {
        EventCreateRequest {
            idempotency_key: idempotency_key.into(),
            subject,
            action,
            actual,
            overage_policy: None,
            metrics: None,
            client_time_ms: None,
            metadata: None,
        }
    }
}

/// Success (201) body of `createEvent` (`EventCreateResponse`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct EventCreateResponse {
    /// Always APPLIED on a schema-valid success.
    pub status: EventStatus,
    /// Server event id.
    pub event_id: String,
    /// Amount actually applied (when capped).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub charged: Option<Amount>,
    /// Balances snapshot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub balances: Option<Vec<Balance>>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn explicit_nulls_on_optionals_decode_as_none() {
        let e: EventCreateResponse = serde_json::from_value(json!({
            "status": "APPLIED", "event_id": "e", "charged": null, "balances": null
        }))
        .unwrap();
        assert_eq!((e.charged, e.balances), (None, None));
        assert!(serde_json::from_value::<EventCreateResponse>(
            json!({"status": "APPLIED", "event_id": null})
        )
        .is_err());
    }
}
