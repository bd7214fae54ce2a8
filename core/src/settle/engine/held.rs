//! The record a worker holds the lock of: its durable rewrites during an episode (a 429 floor,
//! the switch to event mode) and its removal or quarantine when the episode ends. The file
//! work runs on the blocking pool; the removal or quarantine runs in one task with its report,
//! so a cancelled pass never removes or quarantines a record without saying so.

use super::Settler;
use crate::events::Event;
use crate::journal::{QuarantineKind, Record, Store, StoreLock};

/// A record this worker holds the lock of.
pub(super) struct Held {
    pub(super) journal: Store,
    pub(super) lock: StoreLock,
}

impl Settler {
    /// Durably writes `rec` if this worker holds its lock; false (and an event, and the
    /// error in `why`) on failure.
    pub(super) async fn persist(
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

    /// Before a retry: renews the hold on the record when it can lapse (a Redis lease), so a
    /// settlement retrying for longer than a lease still removes its record at the end. A
    /// lease already lost is reported (another worker may now be settling the same record:
    /// harmless, same key); the attempt goes ahead either way.
    pub(super) async fn renew(&self, held: &mut Option<Held>, id: &str) {
        let Some(h) = held.take_if(|h| h.journal.leases_expire()) else {
            return;
        };
        let (h, res) = self
            .blocking(move || {
                let res = h.journal.renew(&h.lock);
                (h, res)
            })
            .await;
        match res {
            Ok(true) => {}
            Ok(false) => self.io_failed(
                Some(id),
                "renew",
                &std::io::Error::other(format!(
                    "redis: the lease on {} expired (another worker may be settling it)",
                    h.journal.locate(id)
                )),
            ),
            Err(e) => self.io_failed(Some(id), "renew", &e),
        }
        *held = Some(h);
    }

    /// Removes (or quarantines) the held record, emits `then`, and releases the record's lock
    /// (the episode ends after it). The file operation, its report, `then` and the unlock run
    /// in one blocking task, so a cancelled replay pass can never remove or quarantine a record
    /// without reporting it, and a settlement pays one blocking hop for all of it.
    pub(super) async fn finish(
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
                    file: h.journal.locate(&rid),
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
}
