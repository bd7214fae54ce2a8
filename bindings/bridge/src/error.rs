//! The error fields every host exception is built from: core's stable kind (code and name),
//! the server's facts, and a binding-level `variant` (the table is [`error_variants`]). Hosts
//! map `(code, name, variant)` to their exception type; nothing here knows a host.

use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};

use cycles_core::journal::ParseError;
use cycles_core::model::EvidenceRef;
use cycles_core::{Error, ErrorKind};
use serde::Serialize;
use serde_json::Value;

/// Code of a panic caught at the boundary: core's `ErrorKind::Internal` (checked by a test).
pub const INTERNAL_CODE: u32 = 4;
/// Name of a panic caught at the boundary: core's `ErrorKind::Internal`.
pub const INTERNAL_NAME: &str = "INTERNAL";

/// Core's stable `(name, code)` table, in `ErrorKind::all()` order: hosts build their
/// exception hierarchy from it instead of repeating it.
pub fn error_codes() -> Vec<(&'static str, u32)> {
    ErrorKind::all()
        .iter()
        .map(|k| (k.name(), k.code()))
        .collect()
}

/// Variant of a call on a closed client or lifecycle (kind RUNTIME).
pub const CLOSED: &str = "closed";
/// Variant of a provider call an integration did not send because the caps allow no
/// acceptable output bound (kind BUDGET_EXCEEDED: the budget allows nothing for this call).
pub const CALL_NOT_SENT: &str = "call_not_sent";

/// The binding-level refinements of a kind, `(variant, kind name, kind code)`: each host
/// gives every variant an exception class of its own, a subclass of its kind's class, named
/// after the variant (`call_not_sent`: `CallNotSentError`, `CallNotSentException`; the JVM
/// makes `closed` its `ClientClosedException`, an `IllegalStateException`). The code and
/// name stay the kind's, so code that tells errors apart by name sees the kind.
pub fn error_variants() -> Vec<(&'static str, &'static str, u32)> {
    [
        (CLOSED, ErrorKind::Runtime),
        (CALL_NOT_SENT, ErrorKind::BudgetExceeded),
    ]
    .into_iter()
    .map(|(v, k)| (v, k.name(), k.code()))
    .collect()
}

/// One error as a host sees it. The field names are the boundary's (docs/bindings.md).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ErrorFields {
    /// Core's stable numeric code of the kind.
    pub code: u32,
    /// Core's stable name of the kind (`ErrorKind::name`).
    pub name: String,
    /// Human-readable message (the API key already redacted by core).
    pub message: String,
    /// HTTP status, when a response was received.
    pub http_status: Option<u16>,
    /// The server's `error` code, when its body had one.
    pub error_code: Option<String>,
    /// The server's `X-Request-Id`.
    pub request_id: Option<String>,
    /// The server's trace id.
    pub trace_id: Option<String>,
    /// Whether core classifies the failure as retryable.
    pub retryable: bool,
    /// `Retry-After` exactly as received.
    pub retry_after_raw: Option<String>,
    /// `Retry-After` as delta seconds, when it was one.
    pub retry_after_seconds: Option<u64>,
    /// The server's `details` object, as JSON text.
    pub details_json: Option<String>,
    /// The server's `cycles_evidence` reference on the error body, when it sent one.
    pub cycles_evidence: Option<EvidenceRef>,
    /// A binding-level refinement of the kind ([`error_variants`]).
    pub variant: Option<&'static str>,
}

impl From<&Error> for ErrorFields {
    fn from(e: &Error) -> ErrorFields {
        ErrorFields {
            code: e.code(),
            name: e.kind().name().to_string(),
            message: e.message().to_string(),
            http_status: e.http_status(),
            error_code: e.server_code().map(str::to_string),
            request_id: e.request_id().map(str::to_string),
            trace_id: e.trace_id().map(str::to_string),
            retryable: e.retryable(),
            retry_after_raw: e.retry_after().map(|r| r.raw.clone()),
            retry_after_seconds: e.retry_after().and_then(|r| r.delta_seconds),
            details_json: e.details().and_then(|d| serde_json::to_string(d).ok()),
            cycles_evidence: e.cycles_evidence().cloned(),
            variant: None,
        }
    }
}

impl From<Error> for ErrorFields {
    fn from(e: Error) -> ErrorFields {
        ErrorFields::from(&e)
    }
}

impl ErrorFields {
    /// An error of `variant` ([`error_variants`]: its kind's code and name).
    fn of_variant(variant: &'static str, message: String) -> ErrorFields {
        let (_, name, code) = error_variants()
            .into_iter()
            .find(|(v, _, _)| *v == variant)
            .expect("a variant of the table");
        ErrorFields {
            code,
            name: name.to_string(),
            message,
            variant: Some(variant),
            ..ErrorFields::default()
        }
    }

    /// The error of a call on a closed client or lifecycle (RUNTIME, variant "closed").
    pub fn closed() -> ErrorFields {
        ErrorFields::of_variant(CLOSED, "the client is closed".into())
    }

    /// The error of a provider call an integration did not send (BUDGET_EXCEEDED, variant
    /// "call_not_sent"); `message` is core's `guard::not_sent_text`.
    pub fn call_not_sent(message: String) -> ErrorFields {
        ErrorFields::of_variant(CALL_NOT_SENT, message)
    }

    /// An INTERNAL error (a panic caught at the boundary, or a bug).
    pub fn internal(message: impl Into<String>) -> ErrorFields {
        ErrorFields {
            code: INTERNAL_CODE,
            name: INTERNAL_NAME.to_string(),
            message: message.into(),
            ..ErrorFields::default()
        }
    }

    /// An INVALID_ARGUMENT error (core's kind).
    pub fn invalid(message: impl Into<String>) -> ErrorFields {
        ErrorFields::from(Error::invalid_argument(message))
    }

    /// A journal file that is not a usable record (core's `ParseError`): INVALID_ARGUMENT
    /// whose `details` is `{"journal_error": "corrupt" | "unsupported"}`.
    pub fn journal_parse(e: &ParseError) -> ErrorFields {
        let kind = match e {
            ParseError::Corrupt(_) => "corrupt",
            ParseError::Unsupported(_) => "unsupported",
        };
        let mut f = ErrorFields::invalid(e.to_string());
        f.details_json = Some(serde_json::json!({ "journal_error": kind }).to_string());
        f
    }

    /// The fields as one JSON object (for hosts that take errors as JSON text).
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

/// A human-readable panic payload.
pub fn panic_message(payload: &(dyn Any + Send)) -> String {
    let what = payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic payload".to_string());
    format!("internal error in the cycles native module (a bug; please report it): {what}")
}

/// Runs `f`, turning a panic into an INTERNAL error: a panic never crosses into a host.
pub fn catch<T>(f: impl FnOnce() -> Result<T, ErrorFields>) -> Result<T, ErrorFields> {
    catch_panic(f).and_then(|r| r)
}

/// The panic boundary itself, for a host whose export does not return an `ErrorFields`
/// result: `f`'s value, or the INTERNAL error of its panic. Each host adapts it to its own
/// return shape (an exception, a status code, a default for an accessor, nothing for a free)
/// instead of calling `catch_unwind` again; [`catch`] and `task`'s polling use it too, so this
/// is the one `catch_unwind` of the bindings.
pub fn catch_panic<R>(f: impl FnOnce() -> R) -> Result<R, ErrorFields> {
    catch_unwind(AssertUnwindSafe(f))
        .map_err(|payload| ErrorFields::internal(panic_message(payload.as_ref())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn internal_code_is_cores() {
        let k = ErrorKind::Internal;
        assert_eq!((INTERNAL_CODE, INTERNAL_NAME), (k.code(), k.name()));
    }

    #[test]
    fn codes_follow_core_table() {
        let codes = error_codes();
        assert_eq!(codes.len(), ErrorKind::all().len());
        assert!(codes.contains(&("INVALID_ARGUMENT", ErrorKind::InvalidArgument.code())));
        assert!(codes.contains(&(INTERNAL_NAME, INTERNAL_CODE)));
    }

    #[test]
    fn variants_refine_kinds_of_the_table() {
        let codes = error_codes();
        let variants = error_variants();
        assert_eq!(
            variants,
            vec![
                (CLOSED, "RUNTIME", 3),
                (CALL_NOT_SENT, "BUDGET_EXCEEDED", 104)
            ]
        );
        for (_, name, code) in variants {
            assert!(codes.contains(&(name, code)), "{name}");
        }
        let f = ErrorFields::call_not_sent("why".into());
        assert_eq!(
            (f.code, f.name.as_str(), f.variant, f.message.as_str()),
            (104, "BUDGET_EXCEEDED", Some(CALL_NOT_SENT), "why")
        );
        assert!(!f.retryable);
    }

    #[test]
    fn closed_is_runtime_with_variant() {
        let f = ErrorFields::closed();
        assert_eq!((f.code, f.name.as_str()), (3, "RUNTIME"));
        assert_eq!(f.variant, Some("closed"));
        assert_eq!(f.message, "the client is closed");
    }

    #[test]
    fn core_error_fields_and_json_shape() {
        let f = ErrorFields::invalid("bad amount");
        assert_eq!(f.name, "INVALID_ARGUMENT");
        assert_eq!(f.code, ErrorKind::InvalidArgument.code());
        assert_eq!(f.message, "bad amount");
        assert!(!f.retryable);
        let j = f.to_json();
        let keys: Vec<&str> = j.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "code",
                "name",
                "message",
                "http_status",
                "error_code",
                "request_id",
                "trace_id",
                "retryable",
                "retry_after_raw",
                "retry_after_seconds",
                "details_json",
                "cycles_evidence",
                "variant"
            ]
        );
        assert_eq!(j["http_status"], Value::Null);
    }

    #[test]
    fn journal_parse_errors_carry_their_kind() {
        let f = ErrorFields::journal_parse(&ParseError::Unsupported("version 2".into()));
        assert_eq!(f.name, "INVALID_ARGUMENT");
        assert_eq!(f.message, "unsupported record: version 2");
        assert_eq!(
            f.details_json.as_deref(),
            Some(r#"{"journal_error":"unsupported"}"#)
        );
        let f = ErrorFields::journal_parse(&ParseError::Corrupt("bad".into()));
        assert_eq!(
            f.details_json.as_deref(),
            Some(r#"{"journal_error":"corrupt"}"#)
        );
    }

    #[test]
    fn panics_become_internal() {
        let r: Result<(), ErrorFields> = catch(|| panic!("boom"));
        let f = r.unwrap_err();
        assert_eq!(f.name, INTERNAL_NAME);
        assert!(f.message.ends_with(": boom"), "{}", f.message);
        let owned: Result<(), ErrorFields> = catch(|| panic!("{}", String::from("owned")));
        assert!(owned.unwrap_err().message.ends_with(": owned"));
        let err: Result<(), ErrorFields> = catch(|| Err(ErrorFields::invalid("bad")));
        assert_eq!(err.unwrap_err().message, "bad");
    }

    #[test]
    fn catch_panic_keeps_any_value() {
        assert_eq!(catch_panic(|| 7).unwrap(), 7);
        let nested: Result<Result<u8, String>, ErrorFields> = catch_panic(|| Err("host".into()));
        assert_eq!(nested.unwrap(), Err("host".to_string()));
        let f = catch_panic(|| -> u8 { panic!("in an accessor") }).unwrap_err();
        assert_eq!((f.code, f.name.as_str()), (INTERNAL_CODE, INTERNAL_NAME));
        assert!(f.message.ends_with(": in an accessor"), "{}", f.message);
    }
}
