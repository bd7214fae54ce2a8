//! Load with faults (issue 32): each face runs `count` concurrent guarded actions (its own
//! concurrency idiom, one key each) against a fresh local server that faults 1% of the
//! reserves and commits; what a face's settlement could not finish stays journaled and is
//! drained; then the server's ledger must show every action reserved once and committed once,
//! with nothing left held. Wall time and peak RSS are measured per face.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::time::{Duration, Instant};

use cycles_local_server::{
    BudgetSeed, Fault, FaultRule, LedgerEntry, LocalServer, Operation, ServerConfig,
};
use serde_json::{json, Value};

use crate::face::Face;

const KEY: &str = "cycles-local-key";
const TENANT: &str = "acme";
const UNIT: &str = "TOKENS";
/// Each action's bare estimate and the actual its work sets (what the ledger must show).
pub const ESTIMATE: i64 = 5;
/// The actual each action's work sets.
pub const ACTUAL: i64 = 3;
/// Drains until nothing is pending, each bounded by this (a 429's floor is 1 s ahead).
const DRAIN_TIMEOUT_MS: u64 = 20_000;
const MAX_DRAINS: usize = 5;
/// Server clock moved past every TTL (the guard's 60 s default) and grace before the last check.
const EXPIRE_MS: u64 = 600_000;

/// `reserved` of the tenant's budget, read through core's client.
async fn reserved_after_expiry(url: &str) -> Result<i64, String> {
    let client = cycles_core::CyclesClient::new(cycles_core::Config::new(url, KEY))
        .map_err(|e| e.to_string())?;
    let b = client
        .get_balances(&cycles_core::BalanceQuery::tenant(TENANT))
        .await
        .map_err(|e| e.to_string())?;
    Ok(b.body
        .balances
        .iter()
        .filter_map(|b| b.reserved.as_ref().map(|a| a.amount))
        .sum())
}

/// Reservations whose every commit fails while the faults are on (a 503 each time), so their
/// settlement outlasts its attempts and must end journaled, then drained: the creates at
/// these fractions of the run get these ids (`reservation_id` fault), off the strides below.
const STUCK: [(u64, &str); 3] = [
    (15, "rsv_load_stuck_a"),
    (50, "rsv_load_stuck_b"),
    (85, "rsv_load_stuck_c"),
];

/// The fault mix: 1% of `createReservation` (a 503 and a lost response, each every 200th,
/// interleaved) and 1% of `commitReservation` (a 503, a lost response and a 429 with
/// `Retry-After: 1`, each every 300th). A reserve's 429 is a refusal the caller sees by design
/// (the guard does not retry it), so 429s are on settlement only, where they must end settled.
/// Plus the [`STUCK`] reservations of a run of `count`, whose commits always fail.
pub fn fault_mix(count: u64) -> Vec<FaultRule> {
    let rule = |operation, every, skip, fault| FaultRule {
        operation,
        reservation_id: None,
        skip,
        times: 0,
        every,
        fault,
    };
    let mut rules = vec![
        rule(
            Operation::CreateReservation,
            200,
            0,
            Fault::ServerError { status: 503 },
        ),
        rule(
            Operation::CreateReservation,
            200,
            100,
            Fault::DropResponseAfterApply,
        ),
        rule(
            Operation::CommitReservation,
            300,
            0,
            Fault::ServerError { status: 503 },
        ),
        rule(
            Operation::CommitReservation,
            300,
            100,
            Fault::DropResponseAfterApply,
        ),
        rule(
            Operation::CommitReservation,
            300,
            200,
            Fault::RateLimited {
                retry_after: Some("1".into()),
            },
        ),
    ];
    for (percent, id) in STUCK {
        // An odd position: never one of the strides' (multiples of 100).
        let at = (count * percent / 100 / 100 * 100 + 51).min(count.max(1));
        rules.push(FaultRule {
            skip: (at - 1) as u32,
            times: 1,
            every: 1,
            ..rule(
                Operation::CreateReservation,
                1,
                0,
                Fault::ReservationId { id: id.into() },
            )
        });
        rules.push(FaultRule {
            reservation_id: Some(id.into()),
            ..rule(
                Operation::CommitReservation,
                1,
                0,
                Fault::ServerError { status: 503 },
            )
        });
    }
    rules
}

/// What one face's run measured and found.
pub struct FaceRun {
    /// The face.
    pub name: String,
    /// Guarded actions started.
    pub count: u64,
    /// Wall time of the load op (spawn excluded), seconds.
    pub wall_s: f64,
    /// The driver's peak resident set (VmHWM), MiB; None where /proc cannot tell.
    pub peak_rss_mib: Option<f64>,
    /// The face's outcomes by name.
    pub outcomes: BTreeMap<String, u64>,
    /// Settled by the drains afterwards.
    pub drained: u64,
    /// Faults the server injected, by name.
    pub faults: BTreeMap<String, u64>,
    /// Guarded calls that raised (typed) with nothing reserved.
    pub unreserved: u64,
    /// Guarded calls that raised with their reservation applied but unknown to the client,
    /// freed by its TTL.
    pub held: u64,
    /// Every violation found (empty: all settled exactly once).
    pub problems: Vec<String>,
}

fn server_config() -> ServerConfig {
    ServerConfig {
        budgets: vec![BudgetSeed {
            scope: "tenant:acme".into(),
            unit: UNIT.into(),
            allocated: 1_000_000_000_000,
            ..BudgetSeed::default()
        }],
        ..ServerConfig::default()
    }
}

/// Peak RSS of a live process in MiB, from `/proc/PID/status`.
fn peak_rss_mib(pid: u32) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

/// What the ledger says of `count` actions under `prefix`.
#[derive(Default)]
pub struct LedgerCheck {
    /// Actions reserved once and committed once with the actual.
    pub committed: u64,
    /// Actions with no reservation (their guarded call raised before one was made).
    pub unreserved: u64,
    /// Reservations never settled: a create the server applied whose answer the client never
    /// got, on the first attempt and on its one retry (the protocol then surfaces the error),
    /// so only their TTL frees them.
    pub held: Vec<String>,
    /// Everything else: doubled reserves or settlements, wrong amounts, foreign entries.
    pub problems: Vec<String>,
}

/// Checks the ledger for `count` actions under `prefix`: one reserve of the estimate per key,
/// one commit of the actual per reservation, nothing released, extended twice or foreign.
pub fn check_ledger(ledger: &[LedgerEntry], prefix: &str, count: u64) -> LedgerCheck {
    let mut out = LedgerCheck::default();
    let mut by_key: HashMap<&str, Vec<&LedgerEntry>> = HashMap::new();
    let mut by_reservation: HashMap<&str, Vec<&LedgerEntry>> = HashMap::new();
    let mut problems = Vec::new();
    for e in ledger {
        match e.kind.as_str() {
            "reserve" => by_key
                .entry(e.idempotency_key.as_str())
                .or_default()
                .push(e),
            "commit" | "release" => {
                if let Some(id) = &e.reservation_id {
                    by_reservation.entry(id.as_str()).or_default().push(e);
                }
            }
            // A heartbeat extend is allowed (a slow face under load); it applies nothing.
            "extend" => {}
            other => problems.push(format!("unexpected ledger entry {other}: {e:?}")),
        }
    }
    for i in 0..count {
        let key = format!("{prefix}-{i}");
        let reserves = by_key.remove(key.as_str()).unwrap_or_default();
        let reserve = match reserves.as_slice() {
            [] => {
                out.unreserved += 1;
                continue;
            }
            [one] => one,
            more => {
                problems.push(format!("{key}: {} reserves (want 1)", more.len()));
                continue;
            }
        };
        if reserve.amount != Some(ESTIMATE) || reserve.unit.as_deref() != Some(UNIT) {
            problems.push(format!(
                "{key}: reserved {:?} {:?}",
                reserve.amount, reserve.unit
            ));
        }
        let id = reserve.reservation_id.as_deref().unwrap_or("");
        let settled = by_reservation.remove(id).unwrap_or_default();
        match settled.as_slice() {
            [c] if c.kind == "commit" && c.amount == Some(ACTUAL) => out.committed += 1,
            [] => out.held.push(format!("{key} ({id})")),
            more => problems.push(format!(
                "{key} ({id}): settled {} times: {:?}",
                more.len(),
                more.iter()
                    .map(|e| (e.kind.as_str(), e.amount))
                    .collect::<Vec<_>>()
            )),
        }
    }
    for (key, _) in by_key {
        problems.push(format!("a reserve under a key no action used: {key}"));
    }
    for (id, _) in by_reservation {
        problems.push(format!(
            "a settlement of a reservation no action made: {id}"
        ));
    }
    problems.truncate(20);
    out.problems = problems;
    out
}

fn counts(v: &Value) -> BTreeMap<String, u64> {
    v.as_object()
        .map(|o| {
            o.iter()
                .map(|(k, n)| (k.clone(), n.as_u64().unwrap_or(0)))
                .collect()
        })
        .unwrap_or_default()
}

fn ok(face: &str, what: &str, answer: Value) -> Result<Value, String> {
    match answer.get("ok") {
        Some(v) => Ok(v.clone()),
        None => Err(format!("{face}: {what} answered {answer}")),
    }
}

/// Runs one face: a fresh server with the fault mix, the load op, drains, the ledger check.
pub async fn run_face(
    name: &str,
    spawn: impl FnOnce() -> Result<Face, String>,
    count: u64,
    work: &Path,
) -> Result<FaceRun, String> {
    let server = LocalServer::start(server_config())
        .await
        .map_err(|e| format!("cannot start the local server: {e}"))?;
    for rule in fault_mix(count) {
        server.add_fault(rule);
    }
    let journal = work.join(format!("load-{name}"));
    std::fs::create_dir_all(&journal).map_err(|e| format!("{}: {e}", journal.display()))?;
    let prefix = format!("load-{name}");
    let mut face = spawn()?;
    let pid = face.pid();
    let request = json!({"op": "load", "url": server.url(), "api_key": KEY, "tenant": TENANT,
                         "default_unit": UNIT, "journal_dir": journal.to_string_lossy(),
                         "count": count, "key_prefix": prefix});
    let started = Instant::now();
    let answer = face.batch(vec![request])?.remove(0);
    let wall_s = started.elapsed().as_secs_f64();
    let peak = peak_rss_mib(pid);
    let answer = ok(name, "load", answer)?;
    let outcomes = counts(&answer["outcomes"]);
    let mut problems = Vec::new();
    let started_total: u64 = outcomes.values().sum();
    if started_total != count {
        problems.push(format!(
            "{started_total} outcomes for {count} actions: {outcomes:?}"
        ));
    }
    let mut errors = 0;
    for (outcome, n) in &outcomes {
        if outcome.starts_with("error:") {
            errors += n;
        } else if outcome != "committed" && outcome != "pending" {
            problems.push(format!("{n} action(s) ended {outcome}"));
        }
    }

    // What settlement could not finish inline is journaled: drain it (faults off), counted.
    server.clear_faults();
    let pending = outcomes.get("pending").copied().unwrap_or(0);
    let mut drained = 0;
    let mut left = u64::MAX;
    for _ in 0..MAX_DRAINS {
        let report = face.batch(vec![json!({"op": "drain", "url": server.url(),
            "api_key": KEY, "tenant": TENANT, "journal_dir": journal.to_string_lossy(),
            "timeout_ms": DRAIN_TIMEOUT_MS})])?;
        let report = ok(
            name,
            "drain",
            report.into_iter().next().unwrap_or(Value::Null),
        )?;
        drained += report["settled"].as_u64().unwrap_or(0);
        left = report["pending"].as_u64().unwrap_or(u64::MAX);
        let quarantined = report["quarantined"].as_u64().unwrap_or(0);
        if quarantined > 0 {
            problems.push(format!("{quarantined} record(s) quarantined"));
        }
        if left == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    if left != 0 {
        problems.push(format!(
            "{left} record(s) still pending after {MAX_DRAINS} drains"
        ));
    }
    if pending == 0 {
        problems.push(
            "no settlement ended journaled: the journal path was not exercised (the stuck \
             reservations' creates were replays?)"
                .into(),
        );
    }
    // Fewer is allowed: a pending settlement's attempt still in flight when the load op's
    // client closed can land once the faults are off, so no drain sees its record. The ledger
    // check below is what proves each of them committed exactly once.
    if drained > pending {
        problems.push(format!(
            "{pending} action(s) ended pending but the drains settled {drained}"
        ));
    }
    face.close()?;

    let ledger = check_ledger(&server.ledger(), &prefix, count);
    let requests = server.requests();
    // Each action the face counted as raised must be one the ledger shows unreserved or held,
    // and each settled one committed exactly once.
    if ledger.unreserved + ledger.held.len() as u64 != errors {
        problems.push(format!(
            "{errors} guarded call(s) raised, but the ledger has {} unreserved and {} held",
            ledger.unreserved,
            ledger.held.len()
        ));
    }
    if ledger.committed != count - errors.min(count) {
        problems.push(format!(
            "{} committed in the ledger for {} actions that did not raise",
            ledger.committed,
            count - errors.min(count)
        ));
    }
    // The request history of a few held keys and of the ledger's other findings.
    let shown: Vec<&String> = ledger.held.iter().chain(&ledger.problems).take(4).collect();
    for p in shown {
        let key = p.split([' ', ':']).next().unwrap_or("");
        let ids: Vec<&str> = requests
            .iter()
            .filter(|r| r.idempotency_key.as_deref() == Some(key))
            .filter_map(|r| r.reservation_id.as_deref())
            .collect();
        let history: Vec<String> = requests
            .iter()
            .filter(|r| {
                r.idempotency_key.as_deref() == Some(key)
                    || r.reservation_id
                        .as_deref()
                        .is_some_and(|id| ids.contains(&id))
            })
            .map(|r| {
                format!(
                    "#{} {} {:?} {}",
                    r.seq,
                    r.path,
                    r.status,
                    r.fault.as_deref().unwrap_or("-")
                )
            })
            .collect();
        eprintln!("  {p}: {}", history.join(", "));
    }
    problems.extend(ledger.problems.iter().cloned());
    // A held reservation is freed by its TTL: past every TTL and grace, nothing may be
    // reserved any more.
    server.advance_clock(EXPIRE_MS);
    match reserved_after_expiry(&server.url()).await {
        Ok(0) => {}
        Ok(n) => problems.push(format!(
            "{n} still reserved after every TTL and grace had passed"
        )),
        Err(e) => problems.push(format!("cannot read the balances: {e}")),
    }
    let mut faults = BTreeMap::new();
    for r in requests {
        if let Some(f) = r.fault {
            *faults.entry(f).or_insert(0) += 1;
        }
    }
    server.shutdown().await;
    let _ = std::fs::remove_dir_all(&journal);
    Ok(FaceRun {
        name: name.to_string(),
        count,
        wall_s,
        peak_rss_mib: peak,
        outcomes,
        drained,
        faults,
        unreserved: ledger.unreserved,
        held: ledger.held.len() as u64,
        problems,
    })
}

/// The Markdown table of the runs.
pub fn table(runs: &[FaceRun]) -> String {
    let mut out = String::from(
        "| face | calls | wall time | peak RSS | faults injected (503 / lost / 429 / stuck id) | committed inline | journaled, then drained | raised, nothing reserved | raised, held until TTL | ledger |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n",
    );
    for r in runs {
        let f = |k: &str| r.faults.get(k).copied().unwrap_or(0);
        out.push_str(&format!(
            "| {} | {} | {:.1} s | {} | {} ({} / {} / {} / {}) | {} | {} | {} | {} | {} |\n",
            r.name,
            r.count,
            r.wall_s,
            r.peak_rss_mib
                .map_or("?".to_string(), |m| format!("{m:.0} MiB")),
            r.faults.values().sum::<u64>(),
            f("server_error"),
            f("drop_response_after_apply"),
            f("rate_limited"),
            f("reservation_id"),
            r.outcomes.get("committed").copied().unwrap_or(0),
            r.drained,
            r.unreserved,
            r.held,
            if r.problems.is_empty() {
                "each committed once or accounted"
            } else {
                "FAILED"
            },
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(kind: &str, key: &str, id: &str, amount: i64) -> LedgerEntry {
        LedgerEntry {
            seq: 0,
            kind: kind.into(),
            tenant: TENANT.into(),
            reservation_id: Some(id.into()),
            idempotency_key: key.into(),
            unit: Some(UNIT.into()),
            amount: Some(amount),
            applied_at_ms: 0,
        }
    }

    #[test]
    fn the_ledger_check_tells_committed_unreserved_held_and_wrong_apart() {
        let ok = [
            entry("reserve", "p-0", "r0", ESTIMATE),
            entry("commit", "p-0:commit", "r0", ACTUAL),
            entry("reserve", "p-2", "r2", ESTIMATE),
        ];
        let c = check_ledger(&ok, "p", 3);
        assert_eq!((c.committed, c.unreserved, c.held.len()), (1, 1, 1));
        assert!(c.problems.is_empty(), "{:?}", c.problems);

        let wrong = [
            entry("reserve", "p-0", "r0", ESTIMATE),
            entry("commit", "p-0:commit", "r0", ACTUAL),
            entry("commit", "p-0:commit2", "r0", ACTUAL),
            entry("reserve", "p-1", "r1", ESTIMATE),
            entry("reserve", "p-1", "r1b", ESTIMATE),
            entry("reserve", "q-0", "rq", ESTIMATE),
            entry("release", "x:release", "rx", ESTIMATE),
        ];
        let c = check_ledger(&wrong, "p", 2);
        let text = c.problems.join("\n");
        for want in [
            "p-0 (r0): settled 2 times",
            "p-1: 2 reserves",
            "a reserve under a key no action used: q-0",
            "a settlement of a reservation no action made: rx",
        ] {
            assert!(text.contains(want), "missing {want:?} in:\n{text}");
        }
        assert_eq!(c.committed, 0);
    }

    #[test]
    fn the_stuck_creates_sit_off_every_stride() {
        for count in [1, 500, 10_000, 123_457] {
            let at: Vec<u32> = fault_mix(count)
                .iter()
                .filter(|r| matches!(r.fault, Fault::ReservationId { .. }))
                .map(|r| r.skip + 1)
                .collect();
            assert_eq!(at.len(), STUCK.len());
            assert!(
                at.iter().all(|p| *p as u64 <= count.max(1)),
                "{count}: {at:?}"
            );
            if count >= 100 {
                assert!(at.iter().all(|p| p % 100 != 0), "{count}: {at:?}");
            }
        }
    }
}
