//! `ALLOW_WITH_CAPS` applied to a request (the spec's `Caps`).
//!
//! Rules:
//! - `lowered_bound = min(bound, caps.max_tokens)`; a request without a bound gets
//!   `caps.max_tokens`; without `caps.max_tokens` the bound is unchanged. `changed` says
//!   whether the request must be rewritten (the integration then says so in an event). A cap
//!   of 0 lowers the bound to 0: no provider accepts that, so the integration does not send
//!   the request.
//! - Tools, the spec's precedence exactly: if `tool_allowlist` is non-empty, only the tools
//!   it names are allowed (the denylist is then ignored); otherwise, if `tool_denylist` is
//!   non-empty, every tool except those it names; if both are empty or absent, every tool.
//!   Names match exactly, case-sensitive.

use crate::error::Error;
use crate::model::Caps;

/// A request's output bound after the caps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CappedBound {
    /// The bound to send (`None`: neither the request nor the caps bound the output).
    pub bound: Option<u64>,
    /// Whether it differs from the request's own bound.
    pub changed: bool,
}

/// `caps.max_tokens` as a count; a negative cap is INVALID_ARGUMENT.
fn cap(caps: &Caps) -> Result<Option<u64>, Error> {
    caps.max_tokens
        .map(|m| {
            u64::try_from(m).map_err(|_| {
                Error::invalid_argument(format!("caps.max_tokens must be non-negative, not {m}"))
            })
        })
        .transpose()
}

/// `lowered_bound = min(bound, caps.max_tokens)`; no bound: `caps.max_tokens`.
pub fn lower_bound(bound: Option<u64>, caps: &Caps) -> Result<CappedBound, Error> {
    let lowered = match (bound, cap(caps)?) {
        (Some(b), Some(c)) => Some(b.min(c)),
        (b, c) => b.or(c),
    };
    Ok(CappedBound {
        bound: lowered,
        changed: lowered != bound,
    })
}

/// Which of a request's tools the caps let through.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ToolFilter {
    /// The allowed tools, in the request's order.
    pub allowed: Vec<String>,
    /// The removed tools, in the request's order.
    pub removed: Vec<String>,
}

/// Whether the caps allow the tool `name` (the module doc's precedence).
pub fn tool_allowed(name: &str, caps: &Caps) -> bool {
    let non_empty = |l: &Option<Vec<String>>| l.as_ref().filter(|l| !l.is_empty()).cloned();
    if let Some(allow) = non_empty(&caps.tool_allowlist) {
        return allow.iter().any(|t| t == name);
    }
    if let Some(deny) = non_empty(&caps.tool_denylist) {
        return !deny.iter().any(|t| t == name);
    }
    true
}

/// Splits `tools` into those the caps allow and those they remove, keeping the order.
pub fn filter_tools<S: AsRef<str>>(tools: &[S], caps: &Caps) -> ToolFilter {
    let mut out = ToolFilter::default();
    for t in tools {
        let t = t.as_ref();
        if tool_allowed(t, caps) {
            out.allowed.push(t.to_string());
        } else {
            out.removed.push(t.to_string());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caps(max: Option<i64>, allow: &[&str], deny: &[&str]) -> Caps {
        let list = |l: &[&str]| Some(l.iter().map(|s| s.to_string()).collect());
        Caps {
            max_tokens: max,
            tool_allowlist: list(allow),
            tool_denylist: list(deny),
            ..Caps::default()
        }
    }

    #[test]
    fn bound_is_lowered_never_raised() {
        let c = caps(Some(100), &[], &[]);
        assert_eq!(
            lower_bound(Some(500), &c).unwrap(),
            CappedBound {
                bound: Some(100),
                changed: true
            }
        );
        assert_eq!(
            lower_bound(Some(50), &c).unwrap(),
            CappedBound {
                bound: Some(50),
                changed: false
            }
        );
        assert_eq!(
            lower_bound(None, &c).unwrap(),
            CappedBound {
                bound: Some(100),
                changed: true
            }
        );
        assert_eq!(
            lower_bound(None, &Caps::default()).unwrap(),
            CappedBound {
                bound: None,
                changed: false
            }
        );
        assert!(lower_bound(Some(1), &caps(Some(-1), &[], &[])).is_err());
    }

    #[test]
    fn allowlist_wins_over_denylist() {
        let f = filter_tools(&["a", "b", "c"], &caps(None, &["b", "a"], &["a"]));
        assert_eq!(
            (f.allowed, f.removed),
            (vec!["a".into(), "b".into()], vec!["c".into()])
        );
        let f = filter_tools(&["a", "B"], &caps(None, &[], &["b"]));
        assert_eq!(f.allowed, vec!["a".to_string(), "B".to_string()]);
        assert!(tool_allowed("x", &Caps::default()));
    }
}
