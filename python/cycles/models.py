"""Typed request parts and result objects of the runtime plane.

Field names and meanings are the protocol's (``cycles-protocol-v0.yaml``). Open
enumerations (units, decisions, statuses, reason codes) are plain ``str``: a value this
version does not know is carried through unchanged. Amounts are ``int`` (int64 on the wire).
Every result has ``meta`` (:class:`ResponseMeta`): HTTP status, request and trace ids and the
attempt's round-trip time.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar, Mapping, TypeVar, Union

__all__ = [
    "Unit",
    "Decision",
    "ReservationStatus",
    "OveragePolicy",
    "Amount",
    "SignedAmount",
    "Subject",
    "Action",
    "Caps",
    "StandardMetrics",
    "Balance",
    "EvidenceRef",
    "ReservationEvidence",
    "ResponseMeta",
    "ReservationCreated",
    "CommitResult",
    "ReleaseResult",
    "ExtendResult",
    "DecisionResult",
    "EventResult",
    "BalancesResult",
    "Reservation",
    "ReservationPage",
    "EvidenceEnvelope",
    "EvidenceJwk",
    "EvidenceJwks",
]


class Unit:
    """Known budget units (any other string is passed through unchanged)."""

    USD_MICROCENTS = "USD_MICROCENTS"
    TOKENS = "TOKENS"
    CREDITS = "CREDITS"
    RISK_POINTS = "RISK_POINTS"


class Decision:
    """Known decisions."""

    ALLOW = "ALLOW"
    ALLOW_WITH_CAPS = "ALLOW_WITH_CAPS"
    DENY = "DENY"


class ReservationStatus:
    """Known reservation states."""

    ACTIVE = "ACTIVE"
    COMMITTED = "COMMITTED"
    RELEASED = "RELEASED"
    EXPIRED = "EXPIRED"


class OveragePolicy:
    """Known overage policies."""

    REJECT = "REJECT"
    ALLOW_IF_AVAILABLE = "ALLOW_IF_AVAILABLE"
    ALLOW_WITH_OVERDRAFT = "ALLOW_WITH_OVERDRAFT"


M = TypeVar("M", bound="_Model")


def _convert(spec: Any, value: Any) -> Any:
    if value is None:
        return None
    if isinstance(spec, list):
        return [_convert(spec[0], v) for v in value]
    return spec._from_json(value)


class _Model:
    """Decoding from the core's JSON and encoding of request parts."""

    _nested: ClassVar[dict[str, Any]] = {}

    @classmethod
    def _from_json(cls: type[M], data: Mapping[str, Any], meta: ResponseMeta | None = None) -> M:
        names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
        kwargs: dict[str, Any] = {}
        for key, value in data.items():
            if key in names and key not in ("extra", "meta"):
                spec = cls._nested.get(key)
                kwargs[key] = _convert(spec, value) if spec is not None else value
        if "extra" in names:
            kwargs["extra"] = {k: v for k, v in data.items() if k not in names}
        if "meta" in names:
            kwargs["meta"] = meta
        return cls(**kwargs)

    def to_json(self) -> dict[str, Any]:
        """The wire object (``None`` fields omitted)."""
        out: dict[str, Any] = {}
        for name in _field_names(type(self)):
            value = getattr(self, name)
            if value is None:
                continue
            out[name] = _encode(value)
        return out


# Field names per model class: ``dataclasses.fields`` rebuilds its tuple on every call, and
# request parts are encoded on every guarded call.
_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


_SCALARS = (str, int, float, bool)


def _field_names(cls: type) -> tuple[str, ...]:
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = tuple(f.name for f in dataclasses.fields(cls) if f.name != "meta")
        _FIELD_NAMES[cls] = names
    return names


def _encode(value: Any) -> Any:
    if type(value) in _SCALARS:  # the common case, before the slower isinstance checks
        return value
    if isinstance(value, _Model):
        return value.to_json()
    if isinstance(value, (list, tuple)):
        return [_encode(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _encode(v) for k, v in value.items()}
    return value


@dataclass(frozen=True)
class Amount(_Model):
    """A non-negative amount in a unit."""

    unit: str
    amount: int


@dataclass(frozen=True)
class SignedAmount(_Model):
    """An amount that may be negative (``Balance.remaining`` in overdraft)."""

    unit: str
    amount: int


@dataclass(frozen=True, kw_only=True)
class Subject(_Model):
    """Who spends: at least one standard field must be set."""

    tenant: str | None = None
    workspace: str | None = None
    app: str | None = None
    workflow: str | None = None
    agent: str | None = None
    toolset: str | None = None
    dimensions: dict[str, str] | None = None


@dataclass(frozen=True)
class Action(_Model):
    """What is guarded: a kind (``"llm.completion"``) and a name (``"openai:gpt-4o"``)."""

    kind: str
    name: str
    tags: list[str] | None = None


@dataclass(frozen=True, kw_only=True)
class Caps(_Model):
    """Soft constraints of an ``ALLOW_WITH_CAPS`` decision."""

    max_tokens: int | None = None
    max_steps_remaining: int | None = None
    tool_allowlist: list[str] | None = None
    tool_denylist: list[str] | None = None
    cooldown_ms: int | None = None


@dataclass(frozen=True, kw_only=True)
class StandardMetrics(_Model):
    """Optional metrics sent with a commit or an event."""

    tokens_input: int | None = None
    tokens_output: int | None = None
    latency_ms: int | None = None
    model_version: str | None = None
    custom: dict[str, Any] | None = None


@dataclass(frozen=True, kw_only=True)
class Balance(_Model):
    """The balance of one scope in one unit."""

    _nested: ClassVar[dict[str, Any]] = {
        "remaining": SignedAmount,
        "reserved": Amount,
        "spent": Amount,
        "debt": Amount,
        "allocated": Amount,
        "overdraft_limit": Amount,
    }
    scope: str
    scope_path: str
    remaining: SignedAmount
    reserved: Amount | None = None
    spent: Amount | None = None
    debt: Amount | None = None
    allocated: Amount | None = None
    overdraft_limit: Amount | None = None
    is_over_limit: bool | None = None


@dataclass(frozen=True)
class EvidenceRef(_Model):
    """A reference to a signed evidence envelope."""

    evidence_id: str
    cycles_evidence_url: str


@dataclass(frozen=True, kw_only=True)
class ReservationEvidence(_Model):
    """Evidence references of a reservation's lifecycle steps."""

    _nested: ClassVar[dict[str, Any]] = {
        "reserve": EvidenceRef,
        "commit": EvidenceRef,
        "release": EvidenceRef,
    }
    reserve: EvidenceRef | None = None
    commit: EvidenceRef | None = None
    release: EvidenceRef | None = None


@dataclass(frozen=True)
class ResponseMeta:
    """Transport facts of the attempt that produced a result."""

    status: int
    request_id: str | None
    trace_id: str | None
    rtt_us: int
    """Round-trip time of the attempt in microseconds (monotonic, sent to body received).
    Feed it to :mod:`cycles.timing` as ``timing.from_micros_ceil(meta.rtt_us)``."""

    @property
    def rtt_ms(self) -> float:
        """Round-trip time in (fractional) milliseconds, for display."""
        return self.rtt_us / 1000.0


_BAL = [Balance]


@dataclass(frozen=True, kw_only=True)
class ReservationCreated(_Model):
    """Result of ``create_reservation``. ``reservation_id`` is set for a live allowed
    reservation; a dry run has none (and may be ``DENY`` with a ``reason_code``)."""

    _nested: ClassVar[dict[str, Any]] = {
        "reserved": Amount,
        "caps": Caps,
        "balances": _BAL,
        "cycles_evidence": EvidenceRef,
    }
    decision: str
    affected_scopes: list[str] = field(default_factory=list)
    reservation_id: str | None = None
    reserved: Amount | None = None
    expires_at_ms: int | None = None
    remaining_ttl_ms: int | None = None
    scope_path: str | None = None
    caps: Caps | None = None
    balances: list[Balance] | None = None
    reason_code: str | None = None
    retry_after_ms: int | None = None
    cycles_evidence: EvidenceRef | None = None
    meta: ResponseMeta | None = None


@dataclass(frozen=True, kw_only=True)
class CommitResult(_Model):
    """Result of ``commit_reservation``."""

    _nested: ClassVar[dict[str, Any]] = {
        "charged": Amount,
        "released": Amount,
        "balances": _BAL,
        "cycles_evidence": EvidenceRef,
    }
    status: str
    charged: Amount
    released: Amount | None = None
    balances: list[Balance] | None = None
    cycles_evidence: EvidenceRef | None = None
    meta: ResponseMeta | None = None


@dataclass(frozen=True, kw_only=True)
class ReleaseResult(_Model):
    """Result of ``release_reservation``."""

    _nested: ClassVar[dict[str, Any]] = {
        "released": Amount,
        "balances": _BAL,
        "cycles_evidence": EvidenceRef,
    }
    status: str
    released: Amount
    balances: list[Balance] | None = None
    cycles_evidence: EvidenceRef | None = None
    meta: ResponseMeta | None = None


@dataclass(frozen=True, kw_only=True)
class ExtendResult(_Model):
    """Result of ``extend_reservation``."""

    _nested: ClassVar[dict[str, Any]] = {"balances": _BAL}
    status: str
    expires_at_ms: int
    remaining_ttl_ms: int | None = None
    balances: list[Balance] | None = None
    meta: ResponseMeta | None = None


@dataclass(frozen=True, kw_only=True)
class DecisionResult(_Model):
    """Result of ``decide``."""

    _nested: ClassVar[dict[str, Any]] = {"caps": Caps, "cycles_evidence": EvidenceRef}
    decision: str
    caps: Caps | None = None
    reason_code: str | None = None
    retry_after_ms: int | None = None
    affected_scopes: list[str] | None = None
    cycles_evidence: EvidenceRef | None = None
    meta: ResponseMeta | None = None


@dataclass(frozen=True, kw_only=True)
class EventResult(_Model):
    """Result of ``create_event``."""

    _nested: ClassVar[dict[str, Any]] = {"charged": Amount, "balances": _BAL}
    status: str
    event_id: str
    charged: Amount | None = None
    balances: list[Balance] | None = None
    meta: ResponseMeta | None = None


@dataclass(frozen=True, kw_only=True)
class BalancesResult(_Model):
    """Result of ``get_balances`` (one page)."""

    _nested: ClassVar[dict[str, Any]] = {"balances": _BAL}
    balances: list[Balance]
    next_cursor: str | None = None
    has_more: bool | None = None
    meta: ResponseMeta | None = None


@dataclass(frozen=True, kw_only=True)
class Reservation(_Model):
    """One reservation (``get_reservation``, and the rows of ``list_reservations``)."""

    _nested: ClassVar[dict[str, Any]] = {
        "subject": Subject,
        "action": Action,
        "reserved": Amount,
        "committed": Amount,
        "evidence": ReservationEvidence,
    }
    reservation_id: str
    status: str
    subject: Subject
    action: Action
    reserved: Amount
    created_at_ms: int
    expires_at_ms: int
    scope_path: str
    affected_scopes: list[str]
    idempotency_key: str | None = None
    committed: Amount | None = None
    finalized_at_ms: int | None = None
    metadata: dict[str, Any] | None = None
    committed_metadata: dict[str, Any] | None = None
    evidence: ReservationEvidence | None = None
    meta: ResponseMeta | None = None


@dataclass(frozen=True, kw_only=True)
class ReservationPage(_Model):
    """Result of ``list_reservations`` (one page)."""

    _nested: ClassVar[dict[str, Any]] = {"reservations": [Reservation]}
    reservations: list[Reservation]
    next_cursor: str | None = None
    has_more: bool | None = None
    meta: ResponseMeta | None = None


@dataclass(frozen=True, kw_only=True)
class EvidenceEnvelope(_Model):
    """A signed evidence envelope exactly as served (unknown members in ``extra``)."""

    schema_version: str
    artifact_type: str
    server_id: str
    signer_did: str
    issued_at_ms: int
    payload: Any
    evidence_id: str
    signature: str
    trace_id: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    meta: ResponseMeta | None = None


@dataclass(frozen=True, kw_only=True)
class EvidenceJwk(_Model):
    """One signer key of the evidence JWKS."""

    kty: str
    crv: str
    x: str
    kid: str
    cycles_nbf_ms: int
    alg: str | None = None
    cycles_exp_ms: int | None = None
    status: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class EvidenceJwks(_Model):
    """Result of ``get_evidence_jwks``."""

    _nested: ClassVar[dict[str, Any]] = {"keys": [EvidenceJwk]}
    keys: list[EvidenceJwk]
    extra: dict[str, Any] = field(default_factory=dict)
    meta: ResponseMeta | None = None


SubjectLike = Union[Subject, Mapping[str, Any]]
ActionLike = Union[Action, Mapping[str, Any]]
AmountLike = Union[Amount, Mapping[str, Any]]
MetricsLike = Union[StandardMetrics, Mapping[str, Any]]
