//! Tests of `conformance/adapters/rust` driven by the real runner binary.
//!
//! Most use `tests/fixtures/fake-cargo.sh` (through `CYCLES_ADAPTER_CARGO`) so every libtest
//! outcome the adapter must reject can be produced without compiling anything. One test
//! runs real `cargo test` against `core/tests/heartbeat_vectors.rs`.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::*;
use serde_json::Value;

fn adapter() -> PathBuf {
    manifest_dir().join("../adapters/rust")
}

/// Runs the runner with the Rust adapter and `map`, returning the output and the report.
fn run(
    claim: &str,
    scenarios: &[&str],
    map: &Path,
    fake_cargo: bool,
    record: Option<&Path>,
) -> (Output, Value) {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("report.json");
    let mut cmd = Command::new(BIN);
    cmd.args(["--claim", claim, "--report-json"])
        .arg(&report)
        .arg("--catalog")
        .arg(shared_catalog());
    for id in scenarios {
        cmd.args(["--scenario", id]);
    }
    cmd.env_remove("CYCLES_RUST_ADAPTER_MAP")
        .env_remove("CYCLES_ADAPTER_CARGO")
        .arg("--adapter")
        .arg("python3")
        .arg(adapter())
        .arg("--map")
        .arg(map);
    if fake_cargo {
        cmd.env("CYCLES_ADAPTER_CARGO", fixture("fake-cargo.sh"));
    }
    if let Some(path) = record {
        cmd.env("FAKE_CARGO_RECORD", path);
    }
    let out = cmd.output().expect("runner starts");
    let doc = read_json(&report);
    (out, doc)
}

#[test]
fn libtest_outcomes_are_checked() {
    let record = tempfile::tempdir().unwrap();
    let calls = record.path().join("calls");
    let (out, doc) = run(
        "durable",
        &[],
        &fixture("rust-adapter-map.json"),
        true,
        Some(&calls),
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));

    // (scenario, passed, diagnostic fragment or "" for none)
    let expectations = [
        ("CR-CORE-001", true, ""),
        (
            "CR-CORE-002",
            false,
            "fake_missing: no test matched exactly (missing or renamed?)",
        ),
        ("CR-CORE-003", false, "fake_ignored: test ignored;"),
        (
            "CR-CORE-003",
            false,
            "fake_ignored_reason: test ignored (needs a database)",
        ),
        (
            "CR-CORE-004",
            false,
            "fake_failed: cargo test exited with status 101",
        ),
        ("CR-BOUNDARY-001", true, ""),
        ("CR-DURABLE-001", false, "fake_twice: expected one test run"),
        (
            "CR-DURABLE-002",
            false,
            "fake_compile_error: cargo test exited with status 101",
        ),
        (
            "CR-DURABLE-003",
            false,
            "fake_wrong_name: libtest ran 'other::fake_wrong_name'",
        ),
        (
            "CR-DURABLE-004",
            false,
            "no native tests mapped for CR-DURABLE-004",
        ),
        ("CR-DURABLE-005", false, "duplicate native tests mapped"),
        ("CR-DURABLE-006", false, "not of the form"),
        (
            "CR-DURABLE-007",
            false,
            "fake_silent_success: expected one test run",
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
        serde_json::json!([
            "heartbeat_vectors::schedule_vectors",
            "heartbeat_vectors::retry_vectors"
        ])
    );
    assert_eq!(
        entry(&doc, "CR-CORE-004")["native_tests"],
        serde_json::json!([
            "heartbeat_vectors::schedule_vectors",
            "heartbeat_vectors::fake_failed"
        ])
    );

    let calls = std::fs::read_to_string(calls).unwrap();
    assert!(calls.lines().any(|l| l
        == "test --color never --test heartbeat_vectors -- --exact schedule_vectors --color never --format pretty"));
    assert!(calls.lines().any(|l| l
        == "test --color never -p cycles-core --test heartbeat_vectors -- --exact fake_should_panic --color never --format pretty"));
}

#[test]
fn adapter_rejects_misuse() {
    let py = |args: &[&str], stdin: &str| {
        let mut child = Command::new("python3")
            .arg(adapter())
            .args(args)
            .env("CYCLES_ADAPTER_CARGO", fixture("fake-cargo.sh"))
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(stdin.as_bytes())
            .unwrap();
        child.wait_with_output().unwrap()
    };
    let map = fixture("rust-adapter-map.json");
    let map = map.to_str().unwrap();
    // stdin names another scenario than argv.
    let out = py(&["--map", map, "CR-CORE-001"], r#"{"id": "CR-CORE-002"}"#);
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    // Unreadable mapping.
    let out = py(
        &["--map", "/nonexistent.json", "CR-CORE-001"],
        r#"{"id": "CR-CORE-001"}"#,
    );
    assert_eq!(out.status.code(), Some(2));
    // A direct successful call prints exactly the protocol result.
    let out = py(&["--map", map, "CR-CORE-001"], r#"{"id": "CR-CORE-001"}"#);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let result: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        result,
        serde_json::json!({
            "scenario_id": "CR-CORE-001",
            "passed": true,
            "native_tests": ["heartbeat_vectors::schedule_vectors", "heartbeat_vectors::retry_vectors"],
        })
    );
}

/// Runs real `cargo test` on two heartbeat vector tests plus a misspelt one. Nested cargo
/// shares the build directory, so this needs the outer `cargo test` to have released its
/// build lock (it does once compilation is done).
#[test]
fn real_cargo_runs_exact_heartbeat_tests() {
    let (out, doc) = run(
        "core",
        &["CR-CORE-001", "CR-CORE-002", "CR-CORE-003"],
        &fixture("heartbeat-map.json"),
        false,
        None,
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let ok = entry(&doc, "CR-CORE-001");
    assert_eq!(ok["passed"], true, "{ok}");
    assert_eq!(
        ok["native_tests"],
        serde_json::json!([
            "heartbeat_vectors::schedule_vectors",
            "heartbeat_vectors::retry_after_vectors"
        ])
    );
    assert_eq!(entry(&doc, "CR-CORE-002")["passed"], true);
    let renamed = entry(&doc, "CR-CORE-003");
    assert_eq!(renamed["passed"], false);
    assert!(
        renamed["diagnostic"]
            .as_str()
            .unwrap()
            .contains("no test matched exactly"),
        "{renamed}"
    );
}

/// The attribute lines directly above `fn <name>(` in `source`, or None when no such fn.
fn attributes_of<'a>(source: &'a str, name: &str) -> Option<Vec<&'a str>> {
    let lines: Vec<&str> = source.lines().collect();
    let at = lines.iter().position(|l| {
        let l = l.trim_start();
        l.starts_with(&format!("fn {name}(")) || l.starts_with(&format!("async fn {name}("))
    })?;
    Some(
        lines[..at]
            .iter()
            .rev()
            .map(|l| l.trim())
            .take_while(|l| l.starts_with("#[") || l.starts_with("///"))
            .filter(|l| l.starts_with("#["))
            .collect(),
    )
}

/// Both committed maps: the file journal's and the Redis journal's (`rust-redis-map.json`,
/// run with `CYCLES_TEST_JOURNAL_STORE=redis` by scripts/matrix.sh).
#[test]
fn committed_map_names_every_scenario_and_only_real_tests() {
    for file in ["rust-map.json", "rust-redis-map.json"] {
        check_committed_map(file);
    }
}

fn check_committed_map(file: &str) {
    for (id, entries) in committed_map(file) {
        for e in &entries {
            let (binary, name) = e
                .strip_prefix("cycles-core/")
                .unwrap_or_else(|| panic!("{file}: {id}: {e} is not a cycles-core test"))
                .split_once("::")
                .unwrap();
            let path = manifest_dir().join(format!("../../core/tests/{binary}.rs"));
            let source = std::fs::read_to_string(&path).unwrap_or_else(|err| {
                panic!("{file}: {id}: cannot read {}: {err}", path.display())
            });
            let attrs = attributes_of(&source, name)
                .unwrap_or_else(|| panic!("{file}: {id}: {e} is not defined"));
            assert!(
                attrs
                    .iter()
                    .any(|a| *a == "#[test]" || a.starts_with("#[tokio::test")),
                "{file}: {id}: {e} is not a test: {attrs:?}"
            );
            // Ignored tests are child-process helpers (or disabled): never evidence.
            assert!(
                !attrs.iter().any(|a| a.starts_with("#[ignore")),
                "{file}: {id}: {e} is ignored"
            );
        }
    }
}
