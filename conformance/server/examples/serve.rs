//! Tiny launcher: `cargo run -p cycles-local-server --example serve -- [config.json] [bind-addr]`.
//! Prints the base URL on stdout (first line) and serves until killed.

use cycles_local_server::{LocalServer, ServerConfig};
use std::io::Write;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut config = match args.first().filter(|a| !a.is_empty() && *a != "-") {
        Some(path) => serde_json::from_str::<ServerConfig>(&std::fs::read_to_string(path)?)?,
        None => ServerConfig::default(),
    };
    if let Some(bind) = args.get(1) {
        config.bind = bind.parse()?;
    }
    let server = LocalServer::start(config).await?;
    println!("{}", server.url());
    std::io::stdout().flush()?;
    tokio::signal::ctrl_c().await?;
    server.shutdown().await;
    Ok(())
}
