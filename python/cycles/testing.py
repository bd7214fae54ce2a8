"""Test helpers: :class:`LocalServer`, the spec-faithful in-memory Cycles server
(``cycles-local-server``) running in this process on the SDK's runtime, on an ephemeral
loopback port, with TTL regimes, scripted faults, and ledger / request-log inspection.

::

    with LocalServer(budgets=[Budget("tenant:acme", "USD_MICROCENTS", 1_000_000)]) as server:
        with server.client() as client:
            server.add_fault("commitReservation", {"kind": "drop_response_after_apply"})
            ...
        assert [e.kind for e in server.ledger()] == ["reserve", "commit"]
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Callable, Literal, Mapping, Sequence, TypedDict, TypeVar, Union

from . import _native
from .client import AsyncClient, Client
from .errors import InvalidArgumentError
from .models import Caps

__all__ = [
    "LocalServer",
    "Budget",
    "FakeProvider",
    "FakeProviderConfig",
    "FakeFault",
    "FakeFaultRule",
    "ProviderRequest",
    "LedgerEntry",
    "RequestRecord",
    "DEFAULT_API_KEY",
    "DEFAULT_TENANT",
]

DEFAULT_TENANT = "acme"
"""Tenant of the default configuration."""
DEFAULT_API_KEY = "cycles-local-key"
"""API key of the default tenant."""
DEFAULT_ADMIN_KEY = "cycles-local-admin"
"""Admin key of the default configuration."""


_I64 = range(-(2**63), 2**63)

#: Operator statuses of a budget (the server also reads them in lower case).
_BUDGET_STATUSES = ("ACTIVE", "FROZEN", "CLOSED")


def _int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value not in _I64:
        raise InvalidArgumentError(f"{what} must be an int of 64 bits, not {value!r}")
    return value


@dataclass(frozen=True)
class Budget:
    """One budget of the local server: ``allocated`` in ``unit`` for ``scope``.

    ``scope`` is a canonical scope path (``tenant:acme``, ``tenant:acme/workspace:prod``);
    reservations are enforced on every derived scope that has a budget in their unit, and a
    scope with no budget in the unit is refused. ``overdraft_limit`` is the debt
    ``ALLOW_WITH_OVERDRAFT`` may accrue (``None``: the server's default, 0); ``status``
    ``ACTIVE`` (``None``: the default), ``FROZEN`` or ``CLOSED``. ``caps``: a reservation
    on this scope is answered ``ALLOW_WITH_CAPS`` with these caps (a
    :class:`~cycles.models.Caps`, e.g. ``Caps(max_tokens=64)``); ``None``: plain ``ALLOW``."""

    scope: str
    unit: str
    allocated: int
    overdraft_limit: int | None = None
    status: Literal["ACTIVE", "FROZEN", "CLOSED"] | None = None
    caps: Caps | None = None

    def __post_init__(self) -> None:
        for name in ("scope", "unit"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value:
                raise InvalidArgumentError(f"Budget.{name} must be a non-empty str, not {value!r}")
        _int(self.allocated, "Budget.allocated")
        if self.overdraft_limit is not None:
            _int(self.overdraft_limit, "Budget.overdraft_limit")
        if self.status is not None and self.status not in _BUDGET_STATUSES:
            raise InvalidArgumentError(
                f"Budget.status must be one of {_BUDGET_STATUSES} or None, not {self.status!r}"
            )
        if self.caps is not None and not isinstance(self.caps, Caps):
            raise InvalidArgumentError(f"Budget.caps must be a Caps or None, not {self.caps!r}")

    def _to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"scope": self.scope, "unit": self.unit, "allocated": self.allocated}
        if self.overdraft_limit is not None:
            out["overdraft_limit"] = self.overdraft_limit
        if self.status is not None:
            out["status"] = self.status
        if self.caps is not None:
            out["caps"] = self.caps.to_json()
        return out


def _mapping(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise InvalidArgumentError(f"{where} must be a mapping, not {value!r}")
    return value


def _items(value: Any, where: str) -> Sequence[Any]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise InvalidArgumentError(f"{where} must be a list, not {value!r}")
    return value


def _config(config: Mapping[str, Any]) -> dict[str, Any]:
    """``config`` as the server's JSON: :class:`Budget` values encoded, everything else as
    given. The bridge checks it (an unknown or missing key is an
    :class:`~cycles.InvalidArgumentError` naming where it is), so every language says it
    the same way."""
    cfg = dict(_mapping(config, "the LocalServer config"))
    budgets = cfg.get("budgets")
    if isinstance(budgets, Budget):
        cfg["budgets"] = budgets._to_json()  # not a list: the bridge says so
    elif isinstance(budgets, Sequence) and not isinstance(budgets, (str, bytes)):
        cfg["budgets"] = [b._to_json() if isinstance(b, Budget) else b for b in budgets]
    return cfg


def _json(value: Any, what: str) -> str:
    try:
        return json.dumps(value)
    except (TypeError, ValueError) as e:
        raise InvalidArgumentError(f"{what} is not JSON: {e}") from None


_R = TypeVar("_R")

# serde's position in the JSON this module wrote, not in anything the caller wrote.
_JSON_POSITION = re.compile(r" at line \d+ column \d+")


def _native_call(fn: Callable[..., _R], *args: Any) -> _R:
    """``fn(*args)`` with serde's JSON positions taken out of an argument error's message."""
    try:
        return fn(*args)
    except InvalidArgumentError as e:
        message = _JSON_POSITION.sub("", e.message)
        if message == e.message:
            raise
        attrs = e._attrs()
        raise type(e)(message, **attrs) from None


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

    ``budgets`` replaces the server's budgets (by default one: ``tenant:acme``,
    ``USD_MICROCENTS``, allocated 10^10): only the given ones exist, e.g.::

        LocalServer(budgets=[Budget("tenant:acme", "TOKENS", 1_000)])

    ``config`` is the server's ``ServerConfig`` as a mapping (every field optional:
    ``bind``, ``tenants``, ``admin_api_key``, ``budgets``, ``regime``,
    ``idempotency_compare``, ``evidence``, ``mode``; see ``conformance/server/README.md``),
    e.g.::

        LocalServer({"regime": {"emit_remaining_ttl": False, "max_extensions": 3},
                     "tenants": [{"id": "acme", "api_keys": ["k1"]}]})

    A key the server does not have (at the top, in a budget, a tenant, the regime or its
    ``extend``) raises :class:`~cycles.InvalidArgumentError` naming it and where it is
    (``invalid server config: budgets[0]: unknown field `limit`, expected one of ...``),
    instead of starting a server that silently keeps the default; a budget mapping needs
    ``scope``, ``unit`` and ``allocated`` like :class:`Budget`. The bridge words these
    errors, the same in every language.

    ``budgets`` and ``regime`` replace ``config["budgets"]`` and ``config["regime"]``.
    ``mode`` replaces ``config["mode"]``: ``"spec"`` (the default: exactly what the spec
    declares) or ``"reference"`` (serialise like the reference Cycles server: explicit
    ``null`` for unset optional subject/action members, ``next_cursor: null`` on last
    pages, 500 on routing errors, 401 reason codes, its header quirks; see the server's
    README).
    """

    def __init__(
        self,
        config: Mapping[str, Any] | None = None,
        *,
        budgets: Sequence[Budget | Mapping[str, Any]] | None = None,
        regime: Mapping[str, Any] | None = None,
        mode: Literal["spec", "reference"] | None = None,
    ) -> None:
        cfg: dict[str, Any] = {} if config is None else dict(_mapping(config, "config"))
        if budgets is not None:
            cfg["budgets"] = budgets
        if regime is not None:
            cfg["regime"] = regime
        if mode is not None:
            if mode not in ("spec", "reference"):
                raise InvalidArgumentError(f"mode must be 'spec' or 'reference', not {mode!r}")
            cfg["mode"] = mode
        cfg = _config(cfg)
        self._config = cfg
        self._native = _native_call(
            _native.NativeLocalServer, _json(cfg, "the LocalServer config") if cfg else None
        )

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
        return self._native.api_key

    @property
    def tenant(self) -> str:
        """The first configured tenant."""
        return self._native.tenant

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
                "fault": dict(_mapping(fault, "the fault")),
                "skip": skip,
                "times": times,
            }
            if reservation_id is not None:
                rule["reservation_id"] = reservation_id
        else:
            rule = dict(_mapping(rule_or_operation, "a fault rule"))
        _native_call(self._native.add_fault, _json(rule, "the fault rule"))

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
        """Moves the server clock forward by ``ms`` milliseconds, 0 or more (expiry without
        sleeping)."""
        if isinstance(ms, bool) or not isinstance(ms, int) or not 0 <= ms < 2**64:
            # pyo3 would raise OverflowError (or TypeError) for what a u64 cannot hold.
            raise InvalidArgumentError(f"advance_clock takes an int of 0 or more, not {ms!r}")
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


# --- The fake model provider -------------------------------------------------------------


class _ServerErrorKind(TypedDict):
    kind: Literal["server_error"]


class ServerErrorFault(_ServerErrorKind, total=False):
    """An error response in the provider's shape (``status`` 500 unless given)."""

    status: int


class _RateLimitedKind(TypedDict):
    kind: Literal["rate_limited"]


class RateLimitedFault(_RateLimitedKind, total=False):
    """HTTP 429 in the provider's shape; ``retry_after`` is the raw ``Retry-After`` value
    (default ``"1"``; ``None`` sends none)."""

    retry_after: str | None


class CutStreamFault(TypedDict):
    """Headers and ``after_chunks`` SSE events (none of a whole body), then the connection
    closes mid-body: no final usage."""

    kind: Literal["cut_stream"]
    after_chunks: int


class StreamErrorFault(TypedDict):
    """``after_chunks`` SSE events, then the provider's in-stream error event, and a clean
    end (no final usage); a whole response is a 500 instead."""

    kind: Literal["stream_error"]
    after_chunks: int


class SlowFirstByteFault(TypedDict):
    """Wait ``ms`` milliseconds before sending anything, then answer normally."""

    kind: Literal["slow_first_byte"]
    ms: int


class SlowChunksFault(TypedDict):
    """Answer normally, but wait ``ms`` milliseconds before each SSE event (before the body
    of a whole response): a stream that stays in flight."""

    kind: Literal["slow_chunks"]
    ms: int


FakeFault = Union[
    ServerErrorFault,
    RateLimitedFault,
    CutStreamFault,
    StreamErrorFault,
    SlowFirstByteFault,
    SlowChunksFault,
]
"""One scripted fault of the fake provider (``kind`` and its parameters)."""


class FakeFaultRule(TypedDict, total=False):
    """When to inject a fault: every given filter must match (``endpoint``:
    ``chat_completions``, ``responses`` or ``messages``; ``model``: the body's model;
    ``call``: the 0-based index among provider calls); of the matching requests ``skip``
    pass, then ``times`` are faulted (default 1; 0: every later one)."""

    endpoint: Literal["chat_completions", "responses", "messages"]
    model: str
    call: int
    skip: int
    times: int
    fault: FakeFault


class FakeProviderConfig(TypedDict, total=False):
    """The fake provider's ``FakeConfig`` (every key optional; an unknown one raises
    :class:`~cycles.InvalidArgumentError` naming it): ``bind`` (default
    ``127.0.0.1:0``), ``reply`` (the reply of every model), ``replies`` (reply per model
    name), ``faults`` (rules matched in order)."""

    bind: str
    reply: str
    replies: Mapping[str, str]
    faults: Sequence[FakeFaultRule]


@dataclass(frozen=True)
class ProviderRequest:
    """One request the fake provider received, in arrival order. ``call`` is its index
    among provider calls (the index a rule's ``call`` matches; ``None`` for an unknown
    route); ``headers`` has every header, names in lower case; ``body`` is the parsed JSON
    (``None`` when empty or not JSON, then ``body_text`` has it); ``output_bound`` is the
    output bound the provider saw (``max_tokens``, ``max_completion_tokens``, the smaller of
    the two when both, or ``max_output_tokens``); ``fault`` names the injected fault."""

    seq: int
    call: int | None
    method: str
    path: str
    endpoint: str | None
    headers: dict[str, str]
    body: Any
    body_text: str | None
    model: str | None
    stream: bool
    output_bound: int | None
    status: int
    fault: str | None
    prompt_tokens: int | None
    completion_tokens: int | None


class FakeProvider:
    """A fake model provider in this process (``cycles-fake-provider``), on an ephemeral
    loopback port: OpenAI Chat Completions and Responses, Anthropic Messages, whole and
    streamed, with deterministic token counts (one token per whitespace-separated word),
    scripted faults and a request recorder. It starts in the constructor and stops on
    :meth:`stop` (or at the end of a ``with`` block)::

        with FakeProvider(reply="Hello there") as provider:
            client = openai.OpenAI(base_url=provider.openai_base_url, api_key="k", max_retries=0)
            client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
            assert provider.requests()[0].output_bound is None

    ``config`` is a :class:`FakeProviderConfig`; ``reply``, ``replies`` and ``faults``
    replace its keys. Any API key is accepted. See ``conformance/fake-provider/README.md``.
    """

    def __init__(
        self,
        config: FakeProviderConfig | None = None,
        *,
        reply: str | None = None,
        replies: Mapping[str, str] | None = None,
        faults: Sequence[FakeFaultRule] | None = None,
    ) -> None:
        cfg: dict[str, Any] = {} if config is None else dict(_mapping(config, "config"))
        if reply is not None:
            cfg["reply"] = reply
        if replies is not None:
            cfg["replies"] = dict(_mapping(replies, "replies"))
        if faults is not None:
            cfg["faults"] = [dict(_mapping(f, "a fault rule")) for f in _items(faults, "faults")]
        self._native = _native_call(_native.NativeFakeProvider, json.dumps(cfg) if cfg else None)

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT`` (no trailing slash): the Anthropic clients' base URL
        (the OpenAI clients' works too: paths are served with and without ``/v1``)."""
        return self._native.url

    @property
    def openai_base_url(self) -> str:
        """``base_url + "/v1"``, the OpenAI clients' usual base URL."""
        return self._native.url + "/v1"

    @property
    def running(self) -> bool:
        """False once stopped."""
        return self._native.running

    def requests(self) -> list[ProviderRequest]:
        """Every request received since the start or the last :meth:`reset`."""
        return [ProviderRequest(**r) for r in json.loads(self._native.requests())]

    def reset(self) -> None:
        """Empties the request log, restarts call numbering at 0 and keeps only the
        configured fault rules (their counts at zero)."""
        self._native.reset()

    def add_fault(self, rule: FakeFaultRule) -> None:
        """Adds a fault rule after the existing ones, e.g.
        ``{"endpoint": "messages", "fault": {"kind": "rate_limited", "retry_after": "2"}}``."""
        _native_call(self._native.add_fault, json.dumps(dict(_mapping(rule, "a fault rule"))))

    def clear_faults(self) -> None:
        """Removes every fault rule (the configured ones too, until :meth:`reset`)."""
        self._native.clear_faults()

    def stop(self) -> None:
        """Shuts the provider down. Idempotent."""
        self._native.stop()

    close = stop

    def __enter__(self) -> FakeProvider:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"FakeProvider(base_url={self.base_url!r}, running={self.running})"
