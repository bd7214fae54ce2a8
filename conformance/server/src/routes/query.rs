//! Query-string parsing and the opaque pagination cursor.

use crate::error::ApiError;
use base64::Engine;
use serde_json::{json, Value};

/// Decoded query parameters in order.
#[derive(Debug, Default, Clone)]
pub(crate) struct Query(pub Vec<(String, String)>);

impl Query {
    pub fn parse(raw: Option<&str>) -> Self {
        let dec = |s: &str| {
            let s = s.replace('+', " ");
            percent_encoding::percent_decode_str(&s)
                .decode_utf8_lossy()
                .into_owned()
        };
        Query(
            raw.unwrap_or_default()
                .split('&')
                .filter(|p| !p.is_empty())
                .map(|p| match p.split_once('=') {
                    Some((k, v)) => (dec(k), dec(v)),
                    None => (dec(p), String::new()),
                })
                .collect(),
        )
    }

    /// First value of `name`.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// First value of `name`, with blank treated as unset.
    pub fn non_blank(&self, name: &str) -> Option<&str> {
        self.get(name).filter(|v| !v.trim().is_empty())
    }

    /// All comma-separated tokens across every occurrence of `name`.
    pub fn tokens(&self, name: &str) -> Vec<String> {
        self.0
            .iter()
            .filter(|(k, _)| k == name)
            .flat_map(|(_, v)| {
                v.split(',')
                    .map(|t| t.trim().to_string())
                    .collect::<Vec<_>>()
            })
            .filter(|t| !t.is_empty())
            .collect()
    }

    /// `limit` in 1..=200, default 50.
    pub fn limit(&self) -> Result<usize, ApiError> {
        match self.get("limit") {
            None => Ok(50),
            Some(s) => match s.trim().parse::<i64>() {
                Ok(n) if (1..=200).contains(&n) => Ok(n as usize),
                _ => Err(ApiError::invalid("limit must be an integer within 1..=200")),
            },
        }
    }
}

/// Encode an offset (and the filter hash it is bound to) as an opaque cursor.
pub(crate) fn encode_cursor(offset: usize, bound: Option<&str>) -> String {
    let v = json!({"o": offset, "h": bound});
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string())
}

/// Decode a cursor; 400 when it is malformed or was minted under a different filter hash.
pub(crate) fn decode_cursor(raw: Option<&str>, bound: Option<&str>) -> Result<usize, ApiError> {
    let Some(raw) = raw.filter(|s| !s.is_empty()) else {
        return Ok(0);
    };
    let bad = || ApiError::invalid("invalid cursor");
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(raw)
        .map_err(|_| bad())?;
    let v: Value = serde_json::from_slice(&bytes).map_err(|_| bad())?;
    let o = v.get("o").and_then(Value::as_u64).ok_or_else(bad)?;
    if let Some(b) = bound {
        if v.get("h").and_then(Value::as_str) != Some(b) {
            return Err(ApiError::invalid(
                "cursor was issued for different window filters",
            ));
        }
    }
    Ok(o as usize)
}
