//! `cycles serve`: the local Cycles server as a process, configured from flags or a JSON file.

use std::io::Write;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;

use clap::{Args, ValueEnum};
use cycles_local_server::{
    BudgetSeed, ExtendClamp, FaultRule, LocalServer, ServerConfig, ServerMode, TenantSeed,
};

/// Options of `cycles serve`. Flags override the config file; the file overrides defaults.
#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Address to bind. Loopback by default: this server has no real security.
    #[arg(long, default_value = "127.0.0.1")]
    host: IpAddr,
    /// Port to bind; 0 picks a free one.
    #[arg(long, default_value_t = 7878)]
    port: u16,
    /// JSON server configuration (the `ServerConfig` of cycles-local-server).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Seed tenant (replaces the default tenants when given).
    #[arg(long)]
    tenant: Option<String>,
    /// API key for the seeded tenant (repeatable).
    #[arg(long = "api-key")]
    api_keys: Vec<String>,
    /// Budget to seed, as SCOPE=UNIT:AMOUNT, e.g. tenant:acme=USD_MICROCENTS:5000000 (repeatable;
    /// replaces the default budgets when given).
    #[arg(long = "budget", value_parser = parse_budget)]
    budgets: Vec<BudgetSeed>,
    /// Do not emit `remaining_ttl_ms` (behave like a server older than 0.1.25.16).
    #[arg(long)]
    no_remaining_ttl: bool,
    /// Extension regime.
    #[arg(long, value_enum)]
    extend: Option<ExtendMode>,
    /// Cap per extension (with --extend grant-cap) or maximum lead (with --extend max-lead), ms.
    #[arg(long)]
    extend_limit_ms: Option<u64>,
    /// Cap on the TTL granted at creation, ms.
    #[arg(long)]
    initial_ttl_cap_ms: Option<u64>,
    /// Maximum number of extensions per reservation.
    #[arg(long)]
    max_extensions: Option<u32>,
    /// Serialise like the reference server (runcycles/cycles-server) instead of exactly as the
    /// spec says: explicit nulls for unset optionals in reservation rows, `next_cursor: null`
    /// on last pages, 500 on routing errors, 401 reason codes, its header quirks.
    #[arg(long)]
    reference_mode: bool,
    /// A scripted fault as JSON, e.g.
    /// '{"operation":"commitReservation","skip":0,"times":1,"fault":{"kind":"server_error","status":503}}'
    /// (repeatable).
    #[arg(long = "fault", value_parser = parse_fault)]
    faults: Vec<FaultRule>,
}

/// How the server treats `extend_by_ms`.
#[derive(Clone, Copy, Debug, ValueEnum)]
enum ExtendMode {
    /// New expiry = current expiry + extend_by_ms.
    Additive,
    /// Each extension grants at most --extend-limit-ms.
    GrantCap,
    /// Expiry never moves beyond now + --extend-limit-ms.
    MaxLead,
}

fn parse_budget(text: &str) -> Result<BudgetSeed, String> {
    let (scope, rest) = text
        .split_once('=')
        .ok_or_else(|| format!("budget {text:?} is not SCOPE=UNIT:AMOUNT"))?;
    let (unit, amount) = rest
        .split_once(':')
        .ok_or_else(|| format!("budget {text:?} is not SCOPE=UNIT:AMOUNT"))?;
    let allocated: i64 = amount
        .parse()
        .map_err(|_| format!("budget amount {amount:?} is not an integer"))?;
    if scope.is_empty() || unit.is_empty() || allocated < 0 {
        return Err(format!(
            "budget {text:?} needs a scope, a unit and an amount >= 0"
        ));
    }
    Ok(BudgetSeed {
        scope: scope.to_string(),
        unit: unit.to_string(),
        allocated,
        ..BudgetSeed::default()
    })
}

fn parse_fault(text: &str) -> Result<FaultRule, String> {
    serde_json::from_str(text).map_err(|err| format!("fault is not a valid FaultRule JSON: {err}"))
}

/// Builds the server configuration: defaults, then the file, then flags.
fn build_config(args: ServeArgs) -> Result<(ServerConfig, Vec<FaultRule>), String> {
    let mut config = match &args.config {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|err| format!("cannot read {}: {err}", path.display()))?;
            serde_json::from_str::<ServerConfig>(&text)
                .map_err(|err| format!("invalid server config {}: {err}", path.display()))?
        }
        None => ServerConfig::default(),
    };
    config.bind = SocketAddr::new(args.host, args.port);
    if args.tenant.is_some() || !args.api_keys.is_empty() {
        let id = args.tenant.clone().unwrap_or_else(|| "acme".to_string());
        let api_keys = if args.api_keys.is_empty() {
            vec!["cycles-local-key".to_string()]
        } else {
            args.api_keys.clone()
        };
        config.tenants = vec![TenantSeed {
            id,
            api_keys,
            ..TenantSeed::default()
        }];
    }
    if !args.budgets.is_empty() {
        config.budgets = args.budgets.clone();
    }
    if args.no_remaining_ttl {
        config.regime.emit_remaining_ttl = false;
    }
    if let Some(mode) = args.extend {
        let limit = || {
            args.extend_limit_ms
                .ok_or_else(|| "--extend grant-cap and max-lead need --extend-limit-ms".to_string())
        };
        config.regime.extend = match mode {
            ExtendMode::Additive => ExtendClamp::Additive,
            ExtendMode::GrantCap => ExtendClamp::GrantCap {
                max_grant_ms: limit()?,
            },
            ExtendMode::MaxLead => ExtendClamp::MaxLead {
                max_lead_ms: limit()?,
            },
        };
    }
    if let Some(cap) = args.initial_ttl_cap_ms {
        config.regime.initial_ttl_cap_ms = Some(cap);
    }
    if let Some(max) = args.max_extensions {
        config.regime.max_extensions = Some(max);
    }
    if args.reference_mode {
        config.mode = ServerMode::Reference;
    }
    Ok((config, args.faults))
}

/// Starts the server, prints where it listens and how to reach it, and waits for Ctrl-C.
pub async fn run(args: ServeArgs) -> Result<(), String> {
    let (config, faults) = build_config(args)?;
    let tenants = config.tenants.clone();
    let server = LocalServer::start(config)
        .await
        .map_err(|err| format!("cannot start the local server: {err}"))?;
    for rule in faults {
        server.add_fault(rule);
    }
    // A closed stdout (e.g. `cycles serve | head -1`) must not take the server down, so the
    // banner is written without println!'s panic on a broken pipe.
    let mut banner = format!("cycles local server listening on {}\n", server.url());
    for tenant in &tenants {
        for key in &tenant.api_keys {
            banner += &format!("  tenant {:?}: X-Cycles-API-Key: {key}\n", tenant.id);
        }
    }
    banner += &format!(
        "  inspection: {url}/__cycles/ledger, {url}/__cycles/requests\npress Ctrl-C to stop\n",
        url = server.url()
    );
    let ctrl_c = crate::ctrl_c::registered().await?;
    let mut out = std::io::stdout();
    let _ = out.write_all(banner.as_bytes()).and_then(|()| out.flush());
    ctrl_c.await?;
    server.shutdown().await;
    Ok(())
}
