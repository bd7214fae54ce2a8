//! What the passes of one engine resolved (terminal outcomes and quarantines), numbered, so a
//! `flush` or `drain` can add what another pass (the background replayer, say) resolved that
//! no report has shown yet.

use std::collections::VecDeque;

use super::Settler;
use crate::settle::{DrainReport, SettleOutcome};

/// The latest terminal outcomes and quarantines of every pass of one engine, numbered. A pass
/// skips a record another pass holds (the background replayer, say), so a drain running
/// beside it would otherwise report a record the other pass settled as neither settled nor
/// remaining; the drain adds what was resolved and not yet reported. Not only what was
/// resolved while it ran: the replayer's first pass starts with the engine, which hosts create
/// lazily, so a drain called first thing would otherwise report that pass's settlements or not
/// by a race (seen in CI: a record the replayer settled just before the drain began was in
/// neither `outcomes` nor `remaining`).
#[derive(Default)]
pub(super) struct Resolved {
    next: u64,
    /// Resolutions numbered below this were in a report already.
    reported: u64,
    log: VecDeque<(u64, Resolution)>,
}

/// One thing a pass resolved: a terminal outcome by reservation id, or a quarantined file's
/// new name.
pub(super) enum Resolution {
    Outcome(String, SettleOutcome),
    Quarantined(String),
}

/// How many resolutions are kept: far more than one drain overlaps in practice.
const RESOLVED_KEEP: usize = 4096;

impl Settler {
    /// Logs one resolution under the next number, forgetting the oldest past [`RESOLVED_KEEP`].
    pub(super) fn resolve(&self, r: Resolution) {
        if let Ok(mut m) = self.inner.resolved.lock() {
            let n = m.next;
            m.next += 1;
            m.log.push_back((n, r));
            if m.log.len() > RESOLVED_KEEP {
                m.log.pop_front();
            }
        }
    }

    /// The first resolution no report has shown: where a `flush` or `drain` starts looking.
    pub(super) fn unreported_seq(&self) -> u64 {
        self.inner.resolved.lock().map_or(0, |m| m.reported)
    }

    /// Adds to `report` what other passes of this engine resolved since `since`, and counts
    /// everything resolved so far as reported.
    pub(super) fn add_resolved_since(&self, since: u64, report: &mut DrainReport) {
        let Ok(mut m) = self.inner.resolved.lock() else {
            return;
        };
        m.reported = m.next;
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
}
