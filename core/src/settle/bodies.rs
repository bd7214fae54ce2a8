//! The two journaled bodies, built once from typed requests when a settlement starts and
//! never rebuilt: every later attempt sends these exact bytes.

use serde_json::value::RawValue;
use serde_json::{Map, Value};

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
/// `metadata.recovered_reservation_id` / `metadata.recovery_reason`.
pub fn event_fallback_body(
    reservation_id: &str,
    commit: &CommitRequest,
    fallback: &EventFallback,
) -> Result<Box<RawValue>, Error> {
    let mut o = Map::new();
    o.insert(
        "idempotency_key".into(),
        Value::String(commit.idempotency_key.clone()),
    );
    o.insert("subject".into(), val(&fallback.subject)?);
    o.insert("action".into(), val(&fallback.action)?);
    o.insert("actual".into(), val(&commit.actual)?);
    if let Some(p) = &fallback.overage_policy {
        o.insert("overage_policy".into(), val(p)?);
    }
    if let Some(m) = &commit.metrics {
        o.insert("metrics".into(), val(m)?);
    }
    let mut meta = commit.metadata.clone().unwrap_or_default();
    meta.insert(
        "recovered_reservation_id".into(),
        Value::String(reservation_id.to_string()),
    );
    meta.insert(
        "recovery_reason".into(),
        Value::String(RECOVERY_REASON.into()),
    );
    o.insert("metadata".into(), Value::Object(meta));
    raw(&Value::Object(o))
}

fn val<T: serde::Serialize>(v: &T) -> Result<Value, Error> {
    serde_json::to_value(v)
        .map_err(|e| Error::invalid_argument(format!("cannot serialize the event body: {e}")))
}
