//! What a failed settlement attempt means for the record: a pure mapping from the error.
//!
//! # The terminal set
//!
//! A record is removed without settling only on a genuine, understood rejection that no
//! retry of the same body can change (PROTOCOL-DIGEST §10 item 4, with the deviations noted):
//!
//! | code | HTTP | why terminal |
//! |---|---|---|
//! | `INVALID_REQUEST` | 400 | the stored body itself is invalid |
//! | `UNIT_MISMATCH` | 400 | `actual.unit` differs from the reservation's |
//! | `NOT_FOUND` | 404 | no such reservation (commit) / no budget at any scope (event) |
//! | `RESERVATION_FINALIZED` | 409 | already committed or released; never double-settled via an event (§10 item 5) |
//! | `IDEMPOTENCY_MISMATCH` | 409 | the key was used for a different payload |
//! | `BUDGET_EXCEEDED` | 409 | REJECT policy: the server refuses this amount |
//! | `OVERDRAFT_LIMIT_EXCEEDED` | 409 | beyond the overdraft limit |
//! | `TENANT_CLOSED` | 409 | closure is irreversible |
//! | `BUDGET_CLOSED` | 409 | closure is irreversible (added: same reasoning as `TENANT_CLOSED`) |
//!
//! Deliberately NOT terminal (the record is kept and replayed later):
//! - `401 UNAUTHORIZED` and `403 FORBIDDEN`: credential problems (a rotated or wrong key) say
//!   nothing about the settlement; the profile forbids dropping it on auth failure. §10 lists
//!   403 as terminal; we keep it, because losing spend to a misconfigured key is worse than
//!   replaying a record an operator can inspect and remove (`cycles journal`).
//! - `BUDGET_FROZEN`, `DEBT_OUTSTANDING`, `MAX_EXTENSIONS_EXCEEDED`, unknown codes, codeless
//!   non-2xx statuses (`UNEXPECTED_STATUS`): not understood as final for a settlement.
//! - `410 RESERVATION_EXPIRED` on a commit switches the record to the event fallback.

use crate::error::{Error, ErrorKind};
use crate::journal::Mode;

/// What to do after a failed attempt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Timeout, connect failure, reset, 5xx, ambiguous 2xx: retry with the same key.
    Transient,
    /// 429: persist the floor, then retry with the same key; the valid `Retry-After` in ms.
    RateLimited(Option<u64>),
    /// The reservation expired: settle through the event fallback.
    Expired,
    /// Understood terminal rejection: remove the record.
    Terminal,
    /// Keep the record for later replay (auth failure, unclassifiable response).
    Keep,
}

/// True for the error kinds of the terminal set (see the module table).
pub fn is_terminal(kind: &ErrorKind) -> bool {
    use ErrorKind::*;
    matches!(
        kind,
        InvalidRequest
            | UnitMismatch
            | NotFound
            | ReservationFinalized
            | IdempotencyMismatch
            | BudgetExceeded
            | OverdraftLimitExceeded
            | TenantClosed
            | BudgetClosed
    )
}

/// Classifies a failed attempt of a `mode` request.
pub fn classify(mode: Mode, error: &Error) -> Verdict {
    let kind = error.kind();
    match kind {
        ErrorKind::RateLimited => {
            Verdict::RateLimited(error.retry_after().and_then(|r| r.delay_ms()))
        }
        ErrorKind::ReservationExpired if mode == Mode::Commit => Verdict::Expired,
        k if k.retryable() => Verdict::Transient,
        k if is_terminal(k) => Verdict::Terminal,
        _ => Verdict::Keep,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Correlation;

    fn http(status: u16, code: &str, retry_after: Option<&str>) -> Error {
        let body = format!(r#"{{"error":"{code}","message":"m","request_id":"r"}}"#);
        Error::from_http(
            status,
            body.as_bytes(),
            Correlation::default(),
            retry_after.map(str::to_string),
        )
    }

    #[test]
    fn terminal_set() {
        for (status, code) in [
            (400, "INVALID_REQUEST"),
            (400, "UNIT_MISMATCH"),
            (404, "NOT_FOUND"),
            (409, "RESERVATION_FINALIZED"),
            (409, "IDEMPOTENCY_MISMATCH"),
            (409, "BUDGET_EXCEEDED"),
            (409, "OVERDRAFT_LIMIT_EXCEEDED"),
            (409, "TENANT_CLOSED"),
            (409, "BUDGET_CLOSED"),
        ] {
            for mode in [Mode::Commit, Mode::Event] {
                assert_eq!(
                    classify(mode, &http(status, code, None)),
                    Verdict::Terminal,
                    "{code}"
                );
            }
        }
    }

    #[test]
    fn kept_not_terminal() {
        for (status, code) in [
            (401, "UNAUTHORIZED"),
            (403, "FORBIDDEN"),
            (409, "BUDGET_FROZEN"),
            (409, "DEBT_OUTSTANDING"),
            (409, "MAX_EXTENSIONS_EXCEEDED"),
            (409, "ACTION_QUOTA_EXCEEDED"),
            (418, "TEAPOT"),
        ] {
            assert_eq!(
                classify(Mode::Commit, &http(status, code, None)),
                Verdict::Keep,
                "{code}"
            );
        }
        let codeless = Error::from_http(409, b"<html>", Correlation::default(), None);
        assert_eq!(classify(Mode::Commit, &codeless), Verdict::Keep);
        // An event is never "expired": a 410 there is not understood, so the record stays.
        assert_eq!(
            classify(Mode::Event, &http(410, "RESERVATION_EXPIRED", None)),
            Verdict::Keep
        );
    }

    #[test]
    fn retries_and_fallback() {
        assert_eq!(
            classify(Mode::Commit, &http(410, "RESERVATION_EXPIRED", None)),
            Verdict::Expired
        );
        let bare410 = Error::from_http(410, b"", Correlation::default(), None);
        assert_eq!(classify(Mode::Commit, &bare410), Verdict::Expired);
        for status in [500, 502, 503, 504] {
            assert_eq!(
                classify(Mode::Commit, &http(status, "INTERNAL_ERROR", None)),
                Verdict::Transient
            );
        }
        let amb = Error::ambiguous(202, "expected HTTP 200, got 202", Correlation::default());
        assert_eq!(classify(Mode::Event, &amb), Verdict::Transient);
        assert_eq!(
            classify(Mode::Commit, &http(429, "LIMIT_EXCEEDED", Some("7"))),
            Verdict::RateLimited(Some(7000))
        );
        assert_eq!(
            classify(
                Mode::Commit,
                &http(429, "LIMIT_EXCEEDED", Some("Wed, 21 Oct 2015 07:28:00 GMT"))
            ),
            Verdict::RateLimited(None)
        );
    }
}
