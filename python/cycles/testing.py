"""Test helpers: :class:`LocalServer`, the spec-faithful in-memory Cycles server
(``cycles-local-server``) running in this process on the SDK's runtime, on an ephemeral
loopback port, with TTL regimes, scripted faults, and ledger / request-log inspection.

::

    with LocalServer() as server, server.client() as client:
        server.add_fault("commitReservation", {"kind": "drop_response_after_apply"})
        ...
        assert [e.kind for e in server.ledger()] == ["reserve", "commit"]
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal, Mapping

from . import _native
from .client import AsyncClient, Client
from .errors import InvalidArgumentError

__all__ = ["LocalServer", "LedgerEntry", "RequestRecord", "DEFAULT_API_KEY", "DEFAULT_TENANT"]

DEFAULT_TENANT = "acme"
"""Tenant of the default configuration."""
DEFAULT_API_KEY = "cycles-local-key"
"""API key of the default tenant."""
DEFAULT_ADMIN_KEY = "cycles-local-admin"
"""Admin key of the default configuration."""


@dataclass(frozen=True)
class LedgerEntry:
    """One APPLIED mutation (replays add none). ``kind``: reserve, commit, release, extend
    or event."""

    seq: int
    kind: str
    tenant: str
    reservation_id: str | None
    idempotency_key: str
    unit: str | None
    amount: int | None
    applied_at_ms: int


@dataclass(frozen=True)
class RequestRecord:
    """One request that reached the server, in arrival order. ``status`` is ``None`` when
    the connection was dropped; ``fault`` names the injected fault; ``body`` is the request
    body exactly as received (``None`` when empty)."""

    seq: int
    operation: str | None
    method: str
    path: str
    reservation_id: str | None
    idempotency_key: str | None
    received_at_ms: int
    received_mono_us: int
    status: int | None
    fault: str | None
    replay: bool
    body: str | None = None


class LocalServer:
    """A running local Cycles server. It starts in the constructor and stops on
    :meth:`stop` (or at the end of a ``with`` block).

    ``config`` is the server's ``ServerConfig`` as a mapping (every field optional), e.g.::

        LocalServer({"regime": {"emit_remaining_ttl": False, "max_extensions": 3},
                     "budgets": [{"scope": "tenant:acme", "unit": "TOKENS",
                                  "allocated": 1000}]})

    ``regime`` is a shortcut that replaces ``config["regime"]``. ``mode`` replaces
    ``config["mode"]``: ``"spec"`` (the default: exactly what the spec declares) or
    ``"reference"`` (serialise like the reference Cycles server: explicit ``null`` for unset
    optional subject/action members, ``next_cursor: null`` on last pages, 500 on routing
    errors, 401 reason codes, its header quirks; see the server's README).
    """

    def __init__(
        self,
        config: Mapping[str, Any] | None = None,
        *,
        regime: Mapping[str, Any] | None = None,
        mode: Literal["spec", "reference"] | None = None,
    ) -> None:
        cfg: dict[str, Any] = dict(config or {})
        if regime is not None:
            cfg["regime"] = dict(regime)
        if mode is not None:
            if mode not in ("spec", "reference"):
                raise InvalidArgumentError(f"mode must be 'spec' or 'reference', not {mode!r}")
            cfg["mode"] = mode
        self._config = cfg
        self._native = _native.NativeLocalServer(json.dumps(cfg) if cfg else None)

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT`` (no trailing slash, no ``/v1``)."""
        return self._native.url

    @property
    def mode(self) -> str:
        """``"spec"`` or ``"reference"`` (see the constructor)."""
        return str(self._config.get("mode", "spec"))

    @property
    def api_key(self) -> str:
        """The first API key of the first configured tenant."""
        tenants = self._config.get("tenants")
        if tenants:
            return str(tenants[0]["api_keys"][0])
        return DEFAULT_API_KEY

    @property
    def tenant(self) -> str:
        """The first configured tenant."""
        tenants = self._config.get("tenants")
        return str(tenants[0]["id"]) if tenants else DEFAULT_TENANT

    @property
    def running(self) -> bool:
        """False once stopped."""
        return self._native.running

    def client(self, **kwargs: Any) -> Client:
        """A :class:`~cycles.Client` for this server (tenant and key filled in)."""
        kwargs.setdefault("tenant", self.tenant)
        return Client(self.url, kwargs.pop("api_key", self.api_key), **kwargs)

    def async_client(self, **kwargs: Any) -> AsyncClient:
        """An :class:`~cycles.AsyncClient` for this server."""
        kwargs.setdefault("tenant", self.tenant)
        return AsyncClient(self.url, kwargs.pop("api_key", self.api_key), **kwargs)

    def add_fault(
        self,
        rule_or_operation: Mapping[str, Any] | str,
        fault: Mapping[str, Any] | None = None,
        *,
        reservation_id: str | None = None,
        skip: int = 0,
        times: int = 1,
    ) -> None:
        """Adds a fault rule: either a whole ``FaultRule`` mapping, or an operation id
        (``"commitReservation"``) and a fault (``{"kind": "delay", "ms": 500}``). ``times=0``
        faults every later matching request."""
        if isinstance(rule_or_operation, str):
            if fault is None:
                raise TypeError("add_fault(operation, fault): the fault is missing")
            rule: dict[str, Any] = {
                "operation": rule_or_operation,
                "fault": dict(fault),
                "skip": skip,
                "times": times,
            }
            if reservation_id is not None:
                rule["reservation_id"] = reservation_id
        else:
            rule = dict(rule_or_operation)
        self._native.add_fault(json.dumps(rule))

    def clear_faults(self) -> None:
        """Removes every fault rule."""
        self._native.clear_faults()

    def ledger(self) -> list[LedgerEntry]:
        """Every applied mutation, in order."""
        return [LedgerEntry(**e) for e in json.loads(self._native.ledger())]

    def requests(self) -> list[RequestRecord]:
        """Every request that reached the router, in arrival order."""
        return [RequestRecord(**r) for r in json.loads(self._native.requests())]

    def advance_clock(self, ms: int) -> None:
        """Moves the server clock forward (expiry without sleeping)."""
        self._native.advance_clock(ms)

    def now_ms(self) -> int:
        """The server's authoritative time (epoch ms)."""
        return self._native.now_ms()

    def set_tenant_closed(self, tenant: str, closed: bool = True) -> None:
        """Closes (or reopens) a tenant."""
        self._native.set_tenant_closed(tenant, closed)

    def stop(self) -> None:
        """Shuts the server down. Idempotent."""
        self._native.stop()

    close = stop

    def __enter__(self) -> LocalServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"LocalServer(url={self.url!r}, mode={self.mode!r}, running={self.running})"
