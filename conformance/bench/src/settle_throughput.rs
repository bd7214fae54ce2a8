//! Durable settlement throughput: settlements per second through core's `Settler` (journal
//! record written and fsynced before the commit leaves, removed after it is applied) against a
//! baseline with the same durability and no sharing, in the same run, at several concurrency
//! levels. The baseline, per settlement: write the record to a temp file, fsync it, rename it,
//! fsync the directory, send the same commit, unlink the record, fsync the directory.
//!
//! Both paths commit fresh reservations (created untimed before each timed run) on one local
//! server (its own runtime, in this process); the journal lives in a temp directory on the
//! disk of `--dir` (default: the system temp dir). Rounds alternate the paths so drift hits
//! both; the report is the median rate per path and concurrency and the ratio ours /
//! baseline. With `--redis`, a fourth path: the same `Settler` journaling to a Redis this
//! process starts (`redis-server` on PATH, AOF with `appendfsync always`, its data on the same
//! disk), the journal store a fleet uses. Run: `cargo run --release -p cycles-bench --bin
//! settle-throughput` (see docs/benchmarks.md).

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use clap::Parser;
use cycles_core::runtime;
use cycles_core::settle::{SettleConfig, Settlement, Settler};
use cycles_core::{
    Action, Amount, CommitRequest, Config, CyclesClient, ReservationCreateRequest, Subject, Unit,
};
use cycles_local_server::{LocalServer, ServerConfig};

#[derive(Parser, Debug)]
#[command(about = "Durable settlements per second: the Settler against per-record fsyncs")]
struct Args {
    /// Concurrency levels (concurrent settlements in flight).
    #[arg(long, value_delimiter = ',', default_value = "1,16,64")]
    concurrency: Vec<usize>,
    /// Settlements per timed run.
    #[arg(long, default_value_t = 256)]
    settlements: usize,
    /// Rounds per concurrency level (each times both paths once).
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Parent of the journal directories (must be on the disk being measured).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
    /// Run only one path, `ours`, `baseline`, `none` (the commits with no journal) or `redis`,
    /// for a profiler attached to this process; prints its rate per concurrency level.
    #[arg(long)]
    only: Option<String>,
    /// Also time the Settler on a Redis journal (starts `redis-server`, AOF, `appendfsync
    /// always`, data under the journal's parent directory).
    #[arg(long)]
    redis: bool,
}

const KEY: &str = "cycles-local-key";

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

static SEQ: AtomicU64 = AtomicU64::new(0);

fn unique(prefix: &str) -> String {
    format!(
        "{prefix}-{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    )
}

/// `n` fresh reservations, created concurrently (not timed).
async fn reserve(client: &Arc<CyclesClient>, n: usize) -> Vec<String> {
    let mut tasks = Vec::with_capacity(n);
    for _ in 0..n {
        let c = client.clone();
        tasks.push(tokio::spawn(async move {
            let r = c
                .create_reservation(&ReservationCreateRequest::new(
                    unique("bench-settle-reserve"),
                    Subject::tenant("acme"),
                    Action::new("llm.completion", "bench"),
                    Amount::new(Unit::UsdMicrocents, 1_000),
                ))
                .await
                .expect("create");
            r.body.reservation_id.expect("reservation id")
        }));
    }
    let mut ids = Vec::with_capacity(n);
    for t in tasks {
        ids.push(t.await.expect("join"));
    }
    ids
}

fn commit_request() -> CommitRequest {
    CommitRequest::new(
        unique("bench-settle-commit"),
        Amount::new(Unit::UsdMicrocents, 800),
    )
}

/// Runs `work` over `ids` with `concurrency` tasks; settlements per second.
async fn run<F, Fut>(ids: Vec<String>, concurrency: usize, work: F) -> f64
where
    F: Fn(String) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let n = ids.len();
    let queue = Arc::new(Mutex::new(ids));
    let work = Arc::new(work);
    let started = Instant::now();
    let mut tasks = Vec::with_capacity(concurrency);
    for _ in 0..concurrency {
        let (q, w) = (queue.clone(), work.clone());
        tasks.push(tokio::spawn(async move {
            loop {
                let next = q.lock().expect("queue").pop();
                match next {
                    Some(id) => w(id).await,
                    None => break,
                }
            }
        }));
    }
    for t in tasks {
        t.await.expect("join");
    }
    n as f64 / started.elapsed().as_secs_f64()
}

fn sync_dir(dir: &Path) {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .expect("fsync dir");
}

/// The baseline's durable write: temp file, fsync, rename, fsync the directory.
fn write_record(dir: &Path, name: &str, bytes: &[u8]) {
    let tmp = dir.join(format!(".{name}.tmp"));
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .expect("create");
    f.write_all(bytes).expect("write");
    f.sync_all().expect("fsync");
    drop(f);
    fs::rename(&tmp, dir.join(name)).expect("rename");
    sync_dir(dir);
}

fn remove_record(dir: &Path, name: &str) {
    fs::remove_file(dir.join(name)).expect("unlink");
    sync_dir(dir);
}

/// Which settlement path a timed run takes.
#[derive(Clone, Copy)]
enum Route {
    /// Core's `Settler::settle`.
    Ours,
    /// One record file written, fsynced and removed per settlement, nothing shared.
    Baseline,
    /// The commit alone, no journal: the ceiling of any durable path.
    NoJournal,
    /// Core's `Settler::settle` on the Redis store.
    Redis,
}

/// What the paths share.
struct Paths {
    client: Arc<CyclesClient>,
    settler: Settler,
    base_dir: Arc<PathBuf>,
    /// The Settler on the Redis store, with `--redis`.
    redis: Option<Settler>,
}

/// Settles every id through `settler`; each must be committed.
async fn settle_all(s: Settler, ids: Vec<String>, concurrency: usize) -> f64 {
    run(ids, concurrency, move |id| {
        let s = s.clone();
        async move {
            let outcome = s
                .settle(Settlement {
                    reservation_id: id,
                    commit: commit_request(),
                    fallback: None,
                })
                .await;
            assert!(
                matches!(outcome, cycles_core::settle::SettleOutcome::Committed(_)),
                "{outcome:?}"
            );
        }
    })
    .await
}

impl Paths {
    /// Settlements per second of `route` over `n` fresh reservations (created untimed),
    /// `concurrency` in flight.
    fn time(&self, rt: &tokio::runtime::Handle, route: Route, concurrency: usize, n: usize) -> f64 {
        let ids = rt.block_on(reserve(&self.client, n));
        match route {
            Route::NoJournal => {
                let cl = self.client.clone();
                rt.block_on(run(ids, concurrency, move |id| {
                    let cl = cl.clone();
                    async move {
                        cl.commit_reservation(&id, &commit_request())
                            .await
                            .expect("commit");
                    }
                }))
            }
            Route::Ours => rt.block_on(settle_all(self.settler.clone(), ids, concurrency)),
            Route::Redis => {
                let s = self.redis.clone().expect("--redis");
                rt.block_on(settle_all(s, ids, concurrency))
            }
            Route::Baseline => {
                let (cl, dir) = (self.client.clone(), self.base_dir.clone());
                rt.block_on(run(ids, concurrency, move |id| {
                    let (cl, dir) = (cl.clone(), dir.clone());
                    async move {
                        let commit = commit_request();
                        let name = format!("{id}.json");
                        let bytes = serde_json::to_vec(&serde_json::json!({
                            "reservation_id": id, "commit": &commit,
                        }))
                        .expect("encode");
                        let (d, n) = (dir.clone(), name.clone());
                        tokio::task::spawn_blocking(move || write_record(&d, &n, &bytes))
                            .await
                            .expect("write");
                        cl.commit_reservation(&id, &commit).await.expect("commit");
                        tokio::task::spawn_blocking(move || remove_record(&dir, &name))
                            .await
                            .expect("remove");
                    }
                }))
            }
        }
    }
}

fn main() {
    let args = Args::parse();
    let server_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("server runtime");
    let server = server_rt
        .block_on(LocalServer::start(ServerConfig::default()))
        .expect("local server");
    let rt = runtime::handle().expect("core runtime");
    let parent = args.dir.clone().unwrap_or_else(std::env::temp_dir);
    let root = parent.join(unique("cycles-bench-settle"));
    fs::create_dir_all(&root).expect("bench dir");

    let plain = Config::new(server.url(), KEY).with_journal_enabled(false);
    let client = Arc::new(CyclesClient::new(plain).expect("client"));
    let ours_dir = root.join("ours");
    let settler = Settler::new(
        &Config::new(server.url(), KEY).with_journal_dir(&ours_dir),
        SettleConfig::default(),
    )
    .expect("settler");
    let base_dir = root.join("baseline");
    fs::create_dir_all(&base_dir).expect("baseline dir");
    let base_dir = Arc::new(base_dir);
    let want_redis = args.redis || args.only.as_deref() == Some("redis");
    let redis_dir = root.join("redis");
    let redis_server = want_redis.then(|| {
        fs::create_dir_all(&redis_dir).expect("redis dir");
        cycles_test_redis::RedisServer::start(&redis_dir, true).expect("redis-server")
    });
    let redis = redis_server.as_ref().map(|r| {
        let cfg = Config::new(server.url(), KEY)
            .with_journal_dir(root.join("unused"))
            .with_journal_url(r.url());
        Settler::new(&cfg, SettleConfig::default()).expect("settler on Redis")
    });

    let paths = Paths {
        client,
        settler,
        base_dir,
        redis,
    };
    if let Some(only) = args.only.as_deref() {
        let route = match only {
            "ours" => Route::Ours,
            "baseline" => Route::Baseline,
            "none" => Route::NoJournal,
            "redis" => Route::Redis,
            other => panic!("--only takes ours, baseline, none or redis, not {other}"),
        };
        for &c in &args.concurrency {
            let rates: Vec<f64> = (0..args.rounds)
                .map(|_| paths.time(&rt, route, c, args.settlements))
                .collect();
            println!(
                "{only}: {c} in flight, {} settlements per round, median {:.0}/s",
                args.settlements,
                median(rates)
            );
        }
        let _ = fs::remove_dir_all(&root);
        return;
    }

    let mut rows = Vec::new();
    for &c in &args.concurrency {
        let (mut ours, mut base, mut ceiling, mut on_redis) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for _ in 0..args.rounds {
            // The ceiling first: the same commits with no journal at all (what durability
            // costs on top of the commit itself).
            ceiling.push(paths.time(&rt, Route::NoJournal, c, args.settlements));
            ours.push(paths.time(&rt, Route::Ours, c, args.settlements));
            base.push(paths.time(&rt, Route::Baseline, c, args.settlements));
            if paths.redis.is_some() {
                on_redis.push(paths.time(&rt, Route::Redis, c, args.settlements));
            }
        }
        let r = (!on_redis.is_empty()).then(|| median(on_redis));
        let (o, b, n) = (median(ours), median(base), median(ceiling));
        rows.push((c, o, b, n, r));
    }
    drop(paths);
    drop(redis_server);
    let _ = fs::remove_dir_all(&root);

    if args.json {
        let rows: Vec<_> = rows
            .iter()
            .map(|(c, o, b, n, r)| {
                serde_json::json!({"concurrency": c, "ours_per_s": o, "baseline_per_s": b,
                    "no_journal_per_s": n, "ratio": o / b, "redis_per_s": r})
            })
            .collect();
        println!(
            "{}",
            serde_json::json!({"settlements": args.settlements, "rounds": args.rounds,
                "dir": parent, "rows": rows})
        );
        return;
    }
    println!(
        "settle-throughput: {} settlements per run, median of {} rounds, journal under {}",
        args.settlements,
        args.rounds,
        parent.display()
    );
    println!(
        "| concurrency | Settler /s | per-record fsync baseline /s | ratio | no journal /s | Settler / no journal |{}",
        if args.redis { " Settler on Redis /s | Redis / file Settler | Redis / no journal |" } else { "" }
    );
    println!(
        "|---:|---:|---:|---:|---:|---:|{}",
        if args.redis { "---:|---:|---:|" } else { "" }
    );
    for (c, o, b, n, r) in rows {
        let redis = r.map_or(String::new(), |r| {
            format!(" {r:.0} | {:.2}x | {:.2}x |", r / o, r / n)
        });
        println!(
            "| {c} | {o:.0} | {b:.0} | {:.2}x | {n:.0} | {:.2}x |{redis}",
            o / b,
            o / n
        );
    }
}
