//! What drives replay passes: the continuous background replayer ([`Settler::start_replay`],
//! stopped through its [`ReplayHandle`]), and the explicit [`Settler::flush`] and
//! [`Settler::drain`], which settle what they can (before a deadline, for `drain`) and report
//! what is left in place, with [`Settler::pending`].

use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::Settler;
use crate::journal::fsio::now_ms;
use crate::settle::{DrainReport, PendingRecord};

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
    /// The records of this engine's server still in the journal (none listed when the
    /// journal cannot be read: a `journal_io_failed` event says so).
    pub async fn pending(&self) -> Vec<PendingRecord> {
        self.scan_pending().await.unwrap_or_default()
    }

    /// The records of this engine's server still in the journal; `None` when it cannot be
    /// read now (reported as `journal_io_failed`).
    async fn scan_pending(&self) -> Option<Vec<PendingRecord>> {
        let Some(journal) = self.inner.journal.clone() else {
            return Some(Vec::new());
        };
        let j = journal.clone();
        match self.blocking(move || j.scan()).await {
            Ok(scan) => Some(
                scan.records
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
            ),
            Err(e) => {
                self.io_failed(None, "scan", &e);
                None
            }
        }
    }

    /// Replays every pending record once now (ignoring replay backoff, honouring
    /// `not_before_ms`) and reports what is left in place, plus what another pass of this
    /// engine resolved that no earlier report showed.
    pub async fn flush(&self) -> DrainReport {
        let since = self.unreported_seq();
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

    /// Replays until the journal is empty or `timeout` has passed, whichever is first.
    /// Unresolved records stay in place; in-flight attempts are abandoned at the deadline. The
    /// report includes what another pass of this engine (the background replayer, whose first
    /// pass starts with the engine) settled or quarantined that no earlier `flush` or `drain`
    /// reported. A journal that cannot be read (Redis restarting, a
    /// directory gone) is never taken for an empty one: the drain keeps trying until the
    /// deadline, and then reports the records its last successful look found, less those it
    /// settled since.
    pub async fn drain(&self, timeout: Duration) -> DrainReport {
        let since = self.unreported_seq();
        let deadline = Instant::now() + timeout;
        let mut report = DrainReport::default();
        let mut pause = Duration::from_millis(50);
        let mut known: Vec<PendingRecord> = Vec::new();
        loop {
            let (outcomes, quarantined) = self.pass(true, Some(deadline)).await;
            for (id, o) in outcomes {
                report.outcomes.retain(|(i, _)| *i != id);
                report.outcomes.push((id, o));
            }
            report.quarantined.extend(quarantined);
            let scanned = self.scan_pending().await;
            let read = scanned.is_some();
            let remaining = match scanned {
                Some(r) => {
                    known.clone_from(&r);
                    r
                }
                None => {
                    let settled = |id: &str| {
                        report
                            .outcomes
                            .iter()
                            .any(|(i, o)| i == id && o.is_settled())
                    };
                    known.retain(|r| !settled(&r.reservation_id));
                    known.clone()
                }
            };
            let unjournaled = self.unjournaled_ids();
            // Another pass (the background replayer) may have just removed a record it
            // settled and not yet logged the outcome: wait for it, so the report has it.
            let empty = read
                && remaining.is_empty()
                && unjournaled.is_empty()
                && self.replays_ended(deadline).await;
            let now = Instant::now();
            if empty || now >= deadline {
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
