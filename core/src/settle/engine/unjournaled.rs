//! Settlements the journal could not take (a full disk, a read-only or removed directory, no
//! file descriptors left): kept in the engine's memory with the journal error, journaled again
//! or settled directly by every pass, and logged as LOST with their body when given up (the
//! engine dropped, the runtime shut down), the last place that actual exists.

use serde_json::value::RawValue;
use tokio::time::Instant;

use super::resolved::Resolution;
use super::{Inner, Settler};
use crate::journal::{Record, Store};
use crate::settle::SettleOutcome;

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

impl Settler {
    /// At an episode's end: keeps in memory a pending settlement the journal does not hold
    /// (its outcome then carries why as `journal_error`) and forgets one journaled again or
    /// resolved. Nothing to do without a journal.
    pub(super) fn spill_after_episode(
        &self,
        id: &str,
        rec: Record,
        outcome: &mut SettleOutcome,
        journal_error: Option<String>,
    ) {
        if self.inner.journal.is_some() {
            let mut spill = self
                .inner
                .unjournaled
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            match outcome {
                SettleOutcome::Pending {
                    journaled: false,
                    journal_error: je,
                    ..
                } => {
                    let why =
                        journal_error.unwrap_or_else(|| "the journal could not be written".into());
                    *je = Some(why.clone());
                    spill.insert(id.to_string(), (rec, why));
                }
                // Journaled again or resolved: nothing left only in memory.
                _ => {
                    spill.remove(id);
                }
            }
        }
    }

    /// The settlements kept only in memory, taken out of the spill one by one: each is
    /// journaled again if the journal works now (the scan that follows replays it like any
    /// record), else settled directly (an episode re-spills it if it stays pending).
    pub(super) async fn retry_unjournaled(
        &self,
        journal: &Store,
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
    pub(super) fn unjournaled_ids(&self) -> Vec<String> {
        let spill = self
            .inner
            .unjournaled
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let mut ids: Vec<String> = spill.keys().cloned().collect();
        ids.sort();
        ids
    }
}
