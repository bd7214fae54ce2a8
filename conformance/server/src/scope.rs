//! Scope derivation: tenant → workspace → app → workflow → agent → toolset, gaps skipped.

use serde_json::Value;

/// The standard subject levels in canonical order.
pub(crate) const LEVELS: [&str; 6] = ["tenant", "workspace", "app", "workflow", "agent", "toolset"];

/// Derived canonical scopes for a (validated) subject, shortest first; the last is the scope path.
pub(crate) fn derive(subject: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let mut path = String::new();
    for level in LEVELS {
        if let Some(v) = subject.get(level).and_then(Value::as_str) {
            if !path.is_empty() {
                path.push('/');
            }
            path.push_str(level);
            path.push(':');
            path.push_str(v);
            out.push(path.clone());
        }
    }
    out
}

/// Value of `level` inside a canonical scope string, if present.
pub(crate) fn level_value<'a>(scope: &'a str, level: &str) -> Option<&'a str> {
    scope.split('/').find_map(|seg| {
        seg.split_once(':')
            .filter(|(k, _)| *k == level)
            .map(|(_, v)| v)
    })
}
