"""``client.guarded(...)`` takes the estimate, ``action`` and ``subject`` as values or as
functions of the decorated call's arguments (issue 28, as Node's ``wrap``). What each call
reserved is read from the server's ledger, the action and subject from the request it got."""

from __future__ import annotations

import asyncio
import gc
import json
import warnings
from pathlib import Path
from typing import Any

import pytest

import cycles
from cycles.testing import LocalServer

ACTION = cycles.Action("llm.completion", "openai:gpt-4o-mini")
PRICE = 30  # per token


def reserved(server: LocalServer) -> list[int | None]:
    return [e.amount for e in server.ledger() if e.kind == "reserve"]


def created(server: LocalServer) -> list[dict[str, Any]]:
    """The bodies of the createReservation requests, in order."""
    return [
        json.loads(q.body or "{}") for q in server.requests() if q.operation == "createReservation"
    ]


@pytest.fixture
def client(server: LocalServer, tmp_path: Path):
    c = server.client(journal_dir=tmp_path)
    try:
        yield c
    finally:
        c.close()


def test_estimate_action_and_subject_from_the_arguments(
    client: cycles.Client, server: LocalServer
) -> None:
    @client.guarded(
        lambda prompt, max_tokens, workspace="default": max_tokens * PRICE,
        action=lambda prompt, max_tokens, workspace="default": cycles.Action("llm", prompt),
        subject=lambda prompt, max_tokens, workspace="default": {
            "tenant": "acme",
            "workspace": workspace,
        },
        actual=lambda reply: reply["tokens"] * PRICE,
    )
    def complete(prompt: str, max_tokens: int, workspace: str = "default") -> dict[str, int]:
        r = cycles.current_reservation()
        assert r is not None
        return {"tokens": max_tokens // 2}

    assert complete("gpt-a", 100) == {"tokens": 50}
    assert complete("gpt-b", max_tokens=40, workspace="prod") == {"tokens": 20}  # keywords too
    assert reserved(server) == [3_000, 1_200]
    assert [(e.kind, e.amount) for e in server.ledger() if e.kind == "commit"] == [
        ("commit", 1_500),
        ("commit", 600),
    ]
    bodies = created(server)
    assert [b["action"] for b in bodies] == [
        {"kind": "llm", "name": "gpt-a"},
        {"kind": "llm", "name": "gpt-b"},
    ]
    assert [b["subject"] for b in bodies] == [
        {"tenant": "acme", "workspace": "default"},
        {"tenant": "acme", "workspace": "prod"},
    ]


def test_a_value_and_a_function_mix(client: cycles.Client, server: LocalServer) -> None:
    @client.guarded(cycles.Amount("USD_MICROCENTS", 500), action=lambda n: ACTION, actual=7)
    def fixed_estimate(n: int) -> int:
        return n

    @client.guarded(lambda n: n, action=ACTION, actual=lambda n: n)
    def from_n(n: int) -> int:
        return n

    assert fixed_estimate(1) == 1 and from_n(250) == 250 and from_n(90) == 90
    assert reserved(server) == [500, 250, 90]


async def test_async_functions_take_the_estimate_from_their_arguments(
    server: LocalServer, tmp_path: Path
) -> None:
    async with server.async_client(journal_dir=tmp_path) as aclient:

        @aclient.guarded(
            lambda n, *, unit_cost=2: n * unit_cost,
            action=lambda n, *, unit_cost=2: cycles.Action("batch", f"n{n}"),
            actual=lambda used: used,
        )
        async def batch(n: int, *, unit_cost: int = 2) -> int:
            await asyncio.sleep(0)
            assert cycles.current_reservation() is not None
            return n

        assert await asyncio.gather(batch(10), batch(20, unit_cost=5)) == [10, 20]
    assert sorted(a or 0 for a in reserved(server)) == [20, 100]
    assert sorted(b["action"]["name"] for b in created(server)) == ["n10", "n20"]
    assert sorted(e.amount or 0 for e in server.ledger() if e.kind == "commit") == [10, 20]


def test_methods_get_self_first(client: cycles.Client, server: LocalServer) -> None:
    class Agent:
        def __init__(self, budget_per_step: int) -> None:
            self.per_step = budget_per_step

        @client.guarded(lambda self, steps: self.per_step * steps, action=ACTION, actual=1)
        def run(self, steps: int) -> int:
            return steps

    assert Agent(40).run(3) == 3
    assert reserved(server) == [120]


def test_a_raising_function_reserves_nothing(client: cycles.Client, server: LocalServer) -> None:
    err = LookupError("no price for this model")
    calls: list[str] = []

    def price(model: str) -> int:
        raise err

    @client.guarded(price, action=ACTION, actual=1)
    def ask(model: str) -> None:
        calls.append(model)

    with pytest.raises(LookupError) as info:
        ask("unknown")
    assert info.value is err  # unchanged
    assert calls == [] and server.requests() == [] and server.ledger() == []


def test_what_a_function_returns_is_checked_on_each_call(
    client: cycles.Client, server: LocalServer
) -> None:
    # Typed Any: the overloads refuse these functions statically, this is the run-time check.
    estimate: Any = lambda n: "a lot" if n else 10  # noqa: E731

    @client.guarded(estimate, action=ACTION, actual=1)
    def ask(n: int) -> int:
        return n

    with pytest.raises(cycles.InvalidArgumentError, match="estimate must be an Amount"):
        ask(1)
    assert ask(0) == 0
    assert reserved(server) == [10]

    action: Any = lambda: "not an action"  # noqa: E731

    @client.guarded(10, action=action, actual=1)
    def bad_action() -> None: ...

    with pytest.raises(cycles.InvalidArgumentError, match="action must be an Action"):
        bad_action()
    assert reserved(server) == [10]


async def test_an_async_estimate_function_is_refused_without_a_warning(
    client: cycles.Client, server: LocalServer
) -> None:
    async def price_of(n: int) -> int:
        return n

    price: Any = price_of  # refused statically too (it returns a coroutine)

    @client.guarded(price, action=ACTION, actual=1)
    async def ask(n: int) -> int:
        return n

    gc.collect()  # what earlier tests left unclosed (sockets) is collected before the check
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with pytest.raises(cycles.InvalidArgumentError, match=r"estimate function .* awaitable"):
            await ask(5)
        gc.collect()  # a coroutine dropped unawaited warns when it is collected
    assert [str(w.message) for w in seen if "never awaited" in str(w.message)] == []
    assert server.requests() == []


def test_values_are_checked_when_guarded_is_called(client: cycles.Client) -> None:
    with pytest.raises(cycles.InvalidArgumentError, match="estimate must be"):
        client.guarded("10", action=ACTION)  # type: ignore[call-overload]
    with pytest.raises(cycles.InvalidArgumentError, match="estimate must fit in 64 bits"):
        client.guarded(2**63, action=ACTION)
    with pytest.raises(cycles.InvalidArgumentError, match="action must be an Action"):
        client.guarded(10, action="llm")  # type: ignore[call-overload]
    with pytest.raises(cycles.InvalidArgumentError, match="subject must be a Subject"):
        client.guarded(10, action=ACTION, subject="acme")  # type: ignore[call-overload]
    with pytest.raises(cycles.InvalidArgumentError, match="heartbeat_policy"):
        client.guarded(10, action=ACTION, heartbeat_policy="panic")
    with pytest.raises(cycles.InvalidArgumentError, match="actual must be an int"):
        client.guarded(10, action=ACTION, actual=1.5)  # type: ignore[call-overload]
    with pytest.raises(TypeError):
        client.guarded(10, action=ACTION, ttl=5)  # type: ignore[call-overload]


def test_no_tenant_and_no_subject_is_refused_when_guarded_is_called(
    server: LocalServer, tmp_path: Path
) -> None:
    with cycles.Client(server.url, server.api_key, journal_dir=tmp_path) as no_tenant:
        with pytest.raises(cycles.InvalidArgumentError, match="subject is required"):
            no_tenant.guarded(10, action=ACTION)

        # A subject function makes the call carry its own tenant.
        @no_tenant.guarded(10, action=ACTION, subject=lambda tenant: {"tenant": tenant}, actual=3)
        def work(tenant: str) -> str:
            return tenant

        assert work(server.tenant) == server.tenant
    assert [(e.kind, e.tenant) for e in server.ledger()] == [
        ("reserve", server.tenant),
        ("commit", server.tenant),
    ]
