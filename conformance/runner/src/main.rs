//! `cycles-conformance`: the Cycles SDK recovery conformance runner (see the crate README).

fn main() {
    let cli = cycles_conformance_runner::Cli::parse_from_env();
    std::process::exit(cycles_conformance_runner::run(&cli));
}
