//! The `cycles` command: the local Cycles server, the demo, and (in later issues) operator tools.

mod demo;
mod fake_provider;
mod journal;
mod plan;
mod serve;

use clap::{Parser, Subcommand};

/// Command-line front end of the Cycles SDK.
#[derive(Parser)]
#[command(
    name = "cycles",
    version,
    about = "Cycles SDK: local server, demo and operator tools"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the local in-memory Cycles server until interrupted.
    Serve(serve::ServeArgs),
    /// Run the guided demo against an embedded local server.
    Demo(demo::DemoArgs),
    /// Print the heartbeat schedule and its arithmetic for given response timings.
    Plan(plan::PlanArgs),
    /// Inspect, replay and drain the durable settlement journal.
    Journal(journal::JournalArgs),
    /// Run the fake model provider (OpenAI and Anthropic wire formats, scripted faults, a
    /// request recorder) until interrupted.
    FakeProvider(fake_provider::FakeProviderArgs),
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(err) => {
            eprintln!("error: cannot start the async runtime: {err}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Serve(args) => serve::run(args).await.map_err(|e| (1, e)),
            Command::Demo(args) => demo::run(args).await.map_err(|e| (1, e)),
            Command::Plan(args) => plan::run(args).await.map_err(|e| (1, e)),
            Command::Journal(args) => journal::run(args).await.map_err(|f| (f.code, f.message)),
            Command::FakeProvider(args) => fake_provider::run(args).await.map_err(|e| (1, e)),
        }
    });
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err((code, err)) => {
            eprintln!("error: {err}");
            std::process::ExitCode::from(code)
        }
    }
}
