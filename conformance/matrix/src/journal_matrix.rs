//! The journal matrix: every face writes pending records (an outage, an expired reservation
//! with a failing event fallback, a 429 floor already past and one still ahead, unicode and
//! big-number metadata, an unusual reservation id) into a journal, and every other face
//! drains them against one local server: each applied exactly once, the request the server
//! received byte for byte the body the writer journaled, nothing left and nothing quarantined.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use cycles_core::journal::{identity, names, Record};
use cycles_local_server::{Fault, FaultRule, LocalServer, Operation};
use serde_json::{json, Value};

use crate::face::{canonical, Face};
use crate::table::Table;

/// What the official SDK (`runcycles` 0.5.3) is known to do differently as a reader. Such a
/// case is not counted as a pass: it is left out of the cell's total and listed under the
/// table; anything else it does wrong is a failure.
pub const RUNCYCLES_PATH: &str = "runcycles 0.5.3 puts a reservation id into the URL path \
     without percent-encoding it: a `/` or `#` in the id changes the URL, the server answers \
     404 and runcycles drops the record (the spend is lost). Every face of this SDK escapes it.";
/// See [`RUNCYCLES_PATH`].
pub const RUNCYCLES_REENCODE: &str = "runcycles 0.5.3 re-encodes a journaled body before \
     replaying it (the same JSON, not the same bytes: `\\u00e9` escapes are sent as raw \
     UTF-8); every face of this SDK sends the journaled bytes.";

/// The journal matrix's result: failure lines and the known deviations it met.
pub struct Outcome {
    /// What failed.
    pub failures: Vec<String>,
    /// Known official-SDK deviations met (see [`RUNCYCLES_PATH`]).
    pub known: std::collections::BTreeSet<&'static str>,
}

/// A drained case's verdict.
enum Verdict {
    Ok,
    Known(&'static str),
    Failed,
}

const KEY: &str = "cycles-local-key";
const TENANT: &str = "acme";

/// One record-writing case.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Case {
    Commit,
    Event,
    FloorPast,
    Unicode,
    OddId,
    FloorFuture,
}

const CASES: [Case; 6] = [
    Case::FloorPast,
    Case::Commit,
    Case::Event,
    Case::Unicode,
    Case::OddId,
    Case::FloorFuture,
];

impl Case {
    fn name(self) -> &'static str {
        match self {
            Case::Commit => "commit",
            Case::Event => "event",
            Case::FloorPast => "floor_past",
            Case::Unicode => "unicode_big_numbers",
            Case::OddId => "odd_reservation_id",
            Case::FloorFuture => "floor_future",
        }
    }

    fn metadata(self) -> Value {
        match self {
            // 2^53 + 1 and i64::MIN: exact only where integers are not doubles.
            Case::Unicode => {
                json!({"note": "caf\u{e9} \u{2603} \u{1d11e} \u{2028} \"q\" \\", "big": 9_007_199_254_740_993_u64,
                                    "min": i64::MIN, "max": u64::MAX, "ratio": 0.1, "list": [1, "\u{e9}", null, true]})
            }
            _ => json!({"case": self.name()}),
        }
    }

    fn faults(self, server: &LocalServer, odd_id: &str) {
        let rule = |operation, fault| FaultRule {
            operation,
            reservation_id: None,
            skip: 0,
            times: 0,
            every: 1,
            fault,
        };
        match self {
            Case::Event => {
                server.add_fault(rule(
                    Operation::CommitReservation,
                    Fault::Error {
                        status: 410,
                        code: "RESERVATION_EXPIRED".into(),
                    },
                ));
                server.add_fault(rule(
                    Operation::CreateEvent,
                    Fault::ServerError { status: 503 },
                ));
            }
            Case::FloorPast | Case::FloorFuture => {
                let secs = if self == Case::FloorPast { "1" } else { "2" };
                server.add_fault(rule(
                    Operation::CommitReservation,
                    Fault::RateLimited {
                        retry_after: Some(secs.into()),
                    },
                ));
            }
            Case::OddId => {
                server.add_fault(FaultRule {
                    times: 1,
                    ..rule(
                        Operation::CreateReservation,
                        Fault::ReservationId { id: odd_id.into() },
                    )
                });
                server.add_fault(rule(
                    Operation::CommitReservation,
                    Fault::ServerError { status: 503 },
                ));
            }
            Case::Commit | Case::Unicode => {
                server.add_fault(rule(
                    Operation::CommitReservation,
                    Fault::ServerError { status: 503 },
                ));
            }
        }
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// A record written by the writer, as found on disk.
struct Written {
    case: Case,
    rid: String,
    record: Record,
}

struct Pair<'a> {
    server: &'a LocalServer,
    url: String,
    /// The reader's journal.
    dir: PathBuf,
    /// Where each write gets its own journal (a writer's background replay must not touch
    /// the records of earlier cases under this case's faults).
    writes: PathBuf,
    writer: String,
    reader: String,
    log: Vec<String>,
}

impl Pair<'_> {
    fn req(&self, op: &str, dir: &Path) -> Value {
        json!({"op": op, "url": self.url, "api_key": KEY, "tenant": TENANT,
               "journal_dir": dir.to_string_lossy()})
    }

    fn fail(&mut self, what: String) {
        self.log
            .push(format!("{} -> {}: {what}", self.writer, self.reader));
    }

    /// Writes one case with `w`; the record it left, checked.
    fn write(&mut self, w: &mut Face, case: Case) -> Option<Written> {
        let odd_id = format!(
            "rsv/\u{fc} \u{e9}\u{1d11e} #?%2F {}-{}",
            self.writer, self.reader
        );
        case.faults(self.server, &odd_id);
        let wdir = self.writes.join(case.name());
        let mut r = self.req("write", &wdir);
        r["case"] = json!({"name": format!("{}-{}-{}", case.name(), self.writer, self.reader),
            "subject": {"tenant": TENANT}, "action": {"kind": "llm.completion", "name": "matrix"},
            "estimate": {"unit": "USD_MICROCENTS", "amount": 500_000}, "actual": 321_000,
            "metrics": {"latency_ms": 12, "tokens_input": 5}, "metadata": case.metadata()});
        let before = now_ms();
        let resp = w.batch(vec![r]).map(|mut v| v.remove(0));
        self.server.clear_faults();
        let resp = match resp {
            Ok(v) => v,
            Err(e) => {
                self.fail(format!("{}: {e}", case.name()));
                return None;
            }
        };
        let ok = &resp["ok"];
        let rid = ok["reservation_id"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if ok["outcome"] != "pending" || rid.is_empty() {
            self.fail(format!(
                "{}: write answered {}",
                case.name(),
                canonical(&resp)
            ));
            return None;
        }
        if case == Case::OddId && rid != odd_id {
            self.fail(format!(
                "{}: reservation id {rid:?}, the server assigned {odd_id:?}",
                case.name()
            ));
        }
        let partition = identity::partition(&self.url, KEY, Some(TENANT));
        let want = wdir.join(&partition).join(names::record_file_name(&rid));
        let found: Vec<(PathBuf, Record)> = crate::crashloop_journal::paths(&wdir)
            .into_iter()
            .filter_map(|p| Some((p.clone(), Record::parse(&std::fs::read(&p).ok()?).ok()?)))
            .filter(|(_, rec)| rec.reservation_id == rid)
            .collect();
        let [(path, record)] = <[_; 1]>::try_from(found).ok().or_else(|| {
            self.fail(format!(
                "{}: not exactly one record of {rid:?} under {}",
                case.name(),
                wdir.display()
            ));
            None
        })?;
        if path != want {
            self.fail(format!(
                "{}: record at {}, expected {}",
                case.name(),
                path.display(),
                want.display()
            ));
        }
        // Into the reader's journal, as a restarted process would find it.
        let into = self.dir.join(&partition);
        let moved = std::fs::create_dir_all(&into)
            .and_then(|_| std::fs::rename(&path, into.join(names::record_file_name(&rid))));
        if let Err(e) = moved {
            self.fail(format!("{}: moving the record: {e}", case.name()));
        }
        let mode = if case == Case::Event {
            "event"
        } else {
            "commit"
        };
        if record.mode.as_str() != mode {
            self.fail(format!("{}: mode {}", case.name(), record.mode.as_str()));
        }
        let body: Value = record
            .active_body()
            .and_then(|b| serde_json::from_str(b.get()).ok())
            .unwrap_or(Value::Null);
        let mut meta = case.metadata();
        if case == Case::Event {
            meta["recovered_reservation_id"] = json!(rid);
            meta["recovery_reason"] = json!("commit_after_reservation_expired");
        }
        if body["metadata"] != meta || body["actual"]["amount"] != 321_000 {
            self.fail(format!(
                "{}: journaled body {} (metadata should be {})",
                case.name(),
                canonical(&body),
                canonical(&meta)
            ));
        }
        let floor = record.not_before_ms;
        if matches!(case, Case::FloorPast | Case::FloorFuture) != floor.is_some_and(|f| f >= before)
        {
            self.fail(format!(
                "{}: not_before_ms {floor:?} (written at {before})",
                case.name()
            ));
        }
        Some(Written { case, rid, record })
    }

    /// Whether `w` was applied exactly once, by a request carrying the journaled bytes (and
    /// not before its floor).
    fn applied_once(&mut self, w: &Written) -> Verdict {
        let official = self.reader == "runcycles";
        let key = w.record.idempotency_key().unwrap_or_default();
        let event = w.record.mode.as_str() == "event";
        let ledger = self.server.ledger();
        let commits = ledger
            .iter()
            .filter(|e| e.kind == "commit" && e.reservation_id.as_deref() == Some(&w.rid))
            .count();
        let events = ledger
            .iter()
            .filter(|e| e.kind == "event" && e.idempotency_key == key)
            .count();
        let (op, want) = if event {
            (Operation::CreateEvent, (0, 1))
        } else {
            (Operation::CommitReservation, (1, 0))
        };
        let name = w.case.name();
        if (commits, events) != want {
            let seen: Vec<String> = self
                .server
                .requests()
                .into_iter()
                .filter(|r| {
                    r.idempotency_key.as_deref() == Some(&key)
                        || r.reservation_id.as_deref() == Some(&w.rid)
                })
                .map(|r| format!("{} {} -> {:?}", r.method, r.path, r.status))
                .collect();
            if official && w.case == Case::OddId && (commits, events) == (0, 0) {
                return Verdict::Known(RUNCYCLES_PATH);
            }
            self.fail(format!(
                "{name}: applied {commits} commit(s), {events} event(s); requests: {seen:?}"
            ));
            return Verdict::Failed;
        }
        let wire = w.record.active_body().map(|b| b.get().to_string());
        let applied: Vec<_> = self
            .server
            .requests()
            .into_iter()
            .filter(|r| r.operation == Some(op) && r.idempotency_key.as_deref() == Some(&key))
            .filter(|r| matches!(r.status, Some(200 | 201)))
            .collect();
        let [sent] = applied.as_slice() else {
            self.fail(format!(
                "{name}: {} successful settlement request(s)",
                applied.len()
            ));
            return Verdict::Failed;
        };
        let json =
            |t: &Option<String>| -> Option<Value> { serde_json::from_str(t.as_deref()?).ok() };
        let reencoded =
            sent.body != wire && json(&sent.body).is_some() && json(&sent.body) == json(&wire);
        if official && reencoded {
            return Verdict::Known(RUNCYCLES_REENCODE);
        }
        if sent.body != wire {
            self.fail(format!(
                "{name}: sent {:?}\n  journaled {:?}",
                sent.body, wire
            ));
            return Verdict::Failed;
        }
        if let Some(f) = w.record.not_before_ms {
            if (sent.received_at_ms as u64) < f {
                self.fail(format!(
                    "{name}: replayed at {} before its floor {f}",
                    sent.received_at_ms
                ));
                return Verdict::Failed;
            }
        }
        Verdict::Ok
    }
}

/// Runs every writer × reader pair; adds rows to `table`; returns the failure lines.
pub async fn run(faces: &mut [Face], table: &mut Table, root: &Path) -> Outcome {
    let mut known = std::collections::BTreeSet::new();
    let server = LocalServer::start(Default::default())
        .await
        .expect("local server starts");
    let url = server.url();
    let mut log = Vec::new();
    let names: Vec<String> = faces.iter().map(|f| f.name.clone()).collect();
    for wi in 0..faces.len() {
        for ri in 0..faces.len() {
            if wi == ri {
                continue;
            }
            let mut pair = Pair {
                server: &server,
                url: url.clone(),
                dir: root.join(format!("{}-to-{}", names[wi], names[ri])),
                writes: root
                    .join("writes")
                    .join(format!("{}-to-{}", names[wi], names[ri])),
                writer: names[wi].clone(),
                reader: names[ri].clone(),
                log: Vec::new(),
            };
            let mut written = Vec::new();
            for case in CASES {
                let before = pair.log.len();
                let w = pair.write(&mut faces[wi], case);
                let ok = w.is_some() && pair.log.len() == before;
                table.add("journal matrix: writes", &names[wi], u64::from(ok), 1);
                written.extend(w);
            }
            // A floor already behind us must really be behind us when the drain starts.
            if let Some(f) = written
                .iter()
                .find(|w| w.case == Case::FloorPast)
                .and_then(|w| w.record.not_before_ms)
            {
                while now_ms() <= f {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
            let mut r = pair.req("drain", &pair.dir);
            r["timeout_ms"] = json!(20_000);
            let drained = faces[ri].batch(vec![r]).map(|mut v| v.remove(0));
            match &drained {
                Ok(v) if v["ok"]["pending"] == 0 && v["ok"]["quarantined"] == 0 => {}
                Ok(v) => pair.fail(format!("drain answered {}", canonical(v))),
                Err(e) => pair.fail(format!("drain: {e}")),
            }
            for w in &written {
                match pair.applied_once(w) {
                    Verdict::Ok => table.add("journal matrix: drains", &names[ri], 1, 1),
                    Verdict::Failed => table.add("journal matrix: drains", &names[ri], 0, 1),
                    Verdict::Known(k) => {
                        known.insert(k);
                    }
                }
            }
            let left: Vec<_> = crate::crashloop_journal::paths(&pair.dir)
                .into_iter()
                .filter(|p| {
                    let n = p
                        .file_name()
                        .map(|n| n.to_string_lossy().into_owned())
                        .unwrap_or_default();
                    !matches!(
                        names::classify(&n),
                        names::EntryKind::Lock | names::EntryKind::Other
                    )
                })
                .collect();
            if !left.is_empty() {
                pair.fail(format!("left in the journal: {left:?}"));
            }
            table.add(
                "journal matrix: nothing left",
                &names[ri],
                u64::from(left.is_empty()),
                1,
            );
            log.append(&mut pair.log);
        }
    }
    server.shutdown().await;
    Outcome {
        failures: log,
        known,
    }
}
