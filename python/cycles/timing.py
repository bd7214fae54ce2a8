"""The heartbeat timing math as plain functions (spec 0.1.25.16, HEARTBEAT GUIDANCE).

Every function here is the Rust core's (``cycles_core::timing``): nothing is re-implemented in
Python, so every language computes identical schedules. The functions are pure: no clock,
no I/O. Durations are integer milliseconds; monotonic instants are integer microseconds.

Infinity: a duration that overflowed, or an unbounded request timeout, is ``math.inf``
(:data:`INFINITE`); a retry window subtracting an unbounded budget is ``-math.inf``. Every
finite value is an ``int`` (exact, however large: Python ints have no 2**53 limit).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, Union

from . import _native

__all__ = [
    "INFINITE",
    "Millis",
    "SignedMillis",
    "MIN_BUDGET_MS",
    "MAX_TRANSIENT_RETRY_MS",
    "PERMANENT_STOP_CODES",
    "Schedule",
    "RetryAfter",
    "FailureMath",
    "Extend",
    "Stop",
    "Decision",
    "Failure",
    "from_micros_ceil",
    "from_micros_floor",
    "schedule",
    "lead_floor",
    "attempt_budget",
    "safety_margin",
    "retry_reserve",
    "next_delay",
    "current_lead_estimate",
    "retry_window",
    "transient_retry_delay",
    "parse_retry_after",
    "retry_after_ms",
    "is_permanent_stop_code",
    "classify_grant",
    "cadence",
    "delay_with_skips",
    "ExtendTimeout",
    "extend_timeout",
    "min_lead_floor",
    "attempt_cutoff",
    "PrimaryPlanner",
    "FallbackPlanner",
]

INFINITE: float = math.inf
"""Positive infinity, the value of an overflowed or unbounded duration."""

Millis = Union[int, float]
"""A non-negative duration in ms: an ``int``, or ``math.inf``."""

SignedMillis = Union[int, float]
"""A signed window in ms: an ``int``, ``math.inf`` or ``-math.inf``."""

MIN_BUDGET_MS = 1000
"""The spec's floor for attempt budgets and safety margins."""

MAX_TRANSIENT_RETRY_MS = 30_000
"""Upper bound of an ordinary transient retry delay."""

PERMANENT_STOP_CODES: tuple[str, ...] = tuple(_native.permanent_stop_codes())
"""Server codes that stop a heartbeat for good."""


@dataclass(frozen=True)
class Schedule:
    """Every intermediate value of one primary-path schedule."""

    lead_floor_ms: Millis
    attempt_budget_ms: Millis
    safety_margin_ms: Millis
    retry_reserve_ms: Millis
    next_delay_ms: Millis


@dataclass(frozen=True)
class ExtendTimeout:
    """The enforced per-extend timeout for a lead (see :func:`extend_timeout`).

    ``source`` is ``"configured"`` (the configured timeout already gives a positive delay),
    ``"derived"`` (a shorter one derived from the lease) or ``"too_short"`` (no timeout keeps
    this lead alive: ``timeout_ms`` is the floor, and ``min_lead_floor_ms`` the lead that
    would be needed)."""

    timeout_ms: Millis
    source: Literal["configured", "derived", "too_short"]
    min_lead_floor_ms: Millis
    max_keeping_timeout_ms: Millis | None
    target_timeout_ms: Millis
    attempt_cutoff_ms: Millis


@dataclass(frozen=True)
class RetryAfter:
    """A parsed ``Retry-After`` value: ``kind`` is ``"missing"``, ``"invalid"`` or
    ``"seconds"``; ``ms`` is ``1000 * seconds`` unless that overflows (then ``None``)."""

    kind: Literal["missing", "invalid", "seconds"]
    seconds: int | None
    ms: int | None


@dataclass(frozen=True)
class FailureMath:
    """The arithmetic behind a failure decision."""

    elapsed_ms: Millis
    current_lead_estimate_ms: Millis
    retry_window_ms: SignedMillis


@dataclass(frozen=True)
class Extend:
    """Start the next extend attempt after ``delay_ms``, with a ``"fresh"`` idempotency key
    (a new extension) or the ``"same"`` key (a retry, never applied twice)."""

    delay_ms: Millis
    key: Literal["fresh", "same"]


@dataclass(frozen=True)
class Stop:
    """Stop heartbeating. ``reason`` is one of ``lease_shorter_than_retry_budget``,
    ``no_safe_retry_window``, ``zero_window_retry_failed``, ``no_progress``,
    ``rate_limit_beyond_window``, ``permanent`` (``code`` set), ``rejected`` (``status``
    set) or ``no_valid_response``."""

    reason: str
    code: str | None = None
    status: int | None = None
    retry_window_ms: SignedMillis | None = None
    retry_after_kind: str | None = None
    retry_after_seconds: int | None = None


Decision = Union[Extend, Stop]


@dataclass(frozen=True)
class Failure:
    """One failed extend attempt, classified for the planners. Build with
    :meth:`transient`, :meth:`rate_limited` or :meth:`error`."""

    kind: Literal["transient", "rate_limited", "error"]
    retry_after: str | None = None
    status: int | None = None
    code: str | None = None

    @classmethod
    def transient(cls) -> Failure:
        """Timeout, connection error or reset, 5xx, or an ambiguous 2xx."""
        return cls("transient")

    @classmethod
    def rate_limited(cls, retry_after: str | None) -> Failure:
        """HTTP 429 with its raw ``Retry-After`` header (``None`` when absent)."""
        return cls("rate_limited", retry_after=retry_after)

    @classmethod
    def error(cls, status: int, code: str | None) -> Failure:
        """Any other error response: its status and server error code."""
        return cls("error", status=status, code=code)


def _decision(raw: tuple) -> Decision:  # type: ignore[type-arg]
    if raw[0] == "extend":
        return Extend(raw[1], raw[2])
    return Stop(raw[1], **raw[2])


def from_micros_ceil(micros: int) -> Millis:
    """Microseconds rounded UP to whole ms (for rtt, elapsed time, budgets: never understated)."""
    return _native.from_micros_ceil(micros)


def from_micros_floor(micros: int) -> Millis:
    """Microseconds rounded DOWN to whole ms (for leads and delays: never overstated)."""
    return _native.from_micros_floor(micros)


def schedule(
    remaining_ttl_ms: int,
    rtt_ms: Millis | None,
    max_rtt_ms: Millis | None,
    request_timeout_ms: Millis,
) -> Schedule:
    """The normative schedule from one schema-valid success. ``rtt_ms=None`` means the
    attempt timing is unreliable (forces ``lead_floor`` and ``next_delay`` to 0);
    ``max_rtt_ms`` is the maximum over the lease including this attempt."""
    return Schedule(**_native.schedule(remaining_ttl_ms, rtt_ms, max_rtt_ms, request_timeout_ms))


def lead_floor(remaining_ttl_ms: int, rtt_ms: Millis | None) -> Millis:
    """``max(0, remaining_ttl_ms - rtt)``; 0 when timing is unreliable (``None``)."""
    return _native.lead_floor(remaining_ttl_ms, rtt_ms)


def attempt_budget(request_timeout_ms: Millis, max_rtt_ms: Millis | None) -> Millis:
    """``max(request_timeout, 1000, 2 x max rtt)``."""
    return _native.attempt_budget(request_timeout_ms, max_rtt_ms)


def safety_margin(max_rtt_ms: Millis | None) -> Millis:
    """``max(1000, 2 x max rtt)``."""
    return _native.safety_margin(max_rtt_ms)


def retry_reserve(attempt_budget_ms: Millis, safety_margin_ms: Millis) -> Millis:
    """``2 x attempt_budget + safety_margin``."""
    return _native.retry_reserve(attempt_budget_ms, safety_margin_ms)


def next_delay(lead_floor_ms: Millis, retry_reserve_ms: Millis) -> Millis:
    """``max(0, lead_floor - retry_reserve)``, from response receipt."""
    return _native.next_delay(lead_floor_ms, retry_reserve_ms)


def current_lead_estimate(last_lead_floor_ms: Millis, elapsed_ms: Millis) -> Millis:
    """``max(0, last lead_floor - elapsed)`` (``elapsed`` rounded up by the caller)."""
    return _native.current_lead_estimate(last_lead_floor_ms, elapsed_ms)


def retry_window(
    current_lead_estimate_ms: Millis, attempt_budget_ms: Millis, safety_margin_ms: Millis
) -> SignedMillis:
    """``estimate - attempt_budget - safety_margin``, NOT clamped (negative: stop)."""
    return _native.retry_window(current_lead_estimate_ms, attempt_budget_ms, safety_margin_ms)


def transient_retry_delay(
    current_lead_estimate_ms: Millis, retry_window_ms: SignedMillis
) -> Millis:
    """``min(30000, estimate / 4, window)`` for a non-negative window."""
    return _native.transient_retry_delay(current_lead_estimate_ms, retry_window_ms)


def parse_retry_after(raw: str | None) -> RetryAfter:
    """Parses a raw ``Retry-After`` value: non-negative delta-seconds only (optional SP/HTAB
    around it); an HTTP-date, a sign, a fraction or an overflowing value is invalid."""
    kind, seconds, ms = _native.parse_retry_after(raw)
    return RetryAfter(kind, seconds, ms)  # type: ignore[arg-type]


def retry_after_ms(raw: str | None) -> int | None:
    """The delay in ms of a raw ``Retry-After`` value, or ``None`` (missing, invalid or
    overflowing: never invent an earlier retry)."""
    return parse_retry_after(raw).ms


def is_permanent_stop_code(code: str) -> bool:
    """True for the codes that stop a heartbeat for good."""
    return _native.is_permanent_stop_code(code)


def classify_grant(grant_ms: int, elapsed_ms: Millis, requested_ttl_ms: int) -> str:
    """Fallback: the regime (``normal``, ``grant_clamped``, ``max_lead_clamped``) of one
    measured grant against the time since the previous success."""
    return _native.classify_grant(grant_ms, elapsed_ms, requested_ttl_ms)


def cadence(regime: str, last_grant_ms: int, requested_ttl_ms: int) -> Millis:
    """Fallback: the beat cadence for a regime."""
    return _native.cadence(regime, last_grant_ms, requested_ttl_ms)


def delay_with_skips(lead_min_now_ms: int, last_grant_ms: int, cadence_ms: Millis) -> Millis:
    """Fallback: the delay to the first beat whose projected ``lead_min`` is below
    1.5 x the last grant."""
    return _native.delay_with_skips(lead_min_now_ms, last_grant_ms, cadence_ms)


def extend_timeout(
    lead_floor_ms: Millis, max_rtt_ms: Millis | None, configured_timeout_ms: Millis
) -> ExtendTimeout:
    """The enforced per-extend timeout for a lead: the configured one while it gives a positive
    delay, else one derived from the lease (about half the lead before the next beat, at least
    ``max(1000, 2 x max rtt)``, never above the configured one). ``math.inf`` configured means
    no configured bound."""
    return ExtendTimeout(**_native.extend_timeout(lead_floor_ms, max_rtt_ms, configured_timeout_ms))


def min_lead_floor(timeout_ms: Millis, max_rtt_ms: Millis | None) -> Millis:
    """The smallest ``lead_floor`` that gives a positive delay with ``timeout_ms``
    (``2 x attempt_budget + safety_margin + 1``)."""
    return _native.min_lead_floor(timeout_ms, max_rtt_ms)


def attempt_cutoff(timeout_ms: Millis) -> Millis:
    """Where an extend attempt with budget ``timeout_ms`` is cut off:
    ``timeout - min(timeout // 10, 100)`` (failure detection stays inside the budget)."""
    return _native.attempt_cutoff(timeout_ms)


class PrimaryPlanner:
    """The normative heartbeat state machine for one lease. Feed it every create/extend
    outcome in order; it answers with the next :data:`Decision`. With ``derive_timeout`` it
    derives the enforced per-extend timeout from each response (:func:`extend_timeout`);
    :attr:`attempt_timeout_ms` is the timeout the next attempt must be cut off within."""

    def __init__(self, request_timeout_ms: Millis, derive_timeout: bool = False) -> None:
        self._p = _native.PrimaryPlanner(request_timeout_ms, derive_timeout)

    @property
    def attempt_timeout_ms(self) -> Millis:
        """The enforced timeout of the next extend attempt (the spec's
        ``request_timeout_budget``)."""
        return self._p.attempt_timeout_ms

    def on_success(
        self, received_us: int, remaining_ttl_ms: int, rtt_ms: Millis | None
    ) -> Decision:
        """A schema-valid success carrying ``remaining_ttl_ms``, received at monotonic
        ``received_us``; ``rtt_ms=None`` when its timing is unreliable."""
        return _decision(self._p.on_success(received_us, remaining_ttl_ms, rtt_ms))

    def on_failure(self, now_us: int, failure: Failure) -> Decision:
        """A failed or ambiguous attempt observed at monotonic ``now_us``."""
        f = failure
        return _decision(self._p.on_failure(now_us, f.kind, f.retry_after, f.status, f.code))

    def observe_rtt(self, rtt_ms: Millis) -> None:
        """Records an rtt measured elsewhere, so margins account for it."""
        self._p.observe_rtt(rtt_ms)

    @property
    def max_rtt_ms(self) -> Millis | None:
        """The maximum reliable rtt observed so far."""
        return self._p.max_rtt_ms

    def failure_math(self, now_us: int) -> FailureMath | None:
        """What a failure at ``now_us`` would compute (``None`` before any success)."""
        m = self._p.failure_math(now_us)
        return None if m is None else FailureMath(*m)


class FallbackPlanner:
    """The NON-normative planner for servers that do not send ``remaining_ttl_ms``."""

    def __init__(self, requested_ttl_ms: int, reserve_received_us: int, expires_at_ms: int) -> None:
        self._p = _native.FallbackPlanner(requested_ttl_ms, reserve_received_us, expires_at_ms)

    def first_beat(self, prime: bool = True) -> Decision:
        """The first beat: immediately when ``prime``, else ``min(ttl/2, 30 s)``."""
        return _decision(self._p.first_beat(prime))

    def on_success(self, received_us: int, expires_at_ms: int) -> Decision:
        """An extend success received at ``received_us`` with the new ``expires_at_ms``."""
        return _decision(self._p.on_success(received_us, expires_at_ms))

    def on_failure(self, now_us: int, failure: Failure) -> Decision:
        """A failed attempt at ``now_us``."""
        f = failure
        return _decision(self._p.on_failure(now_us, f.kind, f.retry_after, f.status, f.code))

    @property
    def regime(self) -> str:
        """``unknown``, ``normal``, ``grant_clamped`` or ``max_lead_clamped``."""
        return self._p.regime

    @property
    def last_grant_ms(self) -> int | None:
        """The last measured grant."""
        return self._p.last_grant_ms

    def lead_min_ms(self, now_us: int) -> int:
        """The conservative lower bound of the lead at ``now_us`` (may be negative)."""
        return self._p.lead_min_ms(now_us)
