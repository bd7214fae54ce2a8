//! The JVM adapter's committed maps (`conformance/adapters/jvm-map.json`, and
//! `jvm-redis-map.json` that scripts/matrix.sh runs with `CYCLES_TEST_JOURNAL_STORE=redis`):
//! every scenario mapped, each entry a JUnit test method that exists and is not disabled. The
//! adapter itself fails a missing or skipped test when it runs it; this catches a rename in
//! `cargo test`, without a JDK.

mod common;

use common::*;

#[test]
fn committed_maps_name_every_scenario_and_only_real_tests() {
    for file in ["jvm-map.json", "jvm-redis-map.json"] {
        check_committed_map(file);
    }
}

fn check_committed_map(file: &str) {
    for (id, entries) in committed_map(file) {
        for e in &entries {
            let (class, method) = e
                .split_once('#')
                .unwrap_or_else(|| panic!("{file}: {id}: {e} is not Class#method"));
            let path =
                manifest_dir().join(format!("../../java/src/test/java/dev/cycles/{class}.java"));
            let source = std::fs::read_to_string(&path).unwrap_or_else(|err| {
                panic!("{file}: {id}: cannot read {}: {err}", path.display())
            });
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

/// The annotations on the lines just above `void <method>(`, or None when there is no such
/// method.
fn annotations_of<'a>(source: &'a str, method: &str) -> Option<Vec<&'a str>> {
    let lines: Vec<&str> = source.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.trim_start().starts_with(&format!("void {method}(")))?;
    Some(
        lines[..at]
            .iter()
            .rev()
            .map(|l| l.trim())
            .take_while(|l| l.starts_with('@'))
            .collect(),
    )
}
