"""``cycles.pricing``: every case of the shared vectors (conformance/vectors/pricing.json)
through the typed Python functions, and ``GuardedReservation.plan_caps`` against the local
server's caps (the ``caps_applied`` event)."""

from __future__ import annotations

import json
import os
import threading
from dataclasses import fields, is_dataclass
from pathlib import Path
from typing import Any, Callable

import pytest

import cycles
from cycles import pricing
from cycles.models import Amount, Caps
from cycles.testing import Budget, LocalServer

# Every function the bridge's pricing table has (pricing_json::FUNCTIONS), by its Python name.
FUNCTIONS: dict[str, Callable[..., Any]] = {
    "text_tokens": pricing.text_tokens,
    "prompt_texts": pricing.prompt_texts,
    "prompt_tokens": pricing.prompt_tokens,
    "output_bound": pricing.output_bound,
    "lookup_price": pricing.lookup_price,
    "cost": pricing.cost,
    "estimate": pricing.estimate,
    "estimate_request": pricing.estimate_request,
    "actual": pricing.actual,
    "settlement": pricing.settlement,
    "lower_bound": pricing.lower_bound,
    "tool_allowed": pricing.tool_allowed,
    "filter_tools": pricing.filter_tools,
    "plan_caps": pricing.plan_caps,
    "usage": pricing.usage,
    "stream_request": lambda api, request: {"set": pricing.stream_request(api, request)},
    "call_failed": pricing.call_failed,
    "observe": pricing.observe,
}

_MAX_EXACT = 2**53 - 1
_COUNTS = {
    "input_tokens",
    "output_tokens",
    "prompt_tokens",
    "output_bound",
    "bound",
    "default",
    "default_output_bound",
}


def vectors_file() -> Path:
    env = os.environ.get("CYCLES_VECTORS")
    base = Path(env).parent if env else Path(__file__).resolve().parents[2] / "conformance/vectors"
    path = base / "pricing.json"
    assert path.is_file(), f"{path} not found (set CYCLES_VECTORS)"
    return path


def _count(v: Any) -> Any:
    """The vectors write counts beyond 2^53 - 1 as decimal strings; Python passes ints."""
    if isinstance(v, str) and v.isdigit() and int(v) > _MAX_EXACT:
        return int(v)
    return v


def _amount(v: Any) -> Any:
    if isinstance(v, dict) and set(v) == {"unit", "amount"} and isinstance(v["unit"], str):
        amount = _count(v["amount"])
        if isinstance(amount, int):
            return Amount(v["unit"], amount)
    return v  # not an amount: core says what is wrong with it


def python_args(function: str, given: dict[str, Any]) -> dict[str, Any]:
    """The vector's JSON arguments as the Python function's keyword arguments."""
    args: dict[str, Any] = {}
    for k, v in given.items():
        if k in _COUNTS:
            v = _count(v)
        elif k == "text_tokens" and isinstance(v, list):
            v = [[_count(n) for n in m] if isinstance(m, list) else m for m in v]
        elif k == "usage" and isinstance(v, dict):
            v = {n: _count(x) for n, x in v.items()}
        elif k in ("actual", "estimate") and function == "settlement":
            v = _amount(v)
        args[k] = v
    if function == "lower_bound":
        args.setdefault("bound", None)  # `bound?`: absent is None
    return args


def encoded(value: Any) -> Any:
    """A Python result in the vectors' encoding."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        return str(value) if abs(value) > _MAX_EXACT else value
    if isinstance(value, pricing.SettlementPlan):
        out: dict[str, Any] = {"action": value.action}
        if value.amount is not None:
            out["amount"] = encoded(value.amount)
        return out
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: encoded(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, (list, tuple)):
        return [encoded(v) for v in value]
    if isinstance(value, dict):
        return {k: encoded(v) for k, v in value.items()}
    raise AssertionError(f"unexpected result type {type(value).__name__}")


def test_every_shared_vector_through_the_python_functions() -> None:
    doc = json.loads(vectors_file().read_text())
    assert doc["format"] == "cycles-pricing-vectors" and doc["version"] == 1
    sections = doc["functions"]
    assert sorted(sections) == sorted(FUNCTIONS), "a function section is missing or unknown"
    names = {n for n in pricing.__all__ if callable(getattr(pricing, n)) and n[0].islower()}
    assert names == set(FUNCTIONS), "cycles.pricing exports exactly the bridge's functions"
    ran = 0
    total = sum(len(cases) for cases in sections.values())
    for function, cases in sections.items():
        assert cases, f"{function} has no cases"
        fn = FUNCTIONS[function]
        for case in cases:
            label = f"{function} {case['name']}"
            args = python_args(function, case["input"])
            if "expect" in case:
                assert "error" not in case, label
                assert encoded(fn(**args)) == case["expect"], label
            else:
                err = case["error"]
                with pytest.raises(cycles.CyclesError) as e:
                    fn(**args)
                assert e.value.name == err["kind"], label
                if err["kind"] == "INVALID_ARGUMENT":
                    assert isinstance(e.value, cycles.InvalidArgumentError), label
                assert err["message_contains"] in e.value.message, f"{label}: {e.value.message}"
            ran += 1
    assert ran == total and ran >= 166, f"only {ran} of {total} vectors ran"


def test_a_pricing_parsed_once_prices_as_the_mapping_does() -> None:
    """What a guard passes (``pricing._parsed``): every vector whose pricing parses gives
    the same answer, or the same error, with the pricing parsed beforehand."""
    doc = json.loads(vectors_file().read_text())
    ran = 0
    for function, cases in doc["functions"].items():
        fn = FUNCTIONS[function]
        for case in cases:
            args = python_args(function, case["input"])
            if "pricing" not in args:
                continue
            try:
                parsed = pricing._parsed(args["pricing"])
            except cycles.InvalidArgumentError:
                continue  # a bad pricing is refused when parsed: checked below
            label = f"{function} {case['name']}"
            if "expect" in case:
                assert encoded(fn(**{**args, "pricing": parsed})) == case["expect"], label
            else:
                with pytest.raises(cycles.CyclesError) as e:
                    fn(**{**args, "pricing": parsed})
                assert case["error"]["message_contains"] in e.value.message, label
            ran += 1
    assert ran >= 40, f"only {ran} vectors ran"
    with pytest.raises(cycles.InvalidArgumentError, match="pricing"):
        pricing._parsed({"unit": "USD_MICROCENTS"})


def test_typed_values() -> None:
    table: pricing.Pricing = {
        "unit": "USD_MICROCENTS",
        "models": {"gpt-4o": {"input_per_mtok": 250_000_000, "output_per_mtok": 1_000_000_000}},
    }
    assert pricing.cost(table, "gpt-4o-2024-08-06", 1000, 100) == Amount("USD_MICROCENTS", 350000)
    assert pricing.lookup_price(table, "gpt-4o-2024-08-06").matched == "gpt-4o"
    e = pricing.estimate_request(pricing.TOKENS, "m", {"messages": [], "max_tokens": 5})
    assert (e.prompt_tokens, e.output_bound, e.amount) == (0, 5, Amount("TOKENS", 5))
    caps = Caps(max_tokens=3, tool_denylist=["shell"])
    assert pricing.lower_bound(10, caps) == pricing.LoweredBound(3, True)
    assert pricing.filter_tools(["calc", "shell"], caps).removed == ("shell",)
    assert not pricing.tool_allowed("shell", caps)
    plan = pricing.plan_caps("messages", {"max_tokens": 10, "tools": [{"name": "shell"}]}, caps)
    assert plan.apply({"max_tokens": 10, "tools": [{"name": "shell"}], "model": "m"}) == {
        "max_tokens": 3,
        "model": "m",
    }
    u = pricing.usage(
        "messages", {"type": "message_start", "message": {"usage": {"input_tokens": 7}}}
    )
    assert u == pricing.Usage(7, None) and u.reported
    assert pricing.actual(pricing.TOKENS, "m", u) == Amount("TOKENS", 7)
    assert pricing.settlement(None, True, Amount("TOKENS", 9)) == pricing.SettlementPlan(
        "commit", Amount("TOKENS", 9)
    )
    assert pricing.settlement(None, False, Amount("TOKENS", 9)).action == "release"
    with pytest.raises(cycles.InvalidArgumentError, match="not JSON-serialisable"):
        pricing.prompt_tokens({"messages": [object()]})


def test_reservation_plan_caps_uses_the_actions_caps_and_reports_it() -> None:
    seen: list[cycles.LifecycleEvent] = []
    got = threading.Event()

    def on_event(ev: cycles.LifecycleEvent) -> None:
        seen.append(ev)
        if ev.kind == "caps_applied":
            got.set()

    budget = Budget("tenant:acme", "TOKENS", 1000, caps=Caps(max_tokens=16))
    with LocalServer(budgets=[budget]) as server, server.client(on_event=on_event) as client:
        with client.reserve(100, unit="TOKENS", action=cycles.Action("llm.completion", "m")) as r:
            assert r.decision == "ALLOW_WITH_CAPS"
            plan = r.plan_caps("chat_completions", {"max_tokens": 100, "messages": []})
            assert (plan.bound_from, plan.bound_to) == (100, 16)
            assert plan.changed and plan.send
            assert plan.set == {"max_tokens": 16}
            with pytest.raises(cycles.InvalidArgumentError, match="unknown provider API"):
                r.plan_caps("completions", {})  # type: ignore[arg-type]
            # No plan said not to send: nothing to refuse, and the action goes on.
            with pytest.raises(cycles.InvalidArgumentError, match="no caps plan"):
                r.refuse_call()
            r.set_actual(10)
        assert got.wait(5), [e.kind for e in seen]
    ev = next(e for e in seen if e.kind == "caps_applied")
    assert ev.fields["api"] == "chat_completions"
    assert (ev.fields["bound_from"], ev.fields["bound_to"]) == (100, 16)
    assert ev.reservation_id == r.reservation_id


def test_reservation_plan_caps_under_allow_changes_nothing(server: LocalServer) -> None:
    with server.client() as client:
        with client.reserve(10, unit="USD_MICROCENTS", action=cycles.Action("llm", "m")) as r:
            assert r.decision == "ALLOW"
            plan = r.plan_caps("messages", {"max_tokens": 100})
            assert not plan.changed and plan.set == {} and plan.send
            r.set_actual(1)
