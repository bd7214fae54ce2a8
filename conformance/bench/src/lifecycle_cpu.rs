//! Client CPU of one guarded lifecycle in core (reserve, heartbeat armed, actual set, commit;
//! journal off) against a bare reqwest create + commit pair, in the same run, against one
//! `cycles serve` child process (so the server's CPU is not counted).
//!
//! - core: `Guard::begin` (create, heartbeat started; the 60 s lease needs no beat), `Usage::set_actual`,
//!   `ActiveGuard::finish(true)` (commit through the Settler, heartbeat stopped);
//! - bare: one `reqwest::Client` posting the create body and the commit body as JSON and reading
//!   each response into a `serde_json::Value` (the id taken from the create's).
//!
//! Both run one lifecycle at a time on core's runtime, or with `--in-flight K`, K tasks on it
//! each running its share one at a time. Rounds alternate the paths; CPU is this process's
//! user + system time (`CLOCK_PROCESS_CPUTIME_ID`) over a round, divided by its lifecycles.
//! Run: `cargo run --release -p cycles-bench --bin lifecycle-cpu -- --cycles-bin
//! target/release/cycles` (see docs/benchmarks.md).

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use clap::Parser;
use cycles_core::events::EventSink;
use cycles_core::guard::{Guard, GuardSpec};
use cycles_core::runtime;
use cycles_core::settle::{SettleConfig, Settler};
use cycles_core::{Action, Amount, Config, CyclesClient, Subject, Unit};
use serde_json::{json, Value};

#[derive(Parser, Debug)]
#[command(about = "Client CPU of a core guarded lifecycle against a bare reqwest pair")]
struct Args {
    /// The `cycles` CLI binary (its `serve` is the server).
    #[arg(long)]
    cycles_bin: PathBuf,
    /// Rounds (each times both paths once).
    #[arg(long, default_value_t = 7)]
    rounds: usize,
    /// Lifecycles per path per round.
    #[arg(long, default_value_t = 1000)]
    lifecycles: usize,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
    /// Run only one path, `core` or `bare` (for a profiler attached to this process); the
    /// ratio is then not computed.
    #[arg(long)]
    only: Option<String>,
    /// Guarded lifecycles without a heartbeat (to see what arming one costs).
    #[arg(long)]
    no_heartbeat: bool,
    /// Lifecycles in flight at once: K tasks, each running lifecycles / K in turn (1: the
    /// calling thread runs them one at a time).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    in_flight: u32,
}

const KEY: &str = "cycles-local-key";

static SEQ: AtomicU64 = AtomicU64::new(0);

fn unique(prefix: &str) -> String {
    format!(
        "{prefix}-{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    )
}

/// This process's user + system CPU in microseconds (all threads; nanosecond clock).
fn cpu_us() -> f64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    t.tv_sec as f64 * 1e6 + t.tv_nsec as f64 / 1e3
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

struct Server(Child, String);

impl Server {
    fn start(bin: &PathBuf) -> Server {
        let mut child = Command::new(bin)
            .args([
                "serve",
                "--port",
                "0",
                "--budget",
                "tenant:acme=USD_MICROCENTS:1000000000000000",
            ])
            .stdout(Stdio::piped())
            .stdin(Stdio::null())
            .spawn()
            .expect("cycles serve");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("first line");
        let url = line
            .split("listening on ")
            .nth(1)
            .expect("listening line")
            .trim()
            .to_string();
        Server(child, url)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

async fn core_lifecycle(guard: &Guard, heartbeat: bool) {
    let spec = GuardSpec::new(
        unique("bench-cpu"),
        Subject::tenant("acme"),
        Action::new("llm.completion", "bench"),
        Amount::new(Unit::UsdMicrocents, 1_000),
    );
    let spec = GuardSpec { heartbeat, ..spec };
    let active = guard.begin(spec).await.expect("begin");
    active
        .usage()
        .set_actual(800)
        .expect("reported before the end");
    let done = active.finish(true).await;
    assert!(
        matches!(done, cycles_core::guard::Finished::Settled { .. }),
        "{done:?}"
    );
}

async fn bare_lifecycle(http: &reqwest::Client, url: &str) {
    let created: Value = http
        .post(format!("{url}/v1/reservations"))
        .header("X-Cycles-API-Key", KEY)
        .json(&json!({
            "idempotency_key": unique("bench-bare"),
            "subject": {"tenant": "acme"},
            "action": {"kind": "llm.completion", "name": "bench"},
            "estimate": {"unit": "USD_MICROCENTS", "amount": 1000},
            "ttl_ms": 60000,
        }))
        .send()
        .await
        .expect("create")
        .json()
        .await
        .expect("create body");
    let id = created["reservation_id"].as_str().expect("id");
    let committed: Value = http
        .post(format!("{url}/v1/reservations/{id}/commit"))
        .header("X-Cycles-API-Key", KEY)
        .json(&json!({
            "idempotency_key": unique("bench-bare-commit"),
            "actual": {"unit": "USD_MICROCENTS", "amount": 800},
        }))
        .send()
        .await
        .expect("commit")
        .json()
        .await
        .expect("commit body");
    assert_eq!(committed["status"], "COMMITTED", "{committed}");
}

/// Which lifecycle a round runs.
#[derive(Clone, Copy)]
enum Path {
    Core,
    Bare,
}

/// What the lifecycles need, cloned into each task.
#[derive(Clone)]
struct Paths {
    guard: Guard,
    http: reqwest::Client,
    url: String,
    heartbeat: bool,
}

impl Paths {
    async fn lifecycles(&self, path: Path, n: usize) {
        for _ in 0..n {
            match path {
                Path::Core => core_lifecycle(&self.guard, self.heartbeat).await,
                Path::Bare => bare_lifecycle(&self.http, &self.url).await,
            }
        }
    }

    /// `k * per_task` lifecycles of `path`: one at a time on this thread when `k` is 1,
    /// otherwise `k` tasks on core's runtime, each running `per_task` in turn.
    fn run(&self, rt: &tokio::runtime::Handle, path: Path, k: usize, per_task: usize) {
        if k == 1 {
            rt.block_on(self.lifecycles(path, per_task));
            return;
        }
        let mut set = tokio::task::JoinSet::new();
        for _ in 0..k {
            let me = self.clone();
            set.spawn_on(async move { me.lifecycles(path, per_task).await }, rt);
        }
        rt.block_on(async {
            while let Some(done) = set.join_next().await {
                done.expect("a lifecycle task panicked");
            }
        });
    }
}

fn main() {
    let args = Args::parse();
    let server = Server::start(&args.cycles_bin);
    let url = server.1.clone();
    let rt = runtime::handle().expect("core runtime");
    let config = Config::new(url.clone(), KEY).with_journal_enabled(false);
    let client = Arc::new(CyclesClient::new(config.clone()).expect("client"));
    let settler = Settler::new(&config, SettleConfig::default()).expect("settler");
    let paths = Paths {
        guard: Guard::new(client, settler, EventSink::default()),
        http: reqwest::Client::new(),
        url,
        heartbeat: !args.no_heartbeat,
    };
    let (k, per_task) = (
        args.in_flight as usize,
        args.lifecycles / args.in_flight as usize,
    );
    let n = (k * per_task) as f64;

    // Warm both (connection pools, allocator, server state).
    for path in [Path::Core, Path::Bare] {
        paths.run(&rt, path, k, 100_usize.div_ceil(k));
    }
    if let Some(only) = args.only.as_deref() {
        let path = match only {
            "core" => Path::Core,
            "bare" => Path::Bare,
            other => panic!("--only takes core or bare, not {other}"),
        };
        let t0 = Instant::now();
        paths.run(&rt, path, k, per_task * args.rounds);
        println!(
            "{only}: {} lifecycles ({k} in flight) in {:.2} s",
            k * per_task * args.rounds,
            t0.elapsed().as_secs_f64()
        );
        return;
    }
    let (mut core_cpu, mut bare_cpu, mut core_wall, mut bare_wall) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..args.rounds {
        for (path, cpu, wall) in [
            (Path::Core, &mut core_cpu, &mut core_wall),
            (Path::Bare, &mut bare_cpu, &mut bare_wall),
        ] {
            let (c0, t0) = (cpu_us(), Instant::now());
            paths.run(&rt, path, k, per_task);
            wall.push(t0.elapsed().as_secs_f64() * 1e6 / n);
            cpu.push((cpu_us() - c0) / n);
        }
    }
    let (cc, bc) = (median(core_cpu), median(bare_cpu));
    let (cw, bw) = (median(core_wall), median(bare_wall));
    if args.json {
        println!(
            "{}",
            json!({"rounds": args.rounds, "lifecycles": args.lifecycles, "in_flight": k,
                "core_cpu_us": cc, "bare_cpu_us": bc, "cpu_ratio": cc / bc,
                "core_wall_us": cw, "bare_wall_us": bw, "wall_ratio": cw / bw})
        );
        return;
    }
    println!(
        "lifecycle-cpu: {} rounds x {} lifecycles per path, {k} in flight, medians, server in a child process",
        args.rounds, n
    );
    println!("| path | client CPU µs per lifecycle | wall µs per lifecycle |");
    println!("|---|---:|---:|");
    println!("| core guarded lifecycle | {cc:.0} | {cw:.0} |");
    println!("| bare reqwest create + commit | {bc:.0} | {bw:.0} |");
    println!("| ratio core / bare | {:.2}x | {:.2}x |", cc / bc, cw / bw);
}
