//! Quick start: reserve, heartbeat while the work runs, commit the actual amount.
//!
//! Run against a local server:
//!   cargo run -q -p cycles-cli -- serve --port 7878 &
//!   CYCLES_BASE_URL=http://127.0.0.1:7878 CYCLES_API_KEY=cycles-local-key \
//!     cargo run -q -p cycles-core --example quickstart
//!
//! The part between the README markers is shown in README.md; a test keeps them identical
//! and runs this example against the local server.

// README:begin
use std::sync::Arc;

use cycles_core::lease::{Heartbeat, HeartbeatConfig};
use cycles_core::{
    Action, Amount, CommitRequest, Config, CyclesClient, Error, ReservationCreateRequest, Subject,
    Unit,
};

pub async fn run(config: Config) -> Result<(), Error> {
    let client = Arc::new(CyclesClient::new(config)?);
    let mut request = ReservationCreateRequest::new(
        "run-42-step-1", // idempotency key: the same key on every retry of this reservation
        Subject::tenant("acme").with_agent("summarizer"),
        Action::new("llm.completion", "openai:gpt-4o-mini"),
        Amount::new(Unit::UsdMicrocents, 500_000),
    );
    request.ttl_ms = Some(30_000);
    let created = client.create_reservation(&request).await?;
    let id = created
        .body
        .reservation_id
        .clone()
        .expect("a live reservation has an id");

    // Keep the lease alive while the work runs (the spec's remaining_ttl_ms algorithm).
    let heartbeat = Heartbeat::start(client.clone(), &id, &created, HeartbeatConfig::new(30_000));
    let actual = call_the_model().await; // your work; it reports what it really cost
    let report = heartbeat.finish().await;
    println!(
        "heartbeat: {} extension(s), ended {:?}",
        report.extensions, report.end
    );

    let commit = CommitRequest::new(
        "run-42-step-1-commit",
        Amount::new(Unit::UsdMicrocents, actual),
    );
    let committed = client.commit_reservation(&id, &commit).await?;
    println!(
        "charged {} {}",
        committed.body.charged.amount, committed.body.charged.unit
    );
    Ok(())
}
// README:end

async fn call_the_model() -> i64 {
    423_000
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    run(Config::from_env()?).await
}
