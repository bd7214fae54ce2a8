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

import os
from typing import (
    Callable,
    TypeVar,
)

from ._base import ActualLike as ActualLike  # re-exported: part of the signatures here
from ._base import EstimateLike as EstimateLike
from ._base import _Base
from ._model_base import _Model
from ._operations import _AsyncOperations, _Operations
from ._requests import (
    _close_seconds,
    _ms,
    _result,
    _row_list,
)
from .lifecycle import (
    DrainReport,
    LifecycleEvent,
)

__all__ = ["Client", "AsyncClient"]

R = TypeVar("R", bound=_Model)


class Client(_Operations, _Base):
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
    unknown unit raises :class:`~cycles.errors.ConfigError`. ``journal_url``
    (``CYCLES_JOURNAL_URL``; e.g. ``"redis://journal:6379/0"``) keeps the settlement journal in
    Redis instead of ``journal_dir``, so another machine's client drains what this one could
    not settle (docs/journal.md, "Stores"). A malformed URL raises
    :class:`~cycles.errors.ConfigError` here; a Redis that cannot be reached, or does not make
    writes as durable as the URL asks, raises it when the settlement engine starts (the first
    guarded action, :meth:`flush` or :meth:`drain`).
    """

    @classmethod
    def from_env(
        cls,
        *,
        journal_dir: str | os.PathLike[str] | None = None,
        journal_enabled: bool | None = None,
        journal_url: str | None = None,
        on_event: Callable[[LifecycleEvent], None] | None = None,
        close_timeout: float | None = None,
        settle_max_attempts: int | None = None,
        replay_interval: float | None = None,
    ) -> Client:
        """A client from ``CYCLES_BASE_URL``, ``CYCLES_API_KEY`` (required),
        ``CYCLES_TENANT``, ``CYCLES_REQUEST_TIMEOUT_MS``, ``CYCLES_CONNECT_TIMEOUT_MS``,
        ``CYCLES_JOURNAL_DIR``, ``CYCLES_JOURNAL_ENABLED``, ``CYCLES_JOURNAL_URL`` (arguments
        win) and ``CYCLES_UNIT``
        (the default unit of a bare estimate; an unknown one is a ConfigError)."""
        options = {
            "journal_dir": journal_dir,
            "journal_enabled": journal_enabled,
            "journal_url": journal_url,
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

    def _rows(self, cls: type[R], op: str, args: str) -> list[R]:
        return _row_list(cls, self._native.call(op, args))


class AsyncClient(_AsyncOperations, _Base):
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
        journal_url: str | None = None,
        on_event: Callable[[LifecycleEvent], None] | None = None,
        close_timeout: float | None = None,
        settle_max_attempts: int | None = None,
        replay_interval: float | None = None,
    ) -> AsyncClient:
        """A client from the ``CYCLES_*`` variables (see :meth:`Client.from_env`)."""
        options = {
            "journal_dir": journal_dir,
            "journal_enabled": journal_enabled,
            "journal_url": journal_url,
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

    async def _rows(self, cls: type[R], op: str, args: str) -> list[R]:
        return _row_list(cls, await self._native.call_async(op, args))
