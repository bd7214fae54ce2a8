//! `cycles-local-server`: a spec-faithful, in-memory Cycles runtime server on loopback, with
//! scripted fault injection, an applied-mutation ledger and a request log, for tests and demos.
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! use cycles_local_server::{LocalServer, ServerConfig};
//! let server = LocalServer::start(ServerConfig::default()).await?;
//! println!("serving on {}", server.url());
//! server.shutdown().await;
//! # Ok(()) }
//! ```
#![warn(missing_docs)]

mod body;
mod budget;
mod clock;
mod config;
mod error;
mod evidence;
mod faults;
mod http;
mod inspect;
mod pipeline;
mod records;
mod reference;
mod routes;
mod scope;
mod shared;
mod state;
mod timefmt;
mod trace;
mod validate;

pub use config::{
    BudgetSeed, BudgetStatus, CapsSeed, ExtendClamp, IdempotencyCompare, Regime, ServerConfig,
    ServerMode, TenantSeed,
};
pub use evidence::canonical_json;
pub use faults::{Fault, FaultRule, Malformed, Operation};
pub use records::{LedgerEntry, RequestRecord};

use shared::{lock, Shared};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// A running server. Dropping it shuts it down (connections are closed abruptly).
pub struct LocalServer {
    shared: Arc<Shared>,
    addr: SocketAddr,
    shutdown_tx: watch::Sender<bool>,
    task: Option<JoinHandle<()>>,
}

impl LocalServer {
    /// Bind `config.bind` and serve on the current tokio runtime.
    pub async fn start(config: ServerConfig) -> std::io::Result<LocalServer> {
        let listener = tokio::net::TcpListener::bind(config.bind).await?;
        let addr = listener.local_addr()?;
        let clock = clock::Clock::default();
        let server_id = format!("http://{addr}/v1");
        let signer = evidence::EvidenceSigner::new(server_id, clock.now_ms());
        let shared = Arc::new(Shared {
            state: Mutex::new(state::State::from_config(&config)),
            config,
            clock,
            faults: Mutex::new(faults::FaultTable::default()),
            arrivals: faults::Arrivals::default(),
            requests: Mutex::new(Vec::new()),
            signer,
            started: Instant::now(),
        });
        let (shutdown_tx, rx) = watch::channel(false);
        let task = tokio::spawn(http::serve(listener, shared.clone(), rx));
        Ok(LocalServer {
            shared,
            addr,
            shutdown_tx,
            task: Some(task),
        })
    }

    /// `http://127.0.0.1:PORT`, no trailing slash.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Install a fault rule (rules are matched in insertion order).
    pub fn add_fault(&self, rule: FaultRule) {
        lock(&self.shared.faults).add(rule);
    }

    /// Remove every fault rule.
    pub fn clear_faults(&self) {
        lock(&self.shared.faults).clear();
    }

    /// One entry per applied mutation, in order; replays add none.
    pub fn ledger(&self) -> Vec<LedgerEntry> {
        self.shared.state().ledger.clone()
    }

    /// Every request that reached the router (inspection endpoints excluded), in arrival order.
    pub fn requests(&self) -> Vec<RequestRecord> {
        lock(&self.shared.requests).clone()
    }

    /// Move the server clock forward.
    pub fn advance_clock(&self, ms: u64) {
        self.shared.clock.advance(ms);
    }

    /// The server's authoritative time (epoch ms).
    pub fn now_ms(&self) -> i64 {
        self.shared.clock.now_ms()
    }

    /// Mark a tenant CLOSED (or open again, for tests; real closure is irreversible).
    pub fn set_tenant_closed(&self, tenant: &str, closed: bool) {
        self.shared
            .state()
            .tenants
            .entry(tenant.to_string())
            .or_default()
            .closed = closed;
    }

    /// Stop accepting, close connections and wait for the accept loop to end.
    pub async fn shutdown(mut self) {
        let _ = self.shutdown_tx.send(true);
        if let Some(t) = self.task.take() {
            let _ = t.await;
        }
    }
}

impl Drop for LocalServer {
    fn drop(&mut self) {
        let _ = self.shutdown_tx.send(true);
    }
}
