"""``Client`` (blocking) and ``AsyncClient`` (asyncio) for the Cycles runtime plane.

Both are thin: each method performs exactly ONE HTTP attempt in the Rust core
(``cycles-core``), which validates the response against the protocol's schema-valid success
predicate and classifies every failure into :mod:`cycles.errors`. Retries are the caller's
(or, later, the lifecycle layer's) business: retry a retryable error with the SAME
idempotency key.

The blocking client releases the GIL while it waits, so other Python threads keep running.
The async client's awaitables are completed from the core's one tokio runtime.
"""

from __future__ import annotations

import functools
import inspect
import json
import math
import os
import threading
from typing import (
    Any,
    Awaitable,
    Callable,
    Mapping,
    ParamSpec,
    Sequence,
    TypeVar,
    Union,
    cast,
    overload,
)

from . import _native
from ._model_base import _encode, _Model
from .errors import InvalidArgumentError
from .lifecycle import (
    HEARTBEAT_POLICIES,
    DrainReport,
    GuardedReservation,
    LifecycleEvent,
    ReservationContext,
    _int64,
    _Lifecycle,
)
from .models import (
    Action,
    ActionLike,
    Amount,
    AmountLike,
    BalancesResult,
    CommitResult,
    DecisionResult,
    EventResult,
    EvidenceEnvelope,
    EvidenceJwks,
    ExtendResult,
    MetricsLike,
    ReleaseResult,
    Reservation,
    ReservationCreated,
    ReservationPage,
    ResponseMeta,
    StandardMetrics,
    Subject,
    SubjectLike,
)

__all__ = ["Client", "AsyncClient"]

R = TypeVar("R", bound=_Model)
P = ParamSpec("P")
T = TypeVar("T")

#: An estimate: an ``Amount`` (or a mapping of one), or an ``int`` in the reservation's unit.
EstimateLike = Union[AmountLike, int]
#: ``actual=`` of :meth:`Client.guarded`: a fixed amount, or a function of the call's result
#: (for an ``async`` function, of the awaited result); ``None``: the function reports it.
ActualLike = Union[int, Amount, Callable[[Any], Union[int, Amount]], None]

# Call arguments in seconds (drain and close bounds) cross as unsigned 64-bit milliseconds:
# anything beyond is refused here with a typed error (pyo3 would raise OverflowError). The
# client options are the bridge's to check (_options_json).
_U64_MAX = 2**64 - 1


def _seconds(seconds: float, name: str, *, zero_ok: bool) -> float:
    """A finite number of seconds whose milliseconds the native layer can hold."""
    if (
        isinstance(seconds, bool)
        or not isinstance(seconds, (int, float))
        or not math.isfinite(seconds)
        or seconds < 0
        or (seconds == 0 and not zero_ok)
    ):
        what = (
            "a finite number of seconds, 0 or more"
            if zero_ok
            else "a positive, finite number of seconds"
        )
        raise InvalidArgumentError(f"{name} must be {what}")
    if round(seconds * 1000) > _U64_MAX:
        raise InvalidArgumentError(f"{name} is too large ({seconds} s)")
    return seconds


def _options_json(options: Mapping[str, Any]) -> str:
    """The client options as the bridge's JSON (Python's names, seconds): the bridge checks
    every one against its single table and names a bad one as written here
    (``request_timeout must be a finite number of seconds above 0, not -1``). ``None`` is
    left out (the default); a path goes as its text; a float JSON cannot carry (``inf``,
    ``nan``) as its text, so it is refused by name rather than lost."""
    out: dict[str, Any] = {}
    for name, value in options.items():
        if value is None:
            continue
        if isinstance(value, os.PathLike):
            value = os.fspath(value)
        elif isinstance(value, float) and not math.isfinite(value):
            value = str(value)
        out[name] = value
    try:
        return json.dumps(out, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise InvalidArgumentError(f"the client options are not JSON: {e}") from None


def _ms(seconds: float | None, name: str) -> int | None:
    if seconds is None:
        return None
    return max(1, round(_seconds(seconds, name, zero_ok=False) * 1000))


def _close_seconds(seconds: float, name: str) -> float:
    """A close's drain bound: 0 for no drain."""
    return float(_seconds(seconds, name, zero_ok=True))


def _part(value: Any, cls: type, what: str) -> Any:
    if isinstance(value, cls):
        return value.to_json()  # type: ignore[attr-defined]
    if isinstance(value, Mapping):
        return _encode(dict(value))
    article = "an" if cls.__name__[0] in "AEIOU" else "a"
    raise InvalidArgumentError(f"{what} must be {article} {cls.__name__} or a mapping")


def _clean(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


def _check_policy(heartbeat_policy: str) -> None:
    if heartbeat_policy not in HEARTBEAT_POLICIES:
        raise InvalidArgumentError(f"heartbeat_policy must be one of {HEARTBEAT_POLICIES}")


def _estimate(estimate: Any) -> int | dict[str, Any]:
    """A guard spec's estimate: an Amount (or a mapping of one) as its wire object, or a bare
    int as is. The bridge gives a bare int its unit (the spec's ``unit``, else the client's
    default unit, else USD_MICROCENTS) and checks ``unit`` against an Amount's: one rule for
    every language, so nothing of it is repeated here."""
    if isinstance(estimate, bool) or not isinstance(estimate, (int, Amount, Mapping)):
        raise InvalidArgumentError("estimate must be an Amount, a mapping or an int")
    if isinstance(estimate, int):
        return _int64(estimate, "estimate")
    est: dict[str, Any] = _part(estimate, Amount, "estimate")
    return est


def _per_call(value: Any, name: str, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    """``value``, or what it returns for the call's arguments when it is a function."""
    if not callable(value):
        return value
    out = value(*args, **kw)
    if inspect.isawaitable(out):
        if inspect.iscoroutine(out):
            out.close()  # never awaited: close it instead of leaving a warning behind
        raise InvalidArgumentError(
            f"the {name} function of guarded() returned an awaitable: it must return the "
            f"{name} itself (it runs before the reservation is made, synchronously)"
        )
    return out


# One encoder for every request: ``json.dumps`` with options builds a new one per call.
_ENCODER = json.JSONEncoder(allow_nan=False, separators=(",", ":"))


def _dumps(args: Mapping[str, Any]) -> str:
    try:
        return _ENCODER.encode(args)
    except (TypeError, ValueError) as e:
        raise InvalidArgumentError(f"arguments are not JSON-serialisable: {e}") from None


def _result(cls: type[R], out: tuple[int, str | None, str | None, int, str]) -> R:
    status, request_id, trace_id, rtt_us, body = out
    meta = ResponseMeta(status, request_id, trace_id, rtt_us)
    return cls._from_json(json.loads(body), meta)


class _Requests:
    """Builds the (operation, JSON arguments) pairs shared by both clients."""

    _native: _native.NativeClient

    def _subject(self, subject: SubjectLike | None) -> Any:
        # None: left out, and the bridge makes it the client's tenant (the same rule and
        # error text in every language, raw operations and guarded ones alike).
        return None if subject is None else _part(subject, Subject, "subject")

    def _create(
        self,
        idempotency_key: str,
        subject: SubjectLike | None,
        action: ActionLike,
        estimate: AmountLike,
        ttl_ms: int | None,
        grace_period_ms: int | None,
        overage_policy: str | None,
        dry_run: bool | None,
        metadata: Mapping[str, Any] | None,
    ) -> str:
        return _dumps(
            _clean(
                {
                    "idempotency_key": idempotency_key,
                    "subject": self._subject(subject),
                    "action": _part(action, Action, "action"),
                    "estimate": _part(estimate, Amount, "estimate"),
                    "ttl_ms": ttl_ms,
                    "grace_period_ms": grace_period_ms,
                    "overage_policy": overage_policy,
                    "dry_run": dry_run,
                    "metadata": None if metadata is None else dict(metadata),
                }
            )
        )

    @staticmethod
    def _metrics(metrics: MetricsLike | None) -> Any:
        return None if metrics is None else _part(metrics, StandardMetrics, "metrics")

    def _commit(
        self,
        reservation_id: str,
        idempotency_key: str,
        actual: AmountLike,
        metrics: MetricsLike | None,
        metadata: Mapping[str, Any] | None,
    ) -> str:
        req = _clean(
            {
                "idempotency_key": idempotency_key,
                "actual": _part(actual, Amount, "actual"),
                "metrics": self._metrics(metrics),
                "metadata": None if metadata is None else dict(metadata),
            }
        )
        return _dumps({"reservation_id": reservation_id, "request": req})

    @staticmethod
    def _release(reservation_id: str, idempotency_key: str, reason: str | None) -> str:
        req = _clean({"idempotency_key": idempotency_key, "reason": reason})
        return _dumps({"reservation_id": reservation_id, "request": req})

    @staticmethod
    def _extend(
        reservation_id: str,
        idempotency_key: str,
        extend_by_ms: int,
        metadata: Mapping[str, Any] | None,
    ) -> str:
        req = _clean(
            {
                "idempotency_key": idempotency_key,
                "extend_by_ms": extend_by_ms,
                "metadata": None if metadata is None else dict(metadata),
            }
        )
        return _dumps({"reservation_id": reservation_id, "request": req})

    def _decide(
        self,
        idempotency_key: str,
        subject: SubjectLike | None,
        action: ActionLike,
        estimate: AmountLike,
        metadata: Mapping[str, Any] | None,
    ) -> str:
        return _dumps(
            _clean(
                {
                    "idempotency_key": idempotency_key,
                    "subject": self._subject(subject),
                    "action": _part(action, Action, "action"),
                    "estimate": _part(estimate, Amount, "estimate"),
                    "metadata": None if metadata is None else dict(metadata),
                }
            )
        )

    def _event(
        self,
        idempotency_key: str,
        subject: SubjectLike | None,
        action: ActionLike,
        actual: AmountLike,
        overage_policy: str | None,
        metrics: MetricsLike | None,
        client_time_ms: int | None,
        metadata: Mapping[str, Any] | None,
    ) -> str:
        return _dumps(
            _clean(
                {
                    "idempotency_key": idempotency_key,
                    "subject": self._subject(subject),
                    "action": _part(action, Action, "action"),
                    "actual": _part(actual, Amount, "actual"),
                    "overage_policy": overage_policy,
                    "metrics": self._metrics(metrics),
                    "client_time_ms": client_time_ms,
                    "metadata": None if metadata is None else dict(metadata),
                }
            )
        )

    @staticmethod
    def _query(**kw: Any) -> str:
        include = kw.get("include")
        if isinstance(include, str):
            kw["include"] = [include]
        elif include is not None:
            kw["include"] = list(include)
        return _dumps(_clean(kw))


class _Base(_Requests):
    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        tenant: str | None = None,
        request_timeout: float | None = None,
        connect_timeout: float | None = None,
        journal_dir: str | os.PathLike[str] | None = None,
        journal_enabled: bool | None = None,
        on_event: Callable[[LifecycleEvent], None] | None = None,
        close_timeout: float | None = None,
        settle_max_attempts: int | None = None,
        replay_interval: float | None = None,
        max_concurrent_requests: int | None = None,
        default_unit: str | None = None,
        max_response_bytes: int | None = None,
    ) -> None:
        options = {
            "base_url": base_url,
            "api_key": api_key,
            "tenant": tenant,
            "default_unit": default_unit,
            "request_timeout": request_timeout,
            "connect_timeout": connect_timeout,
            "journal_dir": journal_dir,
            "journal_enabled": journal_enabled,
            "max_concurrent_requests": max_concurrent_requests,
            "max_response_bytes": max_response_bytes,
            "settle_max_attempts": settle_max_attempts,
            "replay_interval": replay_interval,
            "close_timeout": close_timeout,
        }
        self._native = _native.NativeClient(_options_json(options))
        self._lc_settings(on_event)

    def _lc_settings(self, on_event: Callable[[LifecycleEvent], None] | None) -> None:
        if on_event is not None and not callable(on_event):
            raise InvalidArgumentError(f"on_event must be a function, not {on_event!r}")
        self._on_event = on_event
        # The bridge's (close_timeout, else its default): seconds, as this package speaks.
        self._close_timeout = self._native.close_timeout_ms / 1000
        self._lc: _Lifecycle | None = None
        self._lc_lock = threading.Lock()

    @classmethod
    def _from_env(
        cls, options: dict[str, Any], on_event: Callable[[LifecycleEvent], None] | None
    ) -> Any:
        self = cls._wrap(_native.NativeClient(_options_json(options), from_env=True))
        self._lc_settings(on_event)
        return self

    def _lifecycle(self) -> _Lifecycle:
        """The guarded lifecycle, created on first use (the background replay starts then)."""
        lc = self._lc
        if lc is not None:  # set once, never unset: no lock on the per-call path
            return lc
        with self._lc_lock:
            if self._lc is None:
                native = self._native.lifecycle()
                self._lc = _Lifecycle(native, self._on_event, self._close_timeout)
            return self._lc

    def _close_lifecycle(self, timeout: float | None) -> DrainReport:
        if timeout is not None:
            timeout = _close_seconds(timeout, "timeout")
        with self._lc_lock:
            lc = self._lc
        # Never used: no replay ran and nothing of this client's is journaled; starting a
        # lifecycle now only to report would scan (and replay) other processes' records.
        return DrainReport._empty() if lc is None else lc.close(timeout)

    @property
    def journal_dir(self) -> str:
        """The settlement journal directory (``journal_dir=`` or ``CYCLES_JOURNAL_DIR``;
        default ``~/.runcycles/commit-journal``)."""
        return os.fspath(self._native.journal_dir)

    @property
    def journal_enabled(self) -> bool:
        """Whether settlements are journaled to disk before they are sent."""
        return self._native.journal_enabled

    def reserve(
        self,
        estimate: AmountLike | int,
        *,
        action: ActionLike,
        unit: str | None = None,
        subject: SubjectLike | None = None,
        idempotency_key: str | None = None,
        ttl_ms: int | None = None,
        grace_period_ms: int | None = None,
        overage_policy: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        heartbeat: bool = True,
        heartbeat_policy: str = "warn",
    ) -> ReservationContext:
        """A guarded reservation as a context manager (``with`` or ``async with``).

        On entry: reserves ``estimate`` (an :class:`~cycles.models.Amount`, or an ``int``
        in ``unit``, else the client's :attr:`default_unit`, else ``USD_MICROCENTS``) for
        ``subject`` (default: the client's tenant) and starts the heartbeat, which extends the
        lease by ``ttl_ms`` (default 60 s) while the block runs. The block reports what it
        cost through the yielded :class:`~cycles.lifecycle.GuardedReservation`
        (``set_actual`` / ``add``). On exit the known actual is settled (journaled first;
        committed with the idempotency key ``{key}:commit``), a body that raised before any
        actual releases the reservation (``{key}:release``), and a body that ended without
        an actual releases it too and raises :class:`~cycles.lifecycle.MissingActualError`
        (no commit, no event). The body's own exceptions propagate unchanged.
        ``idempotency_key`` defaults to a fresh ``cycles-<uuid>``. ``heartbeat_policy``:
        ``warn``, ``fail_on_finalize`` or ``cancel``. The defaults are the bridge's (one rule
        for every language): only what is given here is sent to it.
        """
        _check_policy(heartbeat_policy)
        est = _estimate(estimate)
        spec = _dumps(
            _clean(
                {
                    "idempotency_key": idempotency_key,
                    "subject": None if subject is None else _part(subject, Subject, "subject"),
                    "action": _part(action, Action, "action"),
                    "estimate": est,
                    "unit": unit,
                    "ttl_ms": ttl_ms,
                    "grace_period_ms": grace_period_ms,
                    "overage_policy": overage_policy,
                    "metadata": None if metadata is None else dict(metadata),
                    "heartbeat": heartbeat,
                    "policy": heartbeat_policy,
                }
            )
        )
        return ReservationContext(self._lifecycle(), spec)

    def stream(self, estimate: AmountLike | int, **kwargs: Any) -> ReservationContext:
        """:meth:`reserve` for streamed work: call ``r.add(n)`` as usage arrives; whatever
        was added when the block ends (even by an exception) is settled."""
        return self.reserve(estimate, **kwargs)

    @overload
    def guarded(
        self,
        estimate: EstimateLike,
        *,
        action: ActionLike,
        subject: SubjectLike | None = None,
        actual: ActualLike = None,
        unit: str | None = None,
        idempotency_key: str | None = None,
        ttl_ms: int | None = None,
        grace_period_ms: int | None = None,
        overage_policy: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        heartbeat: bool = True,
        heartbeat_policy: str = "warn",
    ) -> Callable[[Callable[P, T]], Callable[P, T]]: ...

    @overload
    def guarded(
        self,
        estimate: EstimateLike | Callable[P, EstimateLike],
        *,
        action: ActionLike | Callable[P, ActionLike],
        subject: SubjectLike | Callable[P, SubjectLike] | None = None,
        actual: ActualLike = None,
        unit: str | None = None,
        idempotency_key: str | None = None,
        ttl_ms: int | None = None,
        grace_period_ms: int | None = None,
        overage_policy: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        heartbeat: bool = True,
        heartbeat_policy: str = "warn",
    ) -> Callable[[Callable[P, T]], Callable[P, T]]: ...

    def guarded(
        self,
        estimate: Any,
        *,
        action: Any,
        subject: Any = None,
        actual: ActualLike = None,
        unit: str | None = None,
        idempotency_key: str | None = None,
        ttl_ms: int | None = None,
        grace_period_ms: int | None = None,
        overage_policy: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        heartbeat: bool = True,
        heartbeat_policy: str = "warn",
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """A decorator guarding every call of a sync or ``async`` function with
        :meth:`reserve` (same keyword arguments).

        ``estimate``, ``action`` and ``subject`` are each a value or a function of the
        decorated call's arguments: it is called with exactly the arguments of each call
        (``self`` first for a method) before anything is reserved, so the reservation can
        depend on the request, e.g. ``estimate=lambda prompt, max_tokens: max_tokens * 30``.
        These functions are plain (not ``async``) even for an ``async`` function; one that
        raises propagates unchanged and nothing is reserved. Under mypy they must accept the
        decorated function's parameters (same names: keyword calls pass them by name); the
        decorated function then keeps the functions' parameter types, so give a ``def`` with
        annotations, not a ``lambda``, where the parameter types matter.

        ``actual`` is the amount to settle when the call returns: an ``int`` (or ``Amount``),
        or a function of the call's result (of the awaited result for an ``async``
        function); with ``actual=None`` the function reports it itself through
        ``cycles.current_reservation().set_actual(...)``. A call that raises is settled or
        released as :meth:`reserve` describes, and its exception propagates unchanged.

        Values are checked when ``guarded`` is called (a bad estimate, action, subject,
        ``actual`` or ``heartbeat_policy`` raises :class:`~cycles.errors.InvalidArgumentError`
        there); what the functions return is checked on each call.
        """
        _check_policy(heartbeat_policy)
        if not callable(estimate):
            _estimate(estimate)
        if not callable(action):
            _part(action, Action, "action")
        if subject is None:
            # No tenant to default to: refused now, with the error each call would raise.
            self._native.default_subject()
        elif not callable(subject):
            self._subject(subject)
        if actual is not None and not callable(actual):
            if isinstance(actual, bool) or not isinstance(actual, (int, Amount)):
                raise InvalidArgumentError(
                    "actual must be an int, an Amount, a function of the result or None"
                )
        options: dict[str, Any] = {
            "unit": unit,
            "idempotency_key": idempotency_key,
            "ttl_ms": ttl_ms,
            "grace_period_ms": grace_period_ms,
            "overage_policy": overage_policy,
            "metadata": metadata,
            "heartbeat": heartbeat,
            "heartbeat_policy": heartbeat_policy,
        }

        def context(args: tuple[Any, ...], kw: dict[str, Any]) -> ReservationContext:
            return self.reserve(
                _per_call(estimate, "estimate", args, kw),
                action=_per_call(action, "action", args, kw),
                subject=_per_call(subject, "subject", args, kw),
                **options,
            )

        def settle_actual(r: GuardedReservation, result: Any) -> None:
            if actual is None:
                return
            r.set_actual(actual(result) if callable(actual) else actual)

        def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
            if inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn):
                # Calling one only creates the generator: the guard would end before any of
                # its work ran. Its body should use ``with client.stream(...) as r`` instead.
                raise InvalidArgumentError(
                    f"guarded() cannot wrap the generator function {fn.__qualname__}: use "
                    "`with client.stream(...) as r:` (or `async with`) inside it"
                )
            if inspect.iscoroutinefunction(fn):

                @functools.wraps(fn)
                async def async_wrapper(*args: Any, **kw: Any) -> Any:
                    async with context(args, kw) as r:
                        result = await cast(Callable[..., Awaitable[Any]], fn)(*args, **kw)
                        settle_actual(r, result)
                    return result

                return async_wrapper

            @functools.wraps(fn)
            def wrapper(*args: Any, **kw: Any) -> Any:
                with context(args, kw) as r:
                    result = fn(*args, **kw)
                    settle_actual(r, result)
                return result

            return wrapper

        return decorate

    @classmethod
    def _wrap(cls, native: _native.NativeClient) -> Any:
        self = cls.__new__(cls)
        self._native = native
        return self

    @property
    def base_url(self) -> str:
        """Server root (without ``/v1``)."""
        return self._native.base_url

    @property
    def tenant(self) -> str | None:
        """Default tenant (used when an operation gets no ``subject``)."""
        return self._native.tenant

    @property
    def default_unit(self) -> str | None:
        """The unit of a bare ``int`` estimate (``default_unit=`` or ``CYCLES_UNIT``);
        ``None``: ``USD_MICROCENTS``."""
        return self._native.default_unit

    @property
    def request_timeout(self) -> float:
        """Per-attempt request timeout in seconds."""
        return self._native.request_timeout_ms / 1000.0

    @property
    def request_timeout_ms(self) -> int:
        """Per-attempt request timeout in milliseconds (the heartbeat's attempt budget)."""
        return self._native.request_timeout_ms

    @property
    def closed(self) -> bool:
        """True once :meth:`close` was called."""
        return self._native.closed

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(base_url={self.base_url!r}, tenant={self.tenant!r}, "
            f"closed={self.closed})"
        )


class Client(_Base):
    """Blocking client. Use as a context manager, or call :meth:`close`.

    ``Client(base_url, api_key, tenant=..., request_timeout=10.0, connect_timeout=5.0)``
    (timeouts in seconds), or :meth:`from_env` for the ``CYCLES_*`` variables.
    ``max_concurrent_requests`` (default 256, ``CYCLES_MAX_CONCURRENT_REQUESTS``) bounds the
    requests (and so connections) in flight at once; more wait for a slot within their
    request timeout. ``max_response_bytes`` (default 1 MiB, ``CYCLES_MAX_RESPONSE_BYTES``) bounds
    one response body: a longer one is not read further, and the call fails as a response that
    is not the operation's (``AmbiguousSuccessError`` for a write: a settlement stays journaled
    and is retried). ``default_unit`` (e.g. ``"TOKENS"``; ``CYCLES_UNIT`` for
    :meth:`from_env`) is the unit of a bare ``int`` estimate, else ``USD_MICROCENTS``; an
    unknown unit raises :class:`~cycles.errors.ConfigError`.
    """

    @classmethod
    def from_env(
        cls,
        *,
        journal_dir: str | os.PathLike[str] | None = None,
        journal_enabled: bool | None = None,
        on_event: Callable[[LifecycleEvent], None] | None = None,
        close_timeout: float | None = None,
        settle_max_attempts: int | None = None,
        replay_interval: float | None = None,
    ) -> Client:
        """A client from ``CYCLES_BASE_URL``, ``CYCLES_API_KEY`` (required),
        ``CYCLES_TENANT``, ``CYCLES_REQUEST_TIMEOUT_MS``, ``CYCLES_CONNECT_TIMEOUT_MS``,
        ``CYCLES_JOURNAL_DIR``, ``CYCLES_JOURNAL_ENABLED`` (arguments win) and ``CYCLES_UNIT``
        (the default unit of a bare estimate; an unknown one is a ConfigError)."""
        options = {
            "journal_dir": journal_dir,
            "journal_enabled": journal_enabled,
            "settle_max_attempts": settle_max_attempts,
            "replay_interval": replay_interval,
            "close_timeout": close_timeout,
        }
        return cls._from_env(options, on_event)  # type: ignore[no-any-return]

    def close(self, timeout: float | None = None) -> DrainReport:
        """Closes the client: stops the background replay, settles pending settlements for at
        most ``timeout`` seconds (default: the client's ``close_timeout``, 5 s), delivers the
        last events, then later calls raise :class:`~cycles.errors.ClientClosedError`.

        Returns what the drain did, always: a client whose guarded lifecycle never ran
        (no ``reserve``, ``stream``, ``guarded`` call, ``flush`` or ``drain``) drained
        nothing and returns an empty report. Idempotent: closing again drains nothing and
        reports what is still pending (still empty for a never-used lifecycle); what is
        pending stays journaled for the next process."""
        report = self._close_lifecycle(timeout)
        self._native.close()
        return report

    def flush(self) -> DrainReport:
        """Replays every pending settlement of this client's server once, now."""
        return DrainReport._from_json(self._lifecycle().native.flush())

    def drain(self, timeout: float) -> DrainReport:
        """Replays pending settlements until none is left or ``timeout`` seconds passed."""
        ms = _ms(timeout, "timeout")
        assert ms is not None
        return DrainReport._from_json(self._lifecycle().native.drain(ms))

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, cls: type[R], op: str, args: str) -> R:
        return _result(cls, self._native.call(op, args))

    def create_reservation(
        self,
        *,
        idempotency_key: str,
        action: ActionLike,
        estimate: AmountLike,
        subject: SubjectLike | None = None,
        ttl_ms: int | None = None,
        grace_period_ms: int | None = None,
        overage_policy: str | None = None,
        dry_run: bool | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> ReservationCreated:
        """``POST /v1/reservations``: reserve ``estimate`` for ``action``."""
        args = self._create(
            idempotency_key, subject, action, estimate, ttl_ms, grace_period_ms,
            overage_policy, dry_run, metadata,
        )  # fmt: skip
        return self._call(ReservationCreated, "create_reservation", args)

    def commit_reservation(
        self,
        reservation_id: str,
        *,
        idempotency_key: str,
        actual: AmountLike,
        metrics: MetricsLike | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> CommitResult:
        """``POST /v1/reservations/{id}/commit``: settle the actual amount."""
        args = self._commit(reservation_id, idempotency_key, actual, metrics, metadata)
        return self._call(CommitResult, "commit_reservation", args)

    def release_reservation(
        self, reservation_id: str, *, idempotency_key: str, reason: str | None = None
    ) -> ReleaseResult:
        """``POST /v1/reservations/{id}/release``: return the reserved amount."""
        args = self._release(reservation_id, idempotency_key, reason)
        return self._call(ReleaseResult, "release_reservation", args)

    def extend_reservation(
        self,
        reservation_id: str,
        *,
        idempotency_key: str,
        extend_by_ms: int,
        metadata: Mapping[str, Any] | None = None,
    ) -> ExtendResult:
        """``POST /v1/reservations/{id}/extend``: one lease extension."""
        args = self._extend(reservation_id, idempotency_key, extend_by_ms, metadata)
        return self._call(ExtendResult, "extend_reservation", args)

    def decide(
        self,
        *,
        idempotency_key: str,
        action: ActionLike,
        estimate: AmountLike,
        subject: SubjectLike | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> DecisionResult:
        """``POST /v1/decide``: a budget decision that persists nothing."""
        args = self._decide(idempotency_key, subject, action, estimate, metadata)
        return self._call(DecisionResult, "decide", args)

    def create_event(
        self,
        *,
        idempotency_key: str,
        action: ActionLike,
        actual: AmountLike,
        subject: SubjectLike | None = None,
        overage_policy: str | None = None,
        metrics: MetricsLike | None = None,
        client_time_ms: int | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> EventResult:
        """``POST /v1/events``: post-only accounting without a reservation."""
        args = self._event(
            idempotency_key, subject, action, actual, overage_policy, metrics,
            client_time_ms, metadata,
        )  # fmt: skip
        return self._call(EventResult, "create_event", args)

    def get_balances(
        self,
        *,
        tenant: str | None = None,
        workspace: str | None = None,
        app: str | None = None,
        workflow: str | None = None,
        agent: str | None = None,
        toolset: str | None = None,
        include_children: bool | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> BalancesResult:
        """``GET /v1/balances`` (one page; at least one subject filter)."""
        args = self._query(
            tenant=tenant, workspace=workspace, app=app, workflow=workflow, agent=agent,
            toolset=toolset, include_children=include_children, limit=limit, cursor=cursor,
        )  # fmt: skip
        return self._call(BalancesResult, "get_balances", args)

    def list_reservations(
        self,
        *,
        idempotency_key: str | None = None,
        status: str | None = None,
        tenant: str | None = None,
        workspace: str | None = None,
        app: str | None = None,
        workflow: str | None = None,
        agent: str | None = None,
        toolset: str | None = None,
        sort_by: str | None = None,
        sort_dir: str | None = None,
        include: Sequence[str] | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> ReservationPage:
        """``GET /v1/reservations`` (one page)."""
        args = self._query(
            idempotency_key=idempotency_key, status=status, tenant=tenant,
            workspace=workspace, app=app, workflow=workflow, agent=agent, toolset=toolset,
            sort_by=sort_by, sort_dir=sort_dir, include=include, limit=limit, cursor=cursor,
        )  # fmt: skip
        return self._call(ReservationPage, "list_reservations", args)

    def list_all_reservations(
        self,
        *,
        max_pages: int = 100,
        idempotency_key: str | None = None,
        status: str | None = None,
        tenant: str | None = None,
        workspace: str | None = None,
        app: str | None = None,
        workflow: str | None = None,
        agent: str | None = None,
        toolset: str | None = None,
        sort_by: str | None = None,
        sort_dir: str | None = None,
        include: Sequence[str] | None = None,
        limit: int | None = None,
    ) -> list[Reservation]:
        """Every row, following ``next_cursor`` for at most ``max_pages`` pages."""
        args = self._query(
            max_pages=max_pages, idempotency_key=idempotency_key, status=status,
            tenant=tenant, workspace=workspace, app=app, workflow=workflow, agent=agent,
            toolset=toolset, sort_by=sort_by, sort_dir=sort_dir, include=include, limit=limit,
        )  # fmt: skip
        out = self._native.call("list_reservations_all", args)
        return [Reservation._from_json(r) for r in json.loads(out[4])]

    def get_reservation(self, reservation_id: str) -> Reservation:
        """``GET /v1/reservations/{id}``."""
        args = _dumps({"reservation_id": reservation_id})
        return self._call(Reservation, "get_reservation", args)

    def get_evidence(self, evidence_id: str) -> EvidenceEnvelope:
        """``GET /v1/evidence/{id}`` (public; sent without the API key)."""
        args = _dumps({"evidence_id": evidence_id})
        return self._call(EvidenceEnvelope, "get_evidence", args)

    def get_evidence_jwks(self) -> EvidenceJwks:
        """``GET /v1/.well-known/cycles-jwks.json`` (public)."""
        return self._call(EvidenceJwks, "get_evidence_jwks", "{}")


class AsyncClient(_Base):
    """asyncio client: the same operations as :class:`Client`, as coroutines.

    Use ``async with AsyncClient(...) as client:``, or call :meth:`aclose`. Takes the
    same arguments as :class:`Client` (``default_unit`` included).
    """

    @classmethod
    def from_env(
        cls,
        *,
        journal_dir: str | os.PathLike[str] | None = None,
        journal_enabled: bool | None = None,
        on_event: Callable[[LifecycleEvent], None] | None = None,
        close_timeout: float | None = None,
        settle_max_attempts: int | None = None,
        replay_interval: float | None = None,
    ) -> AsyncClient:
        """A client from the ``CYCLES_*`` variables (see :meth:`Client.from_env`)."""
        options = {
            "journal_dir": journal_dir,
            "journal_enabled": journal_enabled,
            "settle_max_attempts": settle_max_attempts,
            "replay_interval": replay_interval,
            "close_timeout": close_timeout,
        }
        return cls._from_env(options, on_event)  # type: ignore[no-any-return]

    def close(self, timeout: float | None = None) -> DrainReport:
        """Closes the client synchronously, draining as :meth:`Client.close` does (and
        returning its report, always)."""
        report = self._close_lifecycle(timeout)
        self._native.close()
        return report

    async def aclose(self, timeout: float | None = None) -> DrainReport:
        """Closes the client: drains pending settlements for at most ``timeout`` seconds
        (default ``close_timeout``) without blocking the event loop, then closes. Returns the
        drain report as :meth:`Client.close` does, always: what the drain settled, what is
        still pending, what was quarantined (empty when the lifecycle never ran)."""
        if timeout is not None:
            timeout = _close_seconds(timeout, "timeout")
        lc = self._lc
        drained: DrainReport | None = None
        if lc is not None:
            t = lc.close_timeout if timeout is None else timeout
            ms = round(t * 1000)
            if ms > 0 and not lc.native.closed:
                drained = DrainReport._from_json(await lc.native.drain_async(ms))
        report = self._close_lifecycle(0)
        self._native.close()
        if drained is None:
            return report
        # The drain ran before the close, whose own report (no drain) only lists what is
        # left: the settlements are the drain's.
        return DrainReport(
            outcomes=drained.outcomes + report.outcomes,
            remaining=report.remaining,
            quarantined=tuple(dict.fromkeys(drained.quarantined + report.quarantined)),
            unjournaled=report.unjournaled,
        )

    async def flush(self) -> DrainReport:
        """Replays every pending settlement of this client's server once, now."""
        return DrainReport._from_json(await self._lifecycle().native.flush_async())

    async def drain(self, timeout: float) -> DrainReport:
        """Replays pending settlements until none is left or ``timeout`` seconds passed."""
        ms = _ms(timeout, "timeout")
        assert ms is not None
        return DrainReport._from_json(await self._lifecycle().native.drain_async(ms))

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _call(self, cls: type[R], op: str, args: str) -> R:
        return _result(cls, await self._native.call_async(op, args))

    async def create_reservation(
        self,
        *,
        idempotency_key: str,
        action: ActionLike,
        estimate: AmountLike,
        subject: SubjectLike | None = None,
        ttl_ms: int | None = None,
        grace_period_ms: int | None = None,
        overage_policy: str | None = None,
        dry_run: bool | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> ReservationCreated:
        """See :meth:`Client.create_reservation`."""
        args = self._create(
            idempotency_key, subject, action, estimate, ttl_ms, grace_period_ms,
            overage_policy, dry_run, metadata,
        )  # fmt: skip
        return await self._call(ReservationCreated, "create_reservation", args)

    async def commit_reservation(
        self,
        reservation_id: str,
        *,
        idempotency_key: str,
        actual: AmountLike,
        metrics: MetricsLike | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> CommitResult:
        """See :meth:`Client.commit_reservation`."""
        args = self._commit(reservation_id, idempotency_key, actual, metrics, metadata)
        return await self._call(CommitResult, "commit_reservation", args)

    async def release_reservation(
        self, reservation_id: str, *, idempotency_key: str, reason: str | None = None
    ) -> ReleaseResult:
        """See :meth:`Client.release_reservation`."""
        args = self._release(reservation_id, idempotency_key, reason)
        return await self._call(ReleaseResult, "release_reservation", args)

    async def extend_reservation(
        self,
        reservation_id: str,
        *,
        idempotency_key: str,
        extend_by_ms: int,
        metadata: Mapping[str, Any] | None = None,
    ) -> ExtendResult:
        """See :meth:`Client.extend_reservation`."""
        args = self._extend(reservation_id, idempotency_key, extend_by_ms, metadata)
        return await self._call(ExtendResult, "extend_reservation", args)

    async def decide(
        self,
        *,
        idempotency_key: str,
        action: ActionLike,
        estimate: AmountLike,
        subject: SubjectLike | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> DecisionResult:
        """See :meth:`Client.decide`."""
        args = self._decide(idempotency_key, subject, action, estimate, metadata)
        return await self._call(DecisionResult, "decide", args)

    async def create_event(
        self,
        *,
        idempotency_key: str,
        action: ActionLike,
        actual: AmountLike,
        subject: SubjectLike | None = None,
        overage_policy: str | None = None,
        metrics: MetricsLike | None = None,
        client_time_ms: int | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> EventResult:
        """See :meth:`Client.create_event`."""
        args = self._event(
            idempotency_key, subject, action, actual, overage_policy, metrics,
            client_time_ms, metadata,
        )  # fmt: skip
        return await self._call(EventResult, "create_event", args)

    async def get_balances(
        self,
        *,
        tenant: str | None = None,
        workspace: str | None = None,
        app: str | None = None,
        workflow: str | None = None,
        agent: str | None = None,
        toolset: str | None = None,
        include_children: bool | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> BalancesResult:
        """See :meth:`Client.get_balances`."""
        args = self._query(
            tenant=tenant, workspace=workspace, app=app, workflow=workflow, agent=agent,
            toolset=toolset, include_children=include_children, limit=limit, cursor=cursor,
        )  # fmt: skip
        return await self._call(BalancesResult, "get_balances", args)

    async def list_reservations(
        self,
        *,
        idempotency_key: str | None = None,
        status: str | None = None,
        tenant: str | None = None,
        workspace: str | None = None,
        app: str | None = None,
        workflow: str | None = None,
        agent: str | None = None,
        toolset: str | None = None,
        sort_by: str | None = None,
        sort_dir: str | None = None,
        include: Sequence[str] | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> ReservationPage:
        """See :meth:`Client.list_reservations`."""
        args = self._query(
            idempotency_key=idempotency_key, status=status, tenant=tenant,
            workspace=workspace, app=app, workflow=workflow, agent=agent, toolset=toolset,
            sort_by=sort_by, sort_dir=sort_dir, include=include, limit=limit, cursor=cursor,
        )  # fmt: skip
        return await self._call(ReservationPage, "list_reservations", args)

    async def list_all_reservations(
        self,
        *,
        max_pages: int = 100,
        idempotency_key: str | None = None,
        status: str | None = None,
        tenant: str | None = None,
        workspace: str | None = None,
        app: str | None = None,
        workflow: str | None = None,
        agent: str | None = None,
        toolset: str | None = None,
        sort_by: str | None = None,
        sort_dir: str | None = None,
        include: Sequence[str] | None = None,
        limit: int | None = None,
    ) -> list[Reservation]:
        """See :meth:`Client.list_all_reservations`."""
        args = self._query(
            max_pages=max_pages, idempotency_key=idempotency_key, status=status,
            tenant=tenant, workspace=workspace, app=app, workflow=workflow, agent=agent,
            toolset=toolset, sort_by=sort_by, sort_dir=sort_dir, include=include, limit=limit,
        )  # fmt: skip
        out = await self._native.call_async("list_reservations_all", args)
        return [Reservation._from_json(r) for r in json.loads(out[4])]

    async def get_reservation(self, reservation_id: str) -> Reservation:
        """See :meth:`Client.get_reservation`."""
        args = _dumps({"reservation_id": reservation_id})
        return await self._call(Reservation, "get_reservation", args)

    async def get_evidence(self, evidence_id: str) -> EvidenceEnvelope:
        """See :meth:`Client.get_evidence`."""
        args = _dumps({"evidence_id": evidence_id})
        return await self._call(EvidenceEnvelope, "get_evidence", args)

    async def get_evidence_jwks(self) -> EvidenceJwks:
        """See :meth:`Client.get_evidence_jwks`."""
        return await self._call(EvidenceJwks, "get_evidence_jwks", "{}")
