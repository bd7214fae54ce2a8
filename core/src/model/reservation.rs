//! Reservation operations: create, commit, release, extend, get (detail) and list rows.

use serde::{Deserialize, Serialize};

use super::common::{
    Action, Amount, Balance, Caps, Decision, EvidenceRef, Metadata, OveragePolicy, ReasonCode,
    ReservationEvidence, ReservationStatus, StandardMetrics, Subject,
};
use super::json_object::JsonObject;

/// Body of `POST /v1/reservations` (`ReservationCreateRequest`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ReservationCreateRequest {
    /// Idempotency key (also sent as `X-Idempotency-Key`).
    pub idempotency_key: String,
    /// Who spends.
    pub subject: Subject,
    /// What is guarded.
    pub action: Action,
    /// Amount to reserve.
    pub estimate: Amount,
    /// Requested TTL in ms (1000..=86_400_000, server default 60_000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_ms: Option<i64>,
    /// Grace after expiry for in-flight commits in ms (0..=60_000, server default 5000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grace_period_ms: Option<i64>,
    /// Overage policy applied at commit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overage_policy: Option<OveragePolicy>,
    /// Shadow-mode evaluation: nothing is persisted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dry_run: Option<bool>,
    /// Reserve-time metadata, sent exactly as given (see [`JsonObject`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<JsonObject>,
}

impl ReservationCreateRequest {
    /// A request with only the required fields set.
    pub fn new(
        idempotency_key: impl Into<String>,
        subject: Subject,
        action: Action,
        estimate: Amount,
    ) -> Self {
        ReservationCreateRequest {
            idempotency_key: idempotency_key.into(),
            subject,
            action,
            estimate,
            ttl_ms: None,
            grace_period_ms: None,
            overage_policy: None,
            dry_run: None,
            metadata: None,
        }
    }
}

/// Success body of `createReservation` (`ReservationCreateResponse`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ReservationCreateResponse {
    /// ALLOW, ALLOW_WITH_CAPS or (dry run only) DENY.
    pub decision: Decision,
    /// Present for a live (non dry-run) allowed reservation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reservation_id: Option<String>,
    /// Amount reserved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reserved: Option<Amount>,
    /// Server-authoritative expiry (epoch ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at_ms: Option<i64>,
    /// Remaining lifetime observed by the server (normative heartbeat input when present).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remaining_ttl_ms: Option<i64>,
    /// Canonical scope path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope_path: Option<String>,
    /// Canonical scopes impacted, in canonical order.
    pub affected_scopes: Vec<String>,
    /// Present only with ALLOW_WITH_CAPS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caps: Option<Caps>,
    /// Balances snapshot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub balances: Option<Vec<Balance>>,
    /// Reason for DENY (open string).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason_code: Option<ReasonCode>,
    /// Suggested wait before retrying a DENY.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_ms: Option<i64>,
    /// Evidence reference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cycles_evidence: Option<EvidenceRef>,
}

/// Body of `POST /v1/reservations/{id}/commit` (`CommitRequest`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct CommitRequest {
    /// Idempotency key (also sent as `X-Idempotency-Key`).
    pub idempotency_key: String,
    /// Actual amount consumed.
    pub actual: Amount,
    /// Standard metrics.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics: Option<StandardMetrics>,
    /// Commit-time metadata, sent exactly as given (see [`JsonObject`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<JsonObject>,
}

impl CommitRequest {
    /// A request with only the required fields set.
    pub fn new(idempotency_key: impl Into<String>, actual: Amount) -> Self {
        CommitRequest {
            idempotency_key: idempotency_key.into(),
            actual,
            metrics: None,
            metadata: None,
        }
    }
}

/// Success body of `commitReservation` (`CommitResponse`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct CommitResponse {
    /// Always COMMITTED on a schema-valid success.
    pub status: ReservationStatus,
    /// Amount actually charged.
    pub charged: Amount,
    /// Amount returned from over-reservation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub released: Option<Amount>,
    /// Balances snapshot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub balances: Option<Vec<Balance>>,
    /// Evidence reference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cycles_evidence: Option<EvidenceRef>,
}

/// Body of `POST /v1/reservations/{id}/release` (`ReleaseRequest`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ReleaseRequest {
    /// Idempotency key (also sent as `X-Idempotency-Key`).
    pub idempotency_key: String,
    /// Free-text reason (max 256).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl ReleaseRequest {
    /// A request without a reason.
    pub fn new(idempotency_key: impl Into<String>) -> Self {
        ReleaseRequest {
            idempotency_key: idempotency_key.into(),
            reason: None,
        }
    }
}

/// Success body of `releaseReservation` (`ReleaseResponse`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ReleaseResponse {
    /// Always RELEASED on a schema-valid success.
    pub status: ReservationStatus,
    /// Amount returned to the budget.
    pub released: Amount,
    /// Balances snapshot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub balances: Option<Vec<Balance>>,
    /// Evidence reference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cycles_evidence: Option<EvidenceRef>,
}

/// Body of `POST /v1/reservations/{id}/extend` (`ReservationExtendRequest`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ReservationExtendRequest {
    /// Idempotency key (also sent as `X-Idempotency-Key`).
    pub idempotency_key: String,
    /// Extension relative to the current `expires_at_ms` (1..=86_400_000).
    pub extend_by_ms: i64,
    /// Debugging/audit metadata, sent exactly as given (see [`JsonObject`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<JsonObject>,
}

impl ReservationExtendRequest {
    /// A request without metadata.
    pub fn new(idempotency_key: impl Into<String>, extend_by_ms: i64) -> Self {
        ReservationExtendRequest {
            idempotency_key: idempotency_key.into(),
            extend_by_ms,
            metadata: None,
        }
    }
}

/// Success body of `extendReservation` (`ReservationExtendResponse`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ReservationExtendResponse {
    /// Always ACTIVE on a schema-valid success.
    pub status: ReservationStatus,
    /// New server-authoritative expiry (epoch ms).
    pub expires_at_ms: i64,
    /// Remaining lifetime (optional for older servers; normative heartbeat input when present).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remaining_ttl_ms: Option<i64>,
    /// Balances snapshot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub balances: Option<Vec<Balance>>,
}

/// One reservation as returned by `getReservation` (`ReservationDetail`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ReservationDetail {
    /// Reservation id.
    pub reservation_id: String,
    /// Lifecycle state (unknown future states tolerated).
    pub status: ReservationStatus,
    /// Creation idempotency key, if the server keeps it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
    /// Subject.
    pub subject: Subject,
    /// Action.
    pub action: Action,
    /// Reserved amount.
    pub reserved: Amount,
    /// Committed amount (COMMITTED only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub committed: Option<Amount>,
    /// Creation time (epoch ms).
    pub created_at_ms: i64,
    /// Expiry (epoch ms).
    pub expires_at_ms: i64,
    /// Finalization time (COMMITTED/RELEASED only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finalized_at_ms: Option<i64>,
    /// Canonical scope path.
    pub scope_path: String,
    /// Canonical scopes impacted.
    pub affected_scopes: Vec<String>,
    /// Reserve-time metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
    /// Commit-time metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub committed_metadata: Option<Metadata>,
    /// Evidence references.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<ReservationEvidence>,
}

/// One row of `listReservations` (`ReservationSummary`); same fields as the detail, but
/// `metadata`, `committed_metadata` and `evidence` appear only when requested via `include`.
pub type ReservationSummary = ReservationDetail;

/// Success body of `listReservations` (`ReservationListResponse`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ReservationListResponse {
    /// The page of rows.
    pub reservations: Vec<ReservationSummary>,
    /// Cursor of the next page, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
    /// True if more results may be available.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub has_more: Option<bool>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Unit;
    use serde_json::json;

    #[test]
    fn create_request_serializes_only_known_set_fields() {
        let mut r = ReservationCreateRequest::new(
            "k1",
            Subject::tenant("acme"),
            Action::new("llm.completion", "gpt"),
            Amount::new(Unit::UsdMicrocents, 5),
        );
        r.dry_run = Some(true);
        r.overage_policy = Some(OveragePolicy::AllowWithOverdraft);
        assert_eq!(
            serde_json::to_value(&r).unwrap(),
            json!({
                "idempotency_key": "k1",
                "subject": {"tenant": "acme"},
                "action": {"kind": "llm.completion", "name": "gpt"},
                "estimate": {"unit": "USD_MICROCENTS", "amount": 5},
                "overage_policy": "ALLOW_WITH_OVERDRAFT",
                "dry_run": true
            })
        );
    }

    #[test]
    fn create_response_tolerates_unknown_fields_and_unit() {
        let v = json!({
            "decision": "ALLOW", "reservation_id": "r1",
            "reserved": {"unit": "FUTURE_UNIT", "amount": 5},
            "expires_at_ms": 10, "remaining_ttl_ms": 9,
            "affected_scopes": ["tenant:acme"],
            "deny_detail": {"x": 1}, "brand_new": [1, 2]
        });
        let r: ReservationCreateResponse = serde_json::from_value(v).unwrap();
        assert_eq!(r.reserved.unwrap().unit, Unit::Other("FUTURE_UNIT".into()));
        assert_eq!(r.remaining_ttl_ms, Some(9));
    }

    #[test]
    fn detail_tolerates_unknown_status() {
        let v = json!({
            "reservation_id": "r", "status": "ARCHIVED",
            "subject": {"tenant": "a"}, "action": {"kind": "k", "name": "n"},
            "reserved": {"unit": "TOKENS", "amount": 1},
            "created_at_ms": 1, "expires_at_ms": 2,
            "scope_path": "tenant:a", "affected_scopes": ["tenant:a"], "x": null
        });
        let d: ReservationDetail = serde_json::from_value(v).unwrap();
        assert_eq!(d.status, ReservationStatus::Other("ARCHIVED".into()));
    }

    #[test]
    fn explicit_nulls_on_optionals_decode_as_none() {
        // The reference server's row shape (`get.active_minimal`, `list.page_3`).
        let row = json!({
            "reservation_id": "r", "status": "ACTIVE", "idempotency_key": null,
            "subject": {"tenant": "acme", "workspace": null, "app": null, "workflow": null,
                        "agent": null, "toolset": null, "dimensions": null},
            "action": {"kind": "llm.completion", "name": "m", "tags": null},
            "reserved": {"unit": "USD_MICROCENTS", "amount": 1}, "committed": null,
            "created_at_ms": 1, "expires_at_ms": 2, "finalized_at_ms": null,
            "scope_path": "tenant:acme", "affected_scopes": ["tenant:acme"],
            "metadata": null, "committed_metadata": null, "evidence": null
        });
        let d: ReservationDetail = serde_json::from_value(row.clone()).unwrap();
        assert_eq!(d.subject, Subject::tenant("acme"));
        assert_eq!(d.action, Action::new("llm.completion", "m"));
        assert_eq!(
            (d.committed, d.finalized_at_ms, d.evidence),
            (None, None, None)
        );
        let page: ReservationListResponse = serde_json::from_value(
            json!({"reservations": [row], "next_cursor": null, "has_more": false}),
        )
        .unwrap();
        assert_eq!(page.next_cursor, None);
        assert_eq!(page.has_more, Some(false));

        let created: ReservationCreateResponse = serde_json::from_value(json!({
            "decision": "ALLOW_WITH_CAPS", "reservation_id": null, "reserved": null,
            "expires_at_ms": null, "remaining_ttl_ms": null, "scope_path": null,
            "affected_scopes": [], "balances": null, "reason_code": null,
            "retry_after_ms": null, "cycles_evidence": null,
            "caps": {"max_tokens": null, "max_steps_remaining": 3, "tool_allowlist": null,
                     "tool_denylist": null, "cooldown_ms": null}
        }))
        .unwrap();
        assert_eq!(created.reservation_id, None);
        let caps = created.caps.unwrap();
        assert_eq!((caps.max_tokens, caps.max_steps_remaining), (None, Some(3)));
        let committed: CommitResponse = serde_json::from_value(json!({
            "status": "COMMITTED", "charged": {"unit": "TOKENS", "amount": 2},
            "released": null, "balances": [{"scope": "s", "scope_path": "s",
                "remaining": {"unit": "TOKENS", "amount": -3}, "reserved": null,
                "spent": null, "debt": null, "allocated": null, "overdraft_limit": null,
                "is_over_limit": null}], "cycles_evidence": null
        }))
        .unwrap();
        let b = &committed.balances.unwrap()[0];
        assert_eq!((b.remaining.amount, b.debt.clone()), (-3, None));
        let extended: ReservationExtendResponse = serde_json::from_value(json!(
            {"status": "ACTIVE", "expires_at_ms": 5, "remaining_ttl_ms": null, "balances": null}
        ))
        .unwrap();
        assert_eq!(extended.remaining_ttl_ms, None);
        let released: ReleaseResponse = serde_json::from_value(json!({
            "status": "RELEASED", "released": {"unit": "TOKENS", "amount": 1},
            "balances": null, "cycles_evidence": null
        }))
        .unwrap();
        assert_eq!(released.balances, None);
        // A null on a REQUIRED field still fails decoding.
        assert!(serde_json::from_value::<ReleaseResponse>(
            json!({"status": "RELEASED", "released": null})
        )
        .is_err());
    }

    #[test]
    fn commit_and_extend_requests() {
        let c = CommitRequest::new("c", Amount::new(Unit::Tokens, 3));
        assert_eq!(
            serde_json::to_value(&c).unwrap(),
            json!({"idempotency_key": "c", "actual": {"unit": "TOKENS", "amount": 3}})
        );
        let e = ReservationExtendRequest::new("e", 1000);
        assert_eq!(
            serde_json::to_value(&e).unwrap(),
            json!({"idempotency_key": "e", "extend_by_ms": 1000})
        );
        let r = ReleaseRequest::new("r");
        assert_eq!(
            serde_json::to_value(&r).unwrap(),
            json!({"idempotency_key": "r"})
        );
    }
}
