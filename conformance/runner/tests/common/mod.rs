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

/// The shared catalog, beside the project checkout as on every developer machine and in CI.
pub fn shared_catalog() -> PathBuf {
    manifest_dir().join("../../../shared/spec/scenarios.yaml")
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
