//! The error envelope (`ErrorResponse`), decoded leniently: only `error` matters for
//! classification, and an additive server release may add fields or codes.

use serde::{Deserialize, Serialize};

use super::common::{EvidenceRef, Metadata};

/// Body of a 4xx/5xx response. Every field is optional here so that a partial or
/// extended envelope still yields whatever it carries.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ErrorResponse {
    /// Server `ErrorCode` (open: unknown codes are kept verbatim).
    #[serde(default)]
    pub error: Option<String>,
    /// Human-readable message.
    #[serde(default)]
    pub message: Option<String>,
    /// Request id.
    #[serde(default)]
    pub request_id: Option<String>,
    /// Trace id.
    #[serde(default)]
    pub trace_id: Option<String>,
    /// Extra details (e.g. UNIT_MISMATCH info, `deny_detail`).
    #[serde(default)]
    pub details: Option<Metadata>,
    /// Evidence of a denial.
    #[serde(default)]
    pub cycles_evidence: Option<EvidenceRef>,
}

impl ErrorResponse {
    /// Parses an error body field by field, so one malformed field (e.g. `details` not an
    /// object) does not hide the code. Returns `None` when the body is not a JSON object.
    pub fn parse(body: &[u8]) -> Option<ErrorResponse> {
        let v: serde_json::Value = serde_json::from_slice(body).ok()?;
        let o = v.as_object()?;
        let s = |k: &str| o.get(k).and_then(|v| v.as_str()).map(str::to_string);
        Some(ErrorResponse {
            error: s("error"),
            message: s("message"),
            request_id: s("request_id"),
            trace_id: s("trace_id"),
            details: o.get("details").and_then(|v| v.as_object()).cloned(),
            cycles_evidence: o
                .get("cycles_evidence")
                .and_then(|v| serde_json::from_value(v.clone()).ok()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_with_extra_fields_and_bad_details() {
        let e = ErrorResponse::parse(
            br#"{"error":"UNIT_MISMATCH","message":"m","request_id":"r","details":5,"extra":{"a":1}}"#,
        )
        .unwrap();
        assert_eq!(e.error.as_deref(), Some("UNIT_MISMATCH"));
        assert_eq!(e.details, None);
        assert!(ErrorResponse::parse(b"<html>").is_none());
        assert!(ErrorResponse::parse(b"[1]").is_none());
    }
}
