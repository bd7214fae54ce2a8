//! Runner for the Cycles SDK recovery conformance profile.
//!
//! It validates the scenario catalog, runs an SDK's adapter once per claimed scenario in a
//! fresh process, judges each result against the adapter protocol and writes the evidence
//! report. It contains no SDK logic: the adapter attests which native tests it executed and
//! code review checks that those tests assert the catalog's oracle.
//!
//! The protocol, flags and report match the official Python runner
//! (`scripts/run_client_recovery_conformance.py`); see this crate's README.

#![warn(missing_docs)]

pub mod adapter;
pub mod catalog;
pub mod report;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use clap::{Parser, ValueEnum};

use crate::catalog::{Catalog, Level, Scenario};
use crate::report::{Implementation, ProfileInfo, Report, ScenarioResult, Summary};

/// The conformance level an SDK claims.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Claim {
    /// Core recovery: core and boundary scenarios.
    Core,
    /// Durable recovery: core, durable and boundary scenarios.
    Durable,
}

impl Claim {
    /// The claim's name in messages and the report.
    pub fn as_str(self) -> &'static str {
        match self {
            Claim::Core => "core",
            Claim::Durable => "durable",
        }
    }

    /// Whether a scenario of `level` belongs to this claim. Boundary scenarios belong to
    /// every claim: the guarantee boundary is mandatory for core and durable alike.
    pub fn includes(self, level: Level) -> bool {
        match level {
            Level::Core | Level::Boundary => true,
            Level::Durable => self == Claim::Durable,
        }
    }
}

/// Command-line interface of `cycles-conformance`.
#[derive(Debug, Parser)]
#[command(
    name = "cycles-conformance",
    version,
    about = "Run an SDK's recovery conformance adapter against the Cycles SDK recovery scenario catalog",
    after_help = "--adapter takes the rest of the command line: put it last. The runner appends the \
                  scenario id as the adapter's final argument and writes the scenario inputs \
                  (id, level, name, precondition, faults) as one JSON object to its stdin."
)]
pub struct Cli {
    /// The recovery level claimed: core runs core + boundary, durable runs core + durable + boundary.
    #[arg(long, value_enum)]
    pub claim: Claim,

    /// Run only this scenario (repeatable); it must belong to the claim.
    #[arg(long = "scenario", value_name = "ID")]
    pub scenarios: Vec<String>,

    /// Write the evidence report (report.schema.json) here, atomically, even when scenarios fail.
    #[arg(long, value_name = "PATH")]
    pub report_json: Option<PathBuf>,

    /// Implementation id [default: $GITHUB_REPOSITORY, else the current directory's name].
    #[arg(long, value_name = "ID", value_parser = non_empty)]
    pub implementation: Option<String>,

    /// Implementation version recorded in the report.
    #[arg(long, value_name = "V", value_parser = non_empty)]
    pub implementation_version: Option<String>,

    /// Implementation commit [default: $GITHUB_SHA, else `git rev-parse HEAD` in the current directory, else "unknown"].
    #[arg(long, value_name = "SHA", value_parser = non_empty)]
    pub implementation_commit: Option<String>,

    /// Evidence URL [default: $GITHUB_SERVER_URL/$GITHUB_REPOSITORY/actions/runs/$GITHUB_RUN_ID when all are set].
    #[arg(long, value_name = "URL", value_parser = uri)]
    pub evidence_url: Option<String>,

    /// Per-scenario adapter timeout in seconds (must be > 0).
    #[arg(long, value_name = "SECONDS", default_value = "120", value_parser = positive_seconds)]
    pub timeout: Duration,

    /// Scenario catalog [default: ../shared/spec/scenarios.yaml beside the git repository root].
    #[arg(long, value_name = "PATH")]
    pub catalog: Option<PathBuf>,

    /// Adapter command and its arguments (the rest of the command line).
    #[arg(long, value_name = "CMD", required = true, allow_hyphen_values = true)]
    pub adapter: String,

    /// The adapter's arguments, taken verbatim from everything after `--adapter CMD`.
    #[arg(skip)]
    pub adapter_args: Vec<String>,
}

fn non_empty(text: &str) -> Result<String, String> {
    if text.trim().is_empty() {
        Err("must not be empty".to_owned())
    } else {
        Ok(text.to_owned())
    }
}

/// Accepts an absolute URI (`scheme:rest`, RFC 3986), as `format: uri` in the schema needs.
fn uri(text: &str) -> Result<String, String> {
    let valid = text.split_once(':').is_some_and(|(scheme, rest)| {
        let mut chars = scheme.chars();
        chars.next().is_some_and(|c| c.is_ascii_alphabetic())
            && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
            && !rest.is_empty()
    }) && !text.chars().any(|c| c.is_whitespace() || c.is_control());
    if valid {
        Ok(text.to_owned())
    } else {
        Err("must be an absolute URI such as https://host/path".to_owned())
    }
}

fn positive_seconds(text: &str) -> Result<Duration, String> {
    let secs: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a number of seconds"))?;
    if !(secs.is_finite() && secs > 0.0) {
        return Err("must be greater than 0".to_owned());
    }
    Duration::try_from_secs_f64(secs).map_err(|e| e.to_string())
}

impl Cli {
    /// Parses the command line. `--adapter` takes the rest of argv (like argparse's
    /// REMAINDER), so the split happens before clap sees the arguments: otherwise an
    /// adapter argument such as `--timeout` would be taken as the runner's own flag.
    pub fn parse_from_env() -> Cli {
        Cli::parse_args(std::env::args_os())
    }

    /// [`Cli::parse_from_env`] for an explicit argv (first element: program name).
    pub fn parse_args<I: IntoIterator<Item = OsString>>(args: I) -> Cli {
        let args: Vec<OsString> = args.into_iter().collect();
        let split = args
            .iter()
            .skip(1)
            .position(|a| a == "--adapter" || a.to_string_lossy().starts_with("--adapter="))
            .map(|i| i + 1);
        let Some(at) = split else {
            return Cli::parse_from(args);
        };
        let mut head: Vec<OsString> = args[..at].to_vec();
        let flag = args[at].to_string_lossy().into_owned();
        let mut rest: Vec<String> = args[at + 1..]
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        if let Some(cmd) = flag.strip_prefix("--adapter=") {
            rest.insert(0, cmd.to_owned());
        }
        head.push("--adapter".into());
        if !rest.is_empty() {
            head.push(rest.remove(0).into());
        }
        let mut cli = Cli::parse_from(head);
        cli.adapter_args = rest;
        cli
    }

    /// The full adapter command: program followed by its arguments.
    pub fn adapter_command(&self) -> Vec<String> {
        std::iter::once(self.adapter.clone())
            .chain(self.adapter_args.iter().cloned())
            .collect()
    }
}

fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?.trim().to_owned();
    (!text.is_empty()).then_some(text)
}

fn env_non_empty(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// The default catalog: `<repo root>/../shared/spec/scenarios.yaml`, where the repo root is
/// the current directory's git top level, or else this crate's own checkout (so the binary
/// works from anywhere inside or beside the project).
pub fn default_catalog() -> Result<PathBuf, String> {
    let relative = Path::new("../shared/spec/scenarios.yaml");
    let mut tried = Vec::new();
    if let Some(top) = std::env::current_dir()
        .ok()
        .and_then(|cwd| git(&cwd, &["rev-parse", "--show-toplevel"]))
    {
        tried.push(PathBuf::from(top).join(relative));
    }
    tried.push(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../..")
            .join(relative),
    );
    tried.iter().find(|p| p.is_file()).cloned().ok_or_else(|| {
        format!(
            "no scenario catalog found: missing ../shared/spec/scenarios.yaml (the SDK recovery \
             scenario catalog of the pinned Cycles spec, expected beside the repository; tried \
             {}); pass --catalog PATH, e.g. a download of client-recovery/scenarios.yaml from \
             https://github.com/runcycles/cycles-protocol",
            tried
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )
    })
}

/// Picks the scenarios to run: the claim's scenarios in catalog order, narrowed to
/// `selected` when non-empty. A selected id outside the claim (or unknown) is an error.
pub fn select<'a>(
    catalog: &'a Catalog,
    claim: Claim,
    selected: &[String],
) -> Result<Vec<&'a Scenario>, String> {
    let claimed: Vec<&Scenario> = catalog
        .scenarios
        .iter()
        .filter(|s| claim.includes(s.level))
        .collect();
    if claimed.is_empty() {
        // A claim backed by zero scenarios would "pass" vacuously; refuse it instead.
        return Err(format!(
            "the catalog has no scenarios for the {} claim",
            claim.as_str()
        ));
    }
    if selected.is_empty() {
        return Ok(claimed);
    }
    let unknown: Vec<&str> = selected
        .iter()
        .filter(|id| !claimed.iter().any(|s| &s.id == *id))
        .map(String::as_str)
        .collect();
    if !unknown.is_empty() {
        return Err(format!(
            "scenario {} is outside the {} claim or unknown",
            unknown.join(", "),
            claim.as_str()
        ));
    }
    Ok(claimed
        .into_iter()
        .filter(|s| selected.contains(&s.id))
        .collect())
}

/// Runs the whole command and returns the process exit code: 0 when every selected
/// scenario passed, 1 otherwise (including configuration errors).
pub fn run(cli: &Cli) -> i32 {
    match run_inner(cli) {
        Ok(code) => code,
        Err(message) => {
            eprintln!("error: {message}");
            1
        }
    }
}

fn run_inner(cli: &Cli) -> Result<i32, String> {
    let catalog_path = match &cli.catalog {
        Some(p) => p.clone(),
        None => default_catalog()?,
    };
    let catalog = catalog::load(&catalog_path)?;
    let scenarios = select(&catalog, cli.claim, &cli.scenarios)?;
    let adapter = cli.adapter_command();

    let mut results = Vec::with_capacity(scenarios.len());
    for scenario in &scenarios {
        eprintln!("[{}] {} ({})", scenario.id, scenario.name, scenario.level);
        let outcome = adapter::run_scenario(&adapter, scenario, cli.timeout);
        if outcome.passed {
            eprintln!(
                "[{}] passed: {}",
                scenario.id,
                outcome.native_tests.join(", ")
            );
        } else {
            eprintln!(
                "[{}] FAILED: {}",
                scenario.id,
                outcome.diagnostic.as_deref().unwrap_or("(no diagnostic)")
            );
        }
        results.push(ScenarioResult {
            id: scenario.id.clone(),
            level: scenario.level.as_str().to_owned(),
            name: scenario.name.clone(),
            passed: outcome.passed,
            native_tests: outcome.native_tests,
            diagnostic: outcome.diagnostic,
        });
    }
    let passed = results.iter().filter(|r| r.passed).count();
    let summary = Summary {
        total: results.len(),
        passed,
        failed: results.len() - passed,
    };

    if let Some(path) = &cli.report_json {
        let report = build_report(cli, &catalog, &catalog_path, summary, results);
        report::write_atomic(path, &report)?;
        eprintln!("Wrote report {}", path.display());
    }
    if summary.failed == 0 {
        println!(
            "Passed {} {} recovery scenarios.",
            summary.total,
            cli.claim.as_str()
        );
        Ok(0)
    } else {
        println!(
            "Failed {} of {} {} recovery scenarios.",
            summary.failed,
            summary.total,
            cli.claim.as_str()
        );
        Ok(1)
    }
}

fn build_report(
    cli: &Cli,
    catalog: &Catalog,
    catalog_path: &Path,
    summary: Summary,
    scenarios: Vec<ScenarioResult>,
) -> Report {
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    let catalog_dir = catalog_path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let implementation_id = cli
        .implementation
        .clone()
        .or_else(|| env_non_empty("GITHUB_REPOSITORY"))
        .or_else(|| {
            cwd.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .filter(|n| !n.is_empty())
        })
        .unwrap_or_else(|| "unknown".to_owned());
    let implementation_commit = cli
        .implementation_commit
        .clone()
        .or_else(|| env_non_empty("GITHUB_SHA"))
        .or_else(|| git(&cwd, &["rev-parse", "HEAD"]))
        .unwrap_or_else(|| "unknown".to_owned());
    let evidence_url = cli.evidence_url.clone().or_else(|| {
        match (
            env_non_empty("GITHUB_SERVER_URL"),
            env_non_empty("GITHUB_REPOSITORY"),
            env_non_empty("GITHUB_RUN_ID"),
        ) {
            (Some(server), Some(repo), Some(run)) => Some(format!(
                "{}/{repo}/actions/runs/{run}",
                server.trim_end_matches('/')
            )),
            _ => None,
        }
    });
    Report {
        schema: report::SCHEMA_URL.to_owned(),
        schema_version: report::SCHEMA_VERSION.to_owned(),
        generated_at: report::now_utc(),
        profile: ProfileInfo {
            name: catalog::PROFILE_NAME.to_owned(),
            version: catalog.version.clone(),
            commit: git(catalog_dir, &["rev-parse", "HEAD"])
                .unwrap_or_else(|| "unknown".to_owned()),
            catalog_sha256: catalog.sha256.clone(),
        },
        claim: cli.claim.as_str().to_owned(),
        implementation: Implementation {
            id: implementation_id,
            commit: implementation_commit,
            version: cli.implementation_version.clone(),
        },
        evidence_url,
        summary,
        scenarios,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn catalog() -> Catalog {
        let text = "profile: cycles-sdk-recovery\nversion: \"0.3\"\nscenarios:\n\
  - {id: CR-DURABLE-001, level: durable, name: d, precondition: p, faults: [journal], expected_requests: [], assertions: []}\n\
  - {id: CR-CORE-001, level: core, name: c, precondition: p, faults: [], expected_requests: [], assertions: []}\n\
  - {id: CR-BOUNDARY-001, level: boundary, name: b, precondition: actual_unknown, faults: [], expected_requests: [], assertions: []}\n";
        catalog::parse(text).unwrap()
    }

    fn ids(scenarios: &[&Scenario]) -> Vec<String> {
        scenarios.iter().map(|s| s.id.clone()).collect()
    }

    #[test]
    fn claims_select_levels_in_catalog_order() {
        let c = catalog();
        assert_eq!(
            ids(&select(&c, Claim::Core, &[]).unwrap()),
            ["CR-CORE-001", "CR-BOUNDARY-001"]
        );
        assert_eq!(
            ids(&select(&c, Claim::Durable, &[]).unwrap()),
            ["CR-DURABLE-001", "CR-CORE-001", "CR-BOUNDARY-001"]
        );
        let picked = ["CR-BOUNDARY-001".to_owned(), "CR-DURABLE-001".to_owned()];
        assert_eq!(
            ids(&select(&c, Claim::Durable, &picked).unwrap()),
            ["CR-DURABLE-001", "CR-BOUNDARY-001"]
        );
        let err = select(&c, Claim::Core, &picked).unwrap_err();
        assert_eq!(
            err,
            "scenario CR-DURABLE-001 is outside the core claim or unknown"
        );
    }

    #[test]
    fn an_empty_claim_is_refused() {
        let mut c = catalog();
        c.scenarios.retain(|s| s.level == Level::Durable);
        assert!(select(&c, Claim::Core, &[])
            .unwrap_err()
            .contains("no scenarios for the core claim"));
    }

    #[test]
    fn adapter_argv_split() {
        let cli = Cli::parse_args(
            [
                "x",
                "--claim",
                "core",
                "--adapter",
                "prog",
                "--claim",
                "durable",
                "--timeout",
            ]
            .map(OsString::from),
        );
        assert_eq!(cli.claim, Claim::Core);
        assert_eq!(cli.timeout, Duration::from_secs(120));
        assert_eq!(
            cli.adapter_command(),
            ["prog", "--claim", "durable", "--timeout"]
        );
    }
}
