//! What the bridge's HTTP tests share: a journaled client of a local server, and waiting for
//! a call from the test's thread.

#![allow(dead_code)] // each test binary uses what it needs

use std::future::Future;
use std::path::Path;

use cycles_bridge::{task, ClientHandle, ClientOptions};
use cycles_local_server::LocalServer;

/// A client of `server` with the local API key, a 2 s request timeout and its journal in
/// `journal`.
pub fn journaled_client(server: &LocalServer, journal: &Path) -> ClientHandle {
    ClientHandle::new(
        ClientOptions {
            base_url: server.url(),
            api_key: "cycles-local-key".into(),
            request_timeout_ms: Some(2000),
            journal_dir: Some(journal.to_path_buf()),
            ..ClientOptions::default()
        }
        .into_config(),
    )
    .unwrap()
}

/// Runs `fut` as a blocking host call and waits for its value.
pub fn block<T: Send + 'static>(fut: impl Future<Output = T> + Send + 'static) -> T {
    task::start(fut).unwrap().finish().unwrap()
}
