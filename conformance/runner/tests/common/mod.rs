//! Helpers shared by the runner's integration tests (the runner itself and both adapters).
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use serde_json::Value;

/// The runner binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_cycles-conformance");

pub fn manifest_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// A file of `tests/fixtures`.
pub fn fixture(name: &str) -> PathBuf {
    manifest_dir().join("tests/fixtures").join(name)
}

/// `rel` inside the pinned Cycles spec and fixtures, `shared/` beside the clone as on every
/// developer machine and in CI (docs/authorities.md). Panics naming the file, what it is and
/// where it was expected when it is missing (e.g. in a clone of this repository alone).
pub fn shared_file(rel: &str, what: &str) -> PathBuf {
    let beside = manifest_dir()
        .ancestors()
        .nth(3)
        .expect("conformance/runner sits two levels below the repository root");
    let path = beside.join("shared").join(rel);
    assert!(
        path.is_file(),
        "missing ../shared/{rel} ({what}; part of the pinned Cycles spec and fixtures expected \
         beside the clone, see docs/authorities.md) at {}",
        path.display()
    );
    path
}

/// The scenario catalog of the pinned spec.
pub fn shared_catalog() -> PathBuf {
    shared_file(
        "spec/scenarios.yaml",
        "the SDK recovery scenario catalog, profile cycles-sdk-recovery 0.3",
    )
}

/// The scenario ids of the pinned catalog, in catalog order.
pub fn shared_scenario_ids() -> Vec<String> {
    std::fs::read_to_string(shared_catalog())
        .unwrap()
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- id: ").map(str::to_string))
        .collect()
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A report (or any JSON file) the runner wrote.
pub fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).expect("report exists"))
        .expect("report is JSON")
}

/// The report's entry of scenario `id`.
pub fn entry<'a>(doc: &'a Value, id: &str) -> &'a Value {
    doc["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == id)
        .unwrap_or_else(|| panic!("{id} missing from report"))
}

/// The committed map `conformance/adapters/<file>`, checked to name every scenario of the
/// pinned catalog (and nothing else) with at least one test each: (scenario id, its entries)
/// in catalog order, for the caller to check each entry against its face's sources.
pub fn committed_map(file: &str) -> Vec<(String, Vec<String>)> {
    let path = manifest_dir().join("../adapters").join(file);
    let map: Value = serde_json::from_str(
        &std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())),
    )
    .unwrap_or_else(|e| panic!("{file}: {e}"));
    let map = map
        .as_object()
        .unwrap_or_else(|| panic!("{file}: not an object"));
    let ids = shared_scenario_ids();
    assert_eq!(ids.len(), 12, "{ids:?}");
    assert_eq!(map.len(), ids.len(), "{file}: {:?}", map.keys());
    ids.into_iter()
        .map(|id| {
            let entries: Vec<String> = map
                .get(&id)
                .and_then(Value::as_array)
                .unwrap_or_else(|| panic!("{file}: {id} unmapped"))
                .iter()
                .map(|e| {
                    e.as_str()
                        .unwrap_or_else(|| panic!("{file}: {id}: {e} is not a string"))
                        .to_string()
                })
                .collect();
            assert!(!entries.is_empty(), "{file}: {id}: no tests");
            (id, entries)
        })
        .collect()
}
