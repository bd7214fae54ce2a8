//! The `cycles` command: the local Cycles server, the demo, the heartbeat planner and the
//! journal tools. A library as well as the `cycles` binary, so the Python wheel and the npm
//! package run the same command in-process through [`run`] instead of shipping a second
//! executable (docs/packaging.md).

mod ctrl_c;
mod demo;
mod fake_provider;
mod journal;
mod plan;
mod serve;

use std::ffi::OsString;

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

/// Runs the `cycles` command on `args` (the first item is the program name, as in
/// `std::env::args_os`) and returns its exit code. Usage errors, `--help` and `--version` are
/// printed as the binary prints them. Blocks the calling thread on a runtime of its own, so it
/// must not be called from inside a tokio runtime; `cycles serve` returns on SIGINT.
pub fn run<I, T>(args: I) -> u8
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(err) => {
            let _ = err.print();
            return u8::try_from(err.exit_code()).unwrap_or(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(err) => {
            eprintln!("error: cannot start the async runtime: {err}");
            return 1;
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
        Ok(()) => 0,
        Err((code, err)) => {
            eprintln!("error: {err}");
            code
        }
    }
}
