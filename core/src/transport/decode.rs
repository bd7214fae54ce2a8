//! Pure response handling: one operation's HTTP status, headers and body in, the typed
//! success or the typed [`Error`] out. [`crate::CyclesClient`] runs every response through
//! here, and so can anything that has a response without a network (captured exchanges,
//! bindings' tests), so they all see exactly what the client sees.
//!
//! A 2xx must be the operation's schema-valid success (the predicates of
//! [`crate::model::validate`]) and decode; otherwise it is `AMBIGUOUS_SUCCESS` for a write
//! (it may have applied: retry with the same key) and `INVALID_RESPONSE` for a read (see
//! [`Operation::has_side_effect`] and the table in [`crate::error`]). Any other status is the
//! typed HTTP error of `Error::from_http`.

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::error::{Correlation, Error};
use crate::model::json_view::{self, BorrowedJson, JsonView};
use crate::model::validate::{self, SchemaViolation};
use crate::model::*;

use super::{REQUEST_ID_HEADER, TRACE_ID_HEADER};

/// The eleven runtime operations, named by the spec's operationIds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Operation {
    /// `decide` (POST, persists nothing).
    Decide,
    /// `createReservation`.
    CreateReservation,
    /// `listReservations`.
    ListReservations,
    /// `getReservation`.
    GetReservation,
    /// `commitReservation`.
    CommitReservation,
    /// `releaseReservation`.
    ReleaseReservation,
    /// `extendReservation`.
    ExtendReservation,
    /// `createEvent` (success is 201).
    CreateEvent,
    /// `getBalances`.
    GetBalances,
    /// `getEvidence` (public).
    GetEvidence,
    /// `getEvidenceJwks` (public).
    GetEvidenceJwks,
}

impl Operation {
    /// Every operation, in the spec's order.
    pub const ALL: [Operation; 11] = [
        Operation::Decide,
        Operation::CreateReservation,
        Operation::ListReservations,
        Operation::GetReservation,
        Operation::CommitReservation,
        Operation::ReleaseReservation,
        Operation::ExtendReservation,
        Operation::CreateEvent,
        Operation::GetBalances,
        Operation::GetEvidence,
        Operation::GetEvidenceJwks,
    ];

    /// The spec's operationId.
    pub fn operation_id(self) -> &'static str {
        match self {
            Operation::Decide => "decide",
            Operation::CreateReservation => "createReservation",
            Operation::ListReservations => "listReservations",
            Operation::GetReservation => "getReservation",
            Operation::CommitReservation => "commitReservation",
            Operation::ReleaseReservation => "releaseReservation",
            Operation::ExtendReservation => "extendReservation",
            Operation::CreateEvent => "createEvent",
            Operation::GetBalances => "getBalances",
            Operation::GetEvidence => "getEvidence",
            Operation::GetEvidenceJwks => "getEvidenceJwks",
        }
    }

    /// The method name every host gives the operation (the operationId in snake_case), and
    /// the bridge's name for it.
    pub fn method_name(self) -> &'static str {
        match self {
            Operation::Decide => "decide",
            Operation::CreateReservation => "create_reservation",
            Operation::ListReservations => "list_reservations",
            Operation::GetReservation => "get_reservation",
            Operation::CommitReservation => "commit_reservation",
            Operation::ReleaseReservation => "release_reservation",
            Operation::ExtendReservation => "extend_reservation",
            Operation::CreateEvent => "create_event",
            Operation::GetBalances => "get_balances",
            Operation::GetEvidence => "get_evidence",
            Operation::GetEvidenceJwks => "get_evidence_jwks",
        }
    }

    /// The HTTP method of the operation (`GET` or `POST`).
    pub fn http_method(self) -> &'static str {
        match self {
            Operation::ListReservations
            | Operation::GetReservation
            | Operation::GetBalances
            | Operation::GetEvidence
            | Operation::GetEvidenceJwks => "GET",
            Operation::Decide
            | Operation::CreateReservation
            | Operation::CommitReservation
            | Operation::ReleaseReservation
            | Operation::ExtendReservation
            | Operation::CreateEvent => "POST",
        }
    }

    /// The spec's path template, its parameters in braces (`/v1/reservations/{reservation_id}`).
    /// A path parameter is the host methods' positional argument, and the bridge's argument
    /// of the same name.
    pub fn path(self) -> &'static str {
        match self {
            Operation::Decide => "/v1/decide",
            Operation::CreateReservation | Operation::ListReservations => "/v1/reservations",
            Operation::GetReservation => "/v1/reservations/{reservation_id}",
            Operation::CommitReservation => "/v1/reservations/{reservation_id}/commit",
            Operation::ReleaseReservation => "/v1/reservations/{reservation_id}/release",
            Operation::ExtendReservation => "/v1/reservations/{reservation_id}/extend",
            Operation::CreateEvent => "/v1/events",
            Operation::GetBalances => "/v1/balances",
            Operation::GetEvidence => "/v1/evidence/{evidence_id}",
            Operation::GetEvidenceJwks => "/v1/.well-known/cycles-jwks.json",
        }
    }

    /// The path template's parameters, in order (`["reservation_id"]`).
    pub fn path_params(self) -> Vec<&'static str> {
        self.path()
            .split('/')
            .filter_map(|seg| seg.strip_prefix('{')?.strip_suffix('}'))
            .collect()
    }

    /// What the operation does, in one sentence: the doc comment every host's method starts
    /// with (the generator adds each language's own markup and the method and path).
    pub fn summary(self) -> &'static str {
        match self {
            Operation::Decide => {
                "Asks whether a spend would be allowed, reserving nothing; a denial is a result \
                 (`DENY` with its reason code), not an error."
            }
            Operation::CreateReservation => {
                "Reserves an estimate for an action; a denial is a result, not an error."
            }
            Operation::ListReservations => {
                "Lists reservations, one page; the page's `next_cursor` asks for the next."
            }
            Operation::GetReservation => "Reads one reservation.",
            Operation::CommitReservation => "Commits the actual amount a reservation's work cost.",
            Operation::ReleaseReservation => "Releases a reservation, returning its amount.",
            Operation::ExtendReservation => "Extends a reservation's lease once.",
            Operation::CreateEvent => "Records spend without a reservation (post-only accounting).",
            Operation::GetBalances => {
                "Reads the balances of the scopes a query matches, one page (at least one \
                 subject filter)."
            }
            Operation::GetEvidence => {
                "Fetches one signed evidence envelope (public: sent without the API key; no \
                 signature check here)."
            }
            Operation::GetEvidenceJwks => "Fetches the server's evidence signing keys (public).",
        }
    }

    /// The JSON Schemas of the operation's request (its body, or its query; `None`: its only
    /// argument is in the path) and of its success body, as core's serde types
    /// define them. The host-model generator (`bindings/codegen`) writes every host's models
    /// from these, so a new operation cannot reach a host without them.
    #[cfg(feature = "schema")]
    pub fn schemas(
        self,
        g: &mut schemars::SchemaGenerator,
    ) -> (Option<schemars::Schema>, schemars::Schema) {
        use schemars::JsonSchema;
        fn s<T: JsonSchema>(g: &mut schemars::SchemaGenerator) -> schemars::Schema {
            g.subschema_for::<T>()
        }
        match self {
            Operation::Decide => (Some(s::<DecisionRequest>(g)), s::<DecisionResponse>(g)),
            Operation::CreateReservation => (
                Some(s::<ReservationCreateRequest>(g)),
                s::<ReservationCreateResponse>(g),
            ),
            Operation::ListReservations => (
                Some(s::<ListReservationsQuery>(g)),
                s::<ReservationListResponse>(g),
            ),
            Operation::GetReservation => (None, s::<ReservationDetail>(g)),
            Operation::CommitReservation => (Some(s::<CommitRequest>(g)), s::<CommitResponse>(g)),
            Operation::ReleaseReservation => {
                (Some(s::<ReleaseRequest>(g)), s::<ReleaseResponse>(g))
            }
            Operation::ExtendReservation => (
                Some(s::<ReservationExtendRequest>(g)),
                s::<ReservationExtendResponse>(g),
            ),
            Operation::CreateEvent => (
                Some(s::<EventCreateRequest>(g)),
                s::<EventCreateResponse>(g),
            ),
            Operation::GetBalances => (Some(s::<BalanceQuery>(g)), s::<BalanceResponse>(g)),
            Operation::GetEvidence => (None, s::<EvidenceEnvelope>(g)),
            Operation::GetEvidenceJwks => (None, s::<EvidenceJwks>(g)),
        }
    }

    /// The operation of a spec operationId (exact spelling).
    pub fn from_operation_id(id: &str) -> Option<Operation> {
        Operation::ALL.into_iter().find(|o| o.operation_id() == id)
    }

    /// True for the operations that change server state (the writes). Their invalid 2xx is
    /// `AMBIGUOUS_SUCCESS` (retryable with the same key); a read's is `INVALID_RESPONSE`
    /// (not retryable). `decide` persists nothing, so it counts as a read.
    pub fn has_side_effect(self) -> bool {
        matches!(
            self,
            Operation::CreateReservation
                | Operation::CommitReservation
                | Operation::ReleaseReservation
                | Operation::ExtendReservation
                | Operation::CreateEvent
        )
    }

    /// Checks a response body with this operation's success predicate.
    fn check<J: JsonView>(self, status: u16, body: &J) -> Result<(), SchemaViolation> {
        match self {
            Operation::Decide => validate::decide(status, body),
            Operation::CreateReservation => validate::create_reservation(status, body),
            Operation::ListReservations => validate::list_reservations(status, body),
            Operation::GetReservation => validate::get_reservation(status, body),
            Operation::CommitReservation => validate::commit_reservation(status, body),
            Operation::ReleaseReservation => validate::release_reservation(status, body),
            Operation::ExtendReservation => validate::extend_reservation(status, body),
            Operation::CreateEvent => validate::create_event(status, body),
            Operation::GetBalances => validate::get_balances(status, body),
            Operation::GetEvidence => validate::get_evidence(status, body),
            Operation::GetEvidenceJwks => validate::get_evidence_jwks(status, body),
        }
    }
}

impl std::fmt::Display for Operation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.operation_id())
    }
}

/// The typed success body of one operation.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
#[allow(missing_docs)]
pub enum DecodedBody {
    Decide(DecisionResponse),
    CreateReservation(ReservationCreateResponse),
    ListReservations(ReservationListResponse),
    // Boxed: by far the largest body (keeps the enum small).
    GetReservation(Box<ReservationDetail>),
    CommitReservation(CommitResponse),
    ReleaseReservation(ReleaseResponse),
    ExtendReservation(ReservationExtendResponse),
    CreateEvent(EventCreateResponse),
    GetBalances(BalanceResponse),
    GetEvidence(EvidenceEnvelope),
    GetEvidenceJwks(EvidenceJwks),
}

/// A schema-valid success decoded without a network (no timing: there was no attempt).
#[derive(Clone, Debug, PartialEq)]
pub struct Decoded {
    /// HTTP status.
    pub status: u16,
    /// `X-Request-Id` response header.
    pub request_id: Option<String>,
    /// `X-Cycles-Trace-Id` response header.
    pub trace_id: Option<String>,
    /// The typed body.
    pub body: DecodedBody,
}

/// What classification reads from the response headers: correlation ids and `Retry-After`.
pub(crate) fn header_facts<'a>(
    lookup: impl Fn(&str) -> Option<&'a str>,
) -> (Correlation, Option<String>) {
    let get = |n: &str| lookup(n).map(str::to_string);
    (
        Correlation {
            request_id: get(REQUEST_ID_HEADER),
            trace_id: get(TRACE_ID_HEADER),
        },
        get("retry-after"),
    )
}

fn lookup<'a>(headers: &'a [(&str, &str)], name: &str) -> Option<&'a str> {
    // First occurrence, case-insensitive, like an HTTP client's header map.
    headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| *v)
}

/// Classifies one response of `op`: the typed success, or the error the client raises.
/// This is the client's own path (see the module docs).
pub(crate) fn classify<T: DeserializeOwned>(
    op: Operation,
    status: u16,
    body: &[u8],
    corr: Correlation,
    retry_after: Option<String>,
) -> Result<T, Error> {
    if !(200..300).contains(&status) {
        return Err(Error::from_http(status, body, corr, retry_after));
    }
    let bad = |why: String, corr: Correlation| {
        if op.has_side_effect() {
            Error::ambiguous(status, why, corr)
        } else {
            Error::invalid_response(status, why, corr)
        }
    };
    // Parsed once, borrowing from the body: checked, then decoded from that parse; no `Value`
    // tree (crate::model::json_view says why).
    let doc = match BorrowedJson::parse(body) {
        Ok(v) => v,
        Err(e) => return Err(bad(format!("body is not JSON ({e})"), corr)),
    };
    if let Err(v) = op.check(status, &doc) {
        return Err(bad(v.to_string(), corr));
    }
    json_view::decode(&doc).map_err(|e| bad(format!("cannot decode ({e})"), corr))
}

/// The error of a response whose body went past `limit` bytes (`Config::max_response_bytes`):
/// for a 2xx, what a body that is not the operation's success is (ambiguous for a write: it
/// may have been applied, so a settlement stays journaled and is retried; invalid for a
/// read); otherwise the status's own error, its body unread.
pub(crate) fn oversized(
    op: Operation,
    status: u16,
    limit: usize,
    corr: Correlation,
    retry_after: Option<String>,
) -> Error {
    if !(200..300).contains(&status) {
        return Error::from_http(status, b"", corr, retry_after);
    }
    let why =
        format!("the response body exceeds max_response_bytes ({limit} bytes); not read further");
    if op.has_side_effect() {
        Error::ambiguous(status, why, corr)
    } else {
        Error::invalid_response(status, why, corr)
    }
}

/// The error of a non-2xx response, whatever the operation (classification of errors does
/// not depend on it; e.g. a routing error that matched no operation). For a 2xx status this
/// is still the HTTP classification (`UNEXPECTED_STATUS` family), so call it for non-2xx only.
pub fn http_error(status: u16, headers: &[(&str, &str)], body: &[u8]) -> Error {
    let (corr, retry_after) = header_facts(|n| lookup(headers, n));
    Error::from_http(status, body, corr, retry_after)
}

/// Decodes one response of `op` from its status, headers (name, value pairs; names are
/// matched case-insensitively) and body bytes, exactly as [`crate::CyclesClient`] does.
pub fn decode_response(
    op: Operation,
    status: u16,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Result<Decoded, Error> {
    let (corr, retry_after) = header_facts(|n| lookup(headers, n));
    let meta = corr.clone();
    let body = decoded_body(
        op,
        &Checked {
            op,
            status,
            body,
            corr,
            retry_after,
        },
    )?;
    Ok(Decoded {
        status,
        request_id: meta.request_id,
        trace_id: meta.trace_id,
        body,
    })
}

/// Decodes the typed body of a response one way (from its checked parse, or from its bytes).
trait BodyDecoder {
    type Err;
    fn decode<T: DeserializeOwned>(&self) -> Result<T, Self::Err>;
}

/// [`classify`]: the status, the checks, then the typed body from the checked parse.
struct Checked<'a> {
    op: Operation,
    status: u16,
    body: &'a [u8],
    corr: Correlation,
    retry_after: Option<String>,
}

impl BodyDecoder for Checked<'_> {
    type Err = Error;
    fn decode<T: DeserializeOwned>(&self) -> Result<T, Error> {
        let (corr, retry_after) = (self.corr.clone(), self.retry_after.clone());
        classify(self.op, self.status, self.body, corr, retry_after)
    }
}

/// The typed body straight from the bytes (`serde_json::from_slice`), unchecked.
struct FromBytes<'a>(&'a [u8]);

impl BodyDecoder for FromBytes<'_> {
    type Err = serde_json::Error;
    fn decode<T: DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        serde_json::from_slice(self.0)
    }
}

/// The typed body from a parse, unchecked.
struct FromParse<'d, 'a>(&'d BorrowedJson<'a>);

impl BodyDecoder for FromParse<'_, '_> {
    type Err = serde_json::Error;
    fn decode<T: DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        json_view::decode(self.0)
    }
}

/// `op`'s typed body, decoded by `d`.
fn decoded_body<D: BodyDecoder>(op: Operation, d: &D) -> Result<DecodedBody, D::Err> {
    Ok(match op {
        Operation::Decide => DecodedBody::Decide(d.decode()?),
        Operation::CreateReservation => DecodedBody::CreateReservation(d.decode()?),
        Operation::ListReservations => DecodedBody::ListReservations(d.decode()?),
        Operation::GetReservation => DecodedBody::GetReservation(Box::new(d.decode()?)),
        Operation::CommitReservation => DecodedBody::CommitReservation(d.decode()?),
        Operation::ReleaseReservation => DecodedBody::ReleaseReservation(d.decode()?),
        Operation::ExtendReservation => DecodedBody::ExtendReservation(d.decode()?),
        Operation::CreateEvent => DecodedBody::CreateEvent(d.decode()?),
        Operation::GetBalances => DecodedBody::GetBalances(d.decode()?),
        Operation::GetEvidence => DecodedBody::GetEvidence(d.decode()?),
        Operation::GetEvidenceJwks => DecodedBody::GetEvidenceJwks(d.decode()?),
    })
}

/// `op`'s typed body decoded straight from `body` with `serde_json::from_slice`, unchecked:
/// the reference [`decode_response`]'s decode from its parse is held equal to (a body one
/// decodes, the other decodes to the same value; one refuses, the other too), in the tests
/// and the `decode_response` fuzz target. Not a decoder to use: it checks nothing.
#[doc(hidden)]
pub fn decode_body_from_bytes(
    op: Operation,
    body: &[u8],
) -> Result<DecodedBody, serde_json::Error> {
    decoded_body(op, &FromBytes(body))
}

/// `op`'s typed body decoded from `doc` (what [`decode_response`] does once `doc` passed the
/// checks), unchecked: compared with [`decode_body_from_bytes`] by the tests and the fuzz
/// target.
#[doc(hidden)]
pub fn decode_body_from_parse(
    op: Operation,
    doc: &BorrowedJson<'_>,
) -> Result<DecodedBody, serde_json::Error> {
    decoded_body(op, &FromParse(doc))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    #[test]
    fn path_parameters_are_read_from_the_template() {
        assert_eq!(
            Operation::CommitReservation.path_params(),
            ["reservation_id"]
        );
        assert_eq!(Operation::GetEvidence.path_params(), ["evidence_id"]);
        assert!(Operation::GetEvidenceJwks.path_params().is_empty());
        assert!(Operation::ALL.iter().all(|o| o.path().starts_with("/v1/")));
    }

    /// A number in a member core does not know is kept, correctly rounded, and survives a
    /// round trip: `decode_response` fuzzing found a value whose shortest re-encoding
    /// (`1.767225611111111e134`) serde_json's default float parsing (fast, not correctly
    /// rounded) read one ulp off, so decoding what core re-encoded for a host changed it.
    /// The workspace enables serde_json's `float_roundtrip`.
    #[test]
    fn an_unknown_members_big_number_is_read_correctly_rounded() {
        let digits = format!("17672256{}00000", "1".repeat(122));
        let body = format!(
            r#"{{"keys":[{{"kty":"OKP","crv":"Ed25519","x":"nLKe","kid":"k","cycles_nbf_ms":1,"s":{digits}}}]}}"#
        );
        let d = decode_response(Operation::GetEvidenceJwks, 200, &[], body.as_bytes()).unwrap();
        let DecodedBody::GetEvidenceJwks(jwks) = &d.body else {
            panic!("{:?}", d.body)
        };
        // What Python's float() and JavaScript's Number() read from the same text.
        assert_eq!(
            jwks.keys[0].extra["s"].as_f64(),
            Some(1.767225611111111e134)
        );
        let again = serde_json::to_string(&jwks).unwrap();
        let d2 = decode_response(Operation::GetEvidenceJwks, 200, &[], again.as_bytes()).unwrap();
        assert_eq!(d2.body, d.body);
    }

    #[test]
    fn operation_ids_round_trip_and_writes_are_the_five_mutations() {
        for op in Operation::ALL {
            assert_eq!(Operation::from_operation_id(op.operation_id()), Some(op));
        }
        assert_eq!(Operation::from_operation_id("GetReservation"), None);
        let writes: Vec<&str> = Operation::ALL
            .into_iter()
            .filter(|o| o.has_side_effect())
            .map(Operation::operation_id)
            .collect();
        assert_eq!(
            writes,
            [
                "createReservation",
                "commitReservation",
                "releaseReservation",
                "extendReservation",
                "createEvent"
            ]
        );
    }

    #[test]
    fn invalid_2xx_is_ambiguous_for_writes_and_invalid_for_reads() {
        let h = [("X-Request-Id", "rq"), ("x-cycles-trace-id", "tr")];
        for op in Operation::ALL {
            let e = decode_response(op, 200, &h, b"{}").unwrap_err();
            let want = if op.has_side_effect() {
                ErrorKind::AmbiguousSuccess
            } else {
                ErrorKind::InvalidResponse
            };
            assert_eq!(e.kind(), &want, "{op}");
            assert_eq!(e.retryable(), op.has_side_effect(), "{op}");
            assert_eq!((e.request_id(), e.trace_id()), (Some("rq"), Some("tr")));
            let e = decode_response(op, 200, &h, b"<html>").unwrap_err();
            assert_eq!(e.kind(), &want, "{op} not JSON");
        }
    }

    #[test]
    fn decodes_a_success_and_types_an_error() {
        let h = [("x-request-id", "rq"), ("Retry-After", "7")];
        let ok = decode_response(
            Operation::GetBalances,
            200,
            &h,
            br#"{"balances":[],"has_more":false,"next_cursor":null}"#,
        )
        .unwrap();
        assert_eq!(ok.request_id.as_deref(), Some("rq"));
        match ok.body {
            DecodedBody::GetBalances(b) => assert_eq!(b.next_cursor, None),
            other => panic!("wrong body {other:?}"),
        }
        let e = decode_response(
            Operation::GetBalances,
            429,
            &h,
            br#"{"error":"LIMIT_EXCEEDED","message":"m"}"#,
        )
        .unwrap_err();
        assert_eq!(e.kind(), &ErrorKind::RateLimited);
        assert_eq!(e.retry_after().unwrap().delta_seconds, Some(7));
        let e = http_error(500, &h, br#"{"error":"INTERNAL_ERROR","message":"m"}"#);
        assert_eq!(e.kind(), &ErrorKind::ServerError);
    }

    /// A member the typed response reads, sent twice, is not a success to trust: the decode
    /// straight from the bytes refuses it (a `Value` used to keep the last one silently). A
    /// repeated member nobody reads is ignored, like any unknown one.
    #[test]
    fn a_repeated_member_is_ambiguous_for_a_write() {
        let charged = r#"{"unit":"USD_MICROCENTS","amount":5}"#;
        let twice = format!(r#"{{"status":"COMMITTED","charged":{charged},"charged":{charged}}}"#);
        let e =
            decode_response(Operation::CommitReservation, 200, &[], twice.as_bytes()).unwrap_err();
        assert_eq!(e.kind(), &ErrorKind::AmbiguousSuccess);
        assert!(
            e.message().contains("duplicate field `charged`"),
            "{}",
            e.message()
        );
        let extra = format!(r#"{{"status":"COMMITTED","charged":{charged},"x":1,"x":2}}"#);
        assert!(decode_response(Operation::CommitReservation, 200, &[], extra.as_bytes()).is_ok());
    }
}
