//! Replay of journaled records: one pass over the journal quarantines invalid files, retries
//! what only memory holds, then replays every eligible record (ours, past its rate-limit
//! floor, out of its replay backoff unless the pass is eager) with bounded concurrency, each
//! through the same episode `settle` runs.

use std::time::Duration;

use tokio::task::JoinSet;
use tokio::time::Instant;

use super::held::Held;
use super::resolved::Resolution;
use super::Settler;
use crate::events::Event;
use crate::journal::fsio::now_ms;
use crate::journal::Store;
use crate::settle::SettleOutcome;
use crate::timing::backoff::backoff_delay;

/// Longest pause between two failed background replays of one record.
const MAX_REPLAY_BACKOFF: Duration = Duration::from_secs(300);

impl Settler {
    /// Replays one journaled record if it is free, still present and ours.
    async fn replay_one(
        &self,
        journal: Store,
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
                let had_standard = j.has_standard(&rid);
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
                let kind = pe.quarantine_kind();
                if let Some(h) = held.take() {
                    let me = self.clone();
                    // The rename and its report happen in one blocking task, which runs to
                    // the end even when this pass is cancelled (replay stopped): a file is
                    // never quarantined without its event.
                    self.blocking(move || {
                        match h.journal.quarantine_record(&h.lock, &id, kind) {
                            Ok(new) => me.emit(Event::JournalQuarantined {
                                reservation_id: Some(id.clone()),
                                file: h.journal.locate(&id),
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
    pub(super) async fn pass(
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
                error: format!("{}: {error}", journal.locate_file(file)),
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
                            file: j.locate_file(&inv.file),
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
            let in_flight = InFlight::start(self);
            tasks.spawn(work.track_future(async move {
                let _permit = permit;
                let o = me.replay_one(j, id.clone(), deadline).await;
                // Logged before `in_flight` ends, so a drain that finds the record gone and
                // this replay over also finds its outcome.
                if let Some(o) = &o {
                    me.note_replay(&id, o);
                    if !o.is_pending() {
                        me.resolve(Resolution::Outcome(id.clone(), o.clone()));
                    }
                }
                drop(in_flight);
                (id, o)
            }));
        }
        while let Some(r) = tasks.join_next().await {
            if let Ok((id, Some(o))) = r {
                outcomes.push((id, o));
            }
        }
        (outcomes, quarantined)
    }

    /// Waits until no pass of this engine is replaying a record, or `deadline`; whether none
    /// is.
    pub(super) async fn replays_ended(&self, deadline: Instant) -> bool {
        let mut rx = self.inner.replaying.subscribe();
        tokio::time::timeout_at(deadline, rx.wait_for(|n| *n == 0))
            .await
            .is_ok_and(|r| r.is_ok())
    }
}

/// One record being replayed (counted in the engine's `replaying`) until dropped: when its
/// outcome is logged, or when its pass is stopped.
struct InFlight(tokio::sync::watch::Sender<usize>);

impl InFlight {
    fn start(s: &Settler) -> InFlight {
        s.inner.replaying.send_modify(|n| *n += 1);
        InFlight(s.inner.replaying.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n -= 1);
    }
}
