//! The settlement engine: one [`Settler`] per server and credential, the state its parts share,
//! and the registry the shutdown drain walks. Each concern is a module of its own, in the order
//! a settlement meets them:
//!
//! - `episode`: [`Settler::settle`] (journal first) and the episode it runs, a run of same-key
//!   attempts on one record until it is settled, rejected or left pending;
//! - `held`: the record a worker holds the lock of, written durably during an episode and
//!   removed or quarantined at its end;
//! - `unjournaled`: settlements the journal could not take, kept in memory, retried by every
//!   pass and logged as lost when given up;
//! - `replay`: one pass over the journal (invalid files quarantined, eligible records replayed
//!   with bounded concurrency and per-record backoff);
//! - `resolved`: what every pass resolved, numbered, so a drain reports what a concurrent pass
//!   settled;
//! - `drain`: what drives passes: the background replayer, [`Settler::flush`],
//!   [`Settler::drain`] and [`Settler::pending`].
//!
//! The helpers every part uses (`blocking`, `emit`, `io_failed`) live here. Only [`Settler`]
//! and [`ReplayHandle`] leave this module (re-exported by `settle`); a method one part calls
//! from another is `pub(super)`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use tokio::sync::Semaphore;
use tokio::time::Instant;
use tokio_util::task::TaskTracker;

use super::wire::Wire;
use super::SettleConfig;
use crate::config::Config;
use crate::error::Error;
use crate::events::Event;
use crate::journal::{Record, Store};

mod drain;
mod episode;
mod held;
mod replay;
mod resolved;
mod unjournaled;

pub use drain::ReplayHandle;
use resolved::Resolved;

/// Every settler alive in the process, weakly, so [`crate::runtime::shutdown`] can drain them.
static SETTLERS: Mutex<Vec<Weak<Inner>>> = Mutex::new(Vec::new());

fn register(inner: &Arc<Inner>) {
    let mut all = SETTLERS.lock().unwrap_or_else(|p| p.into_inner());
    all.retain(|w| w.strong_count() > 0);
    all.push(Arc::downgrade(inner));
}

/// The settlers still alive (for the shutdown drain).
pub(crate) fn registered_settlers() -> Vec<Settler> {
    let all = SETTLERS.lock().unwrap_or_else(|p| p.into_inner());
    all.iter()
        .filter_map(Weak::upgrade)
        .map(|inner| Settler { inner })
        .collect()
}

/// The durable settlement engine for one server and credential. Cheap to clone (shared state).
#[derive(Clone)]
pub struct Settler {
    inner: Arc<Inner>,
}

struct Inner {
    wire: Wire,
    base_url: String,
    journal: Option<Store>,
    cfg: SettleConfig,
    permits: Arc<Semaphore>,
    /// In-memory replay backoff per reservation: (failed episodes, next eligible time).
    /// Deliberately not durable: only the 429 floor must survive a restart.
    replay_backoff: Mutex<HashMap<String, (u32, Instant)>>,
    /// Every blocking journal operation in flight (see [`Settler::blocking`]) and every replay task
    /// of a pass, so that [`ReplayHandle::stop`] returns only once all of it has ended.
    file_work: TaskTracker,
    /// What every pass resolved, numbered (see [`Resolved`]).
    resolved: Mutex<Resolved>,
    /// Records being replayed by any pass, counted from the replay's start until its outcome
    /// is in `resolved`, so a drain never ends in the moment between another pass removing a
    /// record and logging what it did (see `replay::InFlight`).
    replaying: tokio::sync::watch::Sender<usize>,
    /// Pending settlements whose latest state could not be journaled (full disk, read-only
    /// or removed directory, no file descriptors), by reservation id, with the journal error.
    /// Every pass tries to journal them again, else to settle them directly, so a known
    /// actual is never dropped while the process lives (see [`Settler::retry_unjournaled`]).
    unjournaled: Mutex<HashMap<String, (Record, String)>>,
}

impl std::fmt::Debug for Settler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Settler")
            .field("base_url", &self.inner.base_url)
            .field("journal", &self.inner.journal.as_ref().map(Store::location))
            .finish_non_exhaustive()
    }
}

impl Settler {
    /// An engine for `config`'s server and credential, journaling under
    /// `config.journal.dir` (or to Redis at `config.journal.url`) when
    /// `config.journal.enabled`. Computes the identity partition (PBKDF2, ~15 ms once per
    /// identity per process): build it at startup, not per call. CONFIG when `settings` fail
    /// [`SettleConfig::validate`], or when a Redis journal cannot be reached or does not make
    /// writes as durable as its URL asks ([`Store::open`]).
    pub fn new(config: &Config, settings: SettleConfig) -> Result<Settler, Error> {
        settings.validate()?;
        let wire = Wire::new(config)?;
        let journal = if config.journal.enabled {
            Some(Store::open(
                &config.journal,
                &config.base_url,
                config.api_key.expose(),
                config.tenant.as_deref(),
            )?)
        } else {
            None
        };
        let permits = Arc::new(Semaphore::new(settings.replay_concurrency.max(1)));
        let inner = Arc::new(Inner {
            wire,
            base_url: config.base_url.clone(),
            journal,
            cfg: settings,
            permits,
            replay_backoff: Mutex::new(HashMap::new()),
            file_work: TaskTracker::new(),
            resolved: Mutex::new(Resolved::default()),
            replaying: tokio::sync::watch::Sender::new(0),
            unjournaled: Mutex::new(HashMap::new()),
        });
        register(&inner);
        Ok(Settler { inner })
    }

    /// The journal partition in use, when journaling is enabled.
    pub fn journal(&self) -> Option<&Store> {
        self.inner.journal.as_ref()
    }

    /// Runs journal file work on the blocking pool (never on an async worker), tracked so
    /// that [`ReplayHandle::stop`] can wait for it: a cancelled pass drops the future, not the
    /// file operation, which still finishes (and reports) on its own.
    ///
    /// A call driven on a blocking host's thread ([`crate::runtime::caller`]) runs it inline:
    /// that thread may block, and a hop to the pool would cost two wake-ups.
    async fn blocking<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> T {
        if crate::runtime::caller::is_driving() {
            return f();
        }
        match self.inner.file_work.spawn_blocking(f).await {
            Ok(v) => v,
            Err(e) => std::panic::resume_unwind(e.into_panic()),
        }
    }

    fn emit(&self, e: Event) {
        self.inner.cfg.events.emit(e);
    }

    fn io_failed(&self, id: Option<&str>, operation: &'static str, e: &std::io::Error) {
        self.emit(Event::JournalIoFailed {
            reservation_id: id.map(str::to_string),
            operation,
            error: e.to_string(),
        });
    }
}
