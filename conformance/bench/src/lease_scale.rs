//! Lease scaling benchmark: memory and CPU per heartbeating lease at 1k, 10k and 100k leases
//! in ONE process, against the local server running in a separate child process (so its own
//! cost is not counted), with a short simulated TTL. Two baselines, each measured in the same
//! run in its own process: the same number of bare tokio tasks sleeping at the same cadence
//! (what the heartbeat adds over the cheapest possible timer task), and the same number of
//! bare reqwest tasks posting the same extends at the same cadence (what one extension costs
//! above a hand-written HTTP call: CPU per extension, issue 15).
//!
//! Run: `cargo run --release -p cycles-bench --bin lease-scale -- --leases 1000,10000,100000`
//! (see docs/benchmarks.md).

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use cycles_core::events::{Event, EventSink};
use cycles_core::lease::{Heartbeat, HeartbeatConfig};
use cycles_core::{Action, Amount, Config, CyclesClient, ReservationCreateRequest, Subject, Unit};
use cycles_local_server::{BudgetSeed, LocalServer, Regime, ServerConfig, TenantSeed};

#[derive(Parser, Debug)]
#[command(about = "Memory and CPU per heartbeating lease")]
struct Args {
    /// Lease counts to measure, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1000,10000,100000")]
    leases: Vec<usize>,
    /// Requested TTL of every reservation (the simulated lease length), ms.
    #[arg(long, default_value_t = 20_000)]
    ttl_ms: i64,
    /// Client per-attempt timeout, ms.
    #[arg(long, default_value_t = 1000)]
    timeout_ms: u64,
    /// Measurement window once all heartbeats run, seconds (at least one beat period).
    #[arg(long, default_value_t = 25)]
    measure_s: u64,
    /// Seconds to wait after setup before the window opens. One ttl puts every lease past
    /// its first beat (which the lease wheel hands to the runtime from its timer thread), so
    /// the window sees only the steady state's beats.
    #[arg(long, default_value_t = 0)]
    warm_s: u64,
    /// Concurrent creates while setting up.
    #[arg(long, default_value_t = 64)]
    create_concurrency: usize,
    /// Spread the creates evenly over this many ms (default: one ttl), so the beats that
    /// follow are spread over the period as in a real fleet instead of arriving as one wave.
    #[arg(long)]
    spread_ms: Option<u64>,
    /// Runs of the heartbeat and the reqwest-extend measurements per size, alternating (each
    /// in a fresh process); the table shows the run with the median heartbeat CPU per extend
    /// and the median of the reqwest ones, so a load change between runs moves both.
    #[arg(long, default_value_t = 1)]
    repeat: usize,
    /// Print one JSON object per size instead of a table.
    #[arg(long)]
    json: bool,
    /// Internal: run the local server and print its URL (used by the benchmark itself).
    #[arg(long, hide = true)]
    serve: bool,
    /// Internal: measure one configuration ("leases" or "baseline") in this fresh process
    /// and print it as JSON, so no run inherits another's allocator state.
    #[arg(long, hide = true)]
    child: Option<String>,
}

const KEY: &str = "bench-key";

fn resident_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

/// User + system CPU time of this process, from /proc (USER_HZ is 100 on Linux).
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after_comm = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after_comm.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // utime and stime are fields 14 and 15 of stat; after "pid (comm)" they are at 11 and 12.
    (ticks(11) + ticks(12)) as f64 / 100.0
}

/// This process's user + system CPU in microseconds (all threads; nanosecond clock), for the
/// per-extension figures, where /proc's 10 ms ticks are too coarse.
fn cpu_us() -> f64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    t.tv_sec as f64 * 1e6 + t.tv_nsec as f64 / 1e3
}

async fn serve() {
    let config = ServerConfig {
        tenants: vec![TenantSeed {
            id: "acme".into(),
            api_keys: vec![KEY.into()],
            ..TenantSeed::default()
        }],
        budgets: vec![BudgetSeed {
            scope: "tenant:acme".into(),
            unit: "TOKENS".into(),
            allocated: i64::MAX / 4,
            ..BudgetSeed::default()
        }],
        regime: Regime {
            max_extensions: Some(u32::MAX),
            ..Regime::default()
        },
        evidence: false,
        ..ServerConfig::default()
    };
    let server = LocalServer::start(config).await.expect("start server");
    println!("{}", server.url());
    std::io::stdout().flush().ok();
    // Serve until the parent closes our stdin.
    tokio::task::spawn_blocking(|| {
        let mut line = String::new();
        while std::io::stdin()
            .read_line(&mut line)
            .map(|n| n > 0)
            .unwrap_or(false)
        {
            line.clear();
        }
    })
    .await
    .ok();
    server.shutdown().await;
}

fn spawn_server() -> (Child, String) {
    let exe = std::env::current_exe().expect("own path");
    let mut child = Command::new(exe)
        .arg("--serve")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn server");
    let mut url = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut url)
        .expect("server URL");
    (child, url.trim().to_string())
}

struct Sample {
    rss_per_unit: f64,
    cpu_ms_per_unit_minute: f64,
}

fn sample(n: usize, rss0: u64, cpu0: f64, window: Duration) -> Sample {
    let rss = resident_bytes().saturating_sub(rss0) as f64 / n as f64;
    let cpu = (cpu_seconds() - cpu0) * 1000.0 / n as f64 * (60.0 / window.as_secs_f64());
    Sample {
        rss_per_unit: rss,
        cpu_ms_per_unit_minute: cpu,
    }
}

/// The baseline: n bare tasks waking at the heartbeat's cadence and doing nothing.
async fn baseline(n: usize, period: Duration, window: Duration) -> Sample {
    let rss0 = resident_bytes();
    let stop = Arc::new(tokio::sync::Notify::new());
    let mut tasks = Vec::with_capacity(n);
    for i in 0..n {
        let stop = stop.clone();
        let offset = period.mul_f64(i as f64 / n as f64);
        tasks.push(tokio::spawn(async move {
            tokio::time::sleep(offset).await;
            loop {
                tokio::select! {
                    _ = stop.notified() => break,
                    _ = tokio::time::sleep(period) => {}
                }
            }
        }));
    }
    let cpu0 = cpu_seconds();
    tokio::time::sleep(window).await;
    let s = sample(n, rss0, cpu0, window);
    for t in &tasks {
        t.abort();
    }
    for t in tasks {
        let _ = t.await;
    }
    s
}

/// Waits `--warm-s`, then measures the window: its sample, the extensions counted in it and
/// the CPU µs per extension.
async fn measure_window(
    n: usize,
    args: &Args,
    rss0: u64,
    extends: &AtomicU64,
) -> (Sample, u64, f64) {
    tokio::time::sleep(Duration::from_secs(args.warm_s)).await;
    let (cpu0, us0) = (cpu_seconds(), cpu_us());
    let extends0 = extends.load(Ordering::Relaxed);
    let window = Duration::from_secs(args.measure_s);
    tokio::time::sleep(window).await;
    let sample = sample(n, rss0, cpu0, window);
    let done = extends.load(Ordering::Relaxed) - extends0;
    (sample, done, (cpu_us() - us0) / done.max(1) as f64)
}

/// The HTTP baseline: n reservations created with a bare reqwest client, then n tasks each
/// posting an extend (a fresh idempotency key, `extend_by_ms` = ttl) once per period, spread
/// over the period as the heartbeats are, and reading each response into a `serde_json::Value`.
/// Returns the window's sample, its extends and the CPU µs per extend.
async fn reqwest_extends(n: usize, args: &Args) -> (Sample, u64, f64) {
    let (mut child, url) = spawn_server();
    let http = reqwest::Client::builder()
        .timeout(Duration::from_millis(args.timeout_ms))
        .build()
        .expect("reqwest client");
    let rss0 = resident_bytes();
    let sem = Arc::new(tokio::sync::Semaphore::new(args.create_concurrency));
    let mut creates = Vec::with_capacity(n);
    for i in 0..n {
        let (http, url, sem, ttl) = (http.clone(), url.clone(), sem.clone(), args.ttl_ms);
        creates.push(tokio::spawn(async move {
            let _permit = sem.acquire().await.expect("semaphore");
            let body = serde_json::json!({
                "idempotency_key": format!("bench-{i}"),
                "subject": {"tenant": "acme"},
                "action": {"kind": "bench.lease", "name": "scale"},
                "estimate": {"unit": "TOKENS", "amount": 1},
                "ttl_ms": ttl,
            });
            let created: serde_json::Value = http
                .post(format!("{url}/v1/reservations"))
                .header("X-Cycles-API-Key", KEY)
                .json(&body)
                .send()
                .await
                .ok()?
                .json()
                .await
                .ok()?;
            created["reservation_id"].as_str().map(str::to_string)
        }));
    }
    let mut ids = Vec::with_capacity(n);
    for c in creates {
        ids.extend(c.await.expect("create task"));
    }
    let extends = Arc::new(AtomicU64::new(0));
    let period = Duration::from_millis(u64::try_from(args.ttl_ms).unwrap_or(1000));
    let start = tokio::time::Instant::now();
    let n_ids = ids.len();
    let mut tasks = Vec::with_capacity(n_ids);
    for (i, id) in ids.into_iter().enumerate() {
        let (http, extends, ttl) = (http.clone(), extends.clone(), args.ttl_ms);
        let url = format!("{url}/v1/reservations/{id}/extend");
        let first = start + period.mul_f64(i as f64 / n_ids as f64);
        tasks.push(tokio::spawn(async move {
            let mut at = first;
            for beat in 0u64.. {
                tokio::time::sleep_until(at).await;
                at += period;
                let body = serde_json::json!({
                    "idempotency_key": format!("bench-{i}-extend-{beat}"),
                    "extend_by_ms": ttl,
                });
                let sent = http
                    .post(&url)
                    .header("X-Cycles-API-Key", KEY)
                    .json(&body)
                    .send()
                    .await;
                let Ok(res) = sent else { continue };
                let ok = res.status().is_success();
                if res.json::<serde_json::Value>().await.is_ok() && ok {
                    extends.fetch_add(1, Ordering::Relaxed);
                }
            }
        }));
    }
    let (sample, done, per_extend) = measure_window(n, args, rss0, &extends).await;
    for t in &tasks {
        t.abort();
    }
    for t in tasks {
        let _ = t.await;
    }
    drop(child.stdin.take());
    let _ = child.wait();
    (sample, done, per_extend)
}

struct LeaseRun {
    sample: Sample,
    cpu_us_per_extend: f64,
    extends: u64,
    failures: u64,
    stopped: usize,
    setup: Duration,
    create_failures: usize,
}

async fn leases(n: usize, args: &Args) -> LeaseRun {
    let (mut child, url) = spawn_server();
    let client = Arc::new(
        CyclesClient::new(
            Config::new(url, KEY).with_request_timeout(Duration::from_millis(args.timeout_ms)),
        )
        .expect("client"),
    );
    let extends = Arc::new(AtomicU64::new(0));
    let failures = Arc::new(AtomicU64::new(0));
    let (e, f) = (extends.clone(), failures.clone());
    let events = EventSink::with_callback(move |event| match event {
        Event::HeartbeatExtended { .. } => {
            e.fetch_add(1, Ordering::Relaxed);
        }
        Event::HeartbeatFailed { error_kind, .. } if f.fetch_add(1, Ordering::Relaxed) < 3 => {
            eprintln!("heartbeat failure: {error_kind}");
        }
        // Other events (heartbeat end, settlements, journal) are not counted here.
        _ => {}
    });
    let rss0 = resident_bytes();
    let setup_start = Instant::now();
    let setup_start_tokio = tokio::time::Instant::now();
    let spread = Duration::from_millis(
        args.spread_ms
            .unwrap_or(u64::try_from(args.ttl_ms).unwrap_or(0)),
    );
    let sem = Arc::new(tokio::sync::Semaphore::new(args.create_concurrency));
    let mut starts = Vec::with_capacity(n);
    for i in 0..n {
        let client = client.clone();
        let sem = sem.clone();
        let ttl = args.ttl_ms;
        let events = events.clone();
        let at = setup_start_tokio + spread.mul_f64(i as f64 / n as f64);
        starts.push(tokio::spawn(async move {
            tokio::time::sleep_until(at).await;
            let permit = sem.acquire().await.expect("semaphore");
            let mut req = ReservationCreateRequest::new(
                format!("bench-{i}"),
                Subject::tenant("acme"),
                Action::new("bench.lease", "scale"),
                Amount::new(Unit::Tokens, 1),
            );
            req.ttl_ms = Some(ttl);
            let res = client.create_reservation(&req).await;
            drop(permit);
            let res = match res {
                Ok(res) => res,
                Err(e) => {
                    eprintln!("create failed: {e}");
                    return None;
                }
            };
            // As a guard does: the heartbeat starts right after its own create response.
            let id = res.body.reservation_id.clone().expect("live reservation");
            let config = HeartbeatConfig {
                events,
                ..HeartbeatConfig::new(ttl)
            };
            Some(Heartbeat::start(client, id, &res, config))
        }));
    }
    let mut beats = Vec::with_capacity(n);
    for s in starts {
        beats.extend(s.await.expect("create task"));
    }
    let create_failures = n - beats.len();
    let setup = setup_start.elapsed();
    let (sample, extends_done, cpu_us_per_extend) = measure_window(n, args, rss0, &extends).await;
    let mut stopped = 0;
    for hb in beats {
        if hb.finish().await.stopped_early() {
            stopped += 1;
        }
    }
    drop(child.stdin.take());
    let _ = child.wait();
    LeaseRun {
        sample,
        cpu_us_per_extend,
        extends: extends_done,
        failures: failures.load(Ordering::Relaxed),
        stopped,
        setup,
        create_failures,
    }
}

/// Runs one measurement in a fresh child process and returns its JSON.
fn measure_in_child(kind: &str, n: usize, args: &Args) -> serde_json::Value {
    let exe = std::env::current_exe().expect("own path");
    let out = Command::new(exe)
        .args(["--child", kind, "--leases", &n.to_string()])
        .args([
            "--ttl-ms",
            &args.ttl_ms.to_string(),
            "--timeout-ms",
            &args.timeout_ms.to_string(),
        ])
        .args(["--measure-s", &args.measure_s.to_string()])
        .args(["--warm-s", &args.warm_s.to_string()])
        .args(["--create-concurrency", &args.create_concurrency.to_string()])
        .args(args.spread_ms.map(|ms| format!("--spread-ms={ms}")))
        .stderr(Stdio::inherit())
        .output()
        .expect("run measurement child");
    assert!(out.status.success(), "{kind} measurement for {n} failed");
    serde_json::from_slice(&out.stdout).expect("measurement JSON")
}

fn child(kind: &str, args: &Args) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let n = args.leases[0];
    let window = Duration::from_secs(args.measure_s);
    let json = match kind {
        "baseline" => {
            // Bare tasks waking at the steady-state beat period of an additive server (~ttl).
            let period = Duration::from_millis(u64::try_from(args.ttl_ms).unwrap_or(1000));
            let s = runtime.block_on(baseline(n, period, window));
            serde_json::json!({"rss_bytes": s.rss_per_unit, "cpu_ms_per_minute": s.cpu_ms_per_unit_minute})
        }
        "reqwest" => {
            let (s, extends, per_extend) = runtime.block_on(reqwest_extends(n, args));
            serde_json::json!({"rss_bytes": s.rss_per_unit, "cpu_ms_per_minute": s.cpu_ms_per_unit_minute,
                "extends": extends, "cpu_us_per_extend": per_extend})
        }
        _ => {
            let r = runtime.block_on(leases(n, args));
            serde_json::json!({
                "rss_bytes": r.sample.rss_per_unit, "cpu_ms_per_minute": r.sample.cpu_ms_per_unit_minute,
                "extends": r.extends, "cpu_us_per_extend": r.cpu_us_per_extend, "failures": r.failures, "stopped": r.stopped, "setup_s": r.setup.as_secs_f64(),
                "create_failures": r.create_failures,
            })
        }
    };
    println!("{json}");
}

fn main() {
    let args = Args::parse();
    if args.serve {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(serve());
        return;
    }
    if let Some(kind) = &args.child {
        child(kind, &args);
        return;
    }
    if !args.json {
        println!(
            "lease-scale: ttl {} ms, timeout {} ms, creates spread over {} ms, window {} s after {} s; per-lease figures, baseline = bare sleeping tokio task; µs/extend against bare reqwest extends at the same cadence",
            args.ttl_ms, args.timeout_ms, args.spread_ms.unwrap_or(u64::try_from(args.ttl_ms).unwrap_or(0)), args.measure_s, args.warm_s
        );
        println!(
            "{:>8} {:>12} {:>11} {:>7} {:>16} {:>10} {:>7} {:>10} {:>11} {:>12} {:>7} {:>8} {:>8} {:>12}",
            "leases",
            "rss/lease B",
            "baseline B",
            "ratio",
            "cpu ms/lease/min",
            "baseline",
            "ratio",
            "extends/s",
            "µs/extend",
            "reqwest µs",
            "ratio",
            "failures",
            "stopped",
            "create fails"
        );
    }
    for &n in &args.leases {
        let base = measure_in_child("baseline", n, &args);
        let f = |v: &serde_json::Value, k: &str| v[k].as_f64().unwrap_or(0.0);
        let (mut runs, mut bares) = (Vec::new(), Vec::new());
        for _ in 0..args.repeat.max(1) {
            runs.push(measure_in_child("leases", n, &args));
            bares.push(measure_in_child("reqwest", n, &args));
        }
        let by_extend_cost = |a: &serde_json::Value, b: &serde_json::Value| {
            f(a, "cpu_us_per_extend").total_cmp(&f(b, "cpu_us_per_extend"))
        };
        runs.sort_by(by_extend_cost);
        bares.sort_by(by_extend_cost);
        let run = runs.swap_remove(runs.len() / 2);
        let bare = bares.swap_remove(bares.len() / 2);
        let mem_ratio = f(&run, "rss_bytes") / f(&base, "rss_bytes").max(1.0);
        let cpu_ratio = f(&run, "cpu_ms_per_minute") / f(&base, "cpu_ms_per_minute").max(1e-6);
        let extends_per_s = f(&run, "extends") / args.measure_s as f64;
        let extend_ratio = f(&run, "cpu_us_per_extend") / f(&bare, "cpu_us_per_extend").max(1e-6);
        if args.json {
            println!(
                "{}",
                serde_json::json!({
                    "leases": n, "ttl_ms": args.ttl_ms, "timeout_ms": args.timeout_ms, "window_s": args.measure_s,
                    "rss_bytes_per_lease": f(&run, "rss_bytes"), "baseline_rss_bytes_per_task": f(&base, "rss_bytes"),
                    "rss_ratio": mem_ratio, "cpu_ms_per_lease_per_minute": f(&run, "cpu_ms_per_minute"),
                    "baseline_cpu_ms_per_task_per_minute": f(&base, "cpu_ms_per_minute"), "cpu_ratio": cpu_ratio,
                    "cpu_us_per_extend": f(&run, "cpu_us_per_extend"), "reqwest_cpu_us_per_extend": f(&bare, "cpu_us_per_extend"),
                    "reqwest_extends_per_second": f(&bare, "extends") / args.measure_s as f64, "extend_cpu_ratio": extend_ratio,
                    "extends_per_second": extends_per_s, "failures": run["failures"], "stopped_early": run["stopped"], "create_failures": run["create_failures"],
                    "setup_seconds": f(&run, "setup_s"),
                })
            );
        } else {
            println!(
                "{:>8} {:>12.0} {:>11.0} {:>7.1} {:>16.3} {:>10.3} {:>7.1} {:>10.0} {:>11.1} {:>12.1} {:>7.2} {:>8} {:>8} {:>12}",
                n,
                f(&run, "rss_bytes"),
                f(&base, "rss_bytes"),
                mem_ratio,
                f(&run, "cpu_ms_per_minute"),
                f(&base, "cpu_ms_per_minute"),
                cpu_ratio,
                extends_per_s,
                f(&run, "cpu_us_per_extend"),
                f(&bare, "cpu_us_per_extend"),
                extend_ratio,
                run["failures"],
                run["stopped"],
                run["create_failures"]
            );
        }
    }
}
