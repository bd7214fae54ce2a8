//! `cycles-fake-provider`: a fake model provider on loopback for integration tests. It
//! speaks OpenAI Chat Completions, OpenAI Responses and Anthropic Messages (whole and
//! streamed) closely enough for the real client libraries, counts tokens by a documented
//! rule ([`tokens`]), injects scripted faults ([`FaultRule`]) and records every request
//! ([`RequestRecord`]), so a test can assert what reached the provider, and what did not.
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! use cycles_fake_provider::{FakeConfig, FakeProvider};
//! let provider = FakeProvider::start(FakeConfig::default()).await?;
//! println!("OpenAI base URL {}/v1, Anthropic base URL {}", provider.url(), provider.url());
//! provider.shutdown().await;
//! # Ok(()) }
//! ```
#![warn(missing_docs)]

mod config;
mod record;
mod server;
pub mod tokens;
mod wire;

pub use config::{Endpoint, FakeConfig, Fault, FaultRule, DEFAULT_REPLY};
pub use record::RequestRecord;
pub use server::REPLY_HEADER;

use std::net::SocketAddr;
use std::sync::Arc;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// A running fake provider. Dropping it stops accepting (open connections are dropped).
pub struct FakeProvider {
    shared: Arc<server::Shared>,
    addr: SocketAddr,
    shutdown_tx: watch::Sender<bool>,
    task: Option<JoinHandle<()>>,
}

impl FakeProvider {
    /// Bind `config.bind` and serve on the current tokio runtime.
    pub async fn start(config: FakeConfig) -> std::io::Result<FakeProvider> {
        let listener = tokio::net::TcpListener::bind(config.bind).await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(server::Shared::new(config));
        let (shutdown_tx, rx) = watch::channel(false);
        let task = tokio::spawn(server::serve(listener, shared.clone(), rx));
        Ok(FakeProvider {
            shared,
            addr,
            shutdown_tx,
            task: Some(task),
        })
    }

    /// `http://127.0.0.1:PORT`, no trailing slash: the Anthropic clients' base URL, and the
    /// OpenAI clients' too (paths are served with and without the `/v1` prefix).
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Every request received since the start or the last [`FakeProvider::reset`].
    pub fn requests(&self) -> Vec<RequestRecord> {
        self.shared.state().requests.clone()
    }

    /// Back to the state just after start: the request log emptied, call numbering from
    /// 0, the configured fault rules only (with their counts at zero).
    pub fn reset(&self) {
        self.shared.reset();
    }

    /// Adds a fault rule after the existing ones.
    pub fn add_fault(&self, rule: FaultRule) {
        self.shared.state().faults.add(rule);
    }

    /// Removes every fault rule (the configured ones too, until the next reset).
    pub fn clear_faults(&self) {
        self.shared.state().faults.clear();
    }

    /// Stop accepting, drop open connections and wait for the accept loop to end.
    pub async fn shutdown(mut self) {
        let _ = self.shutdown_tx.send(true);
        if let Some(t) = self.task.take() {
            let _ = t.await;
        }
    }
}

impl Drop for FakeProvider {
    fn drop(&mut self) {
        let _ = self.shutdown_tx.send(true);
    }
}
