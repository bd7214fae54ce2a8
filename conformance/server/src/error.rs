//! The ErrorResponse model: every failure carries a status, an ErrorCode and a message.

use serde_json::{Map, Value};

/// A failed request, rendered as the spec's `ErrorResponse`.
#[derive(Debug, Clone)]
pub(crate) struct ApiError {
    pub status: u16,
    pub code: String,
    pub message: String,
    pub details: Option<Box<Value>>,
    /// `cycles_evidence` ref for live reserve denials.
    pub evidence: Option<Box<Value>>,
    /// Effective tenant, echoed in `X-Cycles-Tenant` when known.
    pub tenant: Option<String>,
}

impl ApiError {
    pub fn new(status: u16, code: &str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code: code.to_string(),
            message: message.into(),
            details: None,
            evidence: None,
            tenant: None,
        }
    }
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(400, "INVALID_REQUEST", message)
    }
    pub fn unauthorized() -> Self {
        Self::new(401, "UNAUTHORIZED", "missing or invalid API key")
    }
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(403, "FORBIDDEN", message)
    }
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(404, "NOT_FOUND", message)
    }
    pub fn conflict(code: &str, message: impl Into<String>) -> Self {
        Self::new(409, code, message)
    }
    pub fn with_details(mut self, details: Value) -> Self {
        self.details = Some(Box::new(details));
        self
    }

    /// The body without transport-only fields (what error evidence attests).
    pub fn body(&self, request_id: &str, trace_id: &str) -> Value {
        let mut m = Map::new();
        m.insert("error".into(), Value::String(self.code.clone()));
        m.insert("message".into(), Value::String(self.message.clone()));
        m.insert("request_id".into(), Value::String(request_id.to_string()));
        m.insert("trace_id".into(), Value::String(trace_id.to_string()));
        if let Some(d) = &self.details {
            m.insert("details".into(), (**d).clone());
        }
        Value::Object(m)
    }
}
