//! `cycles demo`: the main job. Starts the embedded local server on an ephemeral port and
//! tells a short story against it with the core client. Each chapter is one function taking
//! the shared [`Story`], so later features (heartbeat, crash recovery) add chapters.

use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;
use cycles_core::events::{Disposition, Event, EventSink};
use cycles_core::guard::{Guard, GuardSpec};
use cycles_core::lease::{Heartbeat, HeartbeatConfig};
use cycles_core::settle::{SettleConfig, SettleOutcome, Settler};
use cycles_core::{
    Action, Amount, BalanceQuery, CommitRequest, Config, CyclesClient, Error,
    ReservationCreateRequest, ReservationCreateResponse, Response, Subject, Unit,
};
use cycles_local_server::{
    BudgetSeed, Fault, FaultRule, LocalServer, Operation, ServerConfig, TenantSeed,
};

const TENANT: &str = "acme";
const API_KEY: &str = "demo-key";
const BUDGET: i64 = 5_000_000;

/// Options of `cycles demo`.
#[derive(Args, Debug)]
pub struct DemoArgs {
    /// Requested TTL of the demo reservation, in ms.
    #[arg(long, default_value_t = 3500)]
    ttl_ms: i64,
    /// How long the guarded work runs, in ms (longer than the TTL, to show the heartbeat).
    #[arg(long, default_value_t = 6000)]
    work_ms: u64,
    /// The client's enforced per-attempt timeout, in ms (it sizes the heartbeat's reserve).
    #[arg(long, default_value_t = 500)]
    timeout_ms: u64,
}

/// What every chapter shares: the server, a client, and the reservation in play.
struct Story {
    server: LocalServer,
    client: Arc<CyclesClient>,
    args: DemoArgs,
    created: Option<Response<ReservationCreateResponse>>,
    reservation_id: Option<String>,
}

type Chapter =
    for<'a> fn(
        &'a mut Story,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), Error>> + 'a>>;

/// The story, in order. Later issues append chapters here.
const CHAPTERS: &[(&str, Chapter)] = &[
    ("Balances before any work", |s| Box::pin(balances(s))),
    ("Reserve an estimate before calling the model", |s| {
        Box::pin(reserve(s))
    }),
    (
        "The work outlives its TTL: the heartbeat keeps the lease alive",
        |s| Box::pin(heartbeat(s)),
    ),
    ("Commit the actual amount the work reported", |s| {
        Box::pin(commit(s))
    }),
    ("A second agent asks for more than is left", |s| {
        Box::pin(denied(s))
    }),
    (
        "An outage at settlement time: the journal keeps the spend, a restart settles it once",
        |s| Box::pin(outage(s)),
    ),
    ("Balances after", |s| Box::pin(balances(s))),
    ("What the server applied (its ledger)", |s| {
        Box::pin(ledger(s))
    }),
];

fn usd(microcents: i64) -> String {
    // 1 USD = 10^8 USD_MICROCENTS.
    format!(
        "${}.{:08}",
        microcents / 100_000_000,
        microcents % 100_000_000
    )
}

async fn balances(story: &mut Story) -> Result<(), Error> {
    let page = story
        .client
        .get_balances(&BalanceQuery::tenant(TENANT))
        .await?;
    for b in &page.body.balances {
        let amount = |a: &Option<Amount>| a.as_ref().map_or(0, |a| a.amount);
        println!(
            "   {:<14} remaining {:>9} ({})  reserved {:>9}  spent {:>9}  [{}]",
            b.scope,
            b.remaining.amount,
            usd(b.remaining.amount),
            amount(&b.reserved),
            amount(&b.spent),
            b.remaining.unit
        );
    }
    Ok(())
}

async fn reserve(story: &mut Story) -> Result<(), Error> {
    let mut req = ReservationCreateRequest::new(
        "demo-run-1-reserve",
        Subject::tenant(TENANT).with_agent("summarizer"),
        Action::new("llm.completion", "openai:gpt-4o-mini"),
        Amount::new(Unit::UsdMicrocents, 2_000_000),
    );
    req.ttl_ms = Some(story.args.ttl_ms);
    let res = story.client.create_reservation(&req).await?;
    let body = &res.body;
    println!(
        "   {} reservation {} for {} ({}), ttl {} ms",
        body.decision,
        body.reservation_id.as_deref().unwrap_or("?"),
        req.estimate.amount,
        usd(req.estimate.amount),
        story.args.ttl_ms
    );
    println!(
        "   server says remaining_ttl_ms = {}; round trip {} µs; scopes {:?}",
        body.remaining_ttl_ms
            .map_or("absent".into(), |v| v.to_string()),
        res.timing.rtt().as_micros(),
        body.affected_scopes
    );
    story.reservation_id = body.reservation_id.clone();
    story.created = Some(res);
    Ok(())
}

async fn heartbeat(story: &mut Story) -> Result<(), Error> {
    let (Some(id), Some(created)) = (story.reservation_id.clone(), story.created.as_ref()) else {
        return Ok(());
    };
    let started = Instant::now();
    let events = EventSink::with_callback(move |event| {
        let t = started.elapsed().as_secs_f64();
        match event {
            Event::HeartbeatExtended {
                remaining_ttl_ms,
                next_delay,
                ..
            } => println!(
                "   [+{t:.2}s] extended by the ttl: remaining_ttl_ms {}, next beat in {next_delay}",
                remaining_ttl_ms.map_or("absent".into(), |v| v.to_string())
            ),
            Event::HeartbeatFailed {
                error_kind,
                disposition,
                ..
            } => match disposition {
                Disposition::RetryAfter { delay } => {
                    println!("   [+{t:.2}s] {error_kind}: retrying with the same key in {delay}")
                }
                Disposition::Stopped(reason) => {
                    println!("   [+{t:.2}s] {error_kind}: heartbeat stopped: {reason:?}")
                }
            },
            // Heartbeat end and settlement/journal events are not part of this story.
            _ => {}
        }
    });
    let schedule = cycles_core::timing::primary::schedule(
        created
            .body
            .remaining_ttl_ms
            .and_then(|v| u64::try_from(v).ok())
            .unwrap_or(0),
        Some(cycles_core::timing::Millis::from_micros_ceil(
            created.timing.rtt().as_micros(),
        )),
        None,
        cycles_core::timing::Millis::ms(story.args.timeout_ms),
    );
    println!(
        "   create said remaining_ttl_ms {}; reserve for one failed attempt + one retry + margin = {}; first beat in {}",
        created.body.remaining_ttl_ms.map_or("absent".into(), |v| v.to_string()), schedule.retry_reserve, schedule.next_delay
    );
    let hb = Heartbeat::start(
        story.client.clone(),
        &id,
        created,
        HeartbeatConfig {
            events,
            ..HeartbeatConfig::new(story.args.ttl_ms)
        },
    );
    // The guarded work: here it just takes longer than the reservation's TTL.
    tokio::time::sleep(Duration::from_millis(story.args.work_ms)).await;
    let report = hb.finish().await;
    println!(
        "   work done after {:.2}s (TTL was {:.2}s): {} extension(s), {} failure(s), lease still alive",
        started.elapsed().as_secs_f64(),
        story.args.ttl_ms as f64 / 1000.0,
        report.extensions,
        report.failures
    );
    Ok(())
}

async fn commit(story: &mut Story) -> Result<(), Error> {
    let id = story.reservation_id.clone().unwrap_or_default();
    let actual = Amount::new(Unit::UsdMicrocents, 1_450_000);
    let res = story
        .client
        .commit_reservation(
            &id,
            &CommitRequest::new("demo-run-1-commit", actual.clone()),
        )
        .await?;
    println!(
        "   {}: charged {} ({}), released {}",
        res.body.status,
        res.body.charged.amount,
        usd(res.body.charged.amount),
        res.body.released.as_ref().map_or(0, |a| a.amount)
    );
    Ok(())
}

async fn denied(story: &mut Story) -> Result<(), Error> {
    let req = ReservationCreateRequest::new(
        "demo-run-2-reserve",
        Subject::tenant(TENANT).with_agent("researcher"),
        Action::new("llm.completion", "anthropic:claude-sonnet"),
        Amount::new(Unit::UsdMicrocents, 4_000_000),
    );
    match story.client.create_reservation(&req).await {
        Ok(res) => println!("   unexpectedly allowed: {:?}", res.body.decision),
        Err(err) => println!(
            "   denied as it should be: HTTP {} {} ({}); request id {}",
            err.http_status().map_or("-".into(), |s| s.to_string()),
            err.server_code().unwrap_or("?"),
            err.message(),
            err.request_id().unwrap_or("-")
        ),
    }
    Ok(())
}

async fn outage(story: &mut Story) -> Result<(), Error> {
    let dir = std::env::temp_dir().join(format!("cycles-demo-journal-{}", std::process::id()));
    let config = Config::new(story.server.url(), API_KEY)
        .with_tenant(TENANT)
        .with_request_timeout(Duration::from_millis(story.args.timeout_ms))
        .with_journal_dir(&dir);
    // Every commit fails with 503 until the "outage" ends.
    story.server.add_fault(FaultRule {
        operation: Operation::CommitReservation,
        reservation_id: None,
        skip: 0,
        times: 0,
        every: 1,
        fault: Fault::ServerError { status: 503 },
    });
    let quick = SettleConfig {
        max_attempts: 2,
        backoff_base: Duration::from_millis(50),
        backoff_cap: Duration::from_millis(200),
        ..SettleConfig::default()
    };
    let guard = Guard::new(
        story.client.clone(),
        Settler::new(&config, quick)?,
        EventSink::tracing_only(),
    );
    let spec = GuardSpec::new(
        "demo-run-3",
        Subject::tenant(TENANT).with_agent("summarizer"),
        Action::new("llm.completion", "openai:gpt-4o-mini"),
        Amount::new(Unit::UsdMicrocents, 500_000),
    );
    let run = guard
        .run(spec, |usage| async move {
            usage.set_actual(300_000)?; // the model answered; this is what it cost
            Ok::<_, Error>(())
        })
        .await;
    let reservation_id = match run {
        Ok(done) => {
            println!(
                "   work done, actual 300000; settlement: {}",
                describe(&done.settlement)
            );
            done.reservation_id
        }
        Err(e) => return Err(Error::runtime(format!("unexpected guard error: {e}"))),
    };
    for record in guard.settler().pending().await {
        println!(
            "   on disk: {} (mode {:?}) in {}",
            record.file,
            record.mode,
            dir.display()
        );
    }
    println!("   ...the process could exit or crash here; the spend is not lost.");
    story.server.clear_faults();
    // A restart: a fresh engine built only from the durable journal.
    let restarted = Settler::new(&config, SettleConfig::default())?;
    let report = restarted.drain(Duration::from_secs(5)).await;
    println!(
        "   after the restart: {} settled, {} left in the journal",
        report.settled(),
        report.remaining.len()
    );
    let commits = story
        .server
        .ledger()
        .into_iter()
        .filter(|e| e.kind == "commit" && e.reservation_id.as_deref() == Some(&reservation_id))
        .count();
    println!("   the server applied that commit {commits} time(s)");
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

fn describe(outcome: &SettleOutcome) -> String {
    match outcome {
        SettleOutcome::Committed(c) => format!("committed, charged {}", c.charged.amount),
        SettleOutcome::RecoveredViaEvent(_) => "recovered via event".into(),
        SettleOutcome::Pending {
            reason, journaled, ..
        } => {
            format!("pending ({reason}); journaled: {journaled}")
        }
        SettleOutcome::Rejected(r) => format!("rejected: {}", r.message),
    }
}

async fn ledger(story: &mut Story) -> Result<(), Error> {
    for entry in story.server.ledger() {
        println!(
            "   #{:<2} {:<8} {:<12} key {:<22} {}",
            entry.seq,
            entry.kind,
            entry.reservation_id.as_deref().unwrap_or("-"),
            entry.idempotency_key,
            entry.amount.map_or(String::new(), |a| format!(
                "{a} {}",
                entry.unit.as_deref().unwrap_or("")
            )),
        );
    }
    Ok(())
}

/// Runs every chapter in order against a fresh embedded server.
pub async fn run(args: DemoArgs) -> Result<(), String> {
    if args.ttl_ms < 1000 {
        return Err("--ttl-ms must be at least 1000 (the protocol's minimum)".into());
    }
    if args.timeout_ms == 0 {
        return Err("--timeout-ms must be positive".into());
    }
    let config = ServerConfig {
        tenants: vec![TenantSeed {
            id: TENANT.into(),
            api_keys: vec![API_KEY.into()],
            ..TenantSeed::default()
        }],
        budgets: vec![BudgetSeed {
            scope: format!("tenant:{TENANT}"),
            unit: "USD_MICROCENTS".into(),
            allocated: BUDGET,
            ..BudgetSeed::default()
        }],
        ..ServerConfig::default()
    };
    let server = LocalServer::start(config)
        .await
        .map_err(|e| format!("cannot start the embedded server: {e}"))?;
    let client = CyclesClient::new(
        Config::new(server.url(), API_KEY)
            .with_tenant(TENANT)
            .with_request_timeout(Duration::from_millis(args.timeout_ms)),
    )
    .map_err(|e| e.to_string())?;
    println!("Cycles demo: an agent spends against a budget, guarded by a reservation.");
    println!(
        "Embedded local Cycles server at {} (tenant {TENANT}, budget {BUDGET} USD_MICROCENTS = {})",
        server.url(),
        usd(BUDGET)
    );
    let mut story = Story {
        server,
        client: Arc::new(client),
        args,
        created: None,
        reservation_id: None,
    };
    for (n, (title, chapter)) in CHAPTERS.iter().enumerate() {
        println!("\n{}. {title}", n + 1);
        chapter(&mut story)
            .await
            .map_err(|e| format!("chapter {} failed: {e}", n + 1))?;
    }
    story.server.shutdown().await;
    println!("\nDone. Next: `cycles serve` to run this server yourself, `cycles plan` for heartbeat math, `cycles journal list` to inspect pending settlements.");
    Ok(())
}
