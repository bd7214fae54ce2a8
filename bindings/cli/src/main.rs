//! The `cycles` binary: the library's [`cycles_cli::run`] on the process arguments.

fn main() -> std::process::ExitCode {
    std::process::ExitCode::from(cycles_cli::run(std::env::args_os()))
}
