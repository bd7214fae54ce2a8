//! Core's pure functions through the bridge's JSON helpers, unchanged: the heartbeat timing
//! functions and both planners (`timing_json`, the shared vectors' encoding), the journal
//! helpers (`journal_json`, `journal::names`, `journal::identity`), pricing (`pricing_json`)
//! and the captured-response decoder every binding runs the reference corpus through.

use std::sync::{Arc, Mutex, MutexGuard};

use cycles_bridge::pricing_json;
use cycles_bridge::timing_json::{self, FallbackJson, PrimaryJson};
use cycles_bridge::{decode_captured as bridge_decode, headers_from_json, journal_json};
use cycles_core::journal::{identity, names};

use crate::error::{ffi, Result};

/// One pure timing function by name (`schedule`, `lead_floor`, ..., `extend_timeout`;
/// docs/c.md lists them), its arguments and result JSON.
#[uniffi::export]
pub fn timing_call(name: String, args_json: String) -> Result<String> {
    ffi(|| Ok(timing_json::call(&name, &args_json)?))
}

/// One pure pricing function by name (`estimate`, `actual`, `plan_caps`, ...), JSON in and out.
#[uniffi::export]
pub fn pricing_call(name: String, args_json: String) -> Result<String> {
    ffi(|| Ok(pricing_json::call(&name, &args_json)?))
}

/// A planner's state (a panic while it was held leaves it usable: each step is one call).
fn locked<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Core's normative heartbeat planner driven by JSON steps.
#[derive(uniffi::Object)]
pub struct PrimaryPlanner(Mutex<PrimaryJson>);

#[uniffi::export]
impl PrimaryPlanner {
    /// A planner with `request_timeout_json` (`10000`, `"infinite"`); `derive_timeout`
    /// derives the enforced timeout from short leases.
    #[uniffi::constructor]
    pub fn new(request_timeout_json: String, derive_timeout: bool) -> Result<Arc<PrimaryPlanner>> {
        ffi(|| {
            let p = PrimaryJson::new(&request_timeout_json, derive_timeout)?;
            Ok(Arc::new(PrimaryPlanner(Mutex::new(p))))
        })
    }

    /// One step (`at_us`, and `remaining_ttl_ms` / `rtt_ms` or a `failure`): the decision JSON.
    pub fn step(&self, step_json: String) -> Result<String> {
        ffi(|| Ok(locked(&self.0).step(&step_json)?))
    }

    /// The enforced timeout of the next attempt (JSON duration).
    pub fn attempt_timeout(&self) -> String {
        locked(&self.0).attempt_timeout()
    }
}

/// Core's fallback planner (servers without `remaining_ttl_ms`) driven by JSON steps.
#[derive(uniffi::Object)]
pub struct FallbackPlanner(Mutex<FallbackJson>);

#[uniffi::export]
impl FallbackPlanner {
    /// A planner of a reservation created with `requested_ttl_ms`, received at
    /// `reserve_received_us`, expiring at `expires_at_ms`.
    #[uniffi::constructor]
    pub fn new(
        requested_ttl_ms: u64,
        reserve_received_us: u64,
        expires_at_ms: i64,
    ) -> Arc<FallbackPlanner> {
        Arc::new(FallbackPlanner(Mutex::new(FallbackJson::new(
            requested_ttl_ms,
            reserve_received_us,
            expires_at_ms,
        ))))
    }

    /// The first beat's decision JSON (`prime`: extend at once).
    pub fn first_beat(&self, prime: bool) -> String {
        locked(&self.0).first_beat(prime)
    }

    /// One step (`at_us`, and `expires_at_ms` or a `failure`): the decision JSON.
    pub fn step(&self, step_json: String) -> Result<String> {
        ffi(|| Ok(locked(&self.0).step(&step_json)?))
    }

    /// The current regime's name.
    pub fn regime(&self) -> String {
        locked(&self.0).regime().to_string()
    }

    /// The lower bound of the lead at `now_us`; none when it does not fit 64 bits.
    pub fn lead_min_ms(&self, now_us: u64) -> Option<i64> {
        let lead = locked(&self.0).lead_min_ms(now_us);
        i64::try_from(lead).ok()
    }
}

/// The identity partition (16 hex digits) of (base URL, API key, tenant): the journal
/// subdirectory of that identity.
#[uniffi::export]
pub fn journal_fingerprint(base_url: String, api_key: String, tenant: Option<String>) -> String {
    identity::partition(&base_url, &api_key, tenant.as_deref())
}

/// The record file name (v2) of a reservation.
#[uniffi::export]
pub fn journal_file_name(reservation_id: String) -> String {
    names::record_file_name(&reservation_id)
}

/// The legacy (pre-v2) record file name of a reservation.
#[uniffi::export]
pub fn journal_legacy_file_name(reservation_id: String) -> String {
    names::legacy_file_name(&reservation_id)
}

/// A record file's bytes parsed: the record JSON (docs/bindings.md). A file that is not a
/// usable record is INVALID_ARGUMENT whose details are `{"journal_error": "corrupt"}` or
/// `{"journal_error": "unsupported"}`.
#[uniffi::export]
pub fn journal_parse_record(data: Vec<u8>) -> Result<String> {
    ffi(|| journal_json::parse_record(&data))
}

/// The valid pending records of `journal` (a directory, or a `redis://` URL as the
/// `journalUrl` option takes it) as a JSON array: of one identity when `base_url` and
/// `api_key` are given, of every partition when neither is. A journal that cannot be read, or
/// a URL core refuses, is INVALID_ARGUMENT saying why.
#[uniffi::export]
pub fn journal_pending(
    journal: String,
    base_url: Option<String>,
    api_key: Option<String>,
    tenant: Option<String>,
) -> Result<String> {
    ffi(|| {
        journal_json::pending(
            &journal,
            base_url.as_deref(),
            api_key.as_deref(),
            tenant.as_deref(),
        )
    })
}

/// One captured exchange through core's response path, without a network: the reply JSON, or
/// the error the client would raise. `operation_id` is the spec's (`getReservation`); none
/// only for a non-2xx status. `headers_json`: an object of header names to string values.
#[uniffi::export]
pub fn decode_captured(
    operation_id: Option<String>,
    status: u16,
    headers_json: Option<String>,
    body: Vec<u8>,
) -> Result<String> {
    ffi(|| {
        let headers = headers_from_json(headers_json.as_deref(), "headers")?;
        let pairs: Vec<(&str, &str)> = headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        Ok(bridge_decode(operation_id.as_deref(), status, &pairs, &body)?.to_json())
    })
}
