"""What both clients share beyond requests: construction from options or the environment,
the client's properties, and the guarded lifecycle (:meth:`reserve`, :meth:`stream`,
:meth:`guarded`) over the core's one lifecycle.
"""

from __future__ import annotations

import functools
import inspect
import os
import threading
from typing import (
    Any,
    Awaitable,
    Callable,
    Mapping,
    ParamSpec,
    TypeVar,
    Union,
    cast,
    overload,
)

from . import _native
from ._requests import (
    _check_policy,
    _clean,
    _close_seconds,
    _dumps,
    _estimate,
    _options_json,
    _part,
    _per_call,
    _Requests,
)
from .errors import InvalidArgumentError
from .lifecycle import (
    DrainReport,
    GuardedReservation,
    LifecycleEvent,
    ReservationContext,
    _Lifecycle,
)
from .models import (
    Action,
    ActionLike,
    Amount,
    AmountLike,
    Subject,
    SubjectLike,
)

P = ParamSpec("P")
T = TypeVar("T")

#: An estimate: an ``Amount`` (or a mapping of one), or an ``int`` in the reservation's unit.
EstimateLike = Union[AmountLike, int]
#: ``actual=`` of :meth:`Client.guarded`: a fixed amount, or a function of the call's result
#: (for an ``async`` function, of the awaited result); ``None``: the function reports it.
ActualLike = Union[int, Amount, Callable[[Any], Union[int, Amount]], None]


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
        journal_url: str | None = None,
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
            "journal_url": journal_url,
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
        # Checked in this order (the first bad argument is the one reported).
        est = _estimate(estimate)
        act = _part(action, Action, "action")
        sub = None if subject is None else _part(subject, Subject, "subject")
        return self._reserve_spec(
            {
                "idempotency_key": idempotency_key,
                "subject": sub,
                "action": act,
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

    def _reserve_spec(self, spec: dict[str, Any]) -> ReservationContext:
        """:meth:`reserve` of a guard spec in its wire form (``None`` members left out, so the
        bridge's defaults apply to them): an integration builds its few members per call
        without the model objects. The bridge checks the whole spec."""
        return ReservationContext(self._lifecycle(), _dumps(_clean(spec)))

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
