//! State shared by the accept loop, the request handlers and the `LocalServer` handle.

use crate::clock::Clock;
use crate::config::ServerConfig;
use crate::evidence::EvidenceSigner;
use crate::faults::{Arrivals, FaultTable};
use crate::records::RequestRecord;
use crate::state::State;
use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

pub(crate) struct Shared {
    pub config: ServerConfig,
    pub clock: Clock,
    pub state: Mutex<State>,
    pub faults: Mutex<FaultTable>,
    /// Requests counted per operation as they arrive, for held requests.
    pub arrivals: Arrivals,
    pub requests: Mutex<Vec<RequestRecord>>,
    pub signer: EvidenceSigner,
    pub started: Instant,
}

/// Lock ignoring poisoning: a panicking handler must not wedge the whole test server.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Shared {
    pub fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }
}
