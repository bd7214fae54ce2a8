//! One settlement episode: [`Settler::settle`] journals the settlement durably before any
//! request leaves (continuing an existing record as the original), then runs the episode, the
//! same-key attempts on one record until it is settled, rejected or left pending. Replay runs
//! the same episode on a journaled record, so a settlement behaves alike whichever path
//! settles it.

use std::time::Duration;

use serde_json::value::RawValue;
use tokio::time::Instant;

use super::held::Held;
use super::Settler;
use crate::error::{Error, ErrorKind};
use crate::events::{Event, SettleDisposition};
use crate::journal::fsio::now_ms;
use crate::journal::{Mode, QuarantineKind, Record};
use crate::model::CommitRequest;
use crate::settle::bodies::{commit_body, event_fallback_body, EventFallback};
use crate::settle::classify::{classify, Verdict};
use crate::settle::{EventRecovery, Rejection, SettleOutcome, Settlement};
use crate::timing::backoff::{backoff_delay, rate_limit_floor};
use crate::timing::Millis;

/// The caller-facing rejection of a terminal error.
fn rejection(e: &Error) -> Rejection {
    Rejection {
        kind: e.kind().clone(),
        message: e.message().to_string(),
        http_status: e.http_status(),
        server_code: e.server_code().map(str::to_string),
    }
}

/// What a successful attempt got, by mode.
enum Success {
    Commit(crate::model::CommitResponse),
    Event(crate::model::EventCreateResponse),
}

impl Settler {
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
                        let kind = pe.quarantine_kind();
                        // Reported here, in the same blocking task as the rename, so a dropped
                        // settle() future cannot leave a quarantine unreported.
                        match journal.quarantine_record(&lock, &id, kind) {
                            Ok(new) => me.emit(Event::JournalQuarantined {
                                reservation_id: Some(id.clone()),
                                file: journal.locate(&id),
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

    /// Reports a pending outcome as `Event::SettlementPending`; passes every outcome through.
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

    /// Whether a wait of `wait` from now ends by `deadline` (always, without one).
    fn fits(deadline: Option<Instant>, wait: Duration) -> bool {
        deadline.map_or(true, |d| Instant::now() + wait <= d)
    }

    /// The jittered commit backoff before retry `attempt` (from 0), from the settings.
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

    /// Same-key attempts on one record until it is settled, rejected or left pending.
    /// `lazy_event`: what to build the event fallback body from if the reservation has
    /// expired, when `rec` was not journaled and so carries none yet. `journal_error`: why
    /// `rec` is not journaled although journaling is on; such a record still pending at the
    /// end is kept in memory for the next pass.
    pub(super) async fn episode(
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
            if attempts > 0 {
                self.renew(&mut held, &id).await;
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
        self.spill_after_episode(&id, rec, &mut outcome, journal_error);
        self.pending_event(outcome, &id)
    }
}
