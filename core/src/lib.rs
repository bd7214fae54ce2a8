//! `cycles-core`: the Cycles protocol client shared by every language binding.
//!
//! Layers (one module a concern, data flows top to bottom):
//! - [`model`]: wire types, lenient decoding, strict schema-valid success predicates;
//! - [`transport`]: [`CyclesClient`], one HTTP attempt per call with monotonic timing;
//! - [`error`]: the single [`Error`] type with stable [`ErrorKind`] codes;
//! - [`config`]: [`Config`] built in code or from `CYCLES_*` variables;
//! - [`redact`]: strips the API key from anything a server echoes back into an error;
//! - [`guard`]: the reserve, heartbeat, execute, settle lifecycle bindings wrap;
//! - [`lease`]: the heartbeat driver that keeps a reservation alive while work runs;
//! - [`journal`]: the durable settlement journal, in the format shared with the official SDKs;
//! - [`settle`]: durable settlement (journal first, same-key retries, expiry fallback, replay);
//! - [`rawjson`]: inspecting JSON text that is sent verbatim (lone surrogates, big numbers);
//! - [`events`]: the one event stream (heartbeat, settlement, journal) to host logging;
//! - [`runtime`]: the one process-wide tokio runtime for bindings;
//! - [`timing`]: the PURE heartbeat math (no clock, no I/O) every binding exposes;
//! - [`pricing`]: the PURE cost of a model call (token estimate, price table, caps, actual)
//!   every integration calls.
#![warn(missing_docs)]

pub mod config;
pub mod error;
pub mod events;
pub mod guard;
pub mod journal;
pub mod lease;
pub mod model;
pub mod pricing;
pub mod rawjson;
pub mod redact;
pub mod runtime;
pub mod settle;
pub mod timing;
pub mod transport;

pub use config::{Config, JournalConfig, Secret};
pub use error::{Error, ErrorKind};
pub use journal::{Journal, Mode, Record};
pub use model::{
    Action, Amount, Balance, BalanceQuery, BalanceResponse, Caps, CommitRequest, CommitResponse,
    Decision, DecisionRequest, DecisionResponse, ErrorResponse, EventCreateRequest,
    EventCreateResponse, EventStatus, EvidenceEnvelope, EvidenceJwk, EvidenceJwks, EvidenceRef,
    JsonObject, ListReservationsQuery, Metadata, OveragePolicy, ReasonCode, ReleaseRequest,
    ReleaseResponse, ReservationCreateRequest, ReservationCreateResponse, ReservationDetail,
    ReservationEvidence, ReservationExtendRequest, ReservationExtendResponse,
    ReservationListResponse, ReservationStatus, ReservationSummary, SchemaViolation, SignedAmount,
    SortBy, SortDir, StandardMetrics, Subject, Unit,
};
pub use settle::{
    DrainReport, EventFallback, EventRecovery, PendingRecord, Rejection, ReplayHandle,
    SettleConfig, SettleOutcome, Settlement, Settler,
};
pub use transport::decode::{decode_response, Decoded, DecodedBody, Operation};
pub use transport::retry_after::RetryAfter;
pub use transport::{AttemptTiming, CyclesClient, Response};
