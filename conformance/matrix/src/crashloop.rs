//! The crash loop across languages (issue 32, `scripts/crashloop.sh SEED ITERATIONS`): each
//! iteration a writer face runs guarded actions (`work`, PROTOCOL.md) against one local server
//! with a journal, and is SIGKILLed at a chosen point: before the journal write (mid-work,
//! the actual only in memory), after it (a new record inode), mid-request (the commit held
//! at the server by a `delay` fault), after the server applied (the response held or
//! dropped), or mid-heartbeat (a 1 s TTL, killed when an extend arrives). A different face
//! then starts on the same journal and drains it. The ledger must hold every known actual
//! exactly once, in its amount, and nothing else; an estimate left held must expire.
//!
//! An actual is *known* when it was durable or sent when the writer died: its action ended
//! before the kill, its record was in the journal after the kill, or a settlement request
//! for it had reached the server. An actual the writer held only in memory is lost with the
//! process (the recovery profile's at-most-once edge); its estimate must then expire, never
//! be committed. Everything is drawn from the seed: the faces, the actions, the point, the
//! faults, whether the reservation expires before the drain (commits turn into events).

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use cycles_core::{Config, CyclesClient, ErrorKind, ReservationStatus};
use cycles_local_server::{
    BudgetSeed, Fault, FaultRule, LedgerEntry, LocalServer, Operation, ServerConfig,
};
use serde_json::{json, Value};

use crate::crashloop_journal::{files, Place};
use crate::face::Face;

const KEY: &str = "cycles-local-key";
const TENANT: &str = "acme";
const UNIT: &str = "TOKENS";
/// Every face must take part: a missing one fails the run, never shrinks it.
pub const FACES: [&str; 6] = ["rust", "python", "node", "jvm", "c", "kotlin"];
/// How long a writer may run before its kill point must have been reached.
const TRIGGER_LIMIT: Duration = Duration::from_secs(30);
/// The drain's own bound (30 s) and the driver's start and close.
const DRAIN_LIMIT: Duration = Duration::from_secs(45);
/// Beyond every TTL and grace the loop uses: an estimate left held has expired after it.
const EXPIRE_MS: u64 = 200_000;

/// Where the writer is killed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Point {
    /// During the work of the action (its reservation applied, the actual not yet journaled).
    BeforeJournal,
    /// Right after a new journal record appeared (the commit often held or failing).
    AfterJournal,
    /// The commit reached the server and is held there by a `delay` fault.
    MidRequest,
    /// The server applied the commit; its response is held or dropped.
    AfterApplied,
    /// A heartbeat extend reached the server (1 s TTL, the work sleeping through extends).
    MidHeartbeat,
}

const POINTS: [Point; 5] = [
    Point::BeforeJournal,
    Point::AfterJournal,
    Point::MidRequest,
    Point::AfterApplied,
    Point::MidHeartbeat,
];

impl Point {
    fn name(self) -> &'static str {
        match self {
            Point::BeforeJournal => "before_journal",
            Point::AfterJournal => "after_journal",
            Point::MidRequest => "mid_request",
            Point::AfterApplied => "after_applied",
            Point::MidHeartbeat => "mid_heartbeat",
        }
    }
}

/// The run's figures.
#[derive(Default, Debug)]
struct Stats {
    iterations: usize,
    kills: BTreeMap<&'static str, usize>,
    exited_before_kill: usize,
    written_by: BTreeMap<String, usize>,
    drained_by: BTreeMap<String, usize>,
    actions: usize,
    known: usize,
    lost_in_memory: usize,
    by_commit: usize,
    by_event: usize,
    by_replay: usize,
    expired_held: usize,
    expired_before_drain: usize,
    drainers_killed: usize,
    redis_restarts_before_drain: usize,
    redis_restarts_mid_drain: usize,
}

/// One action of the writer's `work` request.
struct Action {
    key: String,
    estimate: i64,
    actual: i64,
    ttl_ms: Option<i64>,
    sleep_ms: u64,
}

/// With a Redis journal: Redis SIGKILLed and started again on its AOF, drawn per iteration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RedisRestart {
    /// Between the writer's kill and the drain.
    BeforeDrain,
    /// Down for `down_ms` from the moment the drain's first replay reaches the server (the
    /// record's removal after it fails, so the drain must wait Redis out and replay again).
    MidDrain { down_ms: u64 },
}

/// The plan of one iteration, all drawn from the seed.
struct Plan {
    writer: usize,
    drainer: usize,
    point: Point,
    /// The action whose point kills the writer.
    target: usize,
    actions: Vec<Action>,
    fault: Option<FaultRule>,
    /// Milliseconds a fault may hold a request at the server.
    hold_ms: u64,
    /// Kill this long after the point is reached.
    extra: Duration,
    /// Move the server clock past every expiry between the kill and the drain.
    expire_before_drain: bool,
    /// Kill the first drainer too, while its first replay is held this long at the server
    /// (before the server applies it, or after: `true`); a third face finishes the drain.
    kill_drainer: Option<(u64, bool)>,
    /// The third face.
    last_drainer: usize,
    /// With a Redis journal, drawn from a stream of its own (a seed draws the same plans
    /// either way).
    redis_restart: Option<RedisRestart>,
}

fn rule(operation: Operation, skip: usize, times: u32, fault: Fault) -> FaultRule {
    FaultRule {
        operation,
        reservation_id: None,
        skip: skip as u32,
        every: 1,
        times,
        fault,
    }
}

fn plan(
    rng: &mut fastrand::Rng,
    seed: u64,
    i: usize,
    (writer, drainer, last_drainer): (usize, usize, usize),
) -> Plan {
    let point = POINTS[rng.usize(0..POINTS.len())];
    let n = rng.usize(1..=3);
    let target = rng.usize(0..n);
    let actions = (0..n)
        .map(|a| {
            let on_target = a == target;
            Action {
                key: format!("crash-{seed}-{i}-{a}"),
                estimate: 1000,
                actual: rng.i64(1..=1000),
                ttl_ms: (on_target && point == Point::MidHeartbeat).then_some(1000),
                sleep_ms: match point {
                    Point::BeforeJournal if on_target => rng.u64(200..600),
                    Point::MidHeartbeat if on_target => 3000,
                    _ => rng.u64(0..30),
                },
            }
        })
        .collect::<Vec<_>>();
    let commit = Operation::CommitReservation;
    let (fault, hold_ms) = match point {
        Point::BeforeJournal => (None, 0),
        Point::AfterJournal => match rng.u32(0..3) {
            0 => {
                let ms = rng.u64(300..1500);
                (Some(rule(commit, target, 1, Fault::Delay { ms })), ms)
            }
            1 => (
                Some(rule(
                    commit,
                    target,
                    rng.u32(1..3),
                    Fault::ServerError { status: 503 },
                )),
                0,
            ),
            _ => (
                Some(rule(commit, target, rng.u32(1..3), Fault::ConnectionReset)),
                0,
            ),
        },
        Point::MidRequest => {
            let ms = rng.u64(300..1500);
            (Some(rule(commit, target, 1, Fault::Delay { ms })), ms)
        }
        Point::AfterApplied => {
            if rng.bool() {
                let ms = rng.u64(300..1500);
                (
                    Some(rule(commit, target, 1, Fault::DelayAfterApply { ms })),
                    ms,
                )
            } else {
                (
                    Some(rule(commit, target, 1, Fault::DropResponseAfterApply)),
                    0,
                )
            }
        }
        Point::MidHeartbeat => {
            if rng.bool() {
                let ms = rng.u64(200..800);
                (
                    Some(rule(
                        Operation::ExtendReservation,
                        0,
                        1,
                        Fault::Delay { ms },
                    )),
                    ms,
                )
            } else {
                (None, 0)
            }
        }
    };
    let extra = match point {
        // Somewhere in the work's sleep, after the reservation was applied.
        Point::BeforeJournal => Duration::from_millis(rng.u64(0..actions[target].sleep_ms / 2)),
        _ => Duration::from_micros(rng.u64(0..3000)),
    };
    let expire_before_drain =
        matches!(point, Point::AfterJournal | Point::MidRequest) && rng.u32(0..3) == 0;
    let kill_drainer = (rng.u32(0..4) == 0).then(|| (rng.u64(300..1000), rng.bool()));
    Plan {
        writer,
        drainer,
        point,
        target,
        actions,
        fault,
        hold_ms,
        extra,
        expire_before_drain,
        kill_drainer,
        last_drainer,
        redis_restart: None,
    }
}

/// The Redis restart of one iteration (with a Redis journal): before the drain 1 in 3, in
/// the middle of it 1 in 6 (only when the first drainer is not killed too).
fn redis_restart(rng: &mut fastrand::Rng, p: &Plan) -> Option<RedisRestart> {
    match rng.u32(0..6) {
        0 | 1 => Some(RedisRestart::BeforeDrain),
        2 if p.kill_drainer.is_none() => Some(RedisRestart::MidDrain {
            down_ms: rng.u64(200..800),
        }),
        _ => None,
    }
}

fn server_config() -> ServerConfig {
    ServerConfig {
        budgets: vec![BudgetSeed {
            scope: format!("tenant:{TENANT}"),
            unit: UNIT.into(),
            allocated: 1_000_000_000_000,
            ..BudgetSeed::default()
        }],
        ..ServerConfig::default()
    }
}

/// The reservation id of the ledger's reserve under `key`, once applied.
fn reserved(server: &LocalServer, from: usize, key: &str) -> Option<String> {
    server
        .ledger()
        .into_iter()
        .skip(from)
        .find(|e| e.kind == "reserve" && e.idempotency_key == key)
        .and_then(|e| e.reservation_id)
}

/// Whether `key` is the action's base key or derived from it (`{key}:commit`, ...).
fn belongs(key: &str, base: &str) -> bool {
    key == base || key.strip_prefix(base).is_some_and(|r| r.starts_with(':'))
}

/// Ledger entries and requests of this iteration.
struct View {
    ledger: Vec<LedgerEntry>,
}

impl View {
    fn of(server: &LocalServer, ledger_from: usize) -> View {
        View {
            ledger: server.ledger().into_iter().skip(ledger_from).collect(),
        }
    }

    fn count(&self, kind: &str) -> usize {
        self.ledger.iter().filter(|e| e.kind == kind).count()
    }
}

fn count_ops(server: &LocalServer, from: usize, op: Operation, answered: bool) -> usize {
    server
        .requests()
        .iter()
        .skip(from)
        .filter(|r| r.operation == Some(op) && (!answered || r.status.is_some()))
        .count()
}

/// A spawned face process answering one request: a writer (to be killed) or a drainer.
struct Driver {
    child: std::process::Child,
    answer: std::sync::mpsc::Receiver<String>,
}

fn argv(program: &str) -> Result<Vec<String>, String> {
    if program == "builtin" {
        let me = std::env::current_exe().map_err(|e| e.to_string())?;
        Ok(vec![me.to_string_lossy().into_owned(), "face".into()])
    } else {
        Ok(vec![program.to_string()])
    }
}

fn spawn_driver(program: &str, request: &Value, log: &Path) -> Result<Driver, String> {
    let argv = argv(program)?;
    let stderr = std::fs::File::create(log).map_err(|e| format!("{}: {e}", log.display()))?;
    let mut child = Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .map_err(|e| format!("cannot start {argv:?}: {e}"))?;
    let mut stdin = child.stdin.take().expect("piped stdin");
    // One request, then end of input: the driver answers it and exits, unless killed first.
    writeln!(stdin, "{request}").map_err(|e| format!("write to {argv:?}: {e}"))?;
    drop(stdin);
    let stdout = child.stdout.take().expect("piped stdout");
    let (tx, answer) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        if BufReader::new(stdout).read_line(&mut line).is_ok() && !line.is_empty() {
            let _ = tx.send(line);
        }
    });
    Ok(Driver { child, answer })
}

/// The crash loop's options.
pub struct Opts {
    /// Everything is drawn from this seed.
    pub seed: u64,
    /// How many writer/drainer pairs.
    pub iterations: usize,
    /// The faces: NAME=PROGRAM; every one of [`FACES`] must be given, once.
    pub faces: Vec<(String, String)>,
    /// A fresh directory is made inside for the journals and the writers' logs.
    pub work: PathBuf,
    /// Test-only: no face drains, so the known actuals a writer left journaled stay
    /// unapplied; the run must fail (scripts/crashloop.sh proves the loop can).
    pub skip_drain: bool,
    /// Journal to a Redis the loop starts (`redis-server` on PATH, AOF, `appendfsync
    /// always`) instead of a directory; each writer's own directory is removed after its
    /// kill, and Redis is restarted when an iteration draws it.
    pub redis: bool,
}

/// Runs the loop; Ok(false) when an iteration failed (each failure printed).
pub fn run(opts: &Opts) -> Result<bool, String> {
    if let Some((n, _)) = opts
        .faces
        .iter()
        .find(|(n, _)| !FACES.contains(&n.as_str()))
    {
        return Err(format!("unknown face `{n}`"));
    }
    // In FACES order whatever the command line's, so a seed draws the same pairs.
    let mut faces = Vec::new();
    for want in FACES {
        let given: Vec<&(String, String)> = opts.faces.iter().filter(|(n, _)| n == want).collect();
        match given.as_slice() {
            [one] => faces.push((*one).clone()),
            [] => {
                return Err(format!(
                "the crash loop runs every face, and `{want}` is missing (--face {want}=PROGRAM)"
            ))
            }
            _ => return Err(format!("the face `{want}` is given more than once")),
        }
    }
    let opts = &Opts {
        faces,
        work: opts.work.clone(),
        ..*opts
    };
    preflight(opts)?;
    let root = opts
        .work
        .join(format!("cycles-crashloop-{}", std::process::id()));
    std::fs::create_dir_all(&root).map_err(|e| format!("{}: {e}", root.display()))?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let result = rt.block_on(run_loop(opts, &root));
    if matches!(result, Ok(true)) {
        let _ = std::fs::remove_dir_all(&root);
    } else {
        eprintln!(
            "crash loop: journals and writer logs kept in {}",
            root.display()
        );
    }
    result
}

/// Every face must start and answer before the loop: a face that cannot is an error, never
/// a face left out (a short run does not use every face both ways).
fn preflight(opts: &Opts) -> Result<(), String> {
    for (name, program) in &opts.faces {
        let mut f = Face::spawn(name, &argv(program)?)?;
        let probe = json!({"op": "journal_names", "reservation_id": "crashloop-preflight"});
        let got = f.batch(vec![probe])?;
        f.close()?;
        if got[0].get("ok").is_none() {
            return Err(format!("the {name} face does not answer: {}", got[0]));
        }
    }
    Ok(())
}

async fn run_loop(opts: &Opts, root: &Path) -> Result<bool, String> {
    let server = LocalServer::start(server_config())
        .await
        .map_err(|e| format!("cannot start the local server: {e}"))?;
    let inspect = CyclesClient::new(Config::new(server.url(), KEY).with_tenant(TENANT))
        .map_err(|e| e.to_string())?;
    let mut place = if opts.redis {
        Place::redis(&root.join("redis"), &server.url(), KEY, TENANT)?
    } else {
        Place::Dir
    };
    let mut rng = fastrand::Rng::with_seed(opts.seed);
    let mut redis_rng = fastrand::Rng::with_seed(opts.seed ^ 0x5ed1_5000);
    let mut stats = Stats::default();
    let mut failures = Vec::new();
    let started = Instant::now();
    let n = opts.faces.len();
    let mut order: Vec<usize> = Vec::new();
    let mut shift = 1;
    for i in 0..opts.iterations {
        // Each block of as many iterations as faces has every face write once and drain
        // once, never its own journal: a short run still covers every face both ways.
        if i % n == 0 {
            order = (0..n).collect();
            rng.shuffle(&mut order);
            shift = rng.usize(1..n);
        }
        let writer = order[i % n];
        let drainer = order[(i % n + shift) % n];
        // A third face, when the first drainer is killed too.
        let last = (1..n)
            .map(|k| (drainer + k) % n)
            .find(|&f| f != writer)
            .unwrap_or(drainer);
        let mut p = plan(&mut rng, opts.seed, i, (writer, drainer, last));
        if opts.redis {
            p.redis_restart = redis_restart(&mut redis_rng, &p);
        }
        let label = format!(
            "iteration {i}: {} -> {}, {} on action {} of {}{}",
            opts.faces[writer].0,
            opts.faces[drainer].0,
            p.point.name(),
            p.target,
            p.actions.len(),
            if p.expire_before_drain {
                ", expired before the drain"
            } else {
                ""
            }
        ) + match p.redis_restart {
            Some(RedisRestart::BeforeDrain) => ", Redis restarted before the drain",
            Some(RedisRestart::MidDrain { .. }) => ", Redis restarted mid-drain",
            None => "",
        };
        match iteration(&server, &inspect, &mut place, opts, root, i, &p, &mut stats).await {
            Ok(problems) if problems.is_empty() => {}
            Ok(problems) => {
                for pr in problems {
                    failures.push(format!("{label}: {pr}"));
                }
            }
            Err(e) => failures.push(format!("{label}: {e}")),
        }
        if let Some(f) = failures.last().filter(|f| f.starts_with(&label)) {
            eprintln!("FAIL {f}");
        }
        if (i + 1) % 10 == 0 || i + 1 == opts.iterations {
            eprintln!(
                "crash loop: {} of {} iterations, {:.0} s",
                i + 1,
                opts.iterations,
                started.elapsed().as_secs_f64()
            );
        }
    }
    stats.iterations = opts.iterations;
    print_stats(opts, &stats, started.elapsed());
    let killed: usize = stats.kills.values().sum();
    if killed * 2 < opts.iterations {
        failures.push(format!(
            "only {killed} of {} writers were really killed",
            opts.iterations
        ));
    }
    if opts.iterations >= FACES.len() {
        for (name, _) in &opts.faces {
            if !stats.written_by.contains_key(name) || !stats.drained_by.contains_key(name) {
                failures.push(format!("the {name} face did not both write and drain"));
            }
        }
    }
    for f in &failures {
        eprintln!("FAIL {f}");
    }
    Ok(failures.is_empty())
}

fn print_stats(opts: &Opts, s: &Stats, took: Duration) {
    let kills: Vec<String> = POINTS
        .iter()
        .map(|p| format!("{} {}", p.name(), s.kills.get(p.name()).unwrap_or(&0)))
        .collect();
    let faces = |m: &BTreeMap<String, usize>| {
        m.iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    println!(
        "crash loop, seed {}: {} iterations in {:.0} s\n\
         - kills: {} (by point: {}); writers that finished before their point: {}\n\
         - writers: {}; drainers: {}\n\
         - actions started: {}; known actuals: {}; actuals lost in memory with the process: {}\n\
         - known actuals settled: by commit {}, by event {} (replayed from the journal by the last draining face: {}); expired before the drain: {} iterations\n\
         - first drainers killed mid-replay (a third face finished the drain): {}\n\
         - estimates left held, expired at the server (never committed): {}{}",
        opts.seed,
        s.iterations,
        took.as_secs_f64(),
        s.kills.values().sum::<usize>(),
        kills.join(", "),
        s.exited_before_kill,
        faces(&s.written_by),
        faces(&s.drained_by),
        s.actions,
        s.known,
        s.lost_in_memory,
        s.by_commit,
        s.by_event,
        s.by_replay,
        s.expired_before_drain,
        s.drainers_killed,
        s.expired_held,
        if opts.redis {
            format!(
                "\n- journal: Redis (AOF, appendfsync always; each writer's own directory removed \
                 after its kill); Redis SIGKILLed and restarted: before the drain {}, mid-drain {}",
                s.redis_restarts_before_drain, s.redis_restarts_mid_drain
            )
        } else {
            String::new()
        },
    );
}

#[allow(clippy::too_many_arguments)]
async fn iteration(
    server: &LocalServer,
    inspect: &CyclesClient,
    place: &mut Place,
    opts: &Opts,
    root: &Path,
    i: usize,
    p: &Plan,
    stats: &mut Stats,
) -> Result<Vec<String>, String> {
    // The writer's journal directory; with Redis, its "machine" (removed after the kill) and
    // the drainers' own.
    let journal = root.join(format!("journal-{i}"));
    let drain_dir = match place {
        Place::Dir => journal.clone(),
        Place::Redis { .. } => root.join(format!("journal-{i}-drainer")),
    };
    for d in [&journal, &drain_dir] {
        std::fs::create_dir_all(d).map_err(|e| format!("{}: {e}", d.display()))?;
    }
    place.begin(i)?;
    let journal_url = place.url().map(str::to_string);
    let (wname, wprog) = &opts.faces[p.writer];
    let (dname, dprog) = &opts.faces[p.drainer];
    server.clear_faults();
    if let Some(f) = &p.fault {
        server.add_fault(f.clone());
    }
    let ledger_from = server.ledger().len();
    let req_from = server.requests().len();
    let actions: Vec<Value> = p
        .actions
        .iter()
        .map(|a| {
            json!({"key": a.key, "estimate": a.estimate, "actual": a.actual,
                   "ttl_ms": a.ttl_ms, "sleep_ms": a.sleep_ms})
        })
        .collect();
    let request = json!({"id": 1, "op": "work", "url": server.url(), "api_key": KEY,
        "tenant": TENANT, "default_unit": UNIT, "journal_dir": journal.to_string_lossy(),
        "journal_url": journal_url, "actions": actions});
    let log = root.join(format!("writer-{i}-{wname}.log"));
    let mut w = spawn_driver(wprog, &request, &log)?;
    *stats.written_by.entry(wname.clone()).or_default() += 1;
    *stats.drained_by.entry(dname.clone()).or_default() += 1;

    // Run until the point (then SIGKILL by PID) or until the writer ends on its own.
    let t = Instant::now();
    let mut fired: Option<Instant> = None;
    let mut finished = None;
    loop {
        if let Some(status) = w.child.try_wait().map_err(|e| e.to_string())? {
            finished = Some(status);
            break;
        }
        let now = Instant::now();
        if fired.is_none() {
            let hit = match p.point {
                Point::BeforeJournal => {
                    count_ops(server, req_from, Operation::CreateReservation, true) > p.target
                }
                // The target action's own record (every commit is journaled first).
                Point::AfterJournal => reserved(server, ledger_from, &p.actions[p.target].key)
                    .is_some_and(|rid| place.has_record(&journal, &rid)),
                Point::MidRequest => {
                    count_ops(server, req_from, Operation::CommitReservation, false) > p.target
                }
                Point::AfterApplied => View::of(server, ledger_from).count("commit") > p.target,
                Point::MidHeartbeat => {
                    count_ops(server, req_from, Operation::ExtendReservation, false) > 0
                }
            };
            if hit {
                fired = Some(now);
            }
        }
        if fired.is_some_and(|f| now - f >= p.extra) {
            break;
        }
        if now - t > TRIGGER_LIMIT {
            let _ = w.child.kill();
            let _ = w.child.wait();
            return Err(format!(
                "the writer ({wname}) neither ended nor reached its point in {TRIGGER_LIMIT:?}; log {}",
                log.display()
            ));
        }
        if fired.is_some() {
            std::thread::yield_now();
        } else {
            tokio::time::sleep(Duration::from_micros(500)).await;
        }
    }
    let killed_at = Instant::now();
    let killed = match finished {
        Some(status) => {
            let answer = w.answer.recv_timeout(Duration::from_secs(2)).ok();
            let ok = status.success()
                && answer
                    .as_deref()
                    .and_then(|a| serde_json::from_str::<Value>(a).ok())
                    .is_some_and(|v| v.get("ok").is_some());
            if !ok {
                return Err(format!(
                    "the writer ({wname}) ended {status} before its point, answering {answer:?}; log {}",
                    log.display()
                ));
            }
            stats.exited_before_kill += 1;
            false
        }
        None => {
            w.child.kill().map_err(|e| format!("kill: {e}"))?;
            let status = w.child.wait().map_err(|e| e.to_string())?;
            if status.signal() == Some(9) {
                *stats.kills.entry(p.point.name()).or_default() += 1;
                true
            } else if status.success() {
                stats.exited_before_kill += 1;
                false
            } else {
                return Err(format!(
                    "the writer ({wname}) ended {status}; log {}",
                    log.display()
                ));
            }
        }
    };

    // What was durable or sent when the writer died.
    let on_disk = place.journaled(&journal)?;
    let mut problems = Vec::new();
    if let Place::Redis { .. } = place {
        // The writer's machine is lost: nothing of it may be needed to drain.
        let local: Vec<PathBuf> = files(&journal).into_iter().map(|(f, _)| f).collect();
        if local
            .iter()
            .any(|f| f.extension().is_some_and(|e| e == "json"))
        {
            problems.push(format!("a Redis writer journaled locally: {local:?}"));
        }
        std::fs::remove_dir_all(&journal).map_err(|e| format!("{}: {e}", journal.display()))?;
        if p.redis_restart == Some(RedisRestart::BeforeDrain) {
            let r = place.server().expect("a Redis place");
            tokio::task::block_in_place(|| r.restart())?;
            stats.redis_restarts_before_drain += 1;
        }
    }
    let sent: Vec<(Option<String>, Option<String>)> = server
        .requests()
        .into_iter()
        .skip(req_from)
        .filter(|r| {
            matches!(
                r.operation,
                Some(Operation::CommitReservation | Operation::CreateEvent)
            )
        })
        .map(|r| (r.reservation_id, r.idempotency_key))
        .collect();
    server.clear_faults();
    if p.expire_before_drain {
        server.advance_clock(EXPIRE_MS);
        stats.expired_before_drain += 1;
    }

    let mut hold_until = killed_at + Duration::from_millis(p.hold_ms);
    let drain = json!({"id": 1, "op": "drain", "url": server.url(), "api_key": KEY,
                       "tenant": TENANT, "journal_dir": drain_dir.to_string_lossy(),
                       "journal_url": journal_url, "timeout_ms": 30_000});
    let (mut dname, mut dprog) = (dname, dprog);
    if let Some((ms, applied)) = p
        .kill_drainer
        .filter(|_| !on_disk.is_empty() && !opts.skip_drain)
    {
        // The first drainer dies too, its replay held at the server (a commit, or the event
        // of an expired reservation) before or after it is applied; a third face then
        // finishes the drain.
        let hold = || {
            if applied {
                Fault::DelayAfterApply { ms }
            } else {
                Fault::Delay { ms }
            }
        };
        server.add_fault(rule(Operation::CommitReservation, 0, 1, hold()));
        server.add_fault(rule(Operation::CreateEvent, 0, 1, hold()));
        let from = server.requests().len();
        let log = root.join(format!("drainer-{i}-{dname}.log"));
        let mut d = spawn_driver(dprog, &drain, &log)?;
        let t = Instant::now();
        loop {
            if let Some(status) = d.child.try_wait().map_err(|e| e.to_string())? {
                if !status.success() {
                    return Err(format!(
                        "the first drainer ({dname}) ended {status}; log {}",
                        log.display()
                    ));
                }
                break;
            }
            if count_ops(server, from, Operation::CommitReservation, false)
                + count_ops(server, from, Operation::CreateEvent, false)
                > 0
            {
                d.child.kill().map_err(|e| format!("kill: {e}"))?;
                if d.child.wait().map_err(|e| e.to_string())?.signal() == Some(9) {
                    stats.drainers_killed += 1;
                }
                break;
            }
            if t.elapsed() > TRIGGER_LIMIT {
                let _ = d.child.kill();
                let _ = d.child.wait();
                return Err(format!(
                    "the first drainer ({dname}) sent no replay; log {}",
                    log.display()
                ));
            }
            tokio::time::sleep(Duration::from_micros(500)).await;
        }
        server.clear_faults();
        hold_until = hold_until.max(Instant::now() + Duration::from_millis(ms));
        (dname, dprog) = (&opts.faces[p.last_drainer].0, &opts.faces[p.last_drainer].1);
        *stats.drained_by.entry(dname.clone()).or_default() += 1;
        let _ = std::fs::remove_file(&log);
    }

    // A different face starts on the same journal and drains it.
    let drain_log = root.join(format!("drainer-{i}-{dname}-last.log"));
    let answers = if opts.skip_drain {
        vec![json!({"ok": {"settled": 0, "pending": 0, "quarantined": 0}})]
    } else {
        // Its diagnostics go to a log too, shown only when the iteration fails.
        let log = drain_log.clone();
        let from = server.requests().len();
        let mut d = spawn_driver(dprog, &drain, &log)?;
        let until = Instant::now() + DRAIN_LIMIT;
        let mut restart = match p.redis_restart {
            Some(RedisRestart::MidDrain { down_ms }) => Some(down_ms),
            _ => None,
        };
        let answer = loop {
            let got = tokio::task::block_in_place(|| {
                d.answer
                    .recv_timeout(Duration::from_millis(if restart.is_some() {
                        1
                    } else {
                        50
                    }))
            });
            match got {
                Ok(a) => break Ok(a),
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                    break Err(std::sync::mpsc::RecvTimeoutError::Disconnected)
                }
                Err(_) if Instant::now() >= until => {
                    break Err(std::sync::mpsc::RecvTimeoutError::Timeout)
                }
                Err(_) => {}
            }
            let replayed = count_ops(server, from, Operation::CommitReservation, false)
                + count_ops(server, from, Operation::CreateEvent, false);
            if let Some(down_ms) = restart.filter(|_| replayed > 0) {
                restart = None;
                let r = place.server().expect("a Redis place");
                r.kill();
                tokio::time::sleep(Duration::from_millis(down_ms)).await;
                tokio::task::block_in_place(|| r.restart())?;
                stats.redis_restarts_mid_drain += 1;
            }
        };
        let status = match answer {
            Ok(_) => d.child.wait().map_err(|e| e.to_string())?,
            Err(_) => {
                let _ = d.child.kill();
                let _ = d.child.wait();
                return Err(format!(
                    "the drain ({dname}) did not answer in {DRAIN_LIMIT:?}; log {}",
                    log.display()
                ));
            }
        };
        let answer: Value = answer
            .ok()
            .and_then(|a| serde_json::from_str(&a).ok())
            .unwrap_or(Value::Null);
        if !status.success() {
            return Err(format!(
                "the drain ({dname}) ended {status} answering {answer}; log {}",
                log.display()
            ));
        }
        // Kept until the iteration is checked: shown when it fails.
        vec![answer]
    };
    let report = &answers[0]["ok"];
    if report.is_null() {
        problems.push(format!("the drain ({dname}) answered {}", answers[0]));
    } else {
        if report["pending"] != json!(0) || report["quarantined"] != json!(0) {
            problems.push(format!("the drain ({dname}) left {report}"));
        }
        stats.by_replay += report["settled"].as_u64().unwrap_or(0) as usize;
    }
    // A request a fault held must have finished at the server before the ledger is read.
    if let Some(rest) =
        (hold_until + Duration::from_millis(150)).checked_duration_since(Instant::now())
    {
        tokio::time::sleep(rest).await;
    }
    // Past every TTL and grace: what is still held has expired.
    server.advance_clock(EXPIRE_MS);

    let view = View::of(server, ledger_from);
    let rids: BTreeSet<String> = view
        .ledger
        .iter()
        .filter(|e| e.kind == "reserve")
        .filter_map(|e| e.reservation_id.clone())
        .collect();
    for e in &view.ledger {
        // A heartbeat's extend has a key of its own; it belongs by its reservation.
        let ours = p
            .actions
            .iter()
            .any(|a| belongs(&e.idempotency_key, &a.key))
            || (e.kind == "extend" && e.reservation_id.as_ref().is_some_and(|r| rids.contains(r)));
        if !ours {
            problems.push(format!(
                "a ledger entry of no action: {} {:?}",
                e.kind, e.idempotency_key
            ));
        }
    }
    for (a_i, a) in p.actions.iter().enumerate() {
        let Some(rid) = view
            .ledger
            .iter()
            .find(|e| e.kind == "reserve" && e.idempotency_key == a.key)
            .and_then(|e| e.reservation_id.clone())
        else {
            // Never reserved: the writer died before this action began.
            if a_i < p.target || !killed {
                problems.push(format!("{}: never reserved", a.key));
            }
            continue;
        };
        stats.actions += 1;
        let reserves = view
            .ledger
            .iter()
            .filter(|e| e.kind == "reserve" && belongs(&e.idempotency_key, &a.key))
            .count();
        let commits: Vec<&LedgerEntry> = view
            .ledger
            .iter()
            .filter(|e| e.kind == "commit" && e.reservation_id.as_deref() == Some(rid.as_str()))
            .collect();
        let events: Vec<&LedgerEntry> = view
            .ledger
            .iter()
            .filter(|e| e.kind == "event" && belongs(&e.idempotency_key, &a.key))
            .collect();
        let releases = view
            .ledger
            .iter()
            .filter(|e| e.kind == "release" && e.reservation_id.as_deref() == Some(rid.as_str()))
            .count();
        let known = a_i < p.target
            || !killed
            || on_disk.contains(&rid)
            || sent.iter().any(|(r, k)| {
                r.as_deref() == Some(rid.as_str())
                    || k.as_deref().is_some_and(|k| belongs(k, &a.key))
            });
        let settled = commits.len() + events.len();
        if reserves != 1 {
            problems.push(format!("{}: {reserves} reserves", a.key));
        }
        if settled > 1 || (settled == 1 && releases > 0) {
            problems.push(format!(
                "{}: applied more than once: {} commits, {} events, {releases} releases",
                a.key,
                commits.len(),
                events.len()
            ));
        }
        for e in commits.iter().chain(&events) {
            if e.amount != Some(a.actual) {
                problems.push(format!(
                    "{}: {} of {:?}, the actual was {}",
                    a.key, e.kind, e.amount, a.actual
                ));
            }
        }
        if known {
            stats.known += 1;
            if settled == 0 {
                problems.push(format!(
                    "{}: the known actual {} was never applied (journaled {}, sent {})",
                    a.key,
                    a.actual,
                    on_disk.contains(&rid),
                    sent.iter().any(|(r, _)| r.as_deref() == Some(rid.as_str()))
                ));
            }
            stats.by_commit += commits.len().min(1);
            stats.by_event += usize::from(commits.is_empty() && !events.is_empty());
        } else {
            stats.lost_in_memory += 1;
            if settled > 0 {
                problems.push(format!(
                    "{}: applied though its actual was never journaled nor sent",
                    a.key
                ));
            }
        }
        if settled == 0 && releases == 0 {
            // Held by a process that died: the server must have expired it (no commit).
            match inspect.get_reservation(&rid).await {
                Ok(r) if r.body.status == ReservationStatus::Expired => stats.expired_held += 1,
                Ok(r) => problems.push(format!(
                    "{}: left held, and {:?} past its expiry",
                    a.key, r.body.status
                )),
                // This server answers a read of an expired reservation with 410.
                Err(e) if *e.kind() == ErrorKind::ReservationExpired => stats.expired_held += 1,
                Err(e) => problems.push(format!("{}: getReservation: {e}", a.key)),
            }
        }
    }
    let left = place.left(&drain_dir)?;
    if !left.is_empty() {
        problems.push(format!(
            "the journal is not empty after the drain: {left:?}"
        ));
    }
    if problems.is_empty() {
        let _ = std::fs::remove_dir_all(&journal);
        let _ = std::fs::remove_dir_all(&drain_dir);
        let _ = std::fs::remove_file(&log);
        let _ = std::fs::remove_file(&drain_log);
    }
    Ok(problems)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_keys_belong_to_their_base() {
        assert!(belongs("k", "k"));
        assert!(belongs("k:commit", "k"));
        assert!(!belongs("k1:commit", "k"));
        assert!(!belongs("k1", "k"));
    }

    #[test]
    fn a_block_of_iterations_has_every_face_write_and_drain_once() {
        // The same draw as run_loop's, for one block of every face, over many seeds.
        let n = FACES.len();
        for seed in 0..200 {
            let mut rng = fastrand::Rng::with_seed(seed);
            let mut order: Vec<usize> = (0..n).collect();
            rng.shuffle(&mut order);
            let shift = rng.usize(1..n);
            let writers: BTreeSet<usize> = (0..n).map(|i| order[i]).collect();
            let drainers: BTreeSet<usize> = (0..n).map(|i| order[(i + shift) % n]).collect();
            assert_eq!(writers.len(), n);
            assert_eq!(drainers.len(), n);
            assert!((0..n).all(|i| order[i] != order[(i + shift) % n]));
        }
    }

    #[test]
    fn every_face_is_required_kotlin_included() {
        assert!(FACES.contains(&"kotlin"), "{FACES:?}");
        let opts = |faces: &[&str]| Opts {
            seed: 1,
            iterations: 1,
            faces: faces
                .iter()
                .map(|f| (f.to_string(), "unused".to_string()))
                .collect(),
            work: std::env::temp_dir(),
            skip_drain: false,
            redis: false,
        };
        let five = run(&opts(&["rust", "python", "node", "jvm", "c"])).unwrap_err();
        assert!(five.contains("`kotlin` is missing"), "{five}");
        let twice = run(&opts(&[
            "rust", "python", "node", "jvm", "c", "kotlin", "kotlin",
        ]))
        .unwrap_err();
        assert!(
            twice.contains("`kotlin` is given more than once"),
            "{twice}"
        );
        let unknown = run(&opts(&["swift"])).unwrap_err();
        assert!(unknown.contains("unknown face `swift`"), "{unknown}");
    }

    #[test]
    fn the_scripts_run_every_face() {
        let script = |name: &str| {
            let p = Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../scripts")
                .join(name);
            std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        };
        // scripts/crashloop.sh prepares and passes every face (`rust` is built in).
        let crash = script("crashloop.sh");
        let load = script("load.sh");
        let load_default = load
            .lines()
            .find(|l| l.contains("|| faces=("))
            .expect("load.sh's default faces");
        for face in FACES {
            let program = if face == "rust" {
                "--face rust=builtin".to_string()
            } else {
                format!("--face \"{face}=$faces/{face}/run.sh\"")
            };
            assert!(crash.contains(&program), "crashloop.sh lacks {program}");
            if face != "rust" {
                assert!(
                    crash
                        .lines()
                        .any(|l| l.starts_with("for face in ")
                            && l.split([' ', ';']).any(|w| w == face)),
                    "crashloop.sh does not prepare {face}"
                );
            }
            // scripts/load.sh runs every face by default.
            assert!(
                load_default.split(['(', ')', ' ']).any(|w| w == face),
                "load.sh's default faces lack {face}: {load_default}"
            );
        }
    }

    #[test]
    fn plans_are_reproducible_from_the_seed() {
        let draw = |seed| {
            let mut rng = fastrand::Rng::with_seed(seed);
            (0..20)
                .map(|i| {
                    let p = plan(&mut rng, seed, i, (0, 1, 2));
                    (p.point, p.target, p.actions.len(), p.hold_ms)
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(draw(3), draw(3));
    }
}
