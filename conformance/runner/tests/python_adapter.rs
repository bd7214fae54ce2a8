//! Tests of `conformance/adapters/python` driven by the real runner binary, with
//! `tests/fixtures/fake-python.sh` standing in for the test venv's `python -m pytest`, so every
//! pytest outcome the adapter must reject is produced without a venv or a wheel. The real
//! suite is run by `cycles-conformance --adapter conformance/adapters/python` itself (see the
//! README), which needs the venv `python/scripts/test.sh` leaves behind.

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use common::*;
use serde_json::{json, Value};

fn adapter() -> PathBuf {
    manifest_dir().join("../adapters/python")
}

/// Runs the runner (durable claim) with the Python adapter, the fixture map and the fake
/// interpreter; returns the output and the report.
fn run(record: &Path) -> (Output, Value) {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("report.json");
    let out = Command::new(BIN)
        .args(["--claim", "durable", "--report-json"])
        .arg(&report)
        .arg("--catalog")
        .arg(shared_catalog())
        .env_remove("CYCLES_PYTHON_ADAPTER_MAP")
        .env_remove("CYCLES_PYTHON_ADAPTER_PYTHON")
        // The adapter must not let this reach pytest (the suite must test the installed wheel).
        .env("CYCLES_TEST_ALLOW_SOURCE", "1")
        .env("FAKE_PYTHON_RECORD", record)
        .arg("--adapter")
        .arg("python3")
        .arg(adapter())
        .arg("--python")
        .arg(fixture("fake-python.sh"))
        .arg("--map")
        .arg(fixture("python-adapter-map.json"))
        .output()
        .expect("runner starts");
    let doc = read_json(&report);
    (out, doc)
}

#[test]
fn pytest_outcomes_are_checked() {
    let record = tempfile::tempdir().unwrap();
    let calls = record.path().join("calls");
    let (out, doc) = run(&calls);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("Failed 10 of 12 durable recovery scenarios."),
        "{}",
        text(&out.stdout)
    );

    // (scenario, passed, diagnostic fragment or "" for none)
    let expectations = [
        ("CR-CORE-001", true, ""),
        (
            "CR-CORE-002",
            false,
            "fake_missing: pytest exited with status 4, pytest usage error (missing or renamed test?)",
        ),
        ("CR-CORE-003", false, "fake_skipped: test skipped: needs a unicorn"),
        (
            "CR-CORE-004",
            false,
            "fake_failed: pytest exited with status 1, tests failed (test failed: AssertionError: boom)",
        ),
        ("CR-BOUNDARY-001", true, ""),
        (
            "CR-DURABLE-001",
            false,
            "fake_twice: 2 tests ran, expected exactly one",
        ),
        ("CR-DURABLE-002", false, "fake_xfailed: test xfailed: known bug"),
        (
            "CR-DURABLE-003",
            false,
            "fake_renamed: pytest ran 'tests.test_recovery_core::fake_renamed_v2', not 'tests.test_recovery_core::fake_renamed'",
        ),
        ("CR-DURABLE-003", false, "fake_error: pytest exited with status 1"),
        ("CR-DURABLE-003", false, "test errored: failed on setup"),
        (
            "CR-DURABLE-004",
            false,
            "no native tests mapped for CR-DURABLE-004",
        ),
        ("CR-DURABLE-005", false, "duplicate native tests mapped"),
        (
            "CR-DURABLE-006",
            false,
            "test_recovery_core.py::test_passes: not of the form tests/<file>.py::<exact test name>",
        ),
        (
            "CR-DURABLE-006",
            false,
            "no test file python/tests/test_no_such_file.py (missing or renamed?)",
        ),
        (
            "CR-DURABLE-007",
            false,
            "fake_no_report: no usable JUnit report",
        ),
    ];
    for (id, passed, fragment) in expectations {
        let e = entry(&doc, id);
        assert_eq!(e["passed"], passed, "{id}: {e}");
        let diagnostic = e["diagnostic"].as_str().unwrap_or_default();
        assert!(
            diagnostic.contains(fragment),
            "{id}: {diagnostic:?} lacks {fragment:?}"
        );
        if !passed {
            assert!(
                diagnostic.starts_with("adapter exited with status 1"),
                "{id}: {diagnostic}"
            );
        }
    }
    assert_eq!(
        entry(&doc, "CR-CORE-001")["native_tests"],
        json!([
            "tests/test_recovery_core.py::test_passes",
            "tests/test_recovery_durable.py::test_passes_too[param-1]"
        ])
    );
    // A failing test stays visible in the report.
    assert_eq!(
        entry(&doc, "CR-CORE-004")["native_tests"],
        json!([
            "tests/test_recovery_core.py::test_passes",
            "tests/test_recovery_core.py::fake_failed"
        ])
    );

    // How pytest was run: isolated, one exact node, a JUnit report, xfail strict, from a
    // directory outside python/ and without the source-tree escape hatch.
    let calls = std::fs::read_to_string(calls).unwrap();
    let python_dir = manifest_dir().join("../../python").canonicalize().unwrap();
    let node = python_dir.join("tests/test_recovery_core.py::test_passes");
    let args: Vec<&str> = calls.lines().filter(|l| l.starts_with("args: ")).collect();
    let one = args
        .iter()
        .find(|l| l.ends_with(&format!(" {}", node.display())))
        .unwrap_or_else(|| panic!("no run of {} in {calls}", node.display()));
    for part in [
        "args: -I -B -m pytest -p no:cacheprovider -c ",
        " --junitxml ",
        " -o xfail_strict=true ",
    ] {
        assert!(one.contains(part), "{one} lacks {part:?}");
    }
    for cwd in calls.lines().filter_map(|l| l.strip_prefix("cwd: ")) {
        // The adapter's temporary directory, gone by now.
        let cwd = Path::new(cwd);
        assert!(
            !cwd.starts_with(&python_dir),
            "pytest ran inside python/: {cwd:?}"
        );
    }
    assert!(
        calls
            .lines()
            .filter(|l| l.starts_with("allow_source: "))
            .all(|l| l == "allow_source: unset"),
        "{calls}"
    );
}

fn direct_with(args: &[&str], stdin: &str, python_env: Option<&Path>) -> Output {
    let mut cmd = Command::new("python3");
    cmd.arg(adapter())
        .args(args)
        .env_remove("CYCLES_PYTHON_ADAPTER_MAP")
        .env_remove("CYCLES_PYTHON_ADAPTER_PYTHON")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(p) = python_env {
        cmd.env("CYCLES_PYTHON_ADAPTER_PYTHON", p);
    }
    let mut child = cmd.spawn().unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

fn direct(args: &[&str], stdin: &str) -> Output {
    direct_with(args, stdin, None)
}

#[test]
fn adapter_rejects_misuse() {
    let map = fixture("python-adapter-map.json");
    let map = map.to_str().unwrap();
    let fake = fixture("fake-python.sh");
    let fake = fake.to_str().unwrap();
    let ok_stdin = r#"{"id": "CR-CORE-001"}"#;
    // stdin names another scenario than argv.
    let out = direct(
        &["--python", fake, "--map", map, "CR-CORE-001"],
        r#"{"id": "CR-CORE-002"}"#,
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    // stdin is not JSON.
    let out = direct(&["--python", fake, "--map", map, "CR-CORE-001"], "nope");
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    // Unreadable mapping.
    let out = direct(
        &[
            "--python",
            fake,
            "--map",
            "/nonexistent.json",
            "CR-CORE-001",
        ],
        ok_stdin,
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    // No interpreter there.
    let out = direct(
        &[
            "--python",
            "/nonexistent/bin/python",
            "--map",
            map,
            "CR-CORE-001",
        ],
        ok_stdin,
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    assert!(
        text(&out.stderr).contains("no Python interpreter at /nonexistent/bin/python"),
        "{}",
        text(&out.stderr)
    );
    // Unknown option.
    let out = direct(&["--pytest", fake, "CR-CORE-001"], ok_stdin);
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());

    // The interpreter from the environment; a direct successful call prints exactly the
    // protocol result (pytest's own stdout went to stderr).
    let out = direct_with(
        &["--map", map, "CR-CORE-001"],
        ok_stdin,
        Some(&fixture("fake-python.sh")),
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let result: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        result,
        json!({
            "scenario_id": "CR-CORE-001",
            "passed": true,
            "native_tests": [
                "tests/test_recovery_core.py::test_passes",
                "tests/test_recovery_durable.py::test_passes_too[param-1]"
            ],
        })
    );
    assert!(text(&out.stderr).contains("test session starts"));
}

/// Both committed maps: the file journal's and the Redis journal's (`python-redis-map.json`,
/// run with `CYCLES_TEST_JOURNAL_STORE=redis`). The Redis claim runs the same tests but for
/// CR-DURABLE-007, where legacy file names do not exist in Redis.
#[test]
fn committed_map_names_every_scenario_and_only_existing_test_files() {
    let file = check_committed_map("python-map.json");
    let redis = check_committed_map("python-redis-map.json");
    for ((id, entries), (_, on_redis)) in file.iter().zip(&redis) {
        if id != "CR-DURABLE-007" {
            assert_eq!(entries, on_redis, "{id}: the Redis map runs other tests");
        }
    }
}

fn check_committed_map(file: &str) -> Vec<(String, Vec<String>)> {
    let map = committed_map(file);
    for (id, entries) in &map {
        for e in entries {
            let (test_file, name) = e.split_once("::").unwrap();
            let source =
                std::fs::read_to_string(manifest_dir().join("../../python").join(test_file))
                    .unwrap_or_else(|err| panic!("{file}: {id}: {e}: {err}"));
            assert!(
                source.contains(&format!("def {name}(")),
                "{file}: {id}: {e} is not defined"
            );
        }
    }
    map
}
