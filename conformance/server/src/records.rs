//! Inspection records: the ledger of applied mutations and the request log.

use crate::faults::Operation;
use serde::{Deserialize, Serialize};

/// One applied mutation. Replays add none, so "settled exactly once" is a count over these.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct LedgerEntry {
    /// 1-based sequence number.
    pub seq: u64,
    /// `reserve`, `commit`, `release`, `extend` or `event`.
    pub kind: String,
    /// Owning tenant.
    pub tenant: String,
    /// Reservation concerned (none for events).
    pub reservation_id: Option<String>,
    /// Idempotency key of the applying request.
    pub idempotency_key: String,
    /// Unit of the amount.
    pub unit: Option<String>,
    /// Amount reserved / charged / released / applied (none for extend).
    pub amount: Option<i64>,
    /// Server clock at application.
    pub applied_at_ms: i64,
}

/// One request that reached the router (inspection endpoints excluded).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct RequestRecord {
    /// 1-based arrival sequence number.
    pub seq: u64,
    /// Matched operation, if any.
    pub operation: Option<Operation>,
    /// HTTP method.
    pub method: String,
    /// Raw request path.
    pub path: String,
    /// Decoded reservation id from the path.
    pub reservation_id: Option<String>,
    /// Body key, else `X-Idempotency-Key`.
    pub idempotency_key: Option<String>,
    /// Arrival time, server clock ms.
    pub received_at_ms: i64,
    /// Arrival time, monotonic µs since server start.
    pub received_mono_us: u64,
    /// Status sent; `None` when the connection was dropped (or the response is still pending).
    pub status: Option<u16>,
    /// Name of the fault applied, if any.
    pub fault: Option<String>,
    /// The response was an idempotent replay.
    pub replay: bool,
    /// The request body exactly as received (when non-empty UTF-8), so tests can check that a
    /// replay sent the journaled bytes.
    #[serde(default)]
    pub body: Option<String>,
}
