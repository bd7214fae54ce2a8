//! `cycles journal`: operator tools over a durable settlement journal, a directory or a Redis
//! journal (`--url redis://...`); `copy` moves records between the stores unchanged.
//!
//! `list`, `show` and `quarantine` only read (no credentials needed; every identity
//! partition is shown). `replay` and `drain` settle the records of ONE identity (base URL +
//! API key or tenant), exactly as the SDK's replayer does, and leave whatever they cannot
//! settle in place. Exit status of `replay`/`drain`, so shutdown scripts can tell:
//! 0 every record settled and nothing quarantined; 1 records remain pending (or the command
//! failed); 3 a file was quarantined during the run (unreadable, or expired without an
//! event body), which may hold real spend an operator must look at; 2 is a usage error.

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{Args, Subcommand};
use cycles_core::journal::redis_store::{record_key, RedisTarget};
use cycles_core::journal::{names, Journal, Place, Record, Scan};
use cycles_core::{Config, JournalConfig, SettleConfig, SettleOutcome, Settler};
use serde_json::{json, Value};

/// Inspect, replay and drain the durable settlement journal.
#[derive(Args, Debug)]
pub struct JournalArgs {
    #[command(subcommand)]
    command: JournalCommand,
}

#[derive(Args, Debug, Clone)]
struct DirArgs {
    /// Journal directory (default `$HOME/.runcycles/commit-journal`).
    #[arg(long, env = "CYCLES_JOURNAL_DIR")]
    dir: Option<PathBuf>,
    /// A Redis journal instead of the directory (`redis://...`, as the applications'
    /// `journal_url`, durability checked the same way).
    #[arg(long, env = "CYCLES_JOURNAL_URL")]
    url: Option<String>,
    /// Machine-readable JSON output.
    #[arg(long)]
    json: bool,
}

#[derive(Args, Debug, Clone)]
struct IdentityArgs {
    /// Server root the records belong to, exactly as configured by the application.
    #[arg(long, env = "CYCLES_BASE_URL")]
    base_url: String,
    /// API key (used for the requests; never written anywhere).
    #[arg(long, env = "CYCLES_API_KEY", hide_env_values = true)]
    api_key: String,
    /// Tenant, when the application configured one (selects the tenant partition).
    #[arg(long, env = "CYCLES_TENANT")]
    tenant: Option<String>,
}

#[derive(Subcommand, Debug)]
enum JournalCommand {
    /// What is pending, for which server, since when, in which mode.
    List(DirArgs),
    /// One record in full, by reservation id or file path.
    Show {
        /// Reservation id, or the path of a record file.
        target: String,
        #[command(flatten)]
        dir: DirArgs,
    },
    /// Quarantined files: what and why.
    Quarantine(DirArgs),
    /// One replay pass for an identity now; unresolved records stay.
    Replay {
        #[command(flatten)]
        dir: DirArgs,
        #[command(flatten)]
        id: IdentityArgs,
    },
    /// Copy (or move) every record between stores, bytes unchanged: a directory or a Redis
    /// URL (`redis://...`) each way. A record the destination already holds stays as it is
    /// there. Exit 0 when every record is in the destination, 1 when some were busy (being
    /// settled) or unreadable: run it again, or drain or quarantine those.
    Copy {
        /// The source: a journal directory or a Redis URL.
        #[arg(long)]
        from: String,
        /// The destination: a journal directory or a Redis URL (`?durability=...` as for
        /// `journal_url`).
        #[arg(long)]
        to: String,
        /// Remove each record from the source once the destination holds it durably.
        #[arg(long = "move")]
        remove_source: bool,
        /// Machine-readable JSON output.
        #[arg(long)]
        json: bool,
    },
    /// Replay until the identity's journal is empty or the deadline passes.
    Drain {
        #[command(flatten)]
        dir: DirArgs,
        #[command(flatten)]
        id: IdentityArgs,
        /// Longest time to spend, in milliseconds.
        #[arg(long, default_value_t = 30_000)]
        deadline_ms: u64,
    },
}

fn root(d: &DirArgs) -> PathBuf {
    d.dir
        .clone()
        .unwrap_or_else(|| JournalConfig::default().dir)
}

/// The Redis journal `--url` names, if any (an error for a malformed URL).
fn redis_target(d: &DirArgs) -> Result<Option<RedisTarget>, String> {
    d.url.as_deref().map(RedisTarget::parse).transpose()
}

/// What the journal is, for headings: the directory or the URL (no password).
fn label(d: &DirArgs) -> Result<String, String> {
    Ok(match redis_target(d)? {
        Some(t) => t.shown,
        None => root(d).display().to_string(),
    })
}

/// The key naming the journal in JSON output, and its value.
fn where_json(d: &DirArgs) -> Result<(&'static str, Value), String> {
    Ok(match redis_target(d)? {
        Some(t) => ("journal_url", json!(t.shown)),
        None => ("journal_dir", json!(root(d))),
    })
}

fn now_ms() -> u64 {
    cycles_core::journal::fsio::now_ms()
}

fn age(ms: Option<u64>) -> String {
    match ms {
        Some(t) => {
            let s = now_ms().saturating_sub(t) / 1000;
            match s {
                0..=119 => format!("{s}s ago"),
                120..=7199 => format!("{}m ago", s / 60),
                7200..=172_799 => format!("{}h ago", s / 3600),
                _ => format!("{}d ago", s / 86_400),
            }
        }
        None => "unknown".into(),
    }
}

fn record_json(partition: &str, file: &str, r: &Record) -> Value {
    json!({
        "partition": partition,
        "file": file,
        "reservation_id": r.reservation_id,
        "base_url": r.base_url,
        "mode": r.mode.as_str(),
        "idempotency_key": r.idempotency_key(),
        "actual": r.actual().map(|(u, a)| json!({"unit": u, "amount": a})),
        "recorded_at_ms": r.recorded_at_ms,
        "not_before_ms": r.not_before_ms,
        "legacy_name": !names::is_record_file_name(file),
    })
}

/// Where `--dir` / `--url` put the journal (an error for a malformed URL).
fn place(d: &DirArgs) -> Result<Place, String> {
    Ok(match redis_target(d)? {
        Some(t) => Place::Redis(t),
        None => Place::Dir(root(d)),
    })
}

/// Scans every partition of the journal (read-only apart from reaping stale temp files).
fn scan_all(d: &DirArgs) -> Result<Vec<(String, Scan)>, String> {
    let place = place(d)?;
    let parts = place.partitions().map_err(|e| format!("cannot read {e}"))?;
    parts
        .into_iter()
        .map(|p| {
            let store = place.store(&p)?;
            store
                .scan()
                .map(|s| (p, s))
                .map_err(|e| format!("cannot scan {}: {e}", store.location()))
        })
        .collect()
}

fn copy(from: &str, to: &str, remove_source: bool, as_json: bool) -> Result<(), Failure> {
    use cycles_core::journal::transfer::{self, Copy, Place};
    let (src, dst) = (Place::parse(from)?, Place::parse(to)?);
    let report = transfer::copy(&src, &dst, remove_source)?;
    let word = |c: &Copy| match c {
        Copy::Copied if remove_source => "moved",
        Copy::Copied => "copied",
        Copy::Exists => "exists",
        Copy::Busy => "busy",
    };
    let left = report
        .records
        .iter()
        .filter(|r| r.outcome == Copy::Busy)
        .count()
        + report.skipped.len();
    if as_json {
        print_json(&json!({
            "from": from,
            "to": to,
            "records": report.records.iter().map(|r| json!({
                "partition": r.partition,
                "reservation_id": r.reservation_id,
                "file": r.file,
                "outcome": word(&r.outcome),
            })).collect::<Vec<_>>(),
            "skipped": report.skipped.iter().map(|(f, e)| json!({"file": f, "error": e})).collect::<Vec<_>>(),
        }));
    } else {
        let done = report.records.len() - (left - report.skipped.len());
        println!(
            "{} of {} record(s) {} from {from} to {to}; {left} left in the source",
            done,
            report.records.len(),
            if remove_source {
                "moved or present"
            } else {
                "copied or present"
            },
        );
        for r in &report.records {
            println!(
                "  {}/{}  {}",
                r.partition,
                r.reservation_id,
                word(&r.outcome)
            );
        }
        for (f, e) in &report.skipped {
            println!("  skipped {f}: {e}");
        }
    }
    if left > 0 {
        return Err(Failure {
            code: 1,
            message: format!(
                "{left} record(s) not copied: run the copy again, or drain or quarantine them"
            ),
        });
    }
    Ok(())
}

fn print_json(v: &Value) {
    println!("{}", serde_json::to_string_pretty(v).unwrap_or_default());
}

fn list(d: &DirArgs) -> Result<(), String> {
    let root = root(d);
    let scans = scan_all(d)?;
    let mut rows = Vec::new();
    let mut invalid = Vec::new();
    let mut quarantined = 0;
    for (p, s) in &scans {
        rows.extend(s.records.iter().map(|r| record_json(p, &r.file, &r.record)));
        invalid.extend(
            s.invalid
                .iter()
                .map(|i| json!({"partition": p, "file": i.file, "error": i.error.to_string()})),
        );
        quarantined += s.quarantined.len();
    }
    // A mistyped --dir must not read as "nothing pending" without a word (a Redis journal
    // that cannot be reached is an error already).
    let exists = d.url.is_some() || root.is_dir();
    let (name, place) = where_json(d)?;
    if d.json {
        print_json(&json!({
            name: place,
            "exists": exists,
            "pending": rows,
            "invalid": invalid,
            "quarantined": quarantined,
        }));
        return Ok(());
    }
    println!(
        "journal {}: {} pending, {} invalid, {} quarantined{}",
        label(d)?,
        rows.len(),
        invalid.len(),
        quarantined,
        if exists {
            ""
        } else {
            " (no such directory: nothing was ever journaled there)"
        }
    );
    for (p, s) in &scans {
        for r in &s.records {
            let rec = &r.record;
            let floor = match rec.not_before_ms {
                Some(t) if t > now_ms() => {
                    format!(", not before {}s from now", (t - now_ms()).div_ceil(1000))
                }
                _ => String::new(),
            };
            println!(
                "  {p}/{}  {:6}  {}  server {}  since {}{floor}",
                rec.reservation_id,
                rec.mode.as_str(),
                rec.actual()
                    .map(|(u, a)| format!("{a} {u}"))
                    .unwrap_or_else(|| "?".into()),
                rec.base_url.as_deref().unwrap_or("(unrecorded)"),
                age(rec.recorded_at_ms),
            );
        }
    }
    for i in &invalid {
        println!(
            "  invalid {}/{}: {}",
            i["partition"].as_str().unwrap_or(""),
            i["file"].as_str().unwrap_or(""),
            i["error"].as_str().unwrap_or("")
        );
    }
    Ok(())
}

/// `show` on a Redis journal: the record of reservation `target` in any partition.
fn show_redis(target: &str, d: &DirArgs) -> Result<(), String> {
    let (partition, scanned) = scan_all(d)?
        .into_iter()
        .find_map(|(p, s)| {
            s.records
                .into_iter()
                .find(|r| r.record.reservation_id == target)
                .map(|r| (p, r))
        })
        .ok_or_else(|| {
            format!(
                "no pending record for reservation {target:?} in {}",
                label(d).unwrap_or_default()
            )
        })?;
    let bytes = scanned.record.to_json();
    let key = record_key(&partition, &scanned.file);
    print_record(d, &partition, &scanned.file, &key, &scanned.record, &bytes);
    Ok(())
}

fn show(target: &str, d: &DirArgs) -> Result<(), String> {
    if d.url.is_some() {
        return show_redis(target, d);
    }
    let path = Path::new(target);
    let (file_path, partition) = if path.is_file() {
        let p = path
            .parent()
            .and_then(|p| p.file_name())
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default();
        (path.to_path_buf(), p)
    } else {
        let root = root(d);
        let name = names::record_file_name(target);
        let legacy = names::legacy_file_name(target);
        let found = Journal::partitions(&root)
            .map_err(|e| e.to_string())?
            .into_iter()
            .flat_map(|p| {
                [
                    (root.join(&p).join(&name), p.clone()),
                    (root.join(&p).join(&legacy), p),
                ]
            })
            .find(|(f, _)| {
                f.is_file()
                    && std::fs::read(f)
                        .ok()
                        .and_then(|b| Record::parse(&b).ok())
                        .is_some_and(|r| r.reservation_id == target)
            });
        found.ok_or_else(|| {
            format!(
                "no pending record for reservation {target:?} under {}",
                root.display()
            )
        })?
    };
    let bytes = std::fs::read(&file_path)
        .map_err(|e| format!("cannot read {}: {e}", file_path.display()))?;
    let file = file_path
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default();
    match Record::parse(&bytes) {
        Ok(r) => {
            print_record(
                d,
                &partition,
                &file,
                &file_path.display().to_string(),
                &r,
                &bytes,
            );
            Ok(())
        }
        Err(e) => Err(format!("{}: {e}", file_path.display())),
    }
}

/// One record in full: `at` is its path, or its Redis key.
fn print_record(d: &DirArgs, partition: &str, file: &str, at: &str, r: &Record, bytes: &[u8]) {
    let mut v = record_json(partition, file, r);
    v[if d.url.is_some() { "key" } else { "path" }] = json!(at);
    v["record"] = serde_json::from_slice(bytes).unwrap_or(Value::Null);
    if d.json {
        print_json(&v);
        return;
    }
    if d.url.is_some() {
        println!("redis key     {at}");
    } else {
        println!("file          {at}");
    }
    println!("reservation   {}", r.reservation_id);
    println!(
        "server        {}",
        r.base_url.as_deref().unwrap_or("(unrecorded)")
    );
    println!("mode          {}", r.mode);
    println!("key           {}", r.idempotency_key().unwrap_or_default());
    println!(
        "recorded      {} ({})",
        r.recorded_at_ms.map_or("-".into(), |t| t.to_string()),
        age(r.recorded_at_ms)
    );
    println!(
        "not before    {}",
        r.not_before_ms.map_or("-".into(), |t| t.to_string())
    );
    println!("record        {}", String::from_utf8_lossy(bytes));
}

fn quarantine(d: &DirArgs) -> Result<(), String> {
    let scans = scan_all(d)?;
    let rows: Vec<Value> = scans
        .iter()
        .flat_map(|(p, s)| {
            s.quarantined.iter().map(move |q| {
                json!({"partition": p, "file": q.file, "category": q.category,
                       "reason": q.reason, "quarantined_at_ms": q.since_ms})
            })
        })
        .collect();
    if d.json {
        let (name, place) = where_json(d)?;
        print_json(&json!({name: place, "quarantined": rows}));
        return Ok(());
    }
    println!("journal {}: {} quarantined", label(d)?, rows.len());
    for r in &rows {
        let why = match r["category"].as_str() {
            Some("unrecoverable") => {
                "reservation expired and the record has no event fallback body".to_string()
            }
            _ => r["reason"].as_str().unwrap_or("(parses now)").to_string(),
        };
        println!(
            "  {}/{}  {}  {}  {why}",
            r["partition"].as_str().unwrap_or(""),
            r["file"].as_str().unwrap_or(""),
            r["category"].as_str().unwrap_or(""),
            age(r["quarantined_at_ms"].as_u64()),
        );
    }
    Ok(())
}

fn outcome_json(id: &str, o: &SettleOutcome) -> Value {
    match o {
        SettleOutcome::Committed(r) => {
            json!({"reservation_id": id, "outcome": "committed", "charged": r.charged})
        }
        SettleOutcome::RecoveredViaEvent(r) => json!({"reservation_id": id,
            "outcome": "recovered_via_event", "event_id": r.response.event_id, "charged": r.charged}),
        SettleOutcome::Pending {
            reason,
            last_error,
            not_before_ms,
            ..
        } => json!({"reservation_id": id, "outcome": "pending",
            "reason": reason, "last_error": last_error.as_ref().map(|k| k.name()), "not_before_ms": not_before_ms}),
        SettleOutcome::Rejected(r) => {
            json!({"reservation_id": id, "outcome": "rejected", "error": r.kind.name(),
            "http_status": r.http_status, "message": r.message})
        }
    }
}

async fn settle(d: &DirArgs, id: &IdentityArgs, deadline: Option<Duration>) -> Result<(), Failure> {
    let mut config = Config::new(id.base_url.clone(), id.api_key.clone()).with_journal_dir(root(d));
    if let Some(t) = &id.tenant {
        config = config.with_tenant(t.clone());
    }
    if let Some(u) = &d.url {
        config = config.with_journal_url(u.clone());
    }
    let settler = Settler::new(&config, SettleConfig::default()).map_err(|e| e.to_string())?;
    let report = match deadline {
        Some(t) => settler.drain(t).await,
        None => settler.flush().await,
    };
    let outcomes: Vec<Value> = report
        .outcomes
        .iter()
        .map(|(i, o)| outcome_json(i, o))
        .collect();
    let remaining: Vec<Value> = report
        .remaining
        .iter()
        .map(|r| json!({"reservation_id": r.reservation_id, "mode": r.mode.as_str(), "recorded_at_ms": r.recorded_at_ms,
                        "not_before_ms": r.not_before_ms, "file": r.file}))
        .collect();
    if d.json {
        print_json(
            &json!({"partition": settler.journal().map(|j| j.partition().to_string()),
            "settled": report.settled(), "outcomes": outcomes, "remaining": remaining, "quarantined": report.quarantined}),
        );
    } else {
        println!(
            "settled {}, quarantined {}, remaining {}",
            report.settled(),
            report.quarantined.len(),
            report.remaining.len()
        );
        for o in &outcomes {
            println!(
                "  {}: {}",
                o["reservation_id"].as_str().unwrap_or(""),
                o["outcome"].as_str().unwrap_or("")
            );
        }
        for r in &report.remaining {
            println!("  left in place: {} ({} mode)", r.reservation_id, r.mode);
        }
        for q in &report.quarantined {
            println!("  QUARANTINED: {q} (see `cycles journal quarantine`)");
        }
    }
    if !report.quarantined.is_empty() {
        return Err(Failure {
            code: EXIT_QUARANTINED,
            message: format!(
                "{} file(s) quarantined during this run; they may hold spend: see `cycles journal quarantine`{}",
                report.quarantined.len(),
                if report.remaining.is_empty() {
                    String::new()
                } else {
                    format!("; {} record(s) left pending", report.remaining.len())
                }
            ),
        });
    }
    if report.remaining.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{} record(s) left pending in the journal",
            report.remaining.len()
        )
        .into())
    }
}

/// Exit status of `replay`/`drain` when a file was quarantined during the run.
pub const EXIT_QUARANTINED: u8 = 3;

/// Why a `cycles journal` command did not succeed, and its exit status.
#[derive(Debug)]
pub struct Failure {
    /// Process exit status (1, or [`EXIT_QUARANTINED`]).
    pub code: u8,
    /// What to print.
    pub message: String,
}

impl From<String> for Failure {
    fn from(message: String) -> Self {
        Failure { code: 1, message }
    }
}

/// Runs `cycles journal ...`.
pub async fn run(args: JournalArgs) -> Result<(), Failure> {
    match &args.command {
        JournalCommand::List(d) => list(d).map_err(Failure::from),
        JournalCommand::Show { target, dir } => show(target, dir).map_err(Failure::from),
        JournalCommand::Quarantine(d) => quarantine(d).map_err(Failure::from),
        JournalCommand::Replay { dir, id } => settle(dir, id, None).await,
        JournalCommand::Copy {
            from,
            to,
            remove_source,
            json,
        } => copy(from, to, *remove_source, *json),
        JournalCommand::Drain {
            dir,
            id,
            deadline_ms,
        } => settle(dir, id, Some(Duration::from_millis(*deadline_ms))).await,
    }
}
