//! `cycles demo`: the main job. Starts the embedded local server on an ephemeral port and
//! tells a short story against it with the core client. Each chapter is one function taking
//! the shared [`Story`], so later features (heartbeat, crash recovery) add chapters.

use clap::Args;
use cycles_core::{
    Action, Amount, BalanceQuery, CommitRequest, Config, CyclesClient, Error, ReservationCreateRequest,
    ReservationExtendRequest, Subject, Unit,
};
use cycles_local_server::{BudgetSeed, LocalServer, ServerConfig, TenantSeed};

const TENANT: &str = "acme";
const API_KEY: &str = "demo-key";
const BUDGET: i64 = 5_000_000;

/// Options of `cycles demo`.
#[derive(Args, Debug)]
pub struct DemoArgs {
    /// Requested TTL of the demo reservation, in ms.
    #[arg(long, default_value_t = 3000)]
    ttl_ms: i64,
    /// How many times the demo extends the lease.
    #[arg(long, default_value_t = 3)]
    extensions: u32,
}

/// What every chapter shares: the server, a client, and the reservation in play.
struct Story {
    server: LocalServer,
    client: CyclesClient,
    args: DemoArgs,
    reservation_id: Option<String>,
}

type Chapter = for<'a> fn(&'a mut Story) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), Error>> + 'a>>;

/// The story, in order. Later issues append chapters here.
const CHAPTERS: &[(&str, Chapter)] = &[
    ("Balances before any work", |s| Box::pin(balances(s))),
    ("Reserve an estimate before calling the model", |s| Box::pin(reserve(s))),
    ("The work outlives its TTL: extend the lease", |s| Box::pin(extend(s))),
    ("Commit the actual amount the work reported", |s| Box::pin(commit(s))),
    ("A second agent asks for more than is left", |s| Box::pin(denied(s))),
    ("Balances after", |s| Box::pin(balances(s))),
    ("What the server applied (its ledger)", |s| Box::pin(ledger(s))),
];

fn usd(microcents: i64) -> String {
    // 1 USD = 10^8 USD_MICROCENTS.
    format!("${}.{:08}", microcents / 100_000_000, microcents % 100_000_000)
}

async fn balances(story: &mut Story) -> Result<(), Error> {
    let page = story.client.get_balances(&BalanceQuery::tenant(TENANT)).await?;
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
        body.remaining_ttl_ms.map_or("absent".into(), |v| v.to_string()),
        res.timing.rtt().as_micros(),
        body.affected_scopes
    );
    story.reservation_id = body.reservation_id.clone();
    Ok(())
}

async fn extend(story: &mut Story) -> Result<(), Error> {
    let id = story.reservation_id.clone().unwrap_or_default();
    for n in 1..=story.args.extensions {
        let req = ReservationExtendRequest::new(format!("demo-run-1-extend-{n}"), story.args.ttl_ms);
        let res = story.client.extend_reservation(&id, &req).await?;
        println!(
            "   extend #{n} by {} ms: status {}, expires_at_ms {}, remaining_ttl_ms {}",
            story.args.ttl_ms,
            res.body.status,
            res.body.expires_at_ms,
            res.body.remaining_ttl_ms.map_or("absent".into(), |v| v.to_string())
        );
    }
    println!("   (the heartbeat issue replaces these manual extends with the spec's lease-renewal algorithm)");
    Ok(())
}

async fn commit(story: &mut Story) -> Result<(), Error> {
    let id = story.reservation_id.clone().unwrap_or_default();
    let actual = Amount::new(Unit::UsdMicrocents, 1_450_000);
    let res = story
        .client
        .commit_reservation(&id, &CommitRequest::new("demo-run-1-commit", actual.clone()))
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

async fn ledger(story: &mut Story) -> Result<(), Error> {
    for entry in story.server.ledger() {
        println!(
            "   #{:<2} {:<8} {:<12} key {:<22} {}",
            entry.seq,
            entry.kind,
            entry.reservation_id.as_deref().unwrap_or("-"),
            entry.idempotency_key,
            entry.amount.map_or(String::new(), |a| format!("{a} {}", entry.unit.as_deref().unwrap_or(""))),
        );
    }
    Ok(())
}

/// Runs every chapter in order against a fresh embedded server.
pub async fn run(args: DemoArgs) -> Result<(), String> {
    if args.ttl_ms < 1000 {
        return Err("--ttl-ms must be at least 1000 (the protocol's minimum)".into());
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
    let client = CyclesClient::new(Config::new(server.url(), API_KEY).with_tenant(TENANT))
        .map_err(|e| e.to_string())?;
    println!("Cycles demo: an agent spends against a budget, guarded by a reservation.");
    println!(
        "Embedded local Cycles server at {} (tenant {TENANT}, budget {BUDGET} USD_MICROCENTS = {})",
        server.url(),
        usd(BUDGET)
    );
    let mut story = Story {
        server,
        client,
        args,
        reservation_id: None,
    };
    for (n, (title, chapter)) in CHAPTERS.iter().enumerate() {
        println!("\n{}. {title}", n + 1);
        chapter(&mut story).await.map_err(|e| format!("chapter {} failed: {e}", n + 1))?;
    }
    story.server.shutdown().await;
    println!("\nDone. Next: `cycles serve` to run this server yourself, `cycles plan` for heartbeat math.");
    Ok(())
}
