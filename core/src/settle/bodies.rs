//! The two journaled bodies, built once from typed requests when a settlement starts and
//! never rebuilt: every later attempt sends these exact bytes.

use serde_json::value::RawValue;

use crate::error::Error;
use crate::journal::record::RECOVERY_REASON;
use crate::model::{Action, CommitRequest, OveragePolicy, Subject};

/// What the event fallback needs beyond the commit body: the reservation's subject and action
/// (and its overage policy, which the event carries so it is charged like the commit would be).
#[derive(Clone, Debug, PartialEq)]
pub struct EventFallback {
    /// The reservation's subject.
    pub subject: Subject,
    /// The reservation's action.
    pub action: Action,
    /// The reservation's overage policy; `None` lets the server default apply.
    pub overage_policy: Option<OveragePolicy>,
}

fn raw(v: &impl serde::Serialize) -> Result<Box<RawValue>, Error> {
    serde_json::value::to_raw_value(v)
        .map_err(|e| Error::invalid_argument(format!("cannot serialize the settlement body: {e}")))
}

/// The exact wire body of the commit.
pub fn commit_body(commit: &CommitRequest) -> Result<Box<RawValue>, Error> {
    raw(commit)
}

/// The exact wire body of `POST /v1/events` after `RESERVATION_EXPIRED`: the commit's
/// idempotency key, actual, metrics and metadata, the reservation's subject and action, and
/// `metadata.recovered_reservation_id` / `metadata.recovery_reason` (appended; a member of the
/// same name is replaced). Metadata and `metrics.custom` keep their exact text (big integers,
/// number spelling, unpaired-surrogate escapes): the body is assembled from raw parts, never
/// through a `serde_json::Value`.
pub fn event_fallback_body(
    reservation_id: &str,
    commit: &CommitRequest,
    fallback: &EventFallback,
) -> Result<Box<RawValue>, Error> {
    let mut parts = vec![
        ("idempotency_key", raw(&commit.idempotency_key)?),
        ("subject", raw(&fallback.subject)?),
        ("action", raw(&fallback.action)?),
        ("actual", raw(&commit.actual)?),
    ];
    if let Some(p) = &fallback.overage_policy {
        parts.push(("overage_policy", raw(p)?));
    }
    if let Some(m) = &commit.metrics {
        parts.push(("metrics", raw(m)?));
    }
    let metadata = commit.metadata.clone().unwrap_or_default().with_members(&[
        ("recovered_reservation_id", &raw(&reservation_id)?),
        ("recovery_reason", &raw(&RECOVERY_REASON)?),
    ]);
    parts.push(("metadata", metadata.as_raw().to_owned()));
    let members: Vec<String> = parts
        .iter()
        .map(|(k, v)| format!("\"{k}\":{}", v.get()))
        .collect();
    RawValue::from_string(format!("{{{}}}", members.join(",")))
        .map_err(|e| Error::invalid_argument(format!("cannot build the event body: {e}")))
}
