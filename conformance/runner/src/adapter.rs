//! Driving one adapter process per scenario and judging its result.
//!
//! The runner owns no SDK logic: each scenario is a fresh adapter process, so no state can
//! leak between scenarios, and the only evidence accepted is the adapter's single JSON
//! result naming the native tests it executed.

use std::collections::HashSet;
use std::io::{Read, Write};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::catalog::Scenario;

/// The judged outcome of one scenario, as it appears in the report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// Whether the adapter's result passed every protocol check.
    pub passed: bool,
    /// The adapter's native tests when it returned a well-formed list, else empty.
    pub native_tests: Vec<String>,
    /// Why the scenario failed (or the adapter's own diagnostic on success).
    pub diagnostic: Option<String>,
}

impl Outcome {
    fn fail(diagnostic: String) -> Outcome {
        Outcome {
            passed: false,
            native_tests: Vec::new(),
            diagnostic: Some(diagnostic),
        }
    }
}

/// How the adapter process ended.
enum Ended {
    Exited(ExitStatus, Vec<u8>),
    TimedOut,
    SpawnFailed(String),
}

/// Runs `adapter` (command and arguments) for `scenario` with the scenario id appended as
/// the last argument, and judges its stdout against the runner protocol.
pub fn run_scenario(adapter: &[String], scenario: &Scenario, timeout: Duration) -> Outcome {
    let ended = execute(adapter, scenario, timeout);
    judge(scenario, ended, timeout)
}

fn execute(adapter: &[String], scenario: &Scenario, timeout: Duration) -> Ended {
    let Some((program, args)) = adapter.split_first() else {
        return Ended::SpawnFailed("empty adapter command".to_owned());
    };
    let mut command = Command::new(program);
    command
        .args(args)
        .arg(&scenario.id)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        // A group of its own lets a timeout kill everything the adapter started (cargo,
        // test binaries, shells), not just the direct child.
        command.process_group(0);
    }
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(e) => {
            return Ended::SpawnFailed(format!("cannot start adapter {program:?}: {e}"));
        }
    };
    let deadline = Instant::now() + timeout;

    // stdin and stdout are serviced on their own threads so an adapter that ignores stdin
    // or writes a large result can never deadlock against the runner.
    let input = serde_json::to_vec(&scenario.adapter_input()).expect("scenario input serializes");
    if let Some(mut stdin) = child.stdin.take() {
        thread::spawn(move || {
            // An adapter may exit without reading stdin; a broken pipe is not a failure.
            let _ = stdin.write_all(&input);
        });
    }
    let (tx, rx) = mpsc::channel();
    if let Some(mut stdout) = child.stdout.take() {
        thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = stdout.read_to_end(&mut buf);
            let _ = tx.send(buf);
        });
    } else {
        drop(tx);
    }

    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) => {}
            Err(e) => {
                kill_group(&mut child);
                return Ended::SpawnFailed(format!("cannot wait for adapter: {e}"));
            }
        }
        let now = Instant::now();
        if now >= deadline {
            kill_group(&mut child);
            return Ended::TimedOut;
        }
        thread::sleep((deadline - now).min(Duration::from_millis(10)));
    };
    // A grandchild that inherited stdout keeps it open after the adapter exits; the result
    // is complete only at EOF, which must also arrive within the scenario's time budget.
    match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
        Ok(stdout) => Ended::Exited(status, stdout),
        Err(_) => {
            kill_group(&mut child);
            Ended::TimedOut
        }
    }
}

fn kill_group(child: &mut Child) {
    #[cfg(unix)]
    {
        if let Ok(pid) = libc::pid_t::try_from(child.id()) {
            // SAFETY: kill(2) with a negative pid signals the process group we created with
            // process_group(0); its id equals the child's pid. No memory is shared.
            unsafe {
                libc::kill(-pid, libc::SIGKILL);
            }
        }
    }
    let _ = child.kill();
    let _ = child.wait();
}

fn describe_status(status: ExitStatus) -> String {
    if let Some(code) = status.code() {
        return format!("adapter exited with status {code}");
    }
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(signal) = status.signal() {
            return format!("adapter was terminated by signal {signal}");
        }
    }
    format!("adapter ended abnormally ({status})")
}

fn format_seconds(timeout: Duration) -> String {
    let secs = timeout.as_secs_f64();
    if secs.fract() == 0.0 {
        format!("{secs:.0}")
    } else {
        format!("{secs}")
    }
}

fn judge(scenario: &Scenario, ended: Ended, timeout: Duration) -> Outcome {
    let (status, stdout) = match ended {
        Ended::SpawnFailed(e) => return Outcome::fail(e),
        Ended::TimedOut => {
            return Outcome::fail(format!(
                "adapter timed out after {} seconds",
                format_seconds(timeout)
            ))
        }
        Ended::Exited(status, stdout) => (status, stdout),
    };
    let parsed: Result<Value, String> = std::str::from_utf8(&stdout)
        .map_err(|_| "adapter stdout is not UTF-8".to_owned())
        .and_then(|text| {
            serde_json::from_str(text)
                .map_err(|e| format!("adapter stdout is not exactly one JSON document: {e}"))
        });
    if !status.success() {
        // A failing adapter may still have written a result; its diagnostic and native
        // tests make the report far more useful than the exit status alone.
        let mut outcome = Outcome::fail(describe_status(status));
        if let Ok(Value::Object(map)) = &parsed {
            if let Some(Value::String(d)) = map.get("diagnostic") {
                if !d.trim().is_empty() {
                    outcome.diagnostic = Some(format!("{}: {d}", describe_status(status)));
                }
            }
            if let Ok(tests) = native_tests(map.get("native_tests")) {
                outcome.native_tests = tests;
            }
        }
        return outcome;
    }
    let value = match parsed {
        Ok(v) => v,
        Err(e) => return Outcome::fail(e),
    };
    let Value::Object(map) = value else {
        return Outcome::fail(format!("adapter result is not a JSON object: {value}"));
    };
    let adapter_diagnostic = match map.get("diagnostic") {
        None => None,
        Some(Value::String(d)) => Some(d.clone()).filter(|d| !d.trim().is_empty()),
        Some(other) => {
            return Outcome::fail(format!(
                "adapter result diagnostic must be a string, found {other}"
            ))
        }
    };
    let tests = native_tests(map.get("native_tests"));
    let mut outcome = Outcome {
        passed: false,
        native_tests: tests.clone().unwrap_or_default(),
        diagnostic: None,
    };
    let with_adapter_diagnostic = |message: String| match &adapter_diagnostic {
        Some(d) => format!("{message}: {d}"),
        None => message,
    };
    match map.get("scenario_id") {
        Some(Value::String(id)) if *id == scenario.id => {}
        other => {
            outcome.diagnostic = Some(format!(
                "adapter result scenario_id {} does not match {}",
                other.map_or_else(|| "(missing)".to_owned(), Value::to_string),
                scenario.id
            ));
            return outcome;
        }
    }
    // The oracle labels are runner-owned; echoing them back is exactly what the profile
    // says is not conformance, so such a result is rejected outright.
    for oracle in ["expected_requests", "assertions"] {
        if map.contains_key(oracle) {
            outcome.diagnostic = Some(format!(
                "adapter result must not contain the runner-owned oracle field {oracle}"
            ));
            return outcome;
        }
    }
    match map.get("passed") {
        Some(Value::Bool(true)) => {}
        other => {
            outcome.diagnostic = Some(with_adapter_diagnostic(format!(
                "adapter reported passed={}, not true",
                other.map_or_else(|| "(missing)".to_owned(), Value::to_string)
            )));
            return outcome;
        }
    }
    match tests {
        Ok(_) => {
            outcome.passed = true;
            outcome.diagnostic = adapter_diagnostic;
        }
        Err(e) => outcome.diagnostic = Some(e),
    }
    outcome
}

/// Checks `native_tests`: a non-empty list of unique, non-blank strings.
fn native_tests(value: Option<&Value>) -> Result<Vec<String>, String> {
    const SHAPE: &str = "adapter result native_tests must be a non-empty list of non-blank strings";
    let Some(Value::Array(items)) = value else {
        return Err(SHAPE.to_owned());
    };
    if items.is_empty() {
        return Err(SHAPE.to_owned());
    }
    let mut seen = HashSet::new();
    let mut tests = Vec::with_capacity(items.len());
    for item in items {
        let Value::String(name) = item else {
            return Err(format!("{SHAPE}, found {item}"));
        };
        if name.trim().is_empty() {
            return Err(format!("{SHAPE}, found {item}"));
        }
        if !seen.insert(name.as_str()) {
            return Err(format!(
                "adapter result native_tests contains duplicates: {item}"
            ));
        }
        tests.push(name.clone());
    }
    Ok(tests)
}
