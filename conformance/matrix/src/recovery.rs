//! The recovery column: each face's evidence report from the project's conformance runner
//! (durable claim), validated against the shared report schema and counted.

use std::path::Path;

use serde_json::Value;

/// (scenarios passed, scenarios in the report, problems) of the report at `path`.
pub fn check(path: &Path, schema: &Value) -> (u64, u64, Vec<String>) {
    let mut problems = Vec::new();
    let report: Value = match std::fs::read(path)
        .map_err(|e| e.to_string())
        .and_then(|b| serde_json::from_slice(&b).map_err(|e| e.to_string()))
    {
        Ok(v) => v,
        Err(e) => return (0, 12, vec![format!("{}: {e}", path.display())]),
    };
    match jsonschema::options()
        .with_draft(jsonschema::Draft::Draft202012)
        .should_validate_formats(true)
        .build(schema)
    {
        Ok(v) => problems.extend(
            v.iter_errors(&report)
                .map(|e| format!("{}: schema: {e} at {}", path.display(), e.instance_path())),
        ),
        Err(e) => problems.push(format!("the report schema does not compile: {e}")),
    }
    if report["claim"] != "durable" {
        problems.push(format!("{}: claim {}", path.display(), report["claim"]));
    }
    let scenarios = report["scenarios"].as_array().cloned().unwrap_or_default();
    let passed = scenarios.iter().filter(|s| s["passed"] == true).count() as u64;
    let total = (scenarios.len() as u64).max(12);
    (passed, total, problems)
}
