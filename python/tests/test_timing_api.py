"""cycles.timing beyond the vectors: the infinity representation, argument errors, the
planner accessors and rounding helpers."""

from __future__ import annotations

import math

import pytest

import cycles
from cycles import timing


def test_infinity_is_math_inf_in_and_out() -> None:
    assert timing.INFINITE == math.inf
    assert timing.attempt_budget(math.inf, 10) == math.inf
    assert timing.retry_reserve(math.inf, 1000) == math.inf
    assert timing.retry_window(5000, math.inf, 1000) == -math.inf
    assert timing.transient_retry_delay(5000, -math.inf) == 0
    assert timing.transient_retry_delay(math.inf, math.inf) == 30_000
    big = 2**64 - 1
    assert timing.retry_reserve(big, 1) == math.inf, "overflow is infinity, never wraparound"
    assert timing.retry_reserve(2**62, 1000) == 2**63 + 1000
    assert isinstance(timing.next_delay(10, 5), int)


def test_bad_arguments_raise_invalid_argument() -> None:
    for bad in (-1, 1.5, "10", -math.inf, math.nan, 2**64):
        with pytest.raises(cycles.InvalidArgumentError):
            timing.attempt_budget(bad, None)  # type: ignore[arg-type]
    with pytest.raises(cycles.InvalidArgumentError):
        timing.transient_retry_delay(1, "x")  # type: ignore[arg-type]
    with pytest.raises(cycles.InvalidArgumentError):
        timing.cadence("sideways", 1, 1)
    with pytest.raises(cycles.InvalidArgumentError):
        timing.PrimaryPlanner(10_000).on_failure(0, timing.Failure("bogus"))  # type: ignore[arg-type]
    with pytest.raises(cycles.InvalidArgumentError):
        timing.PrimaryPlanner(10_000).on_failure(0, timing.Failure("error"))


def test_rounding_helpers() -> None:
    assert timing.from_micros_ceil(1) == 1
    assert timing.from_micros_ceil(1000) == 1
    assert timing.from_micros_ceil(1001) == 2
    assert timing.from_micros_floor(1999) == 1
    assert timing.from_micros_ceil(2**70) == 2**70 // 1000 + 1
    assert timing.from_micros_ceil(2**80) == math.inf


def test_primary_planner_accessors() -> None:
    p = timing.PrimaryPlanner(10_000)
    assert p.max_rtt_ms is None and p.failure_math(0) is None
    d = p.on_success(0, 60_000, 1500)
    assert d == timing.Extend(35_500, "fresh")
    p.observe_rtt(2000)
    assert p.max_rtt_ms == 2000
    m = p.failure_math(20_000_000)
    assert m == timing.FailureMath(20_000, 38_500, 38_500 - 10_000 - 4000)
    stop = p.on_failure(21_000_000, timing.Failure.error(409, "RESERVATION_FINALIZED"))
    assert stop == timing.Stop("permanent", code="RESERVATION_FINALIZED")
    assert timing.PERMANENT_STOP_CODES == (
        "RESERVATION_EXPIRED",
        "RESERVATION_FINALIZED",
        "MAX_EXTENSIONS_EXCEEDED",
        "TENANT_CLOSED",
        "NOT_FOUND",
    )
    assert timing.is_permanent_stop_code("NOT_FOUND")
    assert not timing.is_permanent_stop_code("INVALID_REQUEST")


def test_stop_details() -> None:
    p = timing.PrimaryPlanner(10_000)
    p.on_success(0, 60_000, 1000)
    d = p.on_failure(37_100_000, timing.Failure.rate_limited("99"))
    assert isinstance(d, timing.Stop) and d.reason == "rate_limit_beyond_window"
    assert d.retry_after_kind == "seconds" and d.retry_after_seconds == 99
    assert isinstance(d.retry_window_ms, int)


def test_fallback_helpers() -> None:
    assert timing.classify_grant(60_000, 60_000, 60_000) == "normal"
    assert timing.classify_grant(0, 1, 60_000) == "max_lead_clamped"
    assert timing.classify_grant(10_000, 30_000, 60_000) == "grant_clamped"
    assert timing.cadence("normal", 60_000, 60_000) == 30_000
    assert timing.delay_with_skips(150_000, 60_000, 30_000) == 90_000
    f = timing.FallbackPlanner(60_000, 0, 60_000)
    assert f.regime == "unknown" and f.last_grant_ms is None
    f.on_success(10_000, 120_000)
    assert f.regime == "normal" and f.last_grant_ms == 60_000
    assert f.lead_min_ms(10_000) == 60_000 - 10


def test_rtt_from_a_real_response_feeds_the_schedule(server) -> None:
    with server.client() as c:
        created = c.create_reservation(
            idempotency_key="k",
            action=cycles.Action("a", "b"),
            estimate=cycles.Amount("USD_MICROCENTS", 1),
            ttl_ms=60_000,
        )
    assert created.meta is not None and created.remaining_ttl_ms is not None
    rtt = timing.from_micros_ceil(created.meta.rtt_us)
    s = timing.schedule(created.remaining_ttl_ms, rtt, rtt, c.request_timeout_ms)
    assert s.attempt_budget_ms == 10_000
    assert s.lead_floor_ms == created.remaining_ttl_ms - rtt
    assert s.next_delay_ms == s.lead_floor_ms - s.retry_reserve_ms
