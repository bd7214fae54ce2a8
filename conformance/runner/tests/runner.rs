//! End-to-end tests: the real `cycles-conformance` binary drives the fake adapter in
//! `tests/fixtures/fake-adapter.sh`, whose behaviour is chosen by `FAKE_MODE`.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use common::*;
use cycles_conformance_runner::catalog;
use serde_json::Value;
use sha2::{Digest, Sha256};

fn shared_schema() -> PathBuf {
    shared_file(
        "spec/report.schema.json",
        "the recovery evidence report schema 1.0",
    )
}

fn fake_adapter() -> String {
    manifest_dir()
        .join("tests/fixtures/fake-adapter.sh")
        .display()
        .to_string()
}

/// A runner command with the GitHub defaults cleared, so tests behave the same in any CI.
fn runner() -> Command {
    let mut cmd = Command::new(BIN);
    for var in [
        "GITHUB_REPOSITORY",
        "GITHUB_SHA",
        "GITHUB_SERVER_URL",
        "GITHUB_RUN_ID",
        "FAKE_MODE",
        "FAKE_RECORD",
        "FAKE_ONLY",
    ] {
        cmd.env_remove(var);
    }
    cmd
}

/// Runs the runner with `args` and the fake adapter in `mode` as the adapter.
fn run(args: &[&str], mode: &str, record: Option<&Path>) -> Output {
    let mut cmd = runner();
    cmd.args(args)
        .arg("--catalog")
        .arg(shared_catalog())
        .env("FAKE_MODE", mode)
        .args(["--adapter", "sh", &fake_adapter()]);
    if let Some(dir) = record {
        cmd.env("FAKE_RECORD", dir);
    }
    cmd.output().expect("runner starts")
}

/// Validates `report` against the shared report.schema.json, formats included.
fn assert_schema_valid(report: &Value) {
    let schema: Value = read_json(&shared_schema());
    let validator = jsonschema::options()
        .with_draft(jsonschema::Draft::Draft202012)
        .should_validate_formats(true)
        .build(&schema)
        .expect("schema compiles");
    let errors: Vec<String> = validator
        .iter_errors(report)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "report violates the schema: {errors:#?}\n{report:#}"
    );
}

/// Runs one scenario with `mode` and returns (exit code, the scenario's report entry).
fn run_one(mode: &str, extra: &[&str]) -> (i32, Value) {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("report.json");
    let mut args = vec![
        "--claim",
        "core",
        "--scenario",
        "CR-CORE-001",
        "--report-json",
        report.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let out = run(&args, mode, None);
    let doc = read_json(&report);
    assert_schema_valid(&doc);
    assert_eq!(doc["summary"]["total"], 1);
    let entry = doc["scenarios"][0].clone();
    assert_eq!(entry["id"], "CR-CORE-001");
    (out.status.code().expect("exited"), entry)
}

/// Asserts that `mode` makes the scenario fail with a diagnostic containing `needle`.
fn assert_fails(mode: &str, needle: &str) -> Value {
    let (code, entry) = run_one(mode, &[]);
    assert_eq!(code, 1, "{mode} must fail the run");
    assert_eq!(entry["passed"], false, "{mode}: {entry}");
    let diagnostic = entry["diagnostic"].as_str().unwrap_or_default();
    assert!(
        diagnostic.contains(needle),
        "{mode}: diagnostic {diagnostic:?} lacks {needle:?}"
    );
    entry
}

#[test]
fn core_claim_passes_core_and_boundary() {
    let out = run(&["--claim", "core"], "ok", None);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "Passed 5 core recovery scenarios.\n");
}

#[test]
fn durable_claim_passes_all_twelve() {
    let out = run(&["--claim", "durable"], "ok", None);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "Passed 12 durable recovery scenarios.\n");
}

#[test]
fn whitespace_around_the_result_is_tolerated() {
    let (code, entry) = run_one("pretty", &[]);
    assert_eq!(code, 0);
    assert_eq!(entry["native_tests"], serde_json::json!(["a", "b"]));
}

#[test]
fn adapter_diagnostic_on_success_is_kept() {
    let (code, entry) = run_one("ok_with_diagnostic", &[]);
    assert_eq!(code, 0);
    assert_eq!(entry["diagnostic"], "all good");
}

#[test]
fn stdin_carries_exactly_the_scenario_inputs_and_id_is_last_argv() {
    let record = tempfile::tempdir().unwrap();
    let mut cmd = runner();
    // Adapter arguments that look like runner flags must reach the adapter verbatim.
    cmd.args(["--claim", "durable", "--catalog"])
        .arg(shared_catalog())
        .env("FAKE_RECORD", record.path())
        .args([
            "--adapter",
            "sh",
            &fake_adapter(),
            "--timeout",
            "two words",
            "--claim",
        ]);
    let out = cmd.output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));

    let catalog = catalog::load(&shared_catalog()).unwrap();
    assert_eq!(catalog.scenarios.len(), 12);
    for scenario in &catalog.scenarios {
        let stdin = std::fs::read_to_string(record.path().join(format!("{}.stdin", scenario.id)))
            .unwrap_or_else(|_| panic!("{} was not run", scenario.id));
        let doc: Value = serde_json::from_str(&stdin).expect("stdin is one JSON document");
        let keys: BTreeSet<&str> = doc
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(
            keys,
            BTreeSet::from(["id", "level", "name", "precondition", "faults"]),
            "{}",
            scenario.id
        );
        assert_eq!(doc["id"], scenario.id.as_str());
        assert_eq!(doc["level"], scenario.level.as_str());
        assert_eq!(doc["name"], scenario.name.as_str());
        assert_eq!(doc["precondition"], scenario.precondition.as_str());
        assert_eq!(doc["faults"], serde_json::json!(scenario.faults));
        // No oracle label leaks anywhere in the payload, not even as a value.
        let inputs = format!(
            "{} {} {}",
            scenario.name,
            scenario.precondition,
            scenario.faults.join(" ")
        );
        for label in scenario
            .expected_requests
            .iter()
            .chain(&scenario.assertions)
        {
            if !inputs.contains(label.as_str()) {
                assert!(
                    !stdin.contains(label.as_str()),
                    "{}: {label} leaked",
                    scenario.id
                );
            }
        }

        let argv =
            std::fs::read_to_string(record.path().join(format!("{}.argv", scenario.id))).unwrap();
        let argv: Vec<&str> = argv.lines().collect();
        assert_eq!(
            argv,
            ["--timeout", "two words", "--claim", scenario.id.as_str()]
        );
    }
}

#[test]
fn non_zero_exit_fails() {
    let entry = assert_fails("exit3", "exited with status 3");
    // A valid-looking result does not rescue a failing exit status.
    assert_eq!(
        entry["native_tests"],
        serde_json::json!(["fake::CR-CORE-001"])
    );
}

#[test]
fn non_zero_exit_keeps_the_adapter_diagnostic() {
    let entry = assert_fails(
        "exit1_with_result",
        "exited with status 1: native test failed",
    );
    assert_eq!(entry["native_tests"], serde_json::json!(["fake::broken"]));
}

#[test]
fn timeout_kills_the_process_group() {
    let record = tempfile::tempdir().unwrap();
    let report = record.path().join("report.json");
    let started = Instant::now();
    let out = run(
        &[
            "--claim",
            "core",
            "--scenario",
            "CR-CORE-002",
            "--timeout",
            "0.5",
            "--report-json",
            report.to_str().unwrap(),
        ],
        "sleep",
        Some(record.path()),
    );
    let elapsed = started.elapsed();
    assert_eq!(out.status.code(), Some(1));
    assert!(elapsed < Duration::from_secs(20), "took {elapsed:?}");
    let doc = read_json(&report);
    assert_schema_valid(&doc);
    assert_eq!(doc["scenarios"][0]["passed"], false);
    assert_eq!(
        doc["scenarios"][0]["diagnostic"],
        "adapter timed out after 0.5 seconds"
    );
    let pid = std::fs::read_to_string(record.path().join("CR-CORE-002.grandchild")).unwrap();
    assert_process_gone(pid.trim());
}

#[test]
fn grandchild_holding_stdout_open_times_out() {
    let record = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let out = run(
        &[
            "--claim",
            "core",
            "--scenario",
            "CR-CORE-003",
            "--timeout",
            "1",
        ],
        "linger",
        Some(record.path()),
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("adapter timed out after 1 seconds"));
    assert!(started.elapsed() < Duration::from_secs(20));
    let pid = std::fs::read_to_string(record.path().join("CR-CORE-003.grandchild")).unwrap();
    assert_process_gone(pid.trim());
}

/// The process is gone or a zombie awaiting its reaper (killed either way).
fn assert_process_gone(pid: &str) {
    let stat = PathBuf::from(format!("/proc/{pid}/stat"));
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match std::fs::read_to_string(&stat) {
            Err(_) => return,
            Ok(s)
                if s.rsplit(')')
                    .next()
                    .is_some_and(|rest| rest.trim_start().starts_with('Z')) =>
            {
                return
            }
            Ok(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            Ok(s) => panic!("grandchild {pid} survived the timeout: {s}"),
        }
    }
}

#[test]
fn junk_stdout_fails() {
    assert_fails("junk", "not exactly one JSON document");
}

#[test]
fn trailing_output_after_the_result_fails() {
    assert_fails("trailing", "not exactly one JSON document");
}

#[test]
fn empty_stdout_fails() {
    assert_fails("empty", "not exactly one JSON document");
}

#[test]
fn non_object_result_fails() {
    assert_fails("array", "not a JSON object");
}

#[test]
fn scenario_id_mismatch_fails() {
    assert_fails(
        "mismatch",
        "scenario_id \"CR-CORE-999\" does not match CR-CORE-001",
    );
    assert_fails("missing_id", "scenario_id (missing) does not match");
}

#[test]
fn passed_must_be_exactly_true() {
    assert_fails("passed_string", "passed=\"true\", not true");
    assert_fails("passed_one", "passed=1, not true");
}

#[test]
fn passed_false_keeps_adapter_evidence() {
    let entry = assert_fails("passed_false", "injected failure");
    assert_eq!(entry["native_tests"], serde_json::json!(["fake::failed"]));
}

#[test]
fn bad_native_tests_fail() {
    for mode in [
        "tests_empty",
        "tests_missing",
        "tests_string",
        "tests_blank",
        "tests_non_string",
    ] {
        let entry = assert_fails(
            mode,
            "native_tests must be a non-empty list of non-blank strings",
        );
        assert_eq!(entry["native_tests"], serde_json::json!([]), "{mode}");
    }
    let entry = assert_fails("tests_duplicate", "native_tests contains duplicates");
    assert_eq!(entry["native_tests"], serde_json::json!([]));
}

#[test]
fn echoed_oracle_fields_fail() {
    assert_fails("echo_oracle", "oracle field assertions");
}

#[test]
fn non_string_diagnostic_fails() {
    assert_fails("diagnostic_number", "diagnostic must be a string");
}

#[test]
fn missing_adapter_program_fails_each_scenario() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("r.json");
    let out = runner()
        .args([
            "--claim",
            "core",
            "--report-json",
            report.to_str().unwrap(),
            "--catalog",
        ])
        .arg(shared_catalog())
        .args(["--adapter", "/nonexistent/adapter"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let doc = read_json(&report);
    assert_schema_valid(&doc);
    assert_eq!(
        doc["summary"],
        serde_json::json!({"total": 5, "passed": 0, "failed": 5})
    );
    assert!(doc["scenarios"][0]["diagnostic"]
        .as_str()
        .unwrap()
        .contains("cannot start adapter"));
}

#[test]
fn scenario_selection_runs_only_the_selected_in_catalog_order() {
    let record = tempfile::tempdir().unwrap();
    let report = record.path().join("report.json");
    let out = run(
        &[
            "--claim",
            "durable",
            "--scenario",
            "CR-BOUNDARY-001",
            "--scenario",
            "CR-DURABLE-003",
            "--scenario",
            "CR-CORE-002",
            "--report-json",
            report.to_str().unwrap(),
        ],
        "ok",
        Some(record.path()),
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "Passed 3 durable recovery scenarios.\n");
    let doc = read_json(&report);
    let ids: Vec<&str> = doc["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["CR-CORE-002", "CR-DURABLE-003", "CR-BOUNDARY-001"]);
    let mut ran: Vec<String> = std::fs::read_dir(record.path())
        .unwrap()
        .filter_map(|e| e.unwrap().file_name().into_string().ok())
        .filter_map(|n| n.strip_suffix(".stdin").map(str::to_owned))
        .collect();
    ran.sort();
    assert_eq!(ran, ["CR-BOUNDARY-001", "CR-CORE-002", "CR-DURABLE-003"]);
}

#[test]
fn scenario_outside_the_claim_is_an_error() {
    for (claim, id) in [
        ("core", "CR-DURABLE-001"),
        ("core", "CR-CORE-999"),
        ("durable", "CR-NOPE-001"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let report = dir.path().join("report.json");
        let out = run(
            &[
                "--claim",
                claim,
                "--scenario",
                id,
                "--report-json",
                report.to_str().unwrap(),
            ],
            "ok",
            Some(dir.path()),
        );
        assert_eq!(out.status.code(), Some(1), "{claim} {id}");
        let stderr = text(&out.stderr);
        assert!(
            stderr.contains(&format!("{id} is outside the {claim} claim or unknown")),
            "{stderr}"
        );
        assert!(!report.exists(), "no evidence for a misconfigured run");
        assert!(
            !dir.path().join(format!("{id}.stdin")).exists(),
            "adapter must not run"
        );
    }
}

#[test]
fn report_matches_the_schema_and_binds_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("nested/dir/recovery.json");
    let out = run(
        &[
            "--claim",
            "durable",
            "--report-json",
            report.to_str().unwrap(),
            "--implementation",
            "example/sdk",
            "--implementation-version",
            "1.2.3",
            "--implementation-commit",
            "deadbeef",
            "--evidence-url",
            "https://example.test/actions/runs/42",
        ],
        "ok",
        None,
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let doc = read_json(&report);
    assert_schema_valid(&doc);
    assert_eq!(
        doc["$schema"],
        "https://raw.githubusercontent.com/runcycles/cycles-protocol/main/client-recovery/report.schema.json"
    );
    assert_eq!(doc["schema_version"], "1.0");
    assert_eq!(doc["claim"], "durable");
    assert_eq!(doc["profile"]["name"], "cycles-sdk-recovery");
    assert_eq!(doc["profile"]["version"], "0.3");
    assert!(!doc["profile"]["commit"].as_str().unwrap().is_empty());
    let raw = std::fs::read_to_string(shared_catalog())
        .unwrap()
        .replace("\r\n", "\n");
    assert_eq!(
        doc["profile"]["catalog_sha256"],
        hex::encode(Sha256::digest(raw.as_bytes()))
    );
    assert_eq!(
        doc["implementation"],
        serde_json::json!({"id": "example/sdk", "commit": "deadbeef", "version": "1.2.3"})
    );
    assert_eq!(doc["evidence_url"], "https://example.test/actions/runs/42");
    assert_eq!(
        doc["summary"],
        serde_json::json!({"total": 12, "passed": 12, "failed": 0})
    );
    let generated = doc["generated_at"].as_str().unwrap();
    assert_eq!(generated.len(), 20, "{generated}");
    assert!(
        generated.ends_with('Z') && generated.as_bytes()[10] == b'T',
        "{generated}"
    );
    for entry in doc["scenarios"].as_array().unwrap() {
        let id = entry["id"].as_str().unwrap();
        assert_eq!(
            entry["native_tests"],
            serde_json::json!([format!("fake::{id}")])
        );
        assert!(entry.get("diagnostic").is_none());
    }
    // Atomic write: only the report is left behind, no temporary file.
    let names: Vec<_> = std::fs::read_dir(report.parent().unwrap())
        .unwrap()
        .collect();
    assert_eq!(names.len(), 1);
}

#[test]
fn report_is_written_when_a_scenario_fails() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("recovery.json");
    let mut cmd = runner();
    cmd.args([
        "--claim",
        "core",
        "--report-json",
        report.to_str().unwrap(),
        "--catalog",
    ])
    .arg(shared_catalog())
    .env("FAKE_MODE", "junk")
    .env("FAKE_ONLY", "CR-CORE-003")
    .args(["--adapter", "sh", &fake_adapter()]);
    let out = cmd.output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stdout),
        "Failed 1 of 5 core recovery scenarios.\n"
    );
    let doc = read_json(&report);
    assert_schema_valid(&doc);
    assert_eq!(
        doc["summary"],
        serde_json::json!({"total": 5, "passed": 4, "failed": 1})
    );
    let failed: Vec<&str> = doc["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["passed"] == false)
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(failed, ["CR-CORE-003"]);
}

#[test]
fn implementation_defaults_come_from_the_environment() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("r.json");
    let out = runner()
        .current_dir(dir.path())
        .args([
            "--claim",
            "core",
            "--scenario",
            "CR-CORE-001",
            "--report-json",
            "r.json",
            "--catalog",
        ])
        .arg(shared_catalog())
        .args(["--adapter", "sh", &fake_adapter()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let doc = read_json(&report);
    assert_schema_valid(&doc);
    let dir_name = dir.path().file_name().unwrap().to_str().unwrap();
    // A temporary directory is no git checkout: the commit is "unknown".
    assert_eq!(
        doc["implementation"],
        serde_json::json!({"id": dir_name, "commit": "unknown"})
    );
    assert!(doc.get("evidence_url").is_none());

    let out = runner()
        .current_dir(dir.path())
        .env("GITHUB_REPOSITORY", "runcycles/example")
        .env("GITHUB_SHA", "0123abcd")
        .env("GITHUB_SERVER_URL", "https://github.example")
        .env("GITHUB_RUN_ID", "77")
        .args([
            "--claim",
            "core",
            "--scenario",
            "CR-CORE-001",
            "--report-json",
            "r.json",
            "--catalog",
        ])
        .arg(shared_catalog())
        .args(["--adapter", "sh", &fake_adapter()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let doc = read_json(&report);
    assert_schema_valid(&doc);
    assert_eq!(
        doc["implementation"],
        serde_json::json!({"id": "runcycles/example", "commit": "0123abcd"})
    );
    assert_eq!(
        doc["evidence_url"],
        "https://github.example/runcycles/example/actions/runs/77"
    );
}

#[test]
fn catalog_digest_is_stable_under_crlf() {
    let dir = tempfile::tempdir().unwrap();
    let lf = std::fs::read_to_string(shared_catalog())
        .unwrap()
        .replace("\r\n", "\n");
    let crlf_path = dir.path().join("scenarios.yaml");
    std::fs::write(&crlf_path, lf.replace('\n', "\r\n")).unwrap();
    assert_ne!(std::fs::read(&crlf_path).unwrap(), lf.as_bytes());

    let mut digests = Vec::new();
    for path in [shared_catalog(), crlf_path] {
        let report = dir.path().join("report.json");
        let out = runner()
            .args([
                "--claim",
                "core",
                "--scenario",
                "CR-CORE-001",
                "--report-json",
            ])
            .arg(&report)
            .arg("--catalog")
            .arg(&path)
            .args(["--adapter", "sh", &fake_adapter()])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        let doc = read_json(&report);
        assert_schema_valid(&doc);
        digests.push(
            doc["profile"]["catalog_sha256"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
    }
    assert_eq!(digests[0], digests[1]);
    assert_eq!(digests[0], hex::encode(Sha256::digest(lf.as_bytes())));
}

#[test]
fn invalid_catalog_is_refused_before_any_adapter_runs() {
    let dir = tempfile::tempdir().unwrap();
    let good = std::fs::read_to_string(shared_catalog()).unwrap();
    let cases = [
        // A durable scenario that mentions neither journal nor record.
        (
            good.replace(
                "unresolved_record_survives_restart",
                "state_survives_restart",
            )
            .replace(
                "journal_write_precedes_first_settlement_request",
                "write_precedes_request",
            )
            .replace(
                "successful_replay_removes_record",
                "successful_replay_cleans_up",
            ),
            "must mention journal or record",
        ),
        (
            good.replace("    level: boundary\n", "    level: core\n"),
            "does not match the id prefix",
        ),
        (
            good.replace(
                "    expected_requests: []\n    assertions:\n      - no_commit",
                "    expected_requests:\n      - commit\n    assertions:\n      - no_commit",
            ),
            "actual_unknown scenario must expect no requests",
        ),
        (
            good.replace("  - id: CR-CORE-004\n", "  - id: CR-CORE-4\n"),
            "does not match ^CR-",
        ),
        (
            good.replace(
                "    name: lost commit",
                "    owner: me\n    name: lost commit",
            ),
            "fields must be exactly",
        ),
    ];
    for (index, (catalog_text, needle)) in cases.iter().enumerate() {
        assert_ne!(
            catalog_text, &good,
            "case {index} did not change the catalog"
        );
        let path = dir.path().join(format!("bad-{index}.yaml"));
        std::fs::write(&path, catalog_text).unwrap();
        let record = dir.path().join(format!("record-{index}"));
        std::fs::create_dir(&record).unwrap();
        let out = runner()
            .args(["--claim", "durable", "--catalog"])
            .arg(&path)
            .env("FAKE_RECORD", &record)
            .args(["--adapter", "sh", &fake_adapter()])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "case {index}");
        let stderr = text(&out.stderr);
        assert!(
            stderr.contains(needle),
            "case {index}: {needle:?} not in {stderr}"
        );
        assert_eq!(
            std::fs::read_dir(&record).unwrap().count(),
            0,
            "case {index}"
        );
    }
}

#[test]
fn default_catalog_is_found_from_the_repository() {
    shared_catalog(); // the default it must find; a clear failure when it is missing
    let out = runner()
        .current_dir(manifest_dir())
        .args(["--claim", "core", "--scenario", "CR-BOUNDARY-001"])
        .args(["--adapter", "sh", &fake_adapter()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "Passed 1 core recovery scenarios.\n");
}

#[test]
fn usage_errors() {
    for args in [
        vec!["--claim", "core", "--timeout", "0", "--adapter", "true"],
        vec!["--claim", "core", "--timeout", "-1", "--adapter", "true"],
        vec!["--claim", "core", "--timeout", "soon", "--adapter", "true"],
        vec!["--claim", "partial", "--adapter", "true"],
        vec!["--claim", "core"],
        vec!["--claim", "core", "--adapter"],
        vec![
            "--claim",
            "core",
            "--evidence-url",
            "not a url",
            "--adapter",
            "true",
        ],
        vec![
            "--claim",
            "core",
            "--implementation",
            "",
            "--adapter",
            "true",
        ],
    ] {
        let out = runner().args(&args).output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            text(&out.stderr)
        );
    }
}

#[test]
fn schema_check_is_not_vacuous() {
    // Guards the guard: the validator must reject reports that break the schema, or every
    // assert_schema_valid above would prove nothing.
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("r.json");
    let out = run(
        &[
            "--claim",
            "core",
            "--scenario",
            "CR-CORE-001",
            "--report-json",
            report.to_str().unwrap(),
        ],
        "ok",
        None,
    );
    assert_eq!(out.status.code(), Some(0));
    let good = read_json(&report);
    assert_schema_valid(&good);
    let schema = read_json(&shared_schema());
    let validator = jsonschema::options()
        .with_draft(jsonschema::Draft::Draft202012)
        .should_validate_formats(true)
        .build(&schema)
        .unwrap();
    type Mutation = (&'static str, fn(&mut Value));
    let mutations: [Mutation; 5] = [
        ("extra field", |r| r["extra"] = Value::Bool(true)),
        ("bad timestamp", |r| r["generated_at"] = "yesterday".into()),
        ("bad digest", |r| {
            r["profile"]["catalog_sha256"] = "ABC".into()
        }),
        ("duplicate tests", |r| {
            r["scenarios"][0]["native_tests"] = serde_json::json!(["x", "x"])
        }),
        ("empty diagnostic", |r| {
            r["scenarios"][0]["diagnostic"] = "".into()
        }),
    ];
    for (what, mutate) in mutations {
        let mut bad = good.clone();
        mutate(&mut bad);
        assert!(!validator.is_valid(&bad), "{what} was accepted");
    }
}

#[test]
fn adapter_equals_form_takes_the_rest_too() {
    let record = tempfile::tempdir().unwrap();
    let adapter = format!("--adapter={}", fake_adapter());
    let out = runner()
        .args(["--claim", "core", "--scenario", "CR-CORE-004", "--catalog"])
        .arg(shared_catalog())
        .env("FAKE_RECORD", record.path())
        .args([adapter.as_str(), "--scenario", "x"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let argv = std::fs::read_to_string(record.path().join("CR-CORE-004.argv")).unwrap();
    assert_eq!(argv, "--scenario\nx\nCR-CORE-004\n");
}

#[test]
fn a_missing_shared_file_is_named_with_where_it_was_expected() {
    let err = std::panic::catch_unwind(|| shared_file("spec/not-there.yaml", "a test file"))
        .expect_err("a missing file fails");
    let message = err.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(
        message.starts_with("missing ../shared/spec/not-there.yaml (a test file; "),
        "{message}"
    );
    let beside = manifest_dir().ancestors().nth(3).unwrap();
    let expected = beside.join("shared/spec/not-there.yaml");
    assert!(
        message.ends_with(&format!(" at {}", expected.display())),
        "{message}"
    );
}
