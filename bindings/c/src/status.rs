//! The status every fallible export returns: `CYCLES_OK` or core's stable error code of the
//! failure's kind (`ErrorKind::code`). A test pins this table to `cycles_bridge::error_codes()`.

/// The result of a call: `CYCLES_OK` (0) or core's stable error code (docs/bindings.md,
/// "Errors"). The failure's details are in the `cycles_error` the call hands out.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(non_camel_case_types)]
pub enum cycles_status {
    /// Success.
    CYCLES_OK = 0,
    /// Bad configuration (missing base URL or key, unparsable environment).
    CYCLES_CONFIG = 1,
    /// A bad argument (NULL pointer, malformed JSON, invalid value, finished guard).
    CYCLES_INVALID_ARGUMENT = 2,
    /// The runtime refused: a closed client, after `cycles_shutdown`, a forked child, or a
    /// blocking call made from a callback or runtime thread.
    CYCLES_RUNTIME = 3,
    /// A bug: a panic caught at the boundary.
    CYCLES_INTERNAL = 4,
    /// A guarded action ended without an actual amount.
    CYCLES_MISSING_ACTUAL = 5,
    /// The heartbeat lapsed (the lease could not be kept).
    CYCLES_HEARTBEAT_LAPSED = 6,
    /// The server could not be reached.
    CYCLES_TRANSPORT_CONNECT = 10,
    /// The request timed out.
    CYCLES_TRANSPORT_TIMEOUT = 11,
    /// The connection was reset.
    CYCLES_TRANSPORT_RESET = 12,
    /// Another transport failure.
    CYCLES_TRANSPORT_OTHER = 13,
    /// 429 from the server.
    CYCLES_RATE_LIMITED = 20,
    /// 5xx from the server.
    CYCLES_SERVER_ERROR = 21,
    /// A write whose success could not be confirmed.
    CYCLES_AMBIGUOUS_SUCCESS = 22,
    /// An unexpected HTTP status.
    CYCLES_UNEXPECTED_STATUS = 23,
    /// A read's response that is not schema-valid.
    CYCLES_INVALID_RESPONSE = 24,
    /// Server `INVALID_REQUEST`.
    CYCLES_INVALID_REQUEST = 100,
    /// Server `UNAUTHORIZED`.
    CYCLES_UNAUTHORIZED = 101,
    /// Server `FORBIDDEN`.
    CYCLES_FORBIDDEN = 102,
    /// Server `NOT_FOUND`.
    CYCLES_NOT_FOUND = 103,
    /// Server `BUDGET_EXCEEDED`.
    CYCLES_BUDGET_EXCEEDED = 104,
    /// Server `BUDGET_FROZEN`.
    CYCLES_BUDGET_FROZEN = 105,
    /// Server `BUDGET_CLOSED`.
    CYCLES_BUDGET_CLOSED = 106,
    /// Server `RESERVATION_EXPIRED`.
    CYCLES_RESERVATION_EXPIRED = 107,
    /// Server `RESERVATION_FINALIZED`.
    CYCLES_RESERVATION_FINALIZED = 108,
    /// Server `IDEMPOTENCY_MISMATCH`.
    CYCLES_IDEMPOTENCY_MISMATCH = 109,
    /// Server `UNIT_MISMATCH`.
    CYCLES_UNIT_MISMATCH = 110,
    /// Server `OVERDRAFT_LIMIT_EXCEEDED`.
    CYCLES_OVERDRAFT_LIMIT_EXCEEDED = 111,
    /// Server `DEBT_OUTSTANDING`.
    CYCLES_DEBT_OUTSTANDING = 112,
    /// Server `MAX_EXTENSIONS_EXCEEDED`.
    CYCLES_MAX_EXTENSIONS_EXCEEDED = 113,
    /// Server `LIMIT_EXCEEDED`.
    CYCLES_LIMIT_EXCEEDED = 114,
    /// Server `TENANT_CLOSED`.
    CYCLES_TENANT_CLOSED = 115,
    /// Server `INTERNAL_ERROR` with a status other than 5xx.
    CYCLES_INTERNAL_ERROR = 116,
    /// A server error code this library does not know (kept verbatim in the error).
    CYCLES_UNKNOWN_ERROR_CODE = 199,
}

/// A panicked accessor's status.
impl Default for cycles_status {
    fn default() -> Self {
        cycles_status::CYCLES_INTERNAL
    }
}

/// Every status but `CYCLES_OK`, in core's table order (for the drift test and lookups).
pub const ALL: [cycles_status; 33] = {
    use cycles_status::*;
    [
        CYCLES_CONFIG,
        CYCLES_INVALID_ARGUMENT,
        CYCLES_RUNTIME,
        CYCLES_INTERNAL,
        CYCLES_MISSING_ACTUAL,
        CYCLES_HEARTBEAT_LAPSED,
        CYCLES_TRANSPORT_CONNECT,
        CYCLES_TRANSPORT_TIMEOUT,
        CYCLES_TRANSPORT_RESET,
        CYCLES_TRANSPORT_OTHER,
        CYCLES_RATE_LIMITED,
        CYCLES_SERVER_ERROR,
        CYCLES_AMBIGUOUS_SUCCESS,
        CYCLES_UNEXPECTED_STATUS,
        CYCLES_INVALID_RESPONSE,
        CYCLES_INVALID_REQUEST,
        CYCLES_UNAUTHORIZED,
        CYCLES_FORBIDDEN,
        CYCLES_NOT_FOUND,
        CYCLES_BUDGET_EXCEEDED,
        CYCLES_BUDGET_FROZEN,
        CYCLES_BUDGET_CLOSED,
        CYCLES_RESERVATION_EXPIRED,
        CYCLES_RESERVATION_FINALIZED,
        CYCLES_IDEMPOTENCY_MISMATCH,
        CYCLES_UNIT_MISMATCH,
        CYCLES_OVERDRAFT_LIMIT_EXCEEDED,
        CYCLES_DEBT_OUTSTANDING,
        CYCLES_MAX_EXTENSIONS_EXCEEDED,
        CYCLES_LIMIT_EXCEEDED,
        CYCLES_TENANT_CLOSED,
        CYCLES_INTERNAL_ERROR,
        CYCLES_UNKNOWN_ERROR_CODE,
    ]
};

/// The status of core's code (an unknown code, which core never produces, is INTERNAL).
pub fn of_code(code: u32) -> cycles_status {
    ALL.iter()
        .copied()
        .find(|s| *s as u32 == code)
        .unwrap_or(cycles_status::CYCLES_INTERNAL)
}

/// The name of a status: core's `ErrorKind::name`, `"OK"` for `CYCLES_OK`.
pub fn name(s: cycles_status) -> &'static str {
    if s == cycles_status::CYCLES_OK {
        return "OK";
    }
    cycles_bridge::error_codes()
        .into_iter()
        .find(|(_, c)| *c == s as u32)
        .map_or("INTERNAL", |(n, _)| n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_equals_cores_error_codes() {
        let core = cycles_bridge::error_codes();
        let mut ours: Vec<u32> = ALL.iter().map(|s| *s as u32).collect();
        ours.sort_unstable();
        ours.dedup();
        let mut theirs: Vec<u32> = core.iter().map(|(_, c)| *c).collect();
        theirs.sort_unstable();
        assert_eq!(
            ours, theirs,
            "cycles_status drifted from core's ErrorKind table"
        );
        for (n, c) in core {
            let s = of_code(c);
            assert_eq!(s as u32, c);
            assert_eq!(name(s), n);
            // The C constant is CYCLES_ + core's name (UNKNOWN_ERROR_CODE included).
            assert_eq!(format!("{s:?}"), format!("CYCLES_{n}"));
        }
        assert_eq!(name(cycles_status::CYCLES_OK), "OK");
    }
}
