"""The guarded lifecycle: reserve, heartbeat while the work runs, settle what it cost.

Everything here translates core's two-phase guard (``Guard::begin`` / ``ActiveGuard::finish``
in ``core/src/guard``) and its durable settler (``core/src/settle``) into Python idioms:

- :meth:`cycles.Client.reserve` (and ``stream``): a context manager, ``with`` or
  ``async with``, yielding a :class:`GuardedReservation` (``set_actual`` / ``add``);
- :meth:`cycles.Client.guarded`: a decorator for sync and async functions;
- :func:`current_reservation`: the innermost active reservation of this context
  (a :class:`contextvars.ContextVar`, so threads and asyncio tasks each see their own).

The rules are core's: a body that ends normally with an actual is settled (journal first,
then commit; an expired reservation is recovered through an event); a body that raises after
reporting usage settles that usage and its exception propagates unchanged; a body that raises
before any actual releases the reservation and its exception propagates unchanged; a body
that ends normally WITHOUT an actual (an empty stream too) releases the reservation and raises
:class:`MissingActualError` (``.released`` says whether the release succeeded). No commit and
no event is ever sent without a known actual. :meth:`GuardedReservation.release` ends an
action early, before any usage (docs/lifecycle.md).

Events (heartbeat outcomes, settlement retries and results, journal quarantines) go to the
``cycles`` logger of :mod:`logging` with ``extra`` fields ``reservation_id``,
``event_kind``, ``disposition``, ``error_kind`` and ``cycles_event`` (the whole
:class:`LifecycleEvent`), and to an optional ``on_event`` callback. Both run on one daemon
thread of the client, never on the thread doing the work and never inside the core.
"""

from __future__ import annotations

import atexit
import contextvars
import json
import logging
import os
import threading
import time
import types
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from . import _native, errors
from .errors import BudgetExceededError, CyclesError, InvalidArgumentError, error_class
from .models import Amount, Caps, MetricsLike, StandardMetrics
from .pricing import Api, CapsPlan, _dumps

__all__ = [
    "GuardedReservation",
    "ReservationContext",
    "Settlement",
    "SettlementStatus",
    "PendingSettlement",
    "DrainReport",
    "LeaseInfo",
    "LifecycleEvent",
    "MissingActualError",
    "InvalidActualError",
    "CallNotSentError",
    "HeartbeatLapsedError",
    "NotSettledError",
    "current_reservation",
    "HEARTBEAT_POLICIES",
]

logger = logging.getLogger("cycles")

#: Heartbeat failure policies (core's ``FailurePolicy``): ``warn`` reports and goes on;
#: ``fail_on_finalize`` settles, then raises :class:`HeartbeatLapsedError` on exit;
#: ``cancel`` also sets :attr:`GuardedReservation.cancelled` when the heartbeat stops.
HEARTBEAT_POLICIES = ("warn", "fail_on_finalize", "cancel")


def _exact_json(value: Any, what: str) -> str:
    """``value`` as JSON text, exactly as Python's ``json`` writes it: integers of any size,
    floats as their shortest round-trip ``repr``, unpaired surrogates as ``\\uXXXX`` escapes
    (``ensure_ascii``); core keeps that text as is. NaN and infinities are not JSON."""
    try:
        return json.dumps(value, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError) as e:
        raise InvalidArgumentError(f"{what} is not JSON-serialisable: {e}") from None


class SettlementStatus:
    """The values of :attr:`Settlement.status`."""

    COMMITTED = "committed"
    RECOVERED_VIA_EVENT = "recovered_via_event"
    PENDING = "pending"
    REJECTED = "rejected"


@dataclass(frozen=True)
class Settlement:
    """How a settlement ended (core's ``SettleOutcome``).

    ``status`` is ``committed`` (the commit applied), ``recovered_via_event`` (the
    reservation had expired; the spend was recorded by an event), ``pending`` (not settled
    yet; when ``journaled`` the record stays on disk and the client's background replay,
    :meth:`~cycles.Client.flush` or :meth:`~cycles.Client.drain` retry it with the same
    idempotency key) or ``rejected`` (a genuine terminal rejection; ``error_kind``,
    ``http_status`` and ``error_code`` say why).

    A pending settlement the journal could not take (full disk, read-only or removed
    directory, no file descriptors left) has ``journaled`` false and ``journal_error``
    naming the failed journal operation and its OS error; the client keeps it in memory and
    its replay, ``flush()`` and ``drain()`` journal it again or settle it, but it is lost if
    the process ends first (``DrainReport.unjournaled`` lists it). The failure is also the
    ``journal_io_failed`` event and an error-level ``settlement_pending``.

    :attr:`charged` is the amount applied to the budget whichever path applied it: the
    commit's ``charged``, or after the event fallback the event response's ``charged``
    (present when the server capped the actual) else the event's whole actual. It exists
    exactly when :attr:`settled`; reading it otherwise raises :class:`NotSettledError`, and
    ``charged_or_none`` is the same value or ``None``. ``body`` is the server's response as
    received.
    """

    status: str
    reservation_id: str
    #: :attr:`charged` when settled, else ``None``.
    charged_or_none: Amount | None = None
    reason: str | None = None
    error_kind: str | None = None
    journaled: bool | None = None
    #: Why a pending settlement is not journaled although journaling is on, else ``None``.
    journal_error: str | None = None
    not_before_ms: int | None = None
    http_status: int | None = None
    error_code: str | None = None
    body: dict[str, Any] | None = field(default=None, repr=False)

    @property
    def settled(self) -> bool:
        """True when committed or recovered via event."""
        return self.status in (SettlementStatus.COMMITTED, SettlementStatus.RECOVERED_VIA_EVENT)

    @property
    def pending(self) -> bool:
        """True when not settled yet (kept for replay)."""
        return self.status == SettlementStatus.PENDING

    @property
    def charged(self) -> Amount:
        """The amount applied to the budget (see the class). Raises :class:`NotSettledError`
        when nothing was applied (``pending`` or ``rejected``): check :attr:`settled`, or
        read ``charged_or_none``."""
        if self.charged_or_none is None:
            # A pending settlement may still apply later (replay), a rejected one never will:
            # either way there is no amount to report, and 0 would read as "applied nothing".
            what = (
                "is pending (journaled; the background replay, flush() or drain() retries it)"
                if self.pending
                else f"is {self.status}"
            )
            raise NotSettledError._of(
                f"the settlement of reservation {self.reservation_id} {what}: nothing was "
                "charged (check .settled, or read .charged_or_none)",
                self.reservation_id,
                self.status,
            )
        return self.charged_or_none

    @classmethod
    def _from(cls, reservation_id: str, d: Mapping[str, Any]) -> Settlement:
        body = d.get("body")
        c = d.get("charged")  # core's amount applied, commit or event alike
        charged = Amount(c["unit"], c["amount"]) if isinstance(c, dict) else None
        return cls(
            status=d["status"],
            reservation_id=reservation_id,
            charged_or_none=charged,
            reason=d.get("reason"),
            error_kind=d.get("error_kind"),
            journaled=d.get("journaled"),
            journal_error=d.get("journal_error"),
            not_before_ms=d.get("not_before_ms"),
            http_status=d.get("http_status"),
            error_code=d.get("error_code"),
            body=body if isinstance(body, dict) else None,
        )


@dataclass(frozen=True)
class PendingSettlement:
    """A settlement still in the journal (``mode`` is ``commit`` or ``event``)."""

    reservation_id: str
    mode: str
    recorded_at_ms: int | None
    not_before_ms: int | None
    file: str


@dataclass(frozen=True)
class DrainReport:
    """What :meth:`~cycles.Client.flush`, :meth:`~cycles.Client.drain` or ``close()`` did:
    the last outcome per record worked on, what is still pending (left in the journal) and
    which files were quarantined. ``close()`` of a client whose lifecycle never ran returns
    an empty report: it drained nothing and did not look at the journal.

    ``unjournaled`` lists the reservations still pending that the journal could not take:
    they exist only in this process's memory (see :class:`Settlement`)."""

    outcomes: tuple[Settlement, ...]
    remaining: tuple[PendingSettlement, ...]
    quarantined: tuple[str, ...]
    unjournaled: tuple[str, ...] = ()

    @property
    def settled(self) -> int:
        """Number of settlements applied."""
        return sum(1 for o in self.outcomes if o.settled)

    @property
    def clean(self) -> bool:
        """True when nothing is left pending (journaled or not) and nothing was quarantined.
        A quarantined file is a record that could not be read (or settled) and may hold real
        spend: an operator must look at it (``cycles journal quarantine``)."""
        return not self.remaining and not self.quarantined and not self.unjournaled

    @classmethod
    def _empty(cls) -> DrainReport:
        return cls(outcomes=(), remaining=(), quarantined=())

    @classmethod
    def _from_json(cls, text: str) -> DrainReport:
        d = json.loads(text)
        return cls(
            outcomes=tuple(
                Settlement._from(o["reservation_id"], o["settlement"]) for o in d["outcomes"]
            ),
            remaining=tuple(PendingSettlement(**r) for r in d["remaining"]),
            quarantined=tuple(d["quarantined"]),
            unjournaled=tuple(d["unjournaled"]),
        )


@dataclass(frozen=True)
class LeaseInfo:
    """What the heartbeat did (core's ``LeaseReport``). ``path`` is ``primary`` or
    ``fallback``; ``end`` is ``finished`` (stopped with its work) or ``stopped`` (by the
    planner), and a stop names its ``stop_reason`` (``no_safe_retry_window``, ``permanent``,
    ...) and ``stop_detail`` exactly as the ``heartbeat_failed`` event does (docs/events.md)."""

    extensions: int
    failures: int
    path: str
    stopped_early: bool
    end: str
    last_error: tuple[str, str] | None
    stop_reason: str | None = None
    stop_detail: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class LifecycleEvent:
    """One core event: ``kind`` (``heartbeat_extended``, ``heartbeat_failed``,
    ``heartbeat_lease_too_short``, ``heartbeat_ended``, ``settlement_settled``,
    ``settlement_attempt_failed``, ``settlement_mode_switched``, ``settlement_pending``,
    ``journal_quarantined``, ``journal_io_failed``, ``journal_migrated``, ``caps_applied``;
    the schema is docs/events.md), the ``level`` core logs it at, the reservation, core's
    message, and the variant's other fields in ``fields``."""

    kind: str
    level: str
    reservation_id: str
    message: str
    disposition: str | None
    error_kind: str | None
    fields: dict[str, Any]

    @classmethod
    def _from_json(cls, text: str) -> LifecycleEvent:
        d = json.loads(text)
        return cls(
            kind=d.pop("kind"),
            level=d.pop("level"),
            reservation_id=d.pop("reservation_id"),
            message=d.pop("message"),
            disposition=d.pop("disposition", None),
            error_kind=d.pop("error_kind", None),
            fields=d,
        )


class MissingActualError(CyclesError):
    """The guarded body ended normally without reporting its actual amount (an empty stream
    too). No commit and no event was sent; the reservation was released in the same call
    (``{key}:release``) so its estimate is not held in silence. :attr:`released` is True when
    that release succeeded; when it failed, :attr:`release_error` is its ``(error_kind,
    message)`` and the estimate stays held until the lease expires. The message is core's
    text (the same in every language). A binding-level outcome of core's guard
    (``Finished::MissingActual``), not a server error."""

    _default_code = 5
    _default_name = "MISSING_ACTUAL"
    reservation_id: str | None = None
    #: True when the reservation was released.
    released: bool = False
    #: ``(error_kind, message)`` of the release when it failed, else ``None``.
    release_error: tuple[str, str] | None = None


class InvalidActualError(InvalidArgumentError):
    """The guarded body reported a negative actual amount: nothing was committed and the
    reservation was released (:attr:`released`; :attr:`release_error` when that failed)."""

    _default_code = 2
    _default_name = "INVALID_ARGUMENT"
    reservation_id: str | None = None
    #: True when the reservation was released.
    released: bool = False
    #: ``(error_kind, message)`` of the release when it failed, else ``None``.
    release_error: tuple[str, str] | None = None


class CallNotSentError(BudgetExceededError):
    """A provider call that was not made: under ``ALLOW_WITH_CAPS`` the caps leave no output
    bound the API accepts (a ``caps.max_tokens`` of 0, or below Responses' minimum of 16), so
    the integration did not send it and released the reservation
    (:meth:`GuardedReservation.refuse_call`). :attr:`released` is True when that release
    succeeded; when it failed, :attr:`release_error` is its ``(error_kind, message)``.

    A :class:`~cycles.BudgetExceededError` (``BUDGET_EXCEEDED``, 104, variant
    ``call_not_sent``: the kind and the variant come from the bridge's table, the message is
    core's text, the same in every language): code catching denials catches this too.
    :attr:`plan` is core's caps plan (``send`` False) when the integration had one."""

    reservation_id: str | None = None
    #: True when the reservation was released.
    released: bool = False
    #: ``(error_kind, message)`` of the release when it failed, else ``None``.
    release_error: tuple[str, str] | None = None
    #: Core's plan that said not to send, when there was one.
    plan: CapsPlan | None = None


errors._variant("call_not_sent", CallNotSentError)


class HeartbeatLapsedError(CyclesError):
    """Under ``heartbeat_policy="fail_on_finalize"`` the heartbeat stopped before the work
    ended. The known actual WAS settled: see :attr:`settlement`."""

    _default_code = 6
    _default_name = "HEARTBEAT_LAPSED"
    reservation_id: str | None = None
    settlement: Settlement | None = None
    #: Why the heartbeat stopped: the stop reason's stable name (``no_safe_retry_window``, ...).
    reason: str | None = None


class NotSettledError(InvalidArgumentError):
    """A settlement value that does not exist was read: :attr:`GuardedReservation.settlement`
    of a reservation that has none (still running, released after its body raised before
    reporting usage, or nothing sent), or :attr:`Settlement.charged` of a settlement that
    applied nothing (``pending`` or ``rejected``). A misuse of the API like reporting usage
    after the block, hence an :class:`~cycles.InvalidArgumentError`; nothing is sent.
    ``reservation_id`` names the reservation; ``status`` is the settlement's status, or
    ``None`` when there is no settlement. The ``..._or_none`` twins of both attributes read
    the same values without raising."""

    reservation_id: str | None = None
    status: str | None = None

    @classmethod
    def _of(cls, message: str, reservation_id: str, status: str | None) -> NotSettledError:
        # Set after construction, as the other lifecycle outcomes do: the base class's
        # constructor (and so pickling) keeps its signature.
        e = cls(message)
        e.reservation_id = reservation_id
        e.status = status
        return e


_CURRENT: contextvars.ContextVar[GuardedReservation | None] = contextvars.ContextVar(
    "cycles_current_reservation", default=None
)


def current_reservation() -> GuardedReservation | None:
    """The innermost guarded reservation active in this context (thread or asyncio task),
    or ``None``. Nested guards restore the outer one when they exit.

    A guard entered in one context and exited in another (a generator resumed by another
    task or thread) cannot restore the context it entered; a finished reservation is
    therefore never returned: the innermost unfinished one around it is. Inside such a
    generator, after its first ``yield``, use the handle bound by ``as`` instead."""
    r = _CURRENT.get()
    while r is not None and r.finished:
        r = r._outer
    return r


def _lease(d: Mapping[str, Any] | None) -> LeaseInfo | None:
    if not d:
        return None
    last = d.get("last_error")
    return LeaseInfo(
        extensions=d["extensions"],
        failures=d["failures"],
        path=d["path"],
        stopped_early=d["stopped_early"],
        end=d["end"],
        last_error=None if last is None else (last[0], last[1]),
        stop_reason=d.get("stop_reason"),
        stop_detail=d.get("stop_detail"),
    )


def _int64(amount: int, what: str) -> int:
    """``amount`` when it fits core's signed 64 bits, else InvalidArgumentError (pyo3 would
    raise OverflowError; JSON would carry it as a float)."""
    if not -(2**63) <= amount < 2**63:
        raise InvalidArgumentError(f"{what} must fit in 64 bits, not {amount}")
    return amount


class GuardedReservation:
    """A reservation whose work is running (yielded by ``reserve``/``stream``, and the value
    of :func:`current_reservation`). Report usage with :meth:`set_actual` or :meth:`add`;
    after the block, :attr:`settlement` tells how it was settled. :attr:`decision` and
    :attr:`caps` are the server's answer (honour the caps under ``ALLOW_WITH_CAPS``);
    :meth:`release` ends the action early, before any usage."""

    def __init__(
        self, native: _native.NativeActive, unit: str, outer: GuardedReservation | None = None
    ) -> None:
        self._native = native
        self._unit = unit
        # The reservation current when this one was entered (see current_reservation()).
        self._outer = outer
        #: How the block ended: ``settled``, ``work_failed``, ``missing_actual``,
        #: ``invalid_actual``, ``released`` (:meth:`release`) or ``heartbeat_lapsed``
        #: (``None`` while running).
        self.outcome: str | None = None
        self._released = False
        self._caps: Caps | None = None
        self._caps_read = False
        # The finished report's settlement and lease members, decoded into their objects on
        # first read (most callers never look at them: a guarded call reads neither).
        self._ended: dict[str, Any] | None = None
        # Where the settlement's body comes from when it is first read (core's report of a
        # finished block; a release's text carries its body already).
        self._report: _native.NativeFinished | None = None
        self._settlement: Settlement | None = None
        self._lease: LeaseInfo | None = None
        #: ``(error_kind, message)`` when the release (after a failing body, a missing or
        #: negative actual, or :meth:`release`) failed.
        self.release_error: tuple[str, str] | None = None

    @property
    def reservation_id(self) -> str:
        """The server's reservation id."""
        return self._native.reservation_id

    @property
    def decision(self) -> str:
        """The server's decision: ``ALLOW`` or ``ALLOW_WITH_CAPS`` (then see :attr:`caps`)."""
        return self._native.decision

    @property
    def caps(self) -> Caps | None:
        """The caps the work should honour under ``ALLOW_WITH_CAPS`` (e.g. shrink the model
        call's ``max_tokens`` to ``caps.max_tokens``); ``None`` under ``ALLOW``."""
        if not self._caps_read:
            # Parsed once, on first read: most callers never look at the caps.
            text = self._native.caps_json
            self._caps = None if text is None else Caps._from_json(json.loads(text))
            self._caps_read = True
        return self._caps

    def plan_caps(self, api: Api, request: Mapping[str, Any]) -> CapsPlan:
        """The caps rewrite of a provider request under this action's :attr:`caps` (core's
        ``wire::plan_caps``; docs/integrations.md, "The provider wire formats"): ``api`` is
        ``"chat_completions"``, ``"responses"`` or ``"messages"``, ``request`` the request
        body (or the library call's keyword arguments). Every output-bound field is lowered
        to ``caps.max_tokens`` (a request with none gets the API's first field), tools the
        caps exclude are removed; apply it with :meth:`CapsPlan.apply`. When
        ``plan.send`` is False (a cap of 0) do not make the call (:meth:`release`).

        A rewrite (``plan.changed``) is reported as the ``caps_applied`` event
        (docs/events.md), to ``on_event`` and the ``cycles`` logger. Under plain ``ALLOW``
        the plan changes nothing. Raises :class:`~cycles.InvalidArgumentError` for an
        unknown ``api`` or a bad output bound in the request."""
        return CapsPlan._from_json(
            json.loads(self._native.plan_caps(api, _dumps(dict(request), "the request")))
        )

    @property
    def unit(self) -> str:
        """The unit of the estimate; actual amounts are in it."""
        return self._unit

    @property
    def actual(self) -> int | None:
        """The actual amount reported so far, if any."""
        return self._native.actual()

    @property
    def cancelled(self) -> bool:
        """True once the heartbeat stopped abnormally under the ``cancel`` policy: long work
        should check it and stop."""
        return self._native.cancelled

    @property
    def finished(self) -> bool:
        """True once the block ended."""
        return self._native.finished

    @property
    def settlement(self) -> Settlement:
        """How the reservation was settled. Every block that ends without raising has one
        (``status`` says whether it applied or is pending), as does a block that raised after
        reporting usage. Raises :class:`NotSettledError` when there is none: while the block
        runs, after a release (:attr:`released`), or when nothing was sent (the body raised
        before reporting usage and the release failed, or :class:`MissingActualError`);
        ``settlement_or_none`` reads the same value without raising."""
        s = self.settlement_or_none
        if s is None:
            if self.outcome is None:
                why = "is still running"
            elif self.released:
                why = f"was released (outcome {self.outcome}: nothing to commit)"
            else:
                why = f"ended with outcome {self.outcome} and sent no settlement"
            raise NotSettledError._of(
                f"reservation {self.reservation_id} has no settlement: it {why} "
                "(read .settlement_or_none to get None instead)",
                self.reservation_id,
                None,
            )
        return s

    @property
    def settlement_or_none(self) -> Settlement | None:
        """:attr:`settlement`, or ``None`` when there is none."""
        self._decoded()
        return self._settlement

    @property
    def released(self) -> bool:
        """True once the reservation was released: by :meth:`release`, or on exit when
        nothing could be committed (the body raised before any actual, ended without one, or
        reported a negative one). False while running, when settled, or when the release
        failed (:attr:`release_error`)."""
        return self._released

    def release(self, reason: str | None = None) -> None:
        """Ends the action now and gives its estimate back (``{key}:release`` with
        ``reason``): e.g. an agent that decides not to call the model. The block's exit then
        does nothing more (outcome ``released``; an exception still propagates).

        Raises :class:`~cycles.InvalidArgumentError`, and the action goes on, once usage was
        reported (a release would drop a known actual: end the block normally to commit it)
        or when the action has already ended. When the server's release fails, the action is
        over all the same (:attr:`release_error` is set, the estimate stays held until the
        lease expires) and the error is raised. Blocking; use :meth:`arelease` in async
        code."""
        self._released_with(self._native.release(reason))

    async def arelease(self, reason: str | None = None) -> None:
        """:meth:`release` for ``async`` code (awaits instead of blocking the event loop)."""
        self._released_with(await self._native.release_async(reason))

    def refuse_call(self, why: str | None = None) -> CallNotSentError:
        """Does not make the provider call this action guards, and says so: releases the
        reservation (``{key}:release``, core's reason) and returns the
        :class:`CallNotSentError` to raise (its message is core's text; :attr:`released`
        and :attr:`release_error` say how the release went). ``why`` is your own reason
        (a library that cannot carry the capped bound); without one it is why the latest
        :meth:`plan_caps` said ``send`` False, and :class:`~cycles.InvalidArgumentError` when
        no plan did. Refused like :meth:`release` once usage was reported. Blocking; use
        :meth:`arefuse_call` in async code."""
        return self._refused(self._native.refuse_call(why))

    async def arefuse_call(self, why: str | None = None) -> CallNotSentError:
        """:meth:`refuse_call` for ``async`` code."""
        return self._refused(await self._native.refuse_call_async(why))

    def _refused(self, text: str) -> CallNotSentError:
        self._apply(text, True)
        e = errors._from_native(**json.loads(text)["error"])
        if not isinstance(e, CallNotSentError):  # the bridge's variant has no class: a bug
            raise e
        e.reservation_id = self.reservation_id
        e.released = self._released
        e.release_error = self.release_error
        return e

    def _released_with(self, text: str) -> None:
        self._apply(text, True)
        if self.release_error is not None:
            kind, message = self.release_error
            raise error_class(kind)(message)

    def _amount(self, amount: int | Amount) -> int:
        if isinstance(amount, Amount):
            if amount.unit != self._unit:
                raise InvalidArgumentError(
                    f"actual unit {amount.unit} differs from the estimate's {self._unit}"
                )
            amount = amount.amount
        if isinstance(amount, bool) or not isinstance(amount, int):
            raise InvalidArgumentError("an actual amount must be an int (or an Amount)")
        return _int64(amount, "an actual amount")

    def set_actual(self, amount: int | Amount) -> None:
        """Sets the actual amount (in the estimate's unit), replacing anything before.

        Raises :class:`~cycles.InvalidArgumentError` once the reservation has finished (the
        block ended): the amount would not be settled."""
        self._native.set_actual(self._amount(amount))

    def add(self, amount: int | Amount) -> None:
        """Adds to the actual amount (streaming); the first call starts from zero. Whatever
        is known when the block ends, even by an exception, is settled. Raises
        :class:`~cycles.InvalidArgumentError` once the reservation has finished."""
        self._native.add(self._amount(amount))

    def set_metrics(self, metrics: MetricsLike) -> None:
        """Metrics sent with the commit (and with an event fallback): a
        :class:`~cycles.models.StandardMetrics` or a mapping of its fields."""
        if isinstance(metrics, StandardMetrics):
            m = metrics.to_json()
        elif isinstance(metrics, Mapping):
            m = dict(metrics)
        else:
            raise InvalidArgumentError("metrics must be a StandardMetrics or a mapping")
        self._native.set_metrics(_exact_json(m, "metrics"))

    def set_metadata(self, metadata: Mapping[str, Any]) -> None:
        """Commit-time metadata (a JSON-serialisable mapping). Its numbers reach the journal
        and the wire exactly as Python's ``json`` writes them (integers of any size, ``-0.0``,
        ``0.1``), as do unpaired surrogates (``"\\ud800"``)."""
        if not isinstance(metadata, Mapping):
            raise InvalidArgumentError("metadata must be a mapping")
        self._native.set_metadata(_exact_json(dict(metadata), "metadata"))

    def _decoded(self) -> None:
        """Builds the settlement and lease objects of the finished report, once."""
        d = self._ended
        if d is not None:
            # Cleared last: a reader in another thread decodes again (the same values) or
            # sees both set, never one missing.
            s = d.get("settlement")
            if s is not None and self._report is not None and "body" not in s:
                body = self._report.settlement_body()
                s = s if body is None else {**s, "body": json.loads(body)}
            self._settlement = None if s is None else Settlement._from(d["reservation_id"], s)
            self._lease = _lease(d.get("lease"))
            self._ended = None

    @property
    def lease(self) -> LeaseInfo | None:
        """What the heartbeat did (``None`` while running or when disabled)."""
        self._decoded()
        return self._lease

    def _apply(self, text: str, succeeded: bool) -> None:
        d = json.loads(text)
        rid = d["reservation_id"]
        self.outcome = d["outcome"]
        self._ended = d
        rel = d.get("release_error")
        self.release_error = None if rel is None else (rel["error_kind"], rel["message"])
        self._released = bool(d.get("released", False))
        if not succeeded:
            return  # the body's own exception propagates unchanged
        if self.outcome in ("missing_actual", "invalid_actual"):
            # Core's text (the same in every language), released or not.
            e: MissingActualError | InvalidActualError = (
                MissingActualError(d["message"])
                if self.outcome == "missing_actual"
                else InvalidActualError(d["message"])
            )
            e.reservation_id = rid
            e.released = self._released
            e.release_error = self.release_error
            raise e
        if self.outcome == "heartbeat_lapsed":
            h = HeartbeatLapsedError(d.get("message") or "the heartbeat lapsed")
            h.reservation_id = rid
            h.settlement = self.settlement_or_none
            h.reason = d.get("reason")
            raise h

    def _apply_report(self, report: _native.NativeFinished, succeeded: bool) -> None:
        """:meth:`_apply` of core's report: its head now, its settlement's body when read."""
        self._report = report
        self._apply(report.head(), succeeded)

    def _apply_call(self, report: _native.NativeFinished, succeeded: bool) -> None:
        # A provider call that returned but failed, with nothing reported, ends released:
        # as :meth:`release`, a failed release is raised.
        self._apply_report(report, succeeded)
        if succeeded and self.outcome == "released" and self.release_error is not None:
            kind, message = self.release_error
            raise error_class(kind)(message)

    def __repr__(self) -> str:
        return (
            f"GuardedReservation(reservation_id={self.reservation_id!r}, actual={self.actual!r}, "
            f"outcome={self.outcome!r}, settlement={self.settlement_or_none!r})"
        )


class ReservationContext:
    """What ``reserve``/``stream`` return: use it with ``with`` or ``async with`` (the
    reservation is made on entry, settled or released on exit). Single use."""

    def __init__(self, lifecycle: _Lifecycle, spec: str) -> None:
        self._lc = lifecycle
        self._spec = spec
        self._handle: GuardedReservation | None = None
        self._token: contextvars.Token[GuardedReservation | None] | None = None

    def _enter(self, native: _native.NativeActive) -> GuardedReservation:
        # The unit is the bridge's (the spec's defaults applied), not worked out again here.
        self._handle = GuardedReservation(native, native.unit, current_reservation())
        self._token = _CURRENT.set(self._handle)
        return self._handle

    def _restore(self) -> None:
        """Puts back the reservation that was current on entry. Runs AFTER settlement and
        never raises: a guard exited in another context (an async generator resumed by
        another task, a sync generator stepped on worker threads, each step in a copied
        context) cannot reset its token there (``ContextVar.reset`` raises ``ValueError``).
        That context never saw this guard, so there is nothing to undo in it; the entering
        context keeps a finished value, which :func:`current_reservation` skips."""
        token, self._token = self._token, None
        if token is None:
            return
        try:
            _CURRENT.reset(token)
        except (ValueError, RuntimeError):
            # A context copied from the entering one after entry (a task created inside the
            # block) still holds this guard: point it back at the outer one.
            if _CURRENT.get() is self._handle:
                _CURRENT.set(self._handle._outer if self._handle is not None else None)

    def _started(self) -> GuardedReservation:
        if self._handle is None:
            raise InvalidArgumentError("the reservation context was not entered")
        return self._handle

    def _unsettled(self) -> GuardedReservation | None:
        """The entered reservation, or ``None`` (the context variable put back) when
        ``r.release()`` already ended the action and nothing is left to settle."""
        h = self._started()
        if h.outcome == "released":
            self._restore()
            return None
        return h

    def __enter__(self) -> GuardedReservation:
        if self._handle is not None:
            raise InvalidArgumentError("a reservation context can be entered once")
        return self._enter(self._lc.native.begin(self._spec))

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: types.TracebackType | None,
    ) -> None:
        # Settle first, whatever happens to the context variable (see _restore). Any
        # exception, GeneratorExit and KeyboardInterrupt included, is a failed body: known
        # usage is settled, otherwise the reservation is released.
        h = self._unsettled()
        if h is None:
            return
        ok = exc_type is None
        try:
            report = h._native.finish(ok)
        finally:
            self._restore()
        h._apply_report(report, ok)

    def _end_call(self, call: _native.NativeProviderCall, exc: BaseException | None) -> None:
        """``__exit__`` of an integration's provider call: core's settlement rule on the call's
        meter (the bridge's ``finish_call``: an actual is committed, no actual and a failed
        call releases, no actual and a call that succeeded commits the estimate) in the one
        crossing that ends the action. ``exc`` is the call's exception (``None``: it
        returned); it is not raised here, the caller rethrows it."""
        h = self._unsettled()
        if h is None:
            return
        ok = exc is None
        try:
            report = h._native.finish_call(call, ok)
        except BaseException as e:
            # Refused before the action was taken: end it as any block that raised.
            self.__exit__(type(e), e, e.__traceback__)
            raise
        self._restore()
        h._apply_call(report, ok)

    async def _aend_call(self, call: _native.NativeProviderCall, exc: BaseException | None) -> None:
        """:meth:`_end_call` for ``async`` code."""
        h = self._unsettled()
        if h is None:
            return
        ok = exc is None
        try:
            report = await h._native.finish_call_async(call, ok)
        except BaseException as e:
            await self.__aexit__(type(e), e, e.__traceback__)
            raise
        self._restore()
        h._apply_call(report, ok)

    async def __aenter__(self) -> GuardedReservation:
        if self._handle is not None:
            raise InvalidArgumentError("a reservation context can be entered once")
        return self._enter(await self._lc.native.begin_async(self._spec))

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: types.TracebackType | None,
    ) -> None:
        # As __exit__. If this task is cancelled while awaiting, the settlement still
        # completes on core's runtime (it does not belong to this task).
        h = self._unsettled()
        if h is None:
            return
        ok = exc_type is None
        try:
            report = await h._native.finish_async(ok)
        finally:
            self._restore()
        h._apply_report(report, ok)


_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}

_LIVE: weakref.WeakSet[_Lifecycle] = weakref.WeakSet()

#: After a batch of events, the forwarding thread waits this long before taking the next, so
#: events are delivered at most this much later and in batches instead of one wake-up each.
_EVENT_LINGER_S = 0.01


class _Lifecycle:
    """One client's native lifecycle plus the daemon thread forwarding its events."""

    def __init__(
        self,
        native: _native.NativeLifecycle,
        on_event: Callable[[LifecycleEvent], None] | None,
        close_timeout: float,
    ) -> None:
        self.native = native
        self.on_event = on_event
        self.close_timeout = close_timeout
        self._closed = False
        self._lock = threading.Lock()
        self._floor: str | None = ""
        self._refresh_floor()
        self._thread = threading.Thread(target=self._forward, name="cycles-events", daemon=True)
        self._thread.start()
        _LIVE.add(self)

    def _refresh_floor(self) -> None:
        """Tells core the least level anyone here looks at (every level with ``on_event``,
        else the ``cycles`` logger's): core does not even build the events below it. Logging
        levels can change at any time, so this runs before every wait (200 ms at most)."""
        floor: str | None = None
        if self.on_event is not None:
            floor = "debug"
        else:
            for name, level in _LEVELS.items():  # least severe first
                if logger.isEnabledFor(level):
                    floor = name
                    break
        if floor != self._floor:
            self.native.set_event_floor(floor)
            self._floor = floor

    def _forward(self) -> None:
        while True:
            self._refresh_floor()
            batch = self.native.next_events(200)
            if batch is None:
                return
            for level, text in batch:
                # Parsed only when somebody listens at its level: by default a lifecycle's
                # debug and info events go nowhere, and parsing them cost about a tenth of a
                # sync lifecycle's CPU (docs/benchmarks.md).
                if self.on_event is None and not logger.isEnabledFor(
                    _LEVELS.get(level, logging.INFO)
                ):
                    continue
                self._deliver(LifecycleEvent._from_json(text))
            if batch and not self._closed:
                # Let the next events gather: woken once per event, this thread cost a few
                # context switches (and a GIL hand-over) per guarded call under load.
                time.sleep(_EVENT_LINGER_S)

    def _deliver(self, ev: LifecycleEvent) -> None:
        level = _LEVELS.get(ev.level, logging.INFO)
        if logger.isEnabledFor(level):
            logger.log(
                level,
                ev.message,
                extra={
                    "reservation_id": ev.reservation_id,
                    "event_kind": ev.kind,
                    "disposition": ev.disposition,
                    "error_kind": ev.error_kind,
                    "cycles_event": ev,
                },
            )
        if self.on_event is not None:
            try:
                self.on_event(ev)
            except Exception:
                logger.exception("the on_event callback raised (ignored)")

    def close(self, timeout: float | None = None) -> DrainReport:
        """Stops the replay, drains for at most ``timeout`` seconds, delivers the events.
        Closing again drains nothing: it only reports what is still pending."""
        with self._lock:
            t = self.close_timeout if timeout is None else timeout
            if self._closed:
                t = 0
            report = DrainReport._from_json(self.native.close(max(0, round(t * 1000))))
            self._closed = True
        self._thread.join(timeout=2.0)
        _LIVE.discard(self)
        return report


def _forget_after_fork() -> None:
    # A fork child has none of the parent's threads or runtime; its clients are the parent's.
    _LIVE.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)


@atexit.register
def _close_all_at_exit() -> None:
    """Interpreter exit: every open client's lifecycle drains within its close bound."""
    for lc in list(_LIVE):
        try:
            lc.close()
        except Exception:  # pragma: no cover - best effort at exit
            logger.exception("draining the settlement journal at exit failed")
