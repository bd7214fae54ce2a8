"""Every case of conformance/vectors/heartbeat.json through cycles.timing, matched exactly.

Vector encoding: integers, decimal strings beyond 2**53, "infinite" / "-infinite". The Python
API uses ints and math.inf / -math.inf, so the expectations are decoded into those."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from conftest import vectors_path

from cycles import timing

DOC = json.loads(vectors_path().read_text())
assert DOC["format"] == "cycles-heartbeat-vectors"
assert DOC["version"] == 1


def section(name: str) -> list[dict[str, Any]]:
    cases = DOC[name]
    assert cases, f"section {name} is empty"
    return cases


def num(v: Any) -> Any:
    """A vector number as the Python API represents it."""
    if v is None:
        return None
    if v == "infinite":
        return math.inf
    if v == "-infinite":
        return -math.inf
    if isinstance(v, str):
        return int(v)
    assert isinstance(v, int) and not isinstance(v, bool)
    return v


def same(got: Any, want: Any) -> bool:
    """Exact equality that also checks the type (an int never equals a float)."""
    return type(got) is type(want) and got == want


def failure(v: dict[str, Any]) -> timing.Failure:
    kind = v["kind"]
    if kind == "transient":
        return timing.Failure.transient()
    if kind == "rate_limited":
        return timing.Failure.rate_limited(v["retry_after"])
    assert kind == "error"
    return timing.Failure.error(v["status"], v["code"])


def check_decision(case: str, got: timing.Decision, want: dict[str, Any]) -> None:
    if "extend" in want:
        assert isinstance(got, timing.Extend), f"{case}: {got}"
        assert same(got.delay_ms, num(want["extend"]["delay_ms"])), f"{case}: {got}"
        assert got.key == want["extend"]["key"], case
        return
    assert isinstance(got, timing.Stop), f"{case}: {got}"
    assert got.reason == want["stop"], f"{case}: {got}"
    if "code" in want:
        assert got.code == want["code"], case
    if "status" in want:
        assert got.status == want["status"], case


def ids(cases: list[dict[str, Any]]) -> list[str]:
    return [c.get("name") or repr(c.get("raw")) for c in cases]


@pytest.mark.parametrize("case", section("schedule"), ids=ids(section("schedule")))
def test_schedule(case: dict[str, Any]) -> None:
    i, e = case["input"], case["expect"]
    s = timing.schedule(
        num(i["remaining_ttl_ms"]),
        num(i["rtt_ms"]),
        num(i["max_rtt_ms"]),
        num(i["request_timeout_ms"]),
    )
    for key in ("lead_floor_ms", "attempt_budget_ms", "safety_margin_ms",
                "retry_reserve_ms", "next_delay_ms"):  # fmt: skip
        assert same(getattr(s, key), num(e[key])), f"{case['name']} {key}: {s}"
    # The individual rules compose to the same schedule.
    budget = timing.attempt_budget(num(i["request_timeout_ms"]), num(i["max_rtt_ms"]))
    margin = timing.safety_margin(num(i["max_rtt_ms"]))
    assert same(budget, s.attempt_budget_ms)
    assert same(margin, s.safety_margin_ms)
    assert same(timing.retry_reserve(budget, margin), s.retry_reserve_ms)
    assert same(timing.lead_floor(num(i["remaining_ttl_ms"]), num(i["rtt_ms"])), s.lead_floor_ms)
    if i["rtt_ms"] is not None:
        assert same(timing.next_delay(s.lead_floor_ms, s.retry_reserve_ms), s.next_delay_ms)


@pytest.mark.parametrize("case", section("retry_after"), ids=ids(section("retry_after")))
def test_retry_after(case: dict[str, Any]) -> None:
    parsed = timing.parse_retry_after(case["raw"])
    assert parsed.kind == case["kind"], case["why"]
    assert parsed.ms == num(case["ms"]), case["why"]
    assert timing.retry_after_ms(case["raw"]) == num(case["ms"])
    if parsed.kind == "seconds":
        assert isinstance(parsed.seconds, int)
    else:
        assert parsed.seconds is None


@pytest.mark.parametrize("case", section("retry"), ids=ids(section("retry")))
def test_retry(case: dict[str, Any]) -> None:
    i, e = case["input"], case["expect"]
    estimate = timing.current_lead_estimate(num(i["last_lead_floor_ms"]), num(i["elapsed_ms"]))
    assert same(estimate, num(e["current_lead_estimate_ms"])), case["name"]
    window = timing.retry_window(estimate, num(i["attempt_budget_ms"]), num(i["safety_margin_ms"]))
    assert same(window, num(e["retry_window_ms"])), case["name"]
    want_delay = num(e["transient_retry_delay_ms"])
    if want_delay is None:
        assert window < 0, "no delay is defined for a negative window"
    else:
        assert same(timing.transient_retry_delay(estimate, window), want_delay), case["name"]


@pytest.mark.parametrize("case", section("planner"), ids=ids(section("planner")))
def test_planner(case: dict[str, Any]) -> None:
    planner = timing.PrimaryPlanner(num(case["request_timeout_ms"]))
    assert len(case["steps"]) == len(case["expect"])
    for step, want in zip(case["steps"], case["expect"], strict=True):
        if step["event"] == "success":
            got = planner.on_success(
                step["at_us"], num(step["remaining_ttl_ms"]), num(step["rtt_ms"])
            )
        else:
            got = planner.on_failure(step["at_us"], failure(step["failure"]))
        check_decision(case["name"], got, want)


@pytest.mark.parametrize("case", section("fallback"), ids=ids(section("fallback")))
def test_fallback(case: dict[str, Any]) -> None:
    create = case["create"]
    planner = timing.FallbackPlanner(
        case["requested_ttl_ms"], create["at_us"], create["expires_at_ms"]
    )
    e = case["expect"]
    check_decision(case["name"], planner.first_beat(case["prime"]), e["first_beat"])
    assert len(case["steps"]) == len(e["decisions"])
    regimes = e.get("regimes", [])
    last_at = create["at_us"]
    for n, (step, want) in enumerate(zip(case["steps"], e["decisions"], strict=True)):
        last_at = step["at_us"]
        if step["event"] == "success":
            got = planner.on_success(step["at_us"], step["expires_at_ms"])
        else:
            got = planner.on_failure(step["at_us"], failure(step["failure"]))
        check_decision(case["name"], got, want)
        if n < len(regimes):
            assert planner.regime == regimes[n], case["name"]
    if "final_lead_min_ms" in e:
        assert planner.lead_min_ms(last_at) == e["final_lead_min_ms"]


@pytest.mark.parametrize("case", section("extend_timeout"), ids=ids(section("extend_timeout")))
def test_extend_timeout(case: dict[str, Any]) -> None:
    i, e = case["input"], case["expect"]
    got = timing.extend_timeout(
        num(i["lead_floor_ms"]), num(i["max_rtt_ms"]), num(i["configured_timeout_ms"])
    )
    assert got.source == e["source"], case["name"]
    for key in ("timeout_ms", "min_lead_floor_ms", "max_keeping_timeout_ms",
                "target_timeout_ms", "attempt_cutoff_ms"):  # fmt: skip
        assert same(getattr(got, key), num(e[key])), f"{case['name']} {key}: {got}"
    assert same(timing.attempt_cutoff(got.timeout_ms), num(e["attempt_cutoff_ms"]))
    assert same(timing.min_lead_floor(0, num(i["max_rtt_ms"])), num(e["min_lead_floor_ms"]))


@pytest.mark.parametrize("case", section("planner_derived"), ids=ids(section("planner_derived")))
def test_planner_derived(case: dict[str, Any]) -> None:
    planner = timing.PrimaryPlanner(num(case["configured_timeout_ms"]), derive_timeout=True)
    assert len(case["steps"]) == len(case["expect"])
    for step, want in zip(case["steps"], case["expect"], strict=True):
        if step["event"] == "success":
            got = planner.on_success(
                step["at_us"], num(step["remaining_ttl_ms"]), num(step["rtt_ms"])
            )
        else:
            got = planner.on_failure(step["at_us"], failure(step["failure"]))
        check_decision(case["name"], got, want)
        assert same(planner.attempt_timeout_ms, num(want["attempt_timeout_ms"])), case["name"]


def test_every_section_is_covered() -> None:
    known = {"format", "version", "about", "schedule", "retry_after", "retry", "planner",
             "fallback", "extend_timeout", "planner_derived"}  # fmt: skip
    assert set(DOC) == known, "a new vector section needs a test here"
