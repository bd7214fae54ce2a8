//! What the schemas cannot say: the names each host gives core's types, and the few idioms
//! a host spells its own way. Everything else (members, types, optionality, docs, the
//! operations) comes from core.

/// The host name of a core model. Results are named for what they are to a caller
/// (`ReservationCreated`, `CommitResult`); the building blocks keep core's names.
pub fn host_name(core: &str) -> &str {
    match core {
        "ReservationCreateResponse" => "ReservationCreated",
        "CommitResponse" => "CommitResult",
        "ReleaseResponse" => "ReleaseResult",
        "ReservationExtendResponse" => "ExtendResult",
        "ReservationExtendRequest" => "ExtendRequest",
        "DecisionResponse" => "DecisionResult",
        "EventCreateResponse" => "EventResult",
        "BalanceResponse" => "BalancesResult",
        "ReservationDetail" => "Reservation",
        "ReservationListResponse" => "ReservationPage",
        other => other,
    }
}

/// Python: the models built positionally (`Amount("TOKENS", 5)`), as users already write
/// them; every other model takes keywords only.
pub const PY_POSITIONAL: &[&str] = &["Amount", "SignedAmount", "Action", "EvidenceRef"];

/// Python: the request parts every method also takes as a plain mapping.
pub const PY_LIKE: &[(&str, &str)] = &[
    ("SubjectLike", "Subject"),
    ("ActionLike", "Action"),
    ("AmountLike", "Amount"),
    ("MetricsLike", "StandardMetrics"),
];

/// The building blocks every host exports, in this order, before the operations' models.
pub const PARTS: &[&str] = &[
    "Amount",
    "SignedAmount",
    "Subject",
    "Action",
    "Caps",
    "StandardMetrics",
    "Balance",
    "EvidenceRef",
    "ReservationEvidence",
];

/// TypeScript: members kept as plain objects although core types them, because their keys
/// have a standard spelling of their own (JWKs go to a JOSE library as served).
pub const TS_OPAQUE_LISTS: &[(&str, &str)] = &[("EvidenceJwks", "keys")];

/// TypeScript: a request's `subject` may be left out; the client fills in its tenant.
pub const TS_SUBJECT_DOC: &str =
    "Who spends; default: the client's tenant (`INVALID_ARGUMENT` when it has none).";

/// The JVM: records written by hand because they carry request-side idioms (factories such as
/// `Amount.usdMicrocents`, `Subject.tenant(...).withAgent(...)`, `toJson`); they decode with the
/// same `from` the generated ones call.
pub const JAVA_HAND_WRITTEN: &[&str] = &["Amount", "Subject", "Action", "Caps", "StandardMetrics"];

/// The JVM: `(core model, former accessor, core member)` for accessors that had a name of
/// their own before the records were generated; the old name stays as a deprecated alias.
pub const JAVA_ALIASES: &[(&str, &str, &str)] = &[
    ("DecisionResponse", "evidence", "cycles_evidence"),
    ("ReservationCreateResponse", "evidence", "cycles_evidence"),
    ("CommitResponse", "evidence", "cycles_evidence"),
    ("ReleaseResponse", "evidence", "cycles_evidence"),
    ("EvidenceRef", "url", "cycles_evidence_url"),
    ("EvidenceJwk", "notBeforeMs", "cycles_nbf_ms"),
    ("EvidenceJwk", "expiresMs", "cycles_exp_ms"),
];
