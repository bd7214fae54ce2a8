//! The names of core's pure timing types at the boundary: every binding's timing surface
//! (`cycles.timing` in Python) takes and returns the same strings.

use cycles_core::timing::fallback::FallbackRegime;
use cycles_core::timing::retry::RetryAfter;
use cycles_core::timing::{ExtendFailure, KeyUse};
use cycles_core::Error;

/// A parsed `Retry-After` as `(kind, seconds)`: `missing`, `invalid` or `seconds` with its value.
pub fn retry_after_kind(r: RetryAfter) -> (&'static str, Option<u64>) {
    match r {
        RetryAfter::Missing => ("missing", None),
        RetryAfter::Invalid => ("invalid", None),
        RetryAfter::Seconds(s) => ("seconds", Some(s)),
    }
}

/// The key an extend decision uses: `fresh` or `same`.
pub fn key_use_name(k: KeyUse) -> &'static str {
    match k {
        KeyUse::Fresh => "fresh",
        KeyUse::Same => "same",
    }
}

/// An extend failure of its boundary form: `transient`, `rate_limited` (with the raw
/// `Retry-After`) or `error` (with its HTTP status and the server's error code).
pub fn parse_failure(
    kind: &str,
    retry_after: Option<&str>,
    status: Option<u16>,
    code: Option<&str>,
) -> Result<ExtendFailure, Error> {
    match kind {
        "transient" => Ok(ExtendFailure::Transient),
        "rate_limited" => Ok(ExtendFailure::RateLimited(RetryAfter::parse(retry_after))),
        "error" => {
            let status = status.ok_or_else(|| {
                Error::invalid_argument("an 'error' failure needs its HTTP status")
            })?;
            Ok(ExtendFailure::from_error_code(status, code))
        }
        other => Err(Error::invalid_argument(format!(
            "failure kind must be 'transient', 'rate_limited' or 'error', not {other:?}"
        ))),
    }
}

/// The fallback planner's regime name.
pub fn regime_name(r: FallbackRegime) -> &'static str {
    match r {
        FallbackRegime::Unknown => "unknown",
        FallbackRegime::Normal => "normal",
        FallbackRegime::GrantClamped => "grant_clamped",
        FallbackRegime::MaxLeadClamped => "max_lead_clamped",
    }
}

/// The fallback regime of its name.
pub fn parse_regime(name: &str) -> Result<FallbackRegime, Error> {
    Ok(match name {
        "unknown" => FallbackRegime::Unknown,
        "normal" => FallbackRegime::Normal,
        "grant_clamped" => FallbackRegime::GrantClamped,
        "max_lead_clamped" => FallbackRegime::MaxLeadClamped,
        other => {
            return Err(Error::invalid_argument(format!(
                "unknown fallback regime {other:?}"
            )))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regimes_round_trip() {
        for r in [
            FallbackRegime::Unknown,
            FallbackRegime::Normal,
            FallbackRegime::GrantClamped,
            FallbackRegime::MaxLeadClamped,
        ] {
            assert_eq!(parse_regime(regime_name(r)).unwrap(), r);
        }
        let e = parse_regime("clamped").unwrap_err();
        assert_eq!(e.message(), "unknown fallback regime \"clamped\"");
    }

    #[test]
    fn failures_parse_or_explain() {
        assert!(matches!(
            parse_failure("transient", None, None, None).unwrap(),
            ExtendFailure::Transient
        ));
        assert!(matches!(
            parse_failure("rate_limited", Some("3"), None, None).unwrap(),
            ExtendFailure::RateLimited(RetryAfter::Seconds(3))
        ));
        let e = parse_failure("error", None, None, Some("X")).unwrap_err();
        assert_eq!(e.message(), "an 'error' failure needs its HTTP status");
        let e = parse_failure("boom", None, None, None).unwrap_err();
        assert!(e.message().ends_with("not \"boom\""));
    }

    #[test]
    fn retry_after_and_key_names() {
        assert_eq!(retry_after_kind(RetryAfter::Missing), ("missing", None));
        assert_eq!(retry_after_kind(RetryAfter::Invalid), ("invalid", None));
        assert_eq!(
            retry_after_kind(RetryAfter::Seconds(9)),
            ("seconds", Some(9))
        );
        assert_eq!(key_use_name(KeyUse::Fresh), "fresh");
        assert_eq!(key_use_name(KeyUse::Same), "same");
    }
}
