//! Loading, digesting and validating the scenario catalog (`scenarios.yaml`).
//!
//! The catalog is the shared source of truth for every SDK, so the runner refuses to run
//! against one that breaks the profile's structural rules rather than producing evidence
//! bound to a malformed catalog.

use std::collections::HashSet;
use std::fmt;
use std::path::Path;

use serde_json::Value;
use sha2::{Digest, Sha256};

/// The only profile name a report may carry (`report.schema.json` pins it).
pub const PROFILE_NAME: &str = "cycles-sdk-recovery";

/// The exact field set of a catalog scenario, in catalog order.
pub const SCENARIO_FIELDS: [&str; 7] = [
    "id",
    "level",
    "name",
    "precondition",
    "faults",
    "expected_requests",
    "assertions",
];

/// A scenario's recovery level.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Level {
    /// Core recovery (`CR-CORE-*`).
    Core,
    /// Durable recovery (`CR-DURABLE-*`).
    Durable,
    /// The guarantee boundary (`CR-BOUNDARY-*`), part of every claim.
    Boundary,
}

impl Level {
    /// The lower-case name used in the catalog, on adapter stdin and in the report.
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Core => "core",
            Level::Durable => "durable",
            Level::Boundary => "boundary",
        }
    }

    fn parse(text: &str) -> Option<Level> {
        match text {
            "core" => Some(Level::Core),
            "durable" => Some(Level::Durable),
            "boundary" => Some(Level::Boundary),
            _ => None,
        }
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One validated catalog scenario.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Scenario {
    /// `CR-<LEVEL>-NNN`.
    pub id: String,
    /// The level, equal to the id's prefix.
    pub level: Level,
    /// Human-readable name.
    pub name: String,
    /// What the SDK can durably know before the faults.
    pub precondition: String,
    /// Injected failures, in order.
    pub faults: Vec<String>,
    /// Runner-owned review oracle: never sent to adapters.
    pub expected_requests: Vec<String>,
    /// Runner-owned review oracle: never sent to adapters.
    pub assertions: Vec<String>,
}

impl Scenario {
    /// The adapter's stdin document: exactly the scenario inputs, never the oracle fields
    /// (`expected_requests`, `assertions`), so an adapter cannot echo them back.
    pub fn adapter_input(&self) -> Value {
        serde_json::json!({
            "id": self.id,
            "level": self.level.as_str(),
            "name": self.name,
            "precondition": self.precondition,
            "faults": self.faults,
        })
    }
}

/// A loaded, validated catalog together with its digest.
#[derive(Clone, Debug)]
pub struct Catalog {
    /// The profile version (`version:`), e.g. `"0.3"`.
    pub version: String,
    /// Scenarios in catalog order.
    pub scenarios: Vec<Scenario>,
    /// sha256 (lower hex) of the catalog text with line endings normalised to LF.
    pub sha256: String,
}

/// Normalises CRLF and lone CR line endings to LF, as a text-mode read does, so that one
/// catalog commit has one digest whatever the checkout's line-ending conversion.
pub fn normalize_newlines(text: &str) -> String {
    text.replace("\r\n", "\n").replace('\r', "\n")
}

/// sha256 (lower hex) of the UTF-8 catalog text after line-ending normalisation.
pub fn catalog_digest(text: &str) -> String {
    hex::encode(Sha256::digest(normalize_newlines(text).as_bytes()))
}

/// Reads, digests and validates the catalog at `path`.
pub fn load(path: &Path) -> Result<Catalog, String> {
    let bytes = std::fs::read(path)
        .map_err(|e| format!("cannot read scenario catalog {}: {e}", path.display()))?;
    let text = String::from_utf8(bytes)
        .map_err(|_| format!("scenario catalog {} is not UTF-8", path.display()))?;
    parse(&text).map_err(|e| format!("invalid scenario catalog {}: {e}", path.display()))
}

/// Digests and validates catalog text.
pub fn parse(text: &str) -> Result<Catalog, String> {
    let normalized = normalize_newlines(text);
    let sha256 = hex::encode(Sha256::digest(normalized.as_bytes()));
    // Going through serde_json::Value keeps validation independent of the YAML crate's
    // typed model and lets every rule report the offending field by name.
    let doc: Value = serde_yaml_ng::from_str(&normalized).map_err(|e| format!("not YAML: {e}"))?;
    let top = doc.as_object().ok_or("the top level must be a mapping")?;
    match top.get("profile") {
        Some(Value::String(p)) if p == PROFILE_NAME => {}
        other => {
            return Err(format!(
                "profile must be {PROFILE_NAME:?}, found {}",
                describe(other)
            ))
        }
    }
    let version = match top.get("version") {
        Some(Value::String(v)) if !v.trim().is_empty() => v.clone(),
        other => {
            return Err(format!(
                "version must be a non-empty string, found {}",
                describe(other)
            ))
        }
    };
    let raw = match top.get("scenarios") {
        Some(Value::Array(items)) if !items.is_empty() => items,
        other => {
            return Err(format!(
                "scenarios must be a non-empty list, found {}",
                describe(other)
            ))
        }
    };
    let mut seen = HashSet::new();
    let mut scenarios = Vec::with_capacity(raw.len());
    for (index, item) in raw.iter().enumerate() {
        let scenario = validate_scenario(item).map_err(|e| format!("scenario #{index}: {e}"))?;
        if !seen.insert(scenario.id.clone()) {
            return Err(format!("duplicate scenario id {}", scenario.id));
        }
        scenarios.push(scenario);
    }
    Ok(Catalog {
        version,
        scenarios,
        sha256,
    })
}

fn describe(value: Option<&Value>) -> String {
    match value {
        None => "nothing".to_owned(),
        Some(v) => v.to_string(),
    }
}

/// Parses `CR-<LEVEL>-NNN` (three ASCII digits) and returns the level named by the prefix.
pub fn level_of_id(id: &str) -> Option<Level> {
    let rest = id.strip_prefix("CR-")?;
    let (prefix, digits) = rest.split_once('-')?;
    let level = match prefix {
        "CORE" => Level::Core,
        "DURABLE" => Level::Durable,
        "BOUNDARY" => Level::Boundary,
        _ => return None,
    };
    (digits.len() == 3 && digits.bytes().all(|b| b.is_ascii_digit())).then_some(level)
}

fn string_field(map: &serde_json::Map<String, Value>, field: &str) -> Result<String, String> {
    match map.get(field) {
        Some(Value::String(s)) if !s.trim().is_empty() => Ok(s.clone()),
        other => Err(format!(
            "{field} must be a non-empty string, found {}",
            describe(other)
        )),
    }
}

fn list_field(map: &serde_json::Map<String, Value>, field: &str) -> Result<Vec<String>, String> {
    let items = map
        .get(field)
        .and_then(Value::as_array)
        .ok_or_else(|| format!("{field} must be a list"))?;
    items
        .iter()
        .map(|item| match item {
            Value::String(s) if !s.trim().is_empty() => Ok(s.clone()),
            other => Err(format!(
                "{field} entries must be non-empty strings, found {other}"
            )),
        })
        .collect()
}

fn validate_scenario(item: &Value) -> Result<Scenario, String> {
    let map = item.as_object().ok_or("a scenario must be a mapping")?;
    let mut keys: Vec<&str> = map.keys().map(String::as_str).collect();
    keys.sort_unstable();
    let mut want = SCENARIO_FIELDS.to_vec();
    want.sort_unstable();
    if keys != want {
        return Err(format!(
            "fields must be exactly {SCENARIO_FIELDS:?}, found {:?}",
            map.keys().collect::<Vec<_>>()
        ));
    }
    let id = string_field(map, "id")?;
    let prefix_level = level_of_id(&id)
        .ok_or_else(|| format!("id {id:?} does not match ^CR-(CORE|DURABLE|BOUNDARY)-\\d{{3}}$"))?;
    let level_text = string_field(map, "level")?;
    let level =
        Level::parse(&level_text).ok_or_else(|| format!("{id}: unknown level {level_text:?}"))?;
    if level != prefix_level {
        return Err(format!(
            "{id}: level {level} does not match the id prefix ({prefix_level})"
        ));
    }
    let scenario = Scenario {
        name: string_field(map, "name").map_err(|e| format!("{id}: {e}"))?,
        precondition: string_field(map, "precondition").map_err(|e| format!("{id}: {e}"))?,
        faults: list_field(map, "faults").map_err(|e| format!("{id}: {e}"))?,
        expected_requests: list_field(map, "expected_requests")
            .map_err(|e| format!("{id}: {e}"))?,
        assertions: list_field(map, "assertions").map_err(|e| format!("{id}: {e}"))?,
        id,
        level,
    };
    if scenario.level == Level::Durable
        && !scenario
            .faults
            .iter()
            .chain(&scenario.assertions)
            .any(|label| label.contains("journal") || label.contains("record"))
    {
        return Err(format!(
            "{}: a durable scenario must mention journal or record in its faults or assertions",
            scenario.id
        ));
    }
    if scenario.precondition == "actual_unknown" && !scenario.expected_requests.is_empty() {
        return Err(format!(
            "{}: an actual_unknown scenario must expect no requests",
            scenario.id
        ));
    }
    Ok(scenario)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ONE: &str = "profile: cycles-sdk-recovery\nversion: \"0.3\"\nscenarios:\n  - id: CR-CORE-001\n    level: core\n    name: n\n    precondition: actual_known\n    faults: [f]\n    expected_requests: [commit]\n    assertions: [a]\n";

    #[test]
    fn ids_parse_with_level_prefix() {
        assert_eq!(level_of_id("CR-CORE-001"), Some(Level::Core));
        assert_eq!(level_of_id("CR-DURABLE-123"), Some(Level::Durable));
        assert_eq!(level_of_id("CR-BOUNDARY-999"), Some(Level::Boundary));
        for bad in [
            "CR-CORE-01",
            "CR-CORE-0001",
            "CR-core-001",
            "XR-CORE-001",
            "CR-CORE-00a",
        ] {
            assert_eq!(level_of_id(bad), None, "{bad}");
        }
    }

    #[test]
    fn minimal_catalog_loads() {
        let c = parse(ONE).unwrap();
        assert_eq!(c.version, "0.3");
        assert_eq!(c.scenarios.len(), 1);
        assert_eq!(c.sha256, catalog_digest(&ONE.replace('\n', "\r\n")));
    }

    #[test]
    fn structural_rules_are_enforced() {
        let cases = [
            (ONE.replace("level: core", "level: durable"), "id prefix"),
            (
                ONE.replace("assertions: [a]\n", ""),
                "fields must be exactly",
            ),
            (
                ONE.replace("assertions: [a]\n", "assertions: [a]\n    extra: 1\n"),
                "fields must be exactly",
            ),
            (ONE.replace("CR-CORE-001", "CR-CORE-1"), "does not match"),
            (
                ONE.replace("precondition: actual_known", "precondition: actual_unknown"),
                "expect no requests",
            ),
            (
                ONE.replace("CR-CORE-001", "CR-DURABLE-001")
                    .replace("level: core", "level: durable"),
                "journal or record",
            ),
            (
                ONE.replace("cycles-sdk-recovery", "other"),
                "profile must be",
            ),
            (ONE.replace("\"0.3\"", "\"\""), "version must be"),
        ];
        for (text, want) in cases {
            let err = parse(&text).unwrap_err();
            assert!(err.contains(want), "{want:?} not in {err:?}");
        }
        let twice = format!("{ONE}{}", &ONE[ONE.find("  - id").unwrap()..]);
        assert!(parse(&twice).unwrap_err().contains("duplicate"));
    }
}
