//! The machine-readable evidence report (`report.schema.json`, schema 1.0).

use std::io::Write;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;

/// The report schema's `$schema` constant.
pub const SCHEMA_URL: &str =
    "https://raw.githubusercontent.com/runcycles/cycles-protocol/main/client-recovery/report.schema.json";

/// The report schema version this runner writes.
pub const SCHEMA_VERSION: &str = "1.0";

/// The whole report document. Field order follows the schema for readable diffs.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// Always [`SCHEMA_URL`].
    #[serde(rename = "$schema")]
    pub schema: String,
    /// Always [`SCHEMA_VERSION`].
    pub schema_version: String,
    /// UTC, second precision, `Z` suffix.
    pub generated_at: String,
    /// The profile and catalog this evidence is bound to.
    pub profile: ProfileInfo,
    /// `core` or `durable`.
    pub claim: String,
    /// The SDK under test.
    pub implementation: Implementation,
    /// Where the CI run that produced this report can be inspected.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub evidence_url: Option<String>,
    /// Counts over `scenarios`.
    pub summary: Summary,
    /// One entry per executed scenario, in catalog order.
    pub scenarios: Vec<ScenarioResult>,
}

/// `profile` in the report.
#[derive(Clone, Debug, Serialize)]
pub struct ProfileInfo {
    /// Always `cycles-sdk-recovery`.
    pub name: String,
    /// The catalog's `version`.
    pub version: String,
    /// HEAD of the protocol checkout holding the catalog, or `unknown`.
    pub commit: String,
    /// sha256 of the LF-normalised catalog text.
    pub catalog_sha256: String,
}

/// `implementation` in the report.
#[derive(Clone, Debug, Serialize)]
pub struct Implementation {
    /// Repository or package identifier of the SDK.
    pub id: String,
    /// The SDK commit under test, or `unknown`.
    pub commit: String,
    /// The SDK's version, when given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

/// `summary` in the report.
#[derive(Clone, Copy, Debug, Serialize, PartialEq, Eq)]
pub struct Summary {
    /// Scenarios executed.
    pub total: usize,
    /// Scenarios that passed.
    pub passed: usize,
    /// Scenarios that failed.
    pub failed: usize,
}

/// One `scenarios[]` entry.
#[derive(Clone, Debug, Serialize)]
pub struct ScenarioResult {
    /// Scenario id.
    pub id: String,
    /// Scenario level.
    pub level: String,
    /// Scenario name.
    pub name: String,
    /// Whether the scenario passed.
    pub passed: bool,
    /// Native tests the adapter attested (empty when it returned none usable).
    pub native_tests: Vec<String>,
    /// Failure reason or the adapter's diagnostic.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diagnostic: Option<String>,
}

/// Formats seconds since the Unix epoch as `YYYY-MM-DDTHH:MM:SSZ`.
pub fn format_utc(unix_seconds: u64) -> String {
    let days = (unix_seconds / 86_400) as i64;
    let rem = unix_seconds % 86_400;
    // Civil-from-days (Howard Hinnant's algorithm): avoids a date-time dependency for one
    // timestamp.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3_600,
        rem % 3_600 / 60,
        rem % 60
    )
}

/// The current UTC time, second precision.
pub fn now_utc() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    format_utc(secs)
}

/// Writes `report` to `path` atomically: a temporary file in the same directory is fully
/// written and synced, then renamed over `path`, so a reader never sees a partial report.
pub fn write_atomic(path: &Path, report: &Report) -> Result<(), String> {
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    };
    std::fs::create_dir_all(&parent)
        .map_err(|e| format!("cannot create report directory {}: {e}", parent.display()))?;
    let file_name = path
        .file_name()
        .ok_or_else(|| format!("report path {} has no file name", path.display()))?;
    let tmp = parent.join(format!(
        ".{}.{}.tmp",
        file_name.to_string_lossy(),
        std::process::id()
    ));
    let mut text = serde_json::to_string_pretty(report).expect("report serializes");
    text.push('\n');
    let result = (|| -> std::io::Result<()> {
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(text.as_bytes())?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    result.map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        format!("cannot write report {}: {e}", path.display())
    })
}

#[cfg(test)]
mod tests {
    use super::format_utc;

    #[test]
    fn utc_formatting() {
        assert_eq!(format_utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(format_utc(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(format_utc(1_798_761_599), "2026-12-31T23:59:59Z");
        assert_eq!(format_utc(4_107_542_400), "2100-03-01T00:00:00Z");
    }
}
