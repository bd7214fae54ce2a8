//! `conformance/adapters/kotlin`: its committed maps (`kotlin-map.json`, and
//! `kotlin-redis-map.json` that scripts/matrix.sh runs with `CYCLES_TEST_JOURNAL_STORE=redis`)
//! name every scenario with JUnit test functions that exist and are not disabled (a rename
//! caught in `cargo test`, without a JDK); and the adapter, driven by the real runner with
//! `tests/fixtures/fake-java.sh` standing in for the JUnit console launcher and
//! `tests/fixtures/fake-mvn.sh` for Maven, rejects every launcher outcome that is not exactly
//! the mapped tests passing, runs one JVM per scenario, and rebuilds classes that are not
//! those of the sources.

mod common;

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use common::*;
use serde_json::{json, Value};

/// A scratch Maven project the fake Maven "compiles": a pom and one test source.
fn project() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("pom.xml"), "<project/>\n").unwrap();
    let src = dir.path().join("src/test/kotlin");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join("RecoveryCoreTest.kt"), "class RecoveryCoreTest\n").unwrap();
    dir
}

fn adapter_command(kotlin_dir: &Path, record: &Path) -> Command {
    let mut cmd = Command::new("python3");
    cmd.arg(manifest_dir().join("../adapters/kotlin"))
        .env_remove("CYCLES_KOTLIN_ADAPTER_MAP")
        .env_remove("CYCLES_KOTLIN_ADAPTER_DIR")
        .env("CYCLES_ADAPTER_JAVA", fixture("fake-java.sh"))
        .env("CYCLES_ADAPTER_MVN", fixture("fake-mvn.sh"))
        .env("CYCLES_ADAPTER_CARGO", "true")
        .env("FAKE_JAVA_RECORD", record)
        .arg("--kotlin-dir")
        .arg(kotlin_dir);
    cmd
}

/// The runner over `scenarios` (all of the durable claim when empty) with the fixture map.
fn run(kotlin_dir: &Path, record: &Path, scenarios: &[&str]) -> (Output, Value) {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("report.json");
    let adapter = adapter_command(kotlin_dir, record);
    let mut cmd = Command::new(BIN);
    cmd.args(["--claim", "durable", "--report-json"])
        .arg(&report)
        .arg("--catalog")
        .arg(shared_catalog());
    for s in scenarios {
        cmd.args(["--scenario", s]);
    }
    for (k, v) in adapter.get_envs() {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    let out = cmd
        .arg("--adapter")
        .arg(adapter.get_program())
        .args(adapter.get_args())
        .arg("--map")
        .arg(fixture("kotlin-adapter-map.json"))
        .output()
        .expect("runner starts");
    let doc = read_json(&report);
    (out, doc)
}

#[test]
fn launcher_outcomes_are_checked_one_jvm_per_scenario() {
    let project = project();
    let record = tempfile::tempdir().unwrap();
    let calls = record.path().join("calls");
    let (out, doc) = run(project.path(), &calls, &[]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("Failed 10 of 12 durable recovery scenarios."),
        "{}",
        text(&out.stdout)
    );
    // (scenario, passed, diagnostic fragment or "" for none)
    let expectations = [
        ("CR-CORE-001", true, ""),
        ("CR-CORE-002", false, "RecoveryCoreTest#fake_missing: no test ran (missing or renamed?)"),
        ("CR-CORE-003", false, "RecoveryCoreTest#fake_skipped: test skipped: public void fake_skipped() is @Disabled"),
        ("CR-CORE-004", false, "RecoveryCoreTest#fake_failed: test failed: expected: <1> but was: <2>"),
        ("CR-BOUNDARY-001", true, ""),
        ("CR-DURABLE-001", false, "RecoveryCoreTest#fake_twice: 2 tests named dev.cycles.kotlin.RecoveryCoreTest#fake_twice ran"),
        ("CR-DURABLE-002", false, "the launch also ran tests that are not mapped: ['dev.cycles.kotlin.RecoveryCoreTest#unmapped']"),
        ("CR-DURABLE-003", false, "RecoveryCoreTest#fake_error: test errored: IllegalStateException: no server"),
        ("CR-DURABLE-004", false, "no native tests mapped for CR-DURABLE-004"),
        ("CR-DURABLE-005", false, "duplicate native tests mapped"),
        ("CR-DURABLE-006", false, "RecoveryCoreTest.passes: not an exact JUnit test"),
        ("CR-DURABLE-007", false, "RecoveryCoreTest#fake_failed: test failed"),
    ];
    for (id, passed, fragment) in expectations {
        let e = entry(&doc, id);
        assert_eq!(e["passed"], passed, "{id}: {e}");
        let diagnostic = e["diagnostic"].as_str().unwrap_or_default();
        assert!(
            diagnostic.contains(fragment),
            "{id}: {diagnostic:?} lacks {fragment:?}"
        );
    }
    // The passing test beside a failing one is not blamed for it.
    let d7 = entry(&doc, "CR-DURABLE-007")["diagnostic"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(!d7.contains("RecoveryCoreTest#passes:"), "{d7}");
    assert_eq!(
        entry(&doc, "CR-BOUNDARY-001")["native_tests"],
        json!(["RecoveryCoreTest#passes", "RecoveryCoreTest#passes2"])
    );
    // One launcher (one JVM) per scenario that had tests to run, with exactly its selectors;
    // Maven once: the first scenario compiled and stamped, the others found the stamp current.
    let calls = std::fs::read_to_string(&calls).unwrap();
    let java: Vec<&str> = calls.lines().filter(|l| l.starts_with("java:")).collect();
    assert_eq!(java.len(), 10, "{calls}");
    assert!(
        java.contains(&"java: dev.cycles.kotlin.RecoveryCoreTest#passes dev.cycles.kotlin.RecoveryCoreTest#passes2"),
        "{calls}"
    );
    assert_eq!(
        calls.lines().filter(|l| l.starts_with("mvn:")).count(),
        1,
        "{calls}"
    );
}

#[test]
fn classes_not_of_the_sources_are_rebuilt() {
    let project = project();
    let record = tempfile::tempdir().unwrap();
    let calls = record.path().join("calls");
    let mvn_runs = || {
        std::fs::read_to_string(&calls)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.starts_with("mvn:"))
            .count()
    };
    let (out, _) = run(project.path(), &calls, &["CR-CORE-001"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(mvn_runs(), 1);
    run(project.path(), &calls, &["CR-CORE-001"]);
    assert_eq!(mvn_runs(), 1, "current classes are not rebuilt");
    // A source edited: rebuilt.
    let src = project.path().join("src/test/kotlin/RecoveryCoreTest.kt");
    std::fs::write(&src, "class RecoveryCoreTest // edited\n").unwrap();
    run(project.path(), &calls, &["CR-CORE-001"]);
    assert_eq!(mvn_runs(), 2, "an edited source is compiled");
    // Classes compiled from other sources since the stamp (the source since reverted): rebuilt.
    let class = project
        .path()
        .join("target/test-classes/RecoveryCoreTest.class");
    std::fs::write(&class, "from another source\n").unwrap();
    run(project.path(), &calls, &["CR-CORE-001"]);
    assert_eq!(mvn_runs(), 3, "classes of other sources are recompiled");
}

fn direct(kotlin_dir: &Path, args: &[&str], stdin: &str) -> Output {
    let record = tempfile::tempdir().unwrap();
    let mut child = adapter_command(kotlin_dir, &record.path().join("calls"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

#[test]
fn misuse_exits_2_with_nothing_on_stdout() {
    let project = project();
    let no_project = tempfile::tempdir().unwrap();
    let cases: [(&Path, &[&str], &str, &str); 4] = [
        (
            no_project.path(),
            &["CR-CORE-001"],
            r#"{"id": "CR-CORE-001"}"#,
            "no Maven project",
        ),
        (
            project.path(),
            &["CR-CORE-001"],
            r#"{"id": "CR-CORE-002"}"#,
            "does not match",
        ),
        (
            project.path(),
            &["--bogus", "CR-CORE-001"],
            r#"{"id": "CR-CORE-001"}"#,
            "unknown option",
        ),
        (
            project.path(),
            &["--map", "/nonexistent.json", "CR-CORE-001"],
            r#"{"id": "CR-CORE-001"}"#,
            "cannot read mapping",
        ),
    ];
    for (dir, args, stdin, fragment) in cases {
        let out = direct(dir, args, stdin);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            text(&out.stderr)
        );
        assert!(out.stdout.is_empty(), "{args:?}: {}", text(&out.stdout));
        assert!(
            text(&out.stderr).contains(fragment),
            "{args:?}: {}",
            text(&out.stderr)
        );
    }
}

#[test]
fn committed_maps_name_every_scenario_and_only_real_tests() {
    for file in ["kotlin-map.json", "kotlin-redis-map.json"] {
        for (id, entries) in committed_map(file) {
            for e in &entries {
                let (class, method) = e
                    .split_once('#')
                    .unwrap_or_else(|| panic!("{file}: {id}: {e} is not Class#method"));
                let path = manifest_dir().join(format!(
                    "../../kotlin/src/test/kotlin/dev/cycles/kotlin/{class}.kt"
                ));
                let source = std::fs::read_to_string(&path).unwrap_or_else(|err| {
                    panic!("{file}: {id}: cannot read {}: {err}", path.display())
                });
                assert!(
                    source.contains(&format!("class {class}")),
                    "{file}: {id}: {} does not define class {class}",
                    path.display()
                );
                let annotations = annotations_of(&source, method)
                    .unwrap_or_else(|| panic!("{file}: {id}: {e} is not defined"));
                assert!(
                    annotations.contains(&"@Test"),
                    "{file}: {id}: {e} is not a test: {annotations:?}"
                );
                assert!(
                    !annotations.iter().any(|a| a.starts_with("@Disabled")),
                    "{file}: {id}: {e} is disabled"
                );
            }
        }
    }
}

/// The annotations on the lines just above `fun <method>(`, or None when there is no such
/// function.
fn annotations_of<'a>(source: &'a str, method: &str) -> Option<Vec<&'a str>> {
    let lines: Vec<&str> = source.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.trim_start().starts_with(&format!("fun {method}(")))?;
    Some(
        lines[..at]
            .iter()
            .rev()
            .map(|l| l.trim())
            .take_while(|l| l.starts_with('@'))
            .collect(),
    )
}
