"""Static checks of the public types, run by ``mypy --strict`` in python/scripts/test.sh (not a
pytest module: nothing here runs). ``assert_type`` fails the check when a type differs, and
under ``--strict`` (``warn_unused_ignores``) every ``type: ignore`` below fails it when mypy
stops reporting the error it silences: that is how the refusals are asserted."""

from __future__ import annotations

from typing import Any, Coroutine

from typing_extensions import assert_type

import cycles
from cycles.testing import Budget, LocalServer

ACTION = cycles.Action("llm.completion", "openai:gpt-4o-mini")


def price(prompt: str, max_tokens: int = 100) -> int:
    return max_tokens * 30


def model(prompt: str, max_tokens: int = 100) -> cycles.Action:
    return cycles.Action("llm.completion", prompt)


def check(client: cycles.Client, aclient: cycles.AsyncClient) -> None:
    # A fixed estimate keeps the decorated function's own signature, sync and async.
    @client.guarded(500, action=ACTION, actual=lambda reply: reply["cost"])
    def ask(question: str) -> dict[str, int]:
        return {"cost": 1}

    assert_type(ask("q"), dict[str, int])
    ask(1)  # type: ignore[arg-type]

    @aclient.guarded(500, action=ACTION)
    async def aask(question: str) -> int:
        return 1

    coro: Coroutine[Any, Any, int] = aask("q")
    coro = aask(1)  # type: ignore[arg-type]
    coro.close()

    # Functions of the arguments: the decorated function must take what they take.
    @client.guarded(price, action=model, actual=lambda n: n)
    def complete(prompt: str, max_tokens: int = 100) -> int:
        return max_tokens

    assert_type(complete("p", max_tokens=5), int)
    complete(1)  # type: ignore[arg-type]

    @client.guarded(price, action=ACTION)  # type: ignore[arg-type]
    def other_names(text: str) -> int:
        return 1

    @client.guarded(lambda n: n * 2, action=ACTION, subject=lambda n: {"tenant": "acme"})
    def by_lambda(n: int) -> int:
        return n

    assert_type(by_lambda(3), int)

    # Not a value of the right kind: refused by the overloads.
    client.guarded("10", action=ACTION)  # type: ignore[call-overload]
    client.guarded(10, action=ACTION, actual=1.5)  # type: ignore[call-overload]


def check_results(client: cycles.Client) -> None:
    with client.reserve(10, action=ACTION) as r:
        r.set_actual(5)
    assert_type(r.settlement, cycles.Settlement)
    assert_type(r.settlement.charged, cycles.Amount)
    assert_type(r.settlement.charged.amount, int)
    assert_type(r.settlement_or_none, cycles.Settlement | None)
    assert_type(r.settlement.charged_or_none, cycles.Amount | None)
    assert_type(client.close(), cycles.DrainReport)


async def check_async_close(aclient: cycles.AsyncClient) -> None:
    assert_type(await aclient.aclose(), cycles.DrainReport)
    assert_type(aclient.close(), cycles.DrainReport)


def check_server() -> None:
    LocalServer(budgets=[Budget("tenant:acme", "TOKENS", 1_000)])
    LocalServer(budgets=[{"scope": "tenant:acme", "unit": "TOKENS", "allocated": 1_000}])
    Budget("tenant:acme", "TOKENS", 1_000, status="PAUSED")  # type: ignore[arg-type]
    Budget("tenant:acme", "TOKENS", "1000")  # type: ignore[arg-type]
