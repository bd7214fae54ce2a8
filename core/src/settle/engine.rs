//! The settlement engine: episodes (a run of same-key attempts on one locked record), the
//! background replayer, `flush` and `drain`.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use serde_json::value::RawValue;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::bodies::{commit_body, event_fallback_body, EventFallback};
use super::classify::{classify, Verdict};
use super::wire::Wire;
use super::{
    DrainReport, EventRecovery, PendingRecord, Rejection, SettleConfig, SettleOutcome, Settlement,
};
use crate::config::Config;
use crate::error::{Error, ErrorKind};
use crate::events::{Event, SettleDisposition};
use crate::journal::fsio::now_ms;
use crate::journal::{Journal, Mode, ParseError, QuarantineKind, Record, RecordLock};
use crate::model::CommitRequest;
use crate::timing::backoff::{backoff_delay, rate_limit_floor};
use crate::timing::Millis;

/// Longest pause between two failed background replays of one record.
const MAX_REPLAY_BACKOFF: Duration = Duration::from_secs(300);

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
    journal: Option<Journal>,
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
    /// Pending settlements whose latest state could not be journaled (full disk, read-only
    /// or removed directory, no file descriptors), by reservation id, with the journal error.
    /// Every pass tries to journal them again, else to settle them directly, so a known
    /// actual is never dropped while the process lives (see [`Settler::retry_unjournaled`]).
    unjournaled: Mutex<HashMap<String, (Record, String)>>,
}

/// Reports a settlement that was neither journaled nor settled and is given up now. The last
/// place this actual exists: the log line carries the body the server never got, so an
/// operator can still apply it by hand.
fn log_lost(id: &str, rec: &Record, why: &str, when: &str) {
    tracing::error!(
        target: "cycles::journal",
        reservation_id = %id,
        "settlement LOST: never journaled ({why}) nor settled before {when}; {} body: {}",
        rec.mode,
        rec.active_body().map_or("<none>", RawValue::get)
    );
}

impl Drop for Inner {
    fn drop(&mut self) {
        let left = self
            .unjournaled
            .get_mut()
            .unwrap_or_else(|p| p.into_inner());
        for (id, (rec, why)) in left.drain() {
            log_lost(&id, &rec, &why, "the engine was dropped");
        }
    }
}

/// The latest terminal outcomes and quarantines of every pass of one engine, numbered. A pass
/// skips a record another pass holds (the background replayer, say), so a drain running
/// beside it would otherwise report a record the other pass settled as neither settled nor
/// remaining; the drain adds what was resolved while it ran.
#[derive(Default)]
struct Resolved {
    next: u64,
    log: VecDeque<(u64, Resolution)>,
}

enum Resolution {
    Outcome(String, SettleOutcome),
    Quarantined(String),
}

/// How many resolutions are kept: far more than one drain overlaps in practice.
const RESOLVED_KEEP: usize = 4096;

impl std::fmt::Debug for Settler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Settler")
            .field("base_url", &self.inner.base_url)
            .field("journal", &self.inner.journal.as_ref().map(Journal::dir))
            .finish_non_exhaustive()
    }
}

/// A record this worker holds the lock of.
struct Held {
    journal: Journal,
    lock: RecordLock,
}

fn rejection(e: &Error) -> Rejection {
    Rejection {
        kind: e.kind().clone(),
        message: e.message().to_string(),
        http_status: e.http_status(),
        server_code: e.server_code().map(str::to_string),
    }
}

enum Success {
    Commit(crate::model::CommitResponse),
    Event(crate::model::EventCreateResponse),
}

/// The background replayer; stops when [`ReplayHandle::stop`] is called or it is dropped.
#[derive(Debug)]
pub struct ReplayHandle {
    token: CancellationToken,
    task: Option<tokio::task::JoinHandle<()>>,
    file_work: TaskTracker,
}

impl ReplayHandle {
    /// Stops replaying (an in-flight attempt is abandoned; its record stays) and waits, also
    /// for journal file work the pass had started: a quarantine that began is finished and
    /// reported before this returns.
    pub async fn stop(mut self) {
        self.token.cancel();
        if let Some(t) = self.task.take() {
            let _ = t.await;
        }
        self.file_work.close();
        self.file_work.wait().await;
        self.file_work.reopen();
    }
}

impl Drop for ReplayHandle {
    fn drop(&mut self) {
        self.token.cancel();
    }
}

impl Settler {
    /// An engine for `config`'s server and credential, journaling under
    /// `config.journal.dir` when `config.journal.enabled`. Computes the identity partition
    /// (PBKDF2, ~15 ms once per identity per process): build it at startup, not per call.
    /// CONFIG when `settings` fail [`SettleConfig::validate`].
    pub fn new(config: &Config, settings: SettleConfig) -> Result<Settler, Error> {
        settings.validate()?;
        let wire = Wire::new(config)?;
        let journal = config.journal.enabled.then(|| {
            Journal::new(
                config.journal.dir.clone(),
                &config.base_url,
                config.api_key.expose(),
                config.tenant.as_deref(),
            )
        });
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
            unjournaled: Mutex::new(HashMap::new()),
        });
        register(&inner);
        Ok(Settler { inner })
    }

    /// The journal partition in use, when journaling is enabled.
    pub fn journal(&self) -> Option<&Journal> {
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

    fn backoff(&self, attempt: u32) -> Duration {
        let c = &self.inner.cfg;
        let ms = backoff_delay(
            attempt,
            c.backoff_base.as_millis().try_into().unwrap_or(u64::MAX),
            c.backoff_cap.as_millis().try_into().unwrap_or(u64::MAX),
            fastrand::u64(..),
        );
        Duration::from_millis(ms.finite().unwrap_or(u64::MAX))
    }

    /// Settles one reservation: journals it durably (before any request leaves), then
    /// commits with the original key, retrying and falling back as the module docs say.
    ///
    /// If a record for this reservation already exists, it is the original settlement and is
    /// continued as is (its idempotency key wins). A record being worked on by another worker
    /// or process gives `Pending` at once.
    pub async fn settle(&self, s: Settlement) -> SettleOutcome {
        let commit = match commit_body(&s.commit) {
            Ok(c) => c,
            Err(e) => return SettleOutcome::Rejected(rejection(&e)),
        };
        let Some(journal) = self.inner.journal.clone() else {
            // Nothing is journaled, so the event body is needed only if the reservation turns
            // out to have expired: built then, not for every commit.
            let rec = Record::new_commit(
                s.reservation_id.clone(),
                self.inner.base_url.clone(),
                commit,
                None,
            );
            let lazy = s.fallback.map(|f| (s.commit, f));
            return self.episode(rec, None, false, None, lazy, None).await;
        };
        let event = match &s.fallback {
            Some(f) => match event_fallback_body(&s.reservation_id, &s.commit, f) {
                Ok(b) => Some(b),
                Err(e) => return SettleOutcome::Rejected(rejection(&e)),
            },
            None => None,
        };
        let rec = Record::new_commit(
            s.reservation_id.clone(),
            self.inner.base_url.clone(),
            commit,
            event,
        );
        let id = s.reservation_id.clone();
        let me = self.clone();
        let started = self
            .blocking(move || {
                let lock = match journal.try_lock(&id) {
                    Ok(Some(l)) => l,
                    Ok(None) => return Ok(None),
                    Err(e) => return Err(("lock", e, Box::new(rec))),
                };
                let mut rec = match journal.load(&lock, &id) {
                    Ok(Some(Ok(existing))) => existing,
                    Ok(Some(Err(pe))) => {
                        // An unusable file where our record goes: keep it as evidence.
                        let kind = match pe {
                            ParseError::Unsupported(_) => QuarantineKind::Unsupported,
                            ParseError::Corrupt(_) => QuarantineKind::Corrupt,
                        };
                        // Reported here, in the same blocking task as the rename, so a dropped
                        // settle() future cannot leave a quarantine unreported.
                        match journal.quarantine_record(&lock, &id, kind) {
                            Ok(new) => me.emit(Event::JournalQuarantined {
                                reservation_id: Some(id.clone()),
                                file: journal.path_of(&id).display().to_string(),
                                quarantined_as: new,
                                reason: pe.to_string(),
                            }),
                            Err(e) => me.io_failed(Some(&id), "quarantine", &e),
                        }
                        rec
                    }
                    Ok(None) => rec,
                    // Never overwrite a record we could not read: it may be the original.
                    Err(e) => return Err(("read", e, Box::new(rec))),
                };
                let saved = journal.save(&lock, &mut rec);
                Ok(Some((Held { journal, lock }, rec, saved)))
            })
            .await;
        match started {
            Ok(None) => self.pending_event(
                SettleOutcome::Pending {
                    reason: "being settled by another worker".into(),
                    last_error: None,
                    journaled: true,
                    journal_error: None,
                    not_before_ms: None,
                },
                &s.reservation_id,
            ),
            Err((op, e, rec)) => {
                self.io_failed(Some(&s.reservation_id), op, &e);
                let why = format!("{op}: {e}");
                self.episode(*rec, None, false, None, None, Some(why)).await
            }
            Ok(Some((held, rec, saved))) => {
                let why = match saved {
                    Ok(()) => None,
                    Err(e) => {
                        self.io_failed(Some(&s.reservation_id), "write", &e);
                        Some(format!("write: {e}"))
                    }
                };
                self.episode(rec, Some(held), why.is_none(), None, None, why)
                    .await
            }
        }
    }

    fn pending_event(&self, o: SettleOutcome, id: &str) -> SettleOutcome {
        if let SettleOutcome::Pending {
            reason,
            not_before_ms,
            journaled,
            ..
        } = &o
        {
            self.emit(Event::SettlementPending {
                reservation_id: id.to_string(),
                reason: reason.clone(),
                not_before_ms: *not_before_ms,
                journaled: *journaled,
            });
        }
        o
    }

    /// Durably writes `rec` if this worker holds its lock; false (and an event, and the
    /// error in `why`) on failure.
    async fn persist(
        &self,
        held: &mut Option<Held>,
        rec: &Record,
        why: &mut Option<String>,
    ) -> bool {
        let Some(h) = held.take() else {
            // Never journaled in this episode: `why` already says why.
            return false;
        };
        let mut r = rec.clone();
        let (h, res) = self
            .blocking(move || {
                let res = h.journal.save(&h.lock, &mut r);
                (h, res)
            })
            .await;
        *held = Some(h);
        match res {
            Ok(()) => {
                *why = None;
                true
            }
            Err(e) => {
                self.io_failed(Some(&rec.reservation_id), "write", &e);
                *why = Some(format!("write: {e}"));
                false
            }
        }
    }

    /// Removes (or quarantines) the held record, emits `then`, and releases the record's lock
    /// (the episode ends after it). The file operation, its report, `then` and the unlock run
    /// in one blocking task, so a cancelled replay pass can never remove or quarantine a record
    /// without reporting it, and a settlement pays one blocking hop for all of it.
    async fn finish(
        &self,
        held: Option<Held>,
        id: &str,
        quarantine: Option<QuarantineKind>,
        then: Option<Event>,
    ) {
        let Some(h) = held else {
            if let Some(e) = then {
                self.emit(e);
            }
            return;
        };
        let rid = id.to_string();
        let me = self.clone();
        self.blocking(move || {
            let res = match quarantine {
                None => h.journal.remove(&h.lock, &rid).map(|_| None),
                Some(k) => h.journal.quarantine_record(&h.lock, &rid, k).map(Some),
            };
            match res {
                Ok(Some(new_name)) => me.emit(Event::JournalQuarantined {
                    reservation_id: Some(rid.clone()),
                    file: h.journal.path_of(&rid).display().to_string(),
                    quarantined_as: new_name,
                    reason: "the reservation expired and the record has no event_fallback_body"
                        .into(),
                }),
                Ok(None) => {}
                // A record left behind after success is harmless: its replay gets the stored
                // original response (same key) and is removed then.
                Err(e) => me.io_failed(
                    Some(&rid),
                    if quarantine.is_some() {
                        "quarantine"
                    } else {
                        "remove"
                    },
                    &e,
                ),
            }
            if let Some(e) = then {
                me.emit(e);
            }
            // Unlinks the lock file: the record is gone, nobody needs it any more.
            drop(h);
        })
        .await;
    }

    fn fits(deadline: Option<Instant>, wait: Duration) -> bool {
        deadline.map_or(true, |d| Instant::now() + wait <= d)
    }

    /// Same-key attempts on one record until it is settled, rejected or left pending.
    /// `lazy_event`: what to build the event fallback body from if the reservation has
    /// expired, when `rec` was not journaled and so carries none yet. `journal_error`: why
    /// `rec` is not journaled although journaling is on; such a record still pending at the
    /// end is kept in memory for the next pass.
    async fn episode(
        &self,
        mut rec: Record,
        mut held: Option<Held>,
        mut journaled: bool,
        deadline: Option<Instant>,
        mut lazy_event: Option<(CommitRequest, EventFallback)>,
        mut journal_error: Option<String>,
    ) -> SettleOutcome {
        let id = rec.reservation_id.clone();
        let cfg = &self.inner.cfg;
        let mut attempts = 0u32;
        let mut last_error: Option<ErrorKind> = None;
        let pending = |reason: &str, last: &Option<ErrorKind>, journaled: bool, nb: Option<u64>| {
            SettleOutcome::Pending {
                reason: reason.to_string(),
                last_error: last.clone(),
                journaled,
                // Filled in once the episode ends.
                journal_error: None,
                not_before_ms: nb,
            }
        };
        let mut outcome = loop {
            if attempts >= cfg.max_attempts.max(1) {
                break pending(
                    "retries exhausted",
                    &last_error,
                    journaled,
                    rec.not_before_ms,
                );
            }
            if let Some(nb) = rec.not_before_ms {
                let now = now_ms();
                if nb > now {
                    let wait = Duration::from_millis(nb - now);
                    if wait > cfg.max_inline_wait || !Self::fits(deadline, wait) {
                        break pending(
                            "rate limited by the server",
                            &last_error,
                            journaled,
                            Some(nb),
                        );
                    }
                    tokio::time::sleep(wait).await;
                }
            }
            attempts += 1;
            let mode = rec.mode;
            let Some(body) = rec.active_body().map(RawValue::to_owned) else {
                break pending(
                    "record has no body for its mode",
                    &last_error,
                    journaled,
                    None,
                );
            };
            let wire = &self.inner.wire;
            let attempt = async {
                match mode {
                    Mode::Commit => wire.commit(&id, &body).await.map(Success::Commit),
                    Mode::Event => wire.event(&body).await.map(Success::Event),
                }
            };
            let result = match deadline {
                Some(d) => match tokio::time::timeout_at(d, attempt).await {
                    Ok(r) => r,
                    Err(_) => {
                        break pending(
                            "deadline reached during an attempt",
                            &last_error,
                            journaled,
                            rec.not_before_ms,
                        )
                    }
                },
                None => attempt.await,
            };
            let error = match result {
                Ok(success) => {
                    let settled = Event::SettlementSettled {
                        reservation_id: id.clone(),
                        via: mode,
                        attempts,
                    };
                    self.finish(held.take(), &id, None, Some(settled)).await;
                    break match success {
                        Success::Commit(r) => SettleOutcome::Committed(r),
                        Success::Event(r) => {
                            SettleOutcome::RecoveredViaEvent(EventRecovery::new(r, body.get()))
                        }
                    };
                }
                Err(e) => e,
            };
            last_error = Some(error.kind().clone());
            let failed = |disposition| Event::SettlementAttemptFailed {
                reservation_id: id.clone(),
                mode,
                error_kind: error.kind().name(),
                error: error.to_string(),
                disposition,
            };
            match classify(mode, &error) {
                Verdict::Transient => {
                    let delay = self.backoff(attempts - 1);
                    if attempts >= cfg.max_attempts {
                        self.emit(failed(SettleDisposition::Kept));
                        continue;
                    }
                    self.emit(failed(SettleDisposition::RetryIn {
                        delay: Millis::ms(delay.as_millis().try_into().unwrap_or(u64::MAX)),
                    }));
                    if delay > cfg.max_inline_wait || !Self::fits(deadline, delay) {
                        break pending(
                            "transient failure; retry later",
                            &last_error,
                            journaled,
                            rec.not_before_ms,
                        );
                    }
                    tokio::time::sleep(delay).await;
                }
                Verdict::RateLimited(retry_after_ms) => {
                    let b = self.backoff(attempts - 1);
                    let floor = rate_limit_floor(
                        now_ms(),
                        retry_after_ms,
                        Millis::ms(b.as_millis().try_into().unwrap_or(u64::MAX)),
                    );
                    rec.not_before_ms = Some(floor);
                    // Persisted BEFORE waiting, so a restart cannot retry earlier.
                    journaled = self.persist(&mut held, &rec, &mut journal_error).await;
                    self.emit(failed(SettleDisposition::NotBefore {
                        not_before_ms: floor,
                    }));
                }
                Verdict::Expired => {
                    if let Some((commit, fallback)) = lazy_event.take() {
                        // Assembled from parts that already serialized: cannot fail in
                        // practice; if it did, the record is treated as having no fallback.
                        rec.event_fallback_body = event_fallback_body(&id, &commit, &fallback).ok();
                    }
                    if rec.event_fallback_body.is_none() {
                        self.emit(failed(SettleDisposition::Rejected));
                        self.finish(held.take(), &id, Some(QuarantineKind::Unrecoverable), None)
                            .await;
                        break SettleOutcome::Rejected(rejection(&error));
                    }
                    self.emit(failed(SettleDisposition::SwitchToEvent));
                    rec.mode = Mode::Event;
                    rec.not_before_ms = None;
                    // Persisted BEFORE the event request (profile D6); on failure the event is
                    // still attempted (D12) and the failure was reported.
                    journaled = self.persist(&mut held, &rec, &mut journal_error).await;
                    if journaled {
                        self.emit(Event::SettlementModeSwitched {
                            reservation_id: id.clone(),
                        });
                    }
                }
                Verdict::Terminal => {
                    self.emit(failed(SettleDisposition::Rejected));
                    self.finish(held.take(), &id, None, None).await;
                    break SettleOutcome::Rejected(rejection(&error));
                }
                Verdict::Keep => {
                    self.emit(failed(SettleDisposition::Kept));
                    let why =
                        if matches!(error.kind(), ErrorKind::Unauthorized | ErrorKind::Forbidden) {
                            "authentication or authorization failed; kept for replay"
                        } else {
                            "unclassifiable response; kept for replay"
                        };
                    break pending(why, &last_error, journaled, rec.not_before_ms);
                }
            }
        };
        if let Some(h) = held {
            // Unlinks the lock file: blocking work.
            self.blocking(move || drop(h)).await;
        }
        if self.inner.journal.is_some() {
            let mut spill = self
                .inner
                .unjournaled
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            match &mut outcome {
                SettleOutcome::Pending {
                    journaled: false,
                    journal_error: je,
                    ..
                } => {
                    let why = journal_error
                        .take()
                        .unwrap_or_else(|| "the journal could not be written".into());
                    *je = Some(why.clone());
                    spill.insert(id.clone(), (rec, why));
                }
                // Journaled again or resolved: nothing left only in memory.
                _ => {
                    spill.remove(&id);
                }
            }
        }
        self.pending_event(outcome, &id)
    }

    /// The settlements kept only in memory, taken out of the spill one by one: each is
    /// journaled again if the journal works now (the scan that follows replays it like any
    /// record), else settled directly (an episode re-spills it if it stays pending).
    async fn retry_unjournaled(
        &self,
        journal: &Journal,
        deadline: Option<Instant>,
    ) -> Vec<(String, SettleOutcome)> {
        let ids: Vec<String> = {
            let spill = self
                .inner
                .unjournaled
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            spill.keys().cloned().collect()
        };
        let mut outcomes = Vec::new();
        for id in ids {
            if deadline.is_some_and(|d| Instant::now() >= d) {
                break;
            }
            let Some((rec, _)) = self
                .inner
                .unjournaled
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&id)
            else {
                continue;
            };
            let j = journal.clone();
            let rid = id.clone();
            let tried = self
                .blocking(move || {
                    let lock = match j.try_lock(&rid) {
                        Ok(Some(l)) => l,
                        // Held by another worker: it is being settled now; try again later.
                        Ok(None) => return Err((None, Box::new(rec))),
                        Err(e) => return Err((Some(("lock", e)), Box::new(rec))),
                    };
                    // The newest state is this one (the engine that last held the record
                    // could not write it), so it replaces whatever the file holds.
                    let mut r = rec.clone();
                    match j.save(&lock, &mut r) {
                        Ok(()) => Ok(()),
                        Err(e) => Err((Some(("write", e)), Box::new(rec))),
                    }
                })
                .await;
            match tried {
                Ok(()) => {}
                Err((None, rec)) => {
                    let mut spill = self
                        .inner
                        .unjournaled
                        .lock()
                        .unwrap_or_else(|p| p.into_inner());
                    spill
                        .entry(id)
                        .or_insert((*rec, "being settled by another worker".into()));
                }
                Err((Some((op, e)), rec)) => {
                    self.io_failed(Some(&id), op, &e);
                    let why = format!("{op}: {e}");
                    let o = self
                        .episode(*rec, None, false, deadline, None, Some(why))
                        .await;
                    if !o.is_pending() {
                        self.resolve(Resolution::Outcome(id.clone(), o.clone()));
                    }
                    outcomes.push((id, o));
                }
            }
        }
        outcomes
    }

    /// Gives up the settlements still only in memory (the process is shutting down): each is
    /// logged as lost with its body, and their ids are returned.
    pub(crate) fn give_up_unjournaled(&self) -> Vec<String> {
        let mut spill = self
            .inner
            .unjournaled
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let mut ids = Vec::new();
        for (id, (rec, why)) in spill.drain() {
            log_lost(&id, &rec, &why, "the runtime shut down");
            ids.push(id);
        }
        ids.sort();
        ids
    }

    /// The reservations whose pending settlement lives only in memory.
    fn unjournaled_ids(&self) -> Vec<String> {
        let spill = self
            .inner
            .unjournaled
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let mut ids: Vec<String> = spill.keys().cloned().collect();
        ids.sort();
        ids
    }

    /// Replays one journaled record if it is free, still present and ours.
    async fn replay_one(
        &self,
        journal: Journal,
        id: String,
        deadline: Option<Instant>,
    ) -> Option<SettleOutcome> {
        let rid = id.clone();
        let j = journal.clone();
        let loaded = self
            .blocking(move || -> std::io::Result<_> {
                let Some(lock) = j.try_lock(&rid)? else {
                    return Ok(None);
                };
                let had_standard = j.path_of(&rid).exists();
                let rec = j.load(&lock, &rid)?;
                Ok(Some((lock, rec, !had_standard)))
            })
            .await;
        let (lock, rec, migrated) = match loaded {
            Err(e) => {
                self.io_failed(Some(&id), "load", &e);
                return None;
            }
            Ok(None) => return None,
            Ok(Some(v)) => v,
        };
        let mut held = Some(Held { journal, lock });
        match rec {
            Some(Ok(rec)) if held.as_ref().is_some_and(|h| h.journal.owns(&rec)) => {
                if migrated {
                    self.emit(Event::JournalMigrated {
                        reservation_id: id.clone(),
                    });
                }
                Some(self.episode(rec, held, true, deadline, None, None).await)
            }
            Some(Err(pe)) => {
                let kind = match pe {
                    ParseError::Unsupported(_) => QuarantineKind::Unsupported,
                    ParseError::Corrupt(_) => QuarantineKind::Corrupt,
                };
                if let Some(h) = held.take() {
                    let me = self.clone();
                    // The rename and its report happen in one blocking task, which runs to
                    // the end even when this pass is cancelled (replay stopped): a file is
                    // never quarantined without its event.
                    self.blocking(move || {
                        match h.journal.quarantine_record(&h.lock, &id, kind) {
                            Ok(new) => me.emit(Event::JournalQuarantined {
                                reservation_id: Some(id.clone()),
                                file: h.journal.path_of(&id).display().to_string(),
                                quarantined_as: new,
                                reason: pe.to_string(),
                            }),
                            Err(e) => me.io_failed(Some(&id), "quarantine", &e),
                        }
                        drop(h);
                    })
                    .await;
                }
                None
            }
            // Gone (finished by another worker) or another base URL's: leave it.
            _ => {
                if let Some(h) = held.take() {
                    self.blocking(move || drop(h)).await;
                }
                None
            }
        }
    }

    fn in_backoff(&self, id: &str, now: Instant) -> bool {
        self.inner
            .replay_backoff
            .lock()
            .ok()
            .and_then(|m| m.get(id).map(|(_, next)| *next > now))
            .unwrap_or(false)
    }

    fn note_replay(&self, id: &str, outcome: &SettleOutcome) {
        let Ok(mut m) = self.inner.replay_backoff.lock() else {
            return;
        };
        if outcome.is_pending() {
            let n = m.get(id).map_or(0, |(n, _)| *n);
            let c = &self.inner.cfg;
            let d = backoff_delay(
                n,
                c.replay_interval.as_millis().try_into().unwrap_or(u64::MAX),
                MAX_REPLAY_BACKOFF
                    .as_millis()
                    .try_into()
                    .unwrap_or(u64::MAX),
                fastrand::u64(..),
            );
            let next = Instant::now()
                + Duration::from_millis(
                    d.finite()
                        .unwrap_or(u64::MAX)
                        .min(MAX_REPLAY_BACKOFF.as_millis() as u64),
                );
            m.insert(id.to_string(), (n.saturating_add(1), next));
        } else {
            m.remove(id);
        }
    }

    /// One replay pass over the journal: quarantines invalid files, then replays every
    /// eligible record (ours, past its floor, not in replay backoff unless `eager`) with
    /// bounded concurrency.
    async fn pass(
        &self,
        eager: bool,
        deadline: Option<Instant>,
    ) -> (Vec<(String, SettleOutcome)>, Vec<String>) {
        let mut outcomes = Vec::new();
        let mut quarantined = Vec::new();
        let Some(journal) = self.inner.journal.clone() else {
            return (outcomes, quarantined);
        };
        outcomes.extend(self.retry_unjournaled(&journal, deadline).await);
        let j = journal.clone();
        let scan = match self.blocking(move || j.scan()).await {
            Ok(s) => s,
            Err(e) => {
                self.io_failed(None, "scan", &e);
                return (outcomes, quarantined);
            }
        };
        for (file, error) in &scan.unreadable {
            self.emit(Event::JournalIoFailed {
                reservation_id: None,
                operation: "read",
                error: format!("{}: {error}", journal.dir().join(file).display()),
            });
        }
        for inv in scan.invalid {
            let j = journal.clone();
            let me = self.clone();
            // Rename and report in one blocking task (see replay_one): never one without the
            // other, even if this pass is cancelled while it runs.
            let done = self
                .blocking(move || match j.quarantine_invalid(&inv.file) {
                    Ok(Some((new, err))) => {
                        me.emit(Event::JournalQuarantined {
                            reservation_id: None,
                            file: j.dir().join(&inv.file).display().to_string(),
                            quarantined_as: new.clone(),
                            reason: err.to_string(),
                        });
                        me.resolve(Resolution::Quarantined(new.clone()));
                        Some(new)
                    }
                    Ok(None) => None,
                    Err(e) => {
                        me.io_failed(None, "quarantine", &e);
                        None
                    }
                })
                .await;
            quarantined.extend(done);
        }
        let now_wall = now_ms();
        let now = Instant::now();
        let mut tasks = JoinSet::new();
        for s in scan.records {
            let rec = s.record;
            if !journal.owns(&rec)
                || rec.not_before_ms.is_some_and(|nb| nb > now_wall)
                || (!eager && self.in_backoff(&rec.reservation_id, now))
            {
                continue;
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                break;
            }
            let Ok(permit) = self.inner.permits.clone().acquire_owned().await else {
                break;
            };
            let me = self.clone();
            let j = journal.clone();
            let id = rec.reservation_id.clone();
            // Tracked like file work: when a stopped pass drops this set, the aborted tasks
            // end at their next await, and `ReplayHandle::stop` waits for that.
            let work = self.inner.file_work.clone();
            tasks.spawn(work.track_future(async move {
                let _permit = permit;
                let o = me.replay_one(j, id.clone(), deadline).await;
                (id, o)
            }));
        }
        while let Some(r) = tasks.join_next().await {
            if let Ok((id, Some(o))) = r {
                self.note_replay(&id, &o);
                if !o.is_pending() {
                    self.resolve(Resolution::Outcome(id.clone(), o.clone()));
                }
                outcomes.push((id, o));
            }
        }
        (outcomes, quarantined)
    }

    /// The records of this engine's server still in the journal.
    pub async fn pending(&self) -> Vec<PendingRecord> {
        let Some(journal) = self.inner.journal.clone() else {
            return Vec::new();
        };
        let j = journal.clone();
        match self.blocking(move || j.scan()).await {
            Ok(scan) => scan
                .records
                .into_iter()
                .filter(|s| journal.owns(&s.record))
                .map(|s| PendingRecord {
                    reservation_id: s.record.reservation_id,
                    mode: s.record.mode,
                    recorded_at_ms: s.record.recorded_at_ms,
                    not_before_ms: s.record.not_before_ms,
                    file: s.file,
                })
                .collect(),
            Err(e) => {
                self.io_failed(None, "scan", &e);
                Vec::new()
            }
        }
    }

    /// Replays every pending record once now (ignoring replay backoff, honouring
    /// `not_before_ms`) and reports what is left in place.
    pub async fn flush(&self) -> DrainReport {
        let since = self.resolved_seq();
        let (outcomes, quarantined) = self.pass(true, None).await;
        let mut report = DrainReport {
            outcomes,
            remaining: self.pending().await,
            quarantined,
            unjournaled: self.unjournaled_ids(),
        };
        self.add_resolved_since(since, &mut report);
        report
    }

    fn resolve(&self, r: Resolution) {
        if let Ok(mut m) = self.inner.resolved.lock() {
            let n = m.next;
            m.next += 1;
            m.log.push_back((n, r));
            if m.log.len() > RESOLVED_KEEP {
                m.log.pop_front();
            }
        }
    }

    fn resolved_seq(&self) -> u64 {
        self.inner.resolved.lock().map_or(0, |m| m.next)
    }

    /// Adds to `report` what other passes of this engine resolved since `since`.
    fn add_resolved_since(&self, since: u64, report: &mut DrainReport) {
        let Ok(m) = self.inner.resolved.lock() else {
            return;
        };
        for (_, r) in m.log.iter().filter(|(n, _)| *n >= since) {
            match r {
                Resolution::Outcome(id, o) => {
                    if !report.outcomes.iter().any(|(i, _)| i == id) {
                        report.outcomes.push((id.clone(), o.clone()));
                    }
                }
                Resolution::Quarantined(name) => {
                    if !report.quarantined.contains(name) {
                        report.quarantined.push(name.clone());
                    }
                }
            }
        }
    }

    /// Replays until the journal is empty or `timeout` has passed, whichever is first.
    /// Unresolved records stay in place; in-flight attempts are abandoned at the deadline. The
    /// report includes what another pass of this engine (the background replayer) settled or
    /// quarantined while the drain ran.
    pub async fn drain(&self, timeout: Duration) -> DrainReport {
        let since = self.resolved_seq();
        let deadline = Instant::now() + timeout;
        let mut report = DrainReport::default();
        let mut pause = Duration::from_millis(50);
        loop {
            let (outcomes, quarantined) = self.pass(true, Some(deadline)).await;
            for (id, o) in outcomes {
                report.outcomes.retain(|(i, _)| *i != id);
                report.outcomes.push((id, o));
            }
            report.quarantined.extend(quarantined);
            let remaining = self.pending().await;
            let unjournaled = self.unjournaled_ids();
            let now = Instant::now();
            if (remaining.is_empty() && unjournaled.is_empty()) || now >= deadline {
                report.remaining = remaining;
                report.unjournaled = unjournaled;
                self.add_resolved_since(since, &mut report);
                return report;
            }
            // Wake for the earliest rate-limit floor among what is left, not a backoff step
            // later: a record parked by a 429 is due exactly at its `not_before_ms`.
            let now_wall = now_ms();
            let floor = remaining
                .iter()
                .filter_map(|r| r.not_before_ms)
                .filter(|nb| *nb > now_wall)
                .min()
                .map(|nb| Duration::from_millis(nb - now_wall));
            let wait = floor.map_or(pause, |f| f.min(pause));
            tokio::time::sleep(wait.min(deadline - now)).await;
            pause = (pause * 2).min(Duration::from_secs(1));
        }
    }

    /// Starts the continuous background replayer on the current tokio runtime (core's own
    /// outside one, or when the call is driven on a blocking host's thread). It also stops
    /// when [`crate::runtime::shutdown`] begins.
    ///
    /// # Panics
    /// Outside a tokio runtime when core's runtime is unusable (shut down, a forked child).
    pub fn start_replay(&self) -> ReplayHandle {
        let token = crate::runtime::stop_token();
        let t = token.clone();
        let me = self.clone();
        let interval = self.inner.cfg.replay_interval;
        let task = crate::runtime::spawn_target()
            .expect("start_replay needs a tokio runtime")
            .spawn(async move {
                loop {
                    tokio::select! {
                        _ = t.cancelled() => break,
                        _ = me.pass(false, None) => {}
                    }
                    tokio::select! {
                        _ = t.cancelled() => break,
                        _ = tokio::time::sleep(interval) => {}
                    }
                }
            });
        ReplayHandle {
            token,
            task: Some(task),
            file_work: self.inner.file_work.clone(),
        }
    }
}
