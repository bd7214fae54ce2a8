//! Typed serde models of the Cycles runtime plane, the lenient error envelope, and the
//! strict schema-valid success predicates (in [`validate`]).
//!
//! Decoding tolerates unknown extra fields and unknown enum values (the protocol evolves
//! additively inside `/v1`); requests serialize only known fields and skip `None`.

pub mod common;
pub mod decide;
pub mod error_body;
pub mod event;
pub mod evidence;
pub mod json_object;
pub mod json_view;
pub mod query;
pub mod reservation;
pub mod validate;

pub use common::{
    Action, Amount, Balance, Caps, Decision, EventStatus, EvidenceRef, Metadata, OveragePolicy,
    ReasonCode, ReservationEvidence, ReservationStatus, SignedAmount, StandardMetrics, Subject,
    Unit,
};
pub use decide::{DecisionRequest, DecisionResponse};
pub use error_body::ErrorResponse;
pub use event::{EventCreateRequest, EventCreateResponse};
pub use evidence::{EvidenceEnvelope, EvidenceJwk, EvidenceJwks};
pub use json_object::JsonObject;
pub use query::{
    BalanceQuery, BalanceResponse, ListInclude, ListReservationsQuery, SortBy, SortDir,
};
pub use reservation::{
    CommitRequest, CommitResponse, ReleaseRequest, ReleaseResponse, ReservationCreateRequest,
    ReservationCreateResponse, ReservationDetail, ReservationExtendRequest,
    ReservationExtendResponse, ReservationListResponse, ReservationSummary,
};
pub use validate::SchemaViolation;
