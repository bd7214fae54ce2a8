"""The guarded lifecycle (issue 5): context managers, decorators, streaming, the current
reservation, settlement results, flush/drain/close, events to logging and a callback. Every
test runs against the in-process LocalServer over real HTTP, journaling under tmp_path."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import cycles
from cycles.testing import LocalServer

ACTION = cycles.Action("llm.completion", "openai:gpt-4o-mini")


class Boom(Exception):
    """The body's own exception; it must come out unchanged."""


def ops(server: LocalServer) -> list[str]:
    return [r.operation or "" for r in server.requests()]


def ledger(server: LocalServer) -> list[tuple[str, int | None]]:
    return [(e.kind, e.amount) for e in server.ledger()]


def journal_files(d: Path) -> list[Path]:
    """Every file but the partition's lock table (`v2.locks`), which stays."""
    return [p for p in d.rglob("*") if p.is_file() and p.name != "v2.locks"]


@pytest.fixture
def client(server: LocalServer, tmp_path: Path):
    c = server.client(journal_dir=tmp_path)
    try:
        yield c
    finally:
        c.close()


@pytest.fixture
async def aclient(server: LocalServer, tmp_path: Path):
    c = server.async_client(journal_dir=tmp_path)
    try:
        yield c
    finally:
        await c.aclose()


# -- context manager ------------------------------------------------------------------------


def test_context_manager_commits_set_actual(client: cycles.Client, server: LocalServer) -> None:
    with client.reserve(1_000, action=ACTION) as r:
        assert cycles.current_reservation() is r
        assert r.reservation_id.startswith("rsv_") or r.reservation_id
        r.set_actual(700)
        assert r.actual == 700
    assert cycles.current_reservation() is None
    assert r.outcome == "settled"
    assert r.settlement is not None
    assert r.settlement.status == cycles.SettlementStatus.COMMITTED
    assert r.settlement.settled
    assert r.settlement.charged == cycles.Amount("USD_MICROCENTS", 700)
    assert ledger(server) == [("reserve", 1_000), ("commit", 700)]


async def test_async_context_manager_commits(
    aclient: cycles.AsyncClient, server: LocalServer
) -> None:
    async with aclient.reserve(cycles.Amount("USD_MICROCENTS", 900), action=ACTION) as r:
        assert cycles.current_reservation() is r
        await asyncio.sleep(0.01)
        r.set_actual(cycles.Amount("USD_MICROCENTS", 650))
    assert cycles.current_reservation() is None
    assert r.settlement is not None and r.settlement.status == "committed"
    assert ledger(server) == [("reserve", 900), ("commit", 650)]


def test_idempotency_keys_derive_from_the_base_key(
    client: cycles.Client, server: LocalServer
) -> None:
    with client.reserve(10, action=ACTION, idempotency_key="job-7") as r:
        r.set_actual(5)
    keys = [(q.operation, q.idempotency_key) for q in server.requests()]
    assert ("createReservation", "job-7") in keys
    assert ("commitReservation", "job-7:commit") in keys


# -- decorator ------------------------------------------------------------------------------


def test_decorator_sync_actual_value_and_callable(
    client: cycles.Client, server: LocalServer
) -> None:
    @client.guarded(500, action=ACTION, actual=120)
    def fixed(x: int) -> int:
        assert cycles.current_reservation() is not None
        return x + 1

    @client.guarded(500, action=ACTION, actual=lambda result: result["tokens"] * 2)
    def from_result(tokens: int) -> dict[str, int]:
        return {"tokens": tokens}

    @client.guarded(500, action=ACTION)
    def reports_itself() -> str:
        r = cycles.current_reservation()
        assert r is not None
        r.set_actual(33)
        return "ok"

    assert fixed(1) == 2
    assert fixed.__name__ == "fixed"
    assert from_result(150) == {"tokens": 150}
    assert reports_itself() == "ok"
    commits = [a for k, a in ledger(server) if k == "commit"]
    assert commits == [120, 300, 33]


async def test_decorator_async_actual_value_and_callable(
    aclient: cycles.AsyncClient, server: LocalServer
) -> None:
    @aclient.guarded(800, action=ACTION, actual=lambda n: n)
    async def work(n: int) -> int:
        await asyncio.sleep(0.01)
        assert cycles.current_reservation() is not None
        return n

    @aclient.guarded(800, action=ACTION, actual=77)
    async def fixed() -> str:
        return "done"

    assert await work(250) == 250
    assert await fixed() == "done"
    assert [a for k, a in ledger(server) if k == "commit"] == [250, 77]


async def test_sync_client_decorates_async_functions(
    client: cycles.Client, server: LocalServer
) -> None:
    @client.guarded(100, action=ACTION, actual=lambda r: r)
    async def work() -> int:
        return 42

    assert await work() == 42
    assert ("commit", 42) in ledger(server)


def test_decorated_failure_releases_and_reraises(
    client: cycles.Client, server: LocalServer
) -> None:
    err = Boom("model call failed")

    @client.guarded(100, action=ACTION, actual=10)
    def work() -> None:
        raise err

    with pytest.raises(Boom) as info:
        work()
    assert info.value is err
    assert [k for k, _ in ledger(server)] == ["reserve", "release"]


# -- failures -------------------------------------------------------------------------------


def test_stream_add_then_exception_settles_known_usage(
    client: cycles.Client, server: LocalServer
) -> None:
    err = Boom("stream broke")
    with pytest.raises(Boom) as info:
        with client.stream(10_000, action=ACTION) as r:
            for chunk in (100, 250, 50):
                r.add(chunk)
            raise err
    assert info.value is err  # unchanged
    assert r.outcome == "work_failed"
    assert r.settlement is not None and r.settlement.status == "committed"
    assert ledger(server) == [("reserve", 10_000), ("commit", 400)]


async def test_async_stream_exception_settles_known_usage(
    aclient: cycles.AsyncClient, server: LocalServer
) -> None:
    with pytest.raises(Boom):
        async with aclient.stream(1_000, action=ACTION) as r:
            r.add(30)
            await asyncio.sleep(0)
            r.add(12)
            raise Boom()
    assert ledger(server) == [("reserve", 1_000), ("commit", 42)]


def test_failure_before_any_actual_releases(client: cycles.Client, server: LocalServer) -> None:
    err = KeyError("missing")
    with pytest.raises(KeyError) as info:
        with client.reserve(1_000, action=ACTION) as r:
            raise err
    assert info.value is err
    assert r.outcome == "work_failed" and r.settlement_or_none is None and r.released
    assert [k for k, _ in ledger(server)] == ["reserve", "release"]
    assert "commitReservation" not in ops(server)


def test_missing_actual_releases(client: cycles.Client, server: LocalServer) -> None:
    with pytest.raises(cycles.MissingActualError) as info:
        with client.reserve(1_000, action=ACTION, idempotency_key="m-1") as r:
            pass
    e = info.value
    assert isinstance(e, cycles.CyclesError)
    assert e.reservation_id == r.reservation_id
    assert e.released and e.release_error is None
    assert "nothing was committed, and the reservation was released" in str(e)
    assert r.outcome == "missing_actual" and r.settlement_or_none is None and r.released
    assert ops(server) == ["createReservation", "releaseReservation"]  # no commit, no event
    assert server.requests()[1].idempotency_key == "m-1:release"
    assert [k for k, _ in ledger(server)] == ["reserve", "release"]


def test_missing_actual_whose_release_fails_says_so(
    client: cycles.Client, server: LocalServer
) -> None:
    server.add_fault("releaseReservation", {"kind": "server_error", "status": 500}, times=0)
    with pytest.raises(cycles.MissingActualError) as info:
        with client.reserve(1_000, action=ACTION) as r:
            pass
    e = info.value
    assert not e.released and not r.released
    assert e.release_error is not None and e.release_error == r.release_error
    assert "releasing the reservation failed" in str(e)
    assert "the estimate stays held until the lease expires" in str(e)
    assert [k for k, _ in ledger(server)] == ["reserve"]
    assert "commitReservation" not in ops(server)


def test_empty_stream_releases(client: cycles.Client, server: LocalServer) -> None:
    with pytest.raises(cycles.MissingActualError, match="reservation was released") as info:
        with client.stream(1_000, action=ACTION) as r:
            pass  # the stream delivered nothing: no actual, not an actual of 0
    assert info.value.released and r.released
    assert ops(server) == ["createReservation", "releaseReservation"]
    assert [k for k, _ in ledger(server)] == ["reserve", "release"]


async def test_async_missing_actual(aclient: cycles.AsyncClient, server: LocalServer) -> None:
    @aclient.guarded(100, action=ACTION)
    async def work() -> None:
        return None

    with pytest.raises(cycles.MissingActualError) as info:
        await work()
    assert info.value.released
    assert ops(server) == ["createReservation", "releaseReservation"]


def test_negative_actual_is_invalid(client: cycles.Client, server: LocalServer) -> None:
    with pytest.raises(cycles.InvalidActualError) as info:
        with client.reserve(100, action=ACTION) as r:
            r.set_actual(-5)
    assert info.value.released and r.released and r.outcome == "invalid_actual"
    assert "negative actual amount (-5)" in str(info.value)
    assert ops(server) == ["createReservation", "releaseReservation"]
    assert [k for k, _ in ledger(server)] == ["reserve", "release"]


def test_denied_reservation_runs_no_work(client: cycles.Client, server: LocalServer) -> None:
    ran = []
    server.add_fault(
        "createReservation", {"kind": "error", "status": 409, "code": "BUDGET_EXCEEDED"}
    )
    with pytest.raises(cycles.BudgetExceededError):
        with client.reserve(100, action=ACTION):
            ran.append(1)
    assert ran == []
    assert cycles.current_reservation() is None


def test_context_is_single_use(client: cycles.Client) -> None:
    ctx = client.reserve(10, action=ACTION)
    with ctx as r:
        r.set_actual(1)
    with pytest.raises(cycles.InvalidArgumentError):
        with ctx:
            pass


# -- the current reservation ----------------------------------------------------------------


def test_nested_guards_restore_the_outer(client: cycles.Client, server: LocalServer) -> None:
    assert cycles.current_reservation() is None
    with client.reserve(1_000, action=ACTION) as outer:
        outer.set_actual(10)
        with client.reserve(500, action=ACTION) as inner:
            assert cycles.current_reservation() is inner
            inner.set_actual(5)
        assert cycles.current_reservation() is outer
        with pytest.raises(Boom):
            with client.reserve(500, action=ACTION) as failing:
                assert cycles.current_reservation() is failing
                raise Boom()
        assert cycles.current_reservation() is outer
    assert cycles.current_reservation() is None
    assert sorted(a or 0 for k, a in ledger(server) if k == "commit") == [5, 10]


async def test_asyncio_tasks_see_their_own_reservation(aclient: cycles.AsyncClient) -> None:
    seen: dict[str, Any] = {}

    async def task(name: str, n: int) -> None:
        async with aclient.reserve(100, action=ACTION) as r:
            seen[name] = r
            await asyncio.sleep(0.05)  # interleave with the other task
            assert cycles.current_reservation() is r
            async with aclient.reserve(10, action=ACTION) as inner:
                await asyncio.sleep(0.01)
                assert cycles.current_reservation() is inner
                inner.set_actual(1)
            assert cycles.current_reservation() is r
            r.set_actual(n)

    async with aclient.reserve(1_000, action=ACTION) as outer:
        await asyncio.gather(task("a", 11), task("b", 22))
        assert cycles.current_reservation() is outer
        outer.set_actual(3)
    assert cycles.current_reservation() is None
    assert seen["a"] is not seen["b"]
    assert seen["a"].settlement.status == "committed"


# -- heartbeat ------------------------------------------------------------------------------


def test_heartbeat_keeps_a_short_lease_alive(server: LocalServer, tmp_path: Path) -> None:
    with server.client(journal_dir=tmp_path, request_timeout=0.5) as client:
        with client.reserve(1_000, action=ACTION, ttl_ms=3_500) as r:
            time.sleep(4.5)
            r.set_actual(900)
    assert r.lease is not None and r.lease.extensions >= 1
    assert not r.lease.stopped_early
    assert (r.lease.path, r.lease.end, r.lease.stop_reason) == ("primary", "finished", None)
    assert r.settlement is not None
    # Committed (not recovered through an event): the reservation never expired.
    assert r.settlement.status == "committed"
    assert ops(server).count("extendReservation") >= 1


def test_a_guard_driven_on_its_thread_beats_while_the_thread_sleeps(
    server: LocalServer, tmp_path: Path
) -> None:
    # A thread's third blocking call on is driven on the thread itself (docs/bindings.md,
    # threading rule 2); its guard's heartbeat must still run while the thread sleeps.
    out: dict[str, Any] = {}

    def worker() -> None:
        with server.client(journal_dir=tmp_path, request_timeout=0.5) as client:
            with client.reserve(10, action=ACTION) as warm:  # calls one and two
                warm.set_actual(1)
            with client.reserve(1_000, action=ACTION, ttl_ms=1_000) as r:  # driven
                time.sleep(1.6)
                r.set_actual(900)
            out["r"] = r

    t = threading.Thread(target=worker)
    t.start()
    t.join(30)
    r = out["r"]
    assert r.lease is not None and r.lease.extensions >= 1
    assert r.settlement is not None and r.settlement.status == "committed"


# -- settlement outage, flush, drain, close -------------------------------------------------


def test_commit_outage_leaves_pending_then_drain_settles(
    server: LocalServer, tmp_path: Path
) -> None:
    client = server.client(journal_dir=tmp_path, settle_max_attempts=2, replay_interval=3600)
    try:
        server.add_fault("commitReservation", {"kind": "server_error", "status": 503}, times=0)
        with client.reserve(1_000, action=ACTION) as r:
            r.set_actual(640)
        s = r.settlement
        assert s is not None and s.status == "pending" and s.pending
        assert s.journaled is True
        assert s.error_kind is not None
        assert journal_files(tmp_path), "the pending settlement is journaled"
        assert ("commit", 640) not in ledger(server)

        still = client.flush()
        assert [p.reservation_id for p in still.remaining] == [r.reservation_id]

        server.clear_faults()
        report = client.drain(5.0)
        assert report.settled == 1 and report.remaining == ()
        assert report.outcomes[0].reservation_id == r.reservation_id
        assert report.outcomes[0].status == "committed"
        assert ("commit", 640) in ledger(server)
        assert journal_files(tmp_path) == []
    finally:
        client.close()


async def test_async_flush_and_drain(server: LocalServer, tmp_path: Path) -> None:
    async with server.async_client(
        journal_dir=tmp_path, settle_max_attempts=1, replay_interval=3600
    ) as client:
        server.add_fault("commitReservation", {"kind": "connection_reset"}, times=0)
        async with client.reserve(100, action=ACTION) as r:
            r.set_actual(60)
        assert r.settlement is not None and r.settlement.status == "pending"
        server.clear_faults()
        report = await client.drain(5.0)
        assert report.settled == 1
        assert (await client.flush()).remaining == ()
    assert ("commit", 60) in ledger(server)


def test_close_drains_within_its_bound(server: LocalServer, tmp_path: Path) -> None:
    client = server.client(journal_dir=tmp_path, settle_max_attempts=1, replay_interval=3600)
    server.add_fault("commitReservation", {"kind": "server_error", "status": 500}, times=0)
    with client.reserve(100, action=ACTION) as r:
        r.set_actual(70)
    assert r.settlement is not None and r.settlement.pending
    started = time.monotonic()
    report = client.close(timeout=1.0)
    took = time.monotonic() - started
    assert took < 3.0, f"close() took {took:.2f}s with a 1s bound"
    assert report is not None
    assert [p.reservation_id for p in report.remaining] == [r.reservation_id]
    assert journal_files(tmp_path), "unsettled records stay journaled for the next process"
    with pytest.raises(cycles.ClientClosedError):
        client.reserve(1, action=ACTION).__enter__()
    # Closing again (e.g. a `with` block around an explicit close) drains nothing more: it
    # only reports what is pending, sending no request.
    sent = len(server.requests())
    again_report = client.close()
    assert again_report is not None
    assert [p.reservation_id for p in again_report.remaining] == [r.reservation_id]
    assert again_report.outcomes == () and len(server.requests()) == sent

    # The next client (same server, key and journal) settles it: its background replay
    # starts with the lifecycle, and drain() waits until the journal is empty.
    server.clear_faults()
    with server.client(journal_dir=tmp_path) as again:
        report2 = again.drain(5.0)
    assert report2.remaining == ()
    assert ("commit", 70) in ledger(server)
    assert journal_files(tmp_path) == []


def test_close_settles_pending_when_the_server_is_back(server: LocalServer, tmp_path: Path) -> None:
    client = server.client(journal_dir=tmp_path, settle_max_attempts=1, replay_interval=3600)
    server.add_fault("commitReservation", {"kind": "server_error", "status": 502}, times=0)
    with client.reserve(100, action=ACTION) as r:
        r.set_actual(80)
    server.clear_faults()
    report = client.close()
    assert report is not None and report.settled == 1 and report.remaining == ()
    assert ("commit", 80) in ledger(server)


# -- events ---------------------------------------------------------------------------------


def test_events_reach_the_logger_and_the_callback(
    server: LocalServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="cycles")
    got: list[cycles.LifecycleEvent] = []
    client = server.client(
        journal_dir=tmp_path, on_event=got.append, settle_max_attempts=2, replay_interval=3600
    )
    server.add_fault("commitReservation", {"kind": "server_error", "status": 503}, times=1)
    with client.reserve(100, action=ACTION) as r:
        r.set_actual(50)
    assert r.settlement is not None and r.settlement.status == "committed"
    client.close()  # delivers every event before returning

    kinds = [e.kind for e in got]
    assert "settlement_attempt_failed" in kinds
    assert "settlement_settled" in kinds
    assert "heartbeat_ended" in kinds
    failed = next(e for e in got if e.kind == "settlement_attempt_failed")
    assert failed.reservation_id == r.reservation_id
    assert failed.error_kind == "SERVER_ERROR"
    assert failed.disposition == "retry"

    records = [x for x in caplog.records if x.name == "cycles"]
    by_kind = {getattr(x, "event_kind", None): x for x in records}
    settled = by_kind["settlement_settled"]
    assert settled.levelno == logging.INFO
    assert settled.__dict__["reservation_id"] == r.reservation_id
    assert settled.__dict__["disposition"] == "settled"
    retry = by_kind["settlement_attempt_failed"]
    assert retry.levelno == logging.WARNING
    assert retry.__dict__["error_kind"] == "SERVER_ERROR"
    assert isinstance(retry.__dict__["cycles_event"], cycles.LifecycleEvent)


def test_a_logging_level_lowered_later_takes_effect_at_the_next_wait(
    server: LocalServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # No on_event and the logger at WARNING: core builds no debug or info events at all.
    caplog.set_level(logging.WARNING, logger="cycles")
    client = server.client(journal_dir=tmp_path)
    with client.reserve(100, action=ACTION) as r:
        r.set_actual(10)
    caplog.set_level(logging.DEBUG, logger="cycles")
    time.sleep(0.3)  # the events thread re-reads the level before each wait (200 ms at most)
    with client.reserve(100, action=ACTION) as r2:
        r2.set_actual(20)
    client.close()  # delivers every event before returning
    settled = [
        x
        for x in caplog.records
        if x.name == "cycles" and getattr(x, "event_kind", None) == "settlement_settled"
    ]
    assert [x.__dict__["reservation_id"] for x in settled] == [r2.reservation_id]
    assert settled[0].levelno == logging.DEBUG  # a first-attempt commit is routine


def test_heartbeat_events_and_a_raising_callback(
    server: LocalServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="cycles")

    def bad(_: cycles.LifecycleEvent) -> None:
        raise RuntimeError("callback bug")

    with server.client(journal_dir=tmp_path, request_timeout=0.5, on_event=bad) as client:
        with client.reserve(100, action=ACTION, ttl_ms=2_000) as r:
            time.sleep(1.5)
            r.set_actual(1)
    assert r.settlement is not None and r.settlement.status == "committed"
    kinds = [getattr(x, "event_kind", None) for x in caplog.records]
    assert "heartbeat_extended" in kinds
    assert any("on_event callback raised" in x.getMessage() for x in caplog.records)


# -- configuration --------------------------------------------------------------------------


def test_journal_settings_from_arguments_and_env(
    server: LocalServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with server.client(journal_dir=tmp_path / "a") as c:
        assert c.journal_dir == str(tmp_path / "a") and c.journal_enabled
    monkeypatch.setenv("CYCLES_BASE_URL", server.url)
    monkeypatch.setenv("CYCLES_API_KEY", server.api_key)
    monkeypatch.setenv("CYCLES_TENANT", server.tenant)
    monkeypatch.setenv("CYCLES_JOURNAL_DIR", str(tmp_path / "env"))
    with cycles.Client.from_env() as c:
        assert c.journal_dir == str(tmp_path / "env")
        with c.reserve(10, action=ACTION) as r:
            r.set_actual(4)
        assert r.settlement is not None and r.settlement.status == "committed"
    c2 = cycles.AsyncClient.from_env(journal_dir=tmp_path / "arg", journal_enabled=False)
    try:
        assert c2.journal_dir == str(tmp_path / "arg") and not c2.journal_enabled
    finally:
        c2.close()


def test_invalid_arguments(client: cycles.Client) -> None:
    with pytest.raises(cycles.InvalidArgumentError):
        client.reserve(10, action=ACTION, heartbeat_policy="panic")
    with pytest.raises(cycles.InvalidArgumentError):
        client.reserve(True, action=ACTION)  # type: ignore[arg-type]
    for bad in (1.5, "10", None):
        with pytest.raises(cycles.InvalidArgumentError, match="an Amount, a mapping or an int"):
            client.reserve(bad, action=ACTION)  # type: ignore[arg-type]
    # Beyond 64 bits JSON would carry the estimate as a float: refused before it is sent.
    for big in (2**63, 2**70, -(2**63) - 1):
        with pytest.raises(cycles.InvalidArgumentError, match="estimate must fit in 64 bits"):
            client.reserve(big, action=ACTION)
    with pytest.raises(cycles.InvalidArgumentError, match="action must be an Action or a mapping"):
        client.reserve(10, action="llm")  # type: ignore[arg-type]
    with pytest.raises(cycles.InvalidArgumentError):
        with client.reserve(10, action=ACTION) as r:
            r.set_actual(1.5)  # type: ignore[arg-type]


def test_usage_reported_after_the_block_is_refused(client: cycles.Client) -> None:
    with client.reserve(10, action=ACTION) as r:
        r.set_actual(4)
    # It would not be settled: refused, never dropped unseen.
    with pytest.raises(cycles.InvalidArgumentError, match="would not be settled"):
        r.set_actual(9)
    with pytest.raises(cycles.InvalidArgumentError, match="would not be settled"):
        r.add(1)
    assert r.settlement is not None and r.settlement.charged is not None
    assert r.settlement.charged.amount == 4


def test_out_of_range_numbers_are_typed_errors_and_the_actual_is_kept(
    client: cycles.Client, server: LocalServer
) -> None:
    # Beyond what the native layer counts in: InvalidArgumentError, never OverflowError.
    with client.reserve(10, action=ACTION) as r:
        for bad in (2**63, -(2**63) - 1, 2**70):
            with pytest.raises(cycles.InvalidArgumentError, match="64 bits"):
                r.set_actual(bad)
            with pytest.raises(cycles.InvalidArgumentError, match="64 bits"):
                r.add(bad)
        r.set_actual(2**63 - 1)  # the edge still fits
        r.set_actual(7)  # the known actual survives the refusals above
    assert r.settlement is not None and r.settlement.status == "committed"
    assert r.settlement.charged is not None and r.settlement.charged.amount == 7
    for bad_seconds in (float("inf"), float("nan"), 1e300):
        with pytest.raises(cycles.InvalidArgumentError, match="timeout"):
            client.drain(timeout=bad_seconds)
        with pytest.raises(cycles.InvalidArgumentError, match="request_timeout"):
            cycles.Client(server.url, server.api_key, request_timeout=bad_seconds)
        with pytest.raises(cycles.InvalidArgumentError, match="replay_interval"):
            cycles.Client(server.url, server.api_key, replay_interval=bad_seconds)
        with pytest.raises(cycles.InvalidArgumentError, match="close_timeout"):
            cycles.Client(server.url, server.api_key, close_timeout=bad_seconds)
    for bad_count in (-1, 2**32, 2**70):
        with pytest.raises(cycles.InvalidArgumentError, match="settle_max_attempts"):
            cycles.Client(server.url, server.api_key, settle_max_attempts=bad_count)
    # 0 is a count; that it allows no attempt is core's rule (ConfigError, as in Rust).
    with pytest.raises(cycles.ConfigError, match="max_attempts"):
        cycles.Client(server.url, server.api_key, settle_max_attempts=0)
    with pytest.raises(cycles.InvalidArgumentError, match="max_concurrent_requests"):
        cycles.Client(server.url, server.api_key, max_concurrent_requests=2**64)
    with pytest.raises(cycles.InvalidArgumentError, match="timeout"):
        client.close(timeout=float("inf"))
    assert not client.closed


# -- interpreter exit -----------------------------------------------------------------------


def test_interpreter_exit_drains_the_journal(server: LocalServer, tmp_path: Path) -> None:
    """A process that ends without close() still settles its pending settlement at exit
    (atexit drains within close_timeout)."""
    import subprocess
    import sys
    import textwrap

    server.add_fault("commitReservation", {"kind": "server_error", "status": 503}, times=1)
    script = textwrap.dedent(
        f"""
        import cycles
        c = cycles.Client({server.url!r}, {server.api_key!r}, tenant={server.tenant!r},
                          journal_dir={str(tmp_path)!r}, settle_max_attempts=1,
                          replay_interval=3600, close_timeout=5.0)
        with c.reserve(100, action={{"kind": "llm.completion", "name": "m"}}) as r:
            r.set_actual(55)
        print(r.settlement.status)
        # no close(): interpreter exit must drain
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "pending"
    assert ("commit", 55) in ledger(server)
    assert journal_files(tmp_path) == []


# -- heartbeat failure policies -------------------------------------------------------------


def test_fail_on_finalize_settles_then_raises(server: LocalServer, tmp_path: Path) -> None:
    server.add_fault(
        "extendReservation", {"kind": "error", "status": 409, "code": "RESERVATION_FINALIZED"}
    )
    with server.client(journal_dir=tmp_path, request_timeout=0.5) as client:
        with pytest.raises(cycles.HeartbeatLapsedError) as info:
            with client.reserve(
                100, action=ACTION, ttl_ms=2_000, heartbeat_policy="fail_on_finalize"
            ) as r:
                time.sleep(1.6)
                r.set_actual(40)
    assert info.value.reservation_id == r.reservation_id
    assert info.value.settlement is not None and info.value.settlement.status == "committed"
    assert r.outcome == "heartbeat_lapsed"
    # Stable names, never Rust debug text: the stop reason, and the lease report's end.
    assert info.value.reason == "permanent"
    assert "finished: permanent (last error: " in str(info.value)
    assert ("commit", 40) in ledger(server)


def test_cancel_policy_flags_the_work(server: LocalServer, tmp_path: Path) -> None:
    server.add_fault(
        "extendReservation", {"kind": "error", "status": 409, "code": "RESERVATION_FINALIZED"}
    )
    got: list[cycles.LifecycleEvent] = []
    with server.client(journal_dir=tmp_path, request_timeout=0.5, on_event=got.append) as client:
        with client.reserve(100, action=ACTION, ttl_ms=2_000, heartbeat_policy="cancel") as r:
            deadline = time.monotonic() + 3.0
            while not r.cancelled and time.monotonic() < deadline:
                time.sleep(0.05)
            assert r.cancelled
            r.set_actual(9)
    assert r.lease is not None and r.lease.stopped_early
    assert (r.lease.end, r.lease.stop_reason, r.lease.stop_detail) == (
        "stopped",
        "permanent",
        {"code": "RESERVATION_FINALIZED"},
    )
    assert r.settlement is not None and r.settlement.status == "committed"
    # core's stable event object (docs/events.md): the stop names its reason and details.
    (failed,) = [e for e in got if e.kind == "heartbeat_failed"]
    assert (failed.level, failed.disposition, failed.error_kind) == (
        "error",
        "stopped",
        "RESERVATION_FINALIZED",
    )
    assert failed.fields["stop_reason"] == "permanent"
    assert failed.fields["stop_detail"] == {"code": "RESERVATION_FINALIZED"}
    (ended,) = [e for e in got if e.kind == "heartbeat_ended"]
    assert (ended.level, ended.disposition, ended.fields["stop_reason"]) == (
        "warning",
        "stopped",
        "permanent",
    )


def test_a_lease_too_short_to_keep_alive_is_reported_when_it_starts(
    server: LocalServer, tmp_path: Path
) -> None:
    # docs/heartbeat.md: no enforced timeout keeps a lead below 3 x 1000 ms + 1 alive; the
    # heartbeat says so as it starts (core's event, forwarded unchanged), naming a ttl that works.
    got: list[cycles.LifecycleEvent] = []
    with server.client(journal_dir=tmp_path, on_event=got.append) as client:
        with client.reserve(100, action=ACTION, ttl_ms=2_000) as short:
            short.set_actual(1)
        with client.reserve(100, action=ACTION, ttl_ms=6_000) as keepable:
            keepable.set_actual(1)
        client.flush()
    warned = [e for e in got if e.kind == "heartbeat_lease_too_short"]
    assert [e.reservation_id for e in warned] == [short.reservation_id]
    (w,) = warned
    assert w.level == "warning"
    assert w.fields["path"] == "primary"
    assert w.fields["lead_floor_ms"] <= 2_000
    assert w.fields["min_ttl_ms"] > 3_000
    assert keepable.settlement is not None and keepable.settlement.status == "committed"


# -- decision, caps, release (docs/lifecycle.md) --------------------------------------------


def test_an_allow_handle_has_no_caps(client: cycles.Client, server: LocalServer) -> None:
    with client.reserve(100, action=ACTION) as r:
        assert r.decision == "ALLOW" and r.caps is None
        r.set_actual(10)
    assert [k for k, _ in ledger(server)] == ["reserve", "commit"]


def test_caps_of_a_budget_reach_the_handle(tmp_path: Path) -> None:
    from conftest import SERVER_MODE

    caps = cycles.Caps(max_tokens=64, tool_denylist=["shell"], cooldown_ms=5)
    budgets = [
        cycles.testing.Budget("tenant:acme", "TOKENS", 1_000),
        cycles.testing.Budget("tenant:acme/workspace:capped", "TOKENS", 1_000, caps=caps),
    ]
    with LocalServer(budgets=budgets, mode=SERVER_MODE) as server:  # type: ignore[arg-type]
        with server.client(journal_dir=tmp_path, default_unit="TOKENS") as client:
            subject = {"tenant": "acme", "workspace": "capped"}
            with client.reserve(100, action=ACTION, subject=subject) as r:
                assert r.decision == "ALLOW_WITH_CAPS"
                assert r.caps == caps and r.caps.max_tokens == 64
                assert r.caps.max_steps_remaining is None
                r.set_actual(r.caps.max_tokens)
            with client.reserve(100, action=ACTION) as plain:
                assert plain.decision == "ALLOW" and plain.caps is None
                plain.set_actual(1)
        assert [(e.kind, e.unit, e.amount) for e in server.ledger()] == [
            ("reserve", "TOKENS", 100),
            ("commit", "TOKENS", 64),
            ("reserve", "TOKENS", 100),
            ("commit", "TOKENS", 1),
        ]


def test_release_ends_the_action_and_the_exit_sends_nothing(
    client: cycles.Client, server: LocalServer
) -> None:
    with client.reserve(1_000, action=ACTION, idempotency_key="rel-1") as r:
        r.release("not needed")
        assert r.finished and r.released and r.outcome == "released"
        with pytest.raises(cycles.InvalidArgumentError):
            r.set_actual(5)  # over: the report would never be settled
    assert r.released and r.settlement_or_none is None and r.release_error is None
    releases = [q for q in server.requests() if q.operation == "releaseReservation"]
    assert [q.idempotency_key for q in releases] == ["rel-1:release"]
    assert json.loads(releases[0].body or "{}")["reason"] == "not needed"
    assert ops(server) == ["createReservation", "releaseReservation"]
    assert [k for k, _ in ledger(server)] == ["reserve", "release"]


def test_release_then_raise_propagates_and_sends_nothing_more(
    client: cycles.Client, server: LocalServer
) -> None:
    with pytest.raises(Boom):
        with client.reserve(1_000, action=ACTION) as r:
            r.release()
            raise Boom()
    assert r.outcome == "released" and r.released
    assert [k for k, _ in ledger(server)] == ["reserve", "release"]


def test_release_after_usage_is_refused_and_the_action_goes_on(
    client: cycles.Client, server: LocalServer
) -> None:
    with client.reserve(1_000, action=ACTION) as r:
        r.add(5)
        with pytest.raises(cycles.InvalidArgumentError):
            r.release("x")
        assert not r.finished and not r.released
        r.add(2)
    assert r.outcome == "settled" and r.settlement.charged == cycles.Amount("USD_MICROCENTS", 7)
    assert [k for k, _ in ledger(server)] == ["reserve", "commit"]
    with pytest.raises(cycles.InvalidArgumentError):
        r.release()  # already finished


def test_a_failed_release_raises_and_ends_the_action(
    client: cycles.Client, server: LocalServer
) -> None:
    server.add_fault("releaseReservation", {"kind": "server_error", "status": 500}, times=0)
    with client.reserve(1_000, action=ACTION) as r:
        with pytest.raises(cycles.CyclesError):
            r.release()
        assert r.finished and not r.released and r.release_error is not None
    assert r.outcome == "released"
    assert [k for k, _ in ledger(server)] == ["reserve"]
    assert "commitReservation" not in ops(server)


async def test_arelease_in_async_with(aclient: cycles.AsyncClient, server: LocalServer) -> None:
    async with aclient.reserve(1_000, action=ACTION, idempotency_key="arel") as r:
        assert r.decision == "ALLOW"
        await r.arelease("changed my mind")
    assert r.released and r.outcome == "released"
    assert [q.idempotency_key for q in server.requests()][1:] == ["arel:release"]
    assert [k for k, _ in ledger(server)] == ["reserve", "release"]


# -- the client's default unit and the bridge's spec defaults -------------------------------


def test_a_bare_estimate_is_reserved_in_the_default_unit(tmp_path: Path) -> None:
    from conftest import SERVER_MODE

    budgets = [cycles.testing.Budget("tenant:acme", "TOKENS", 1_000)]
    with LocalServer(budgets=budgets, mode=SERVER_MODE) as server:  # type: ignore[arg-type]
        with server.client(journal_dir=tmp_path, default_unit="TOKENS") as client:
            assert client.default_unit == "TOKENS"
            with client.reserve(100, action=ACTION) as r:
                assert r.unit == "TOKENS"
                r.set_actual(40)
            assert r.settlement.charged == cycles.Amount("TOKENS", 40)
        reqs = server.requests()
        body = reqs[0].body or ""
        # The bridge filled the defaults: a fresh cycles-<uuid> key and the client's tenant.
        sent = json.loads(body)
        assert sent["estimate"] == {"unit": "TOKENS", "amount": 100}
        assert sent["subject"] == {"tenant": "acme"}
        assert reqs[0].idempotency_key is not None
        assert reqs[0].idempotency_key.startswith("cycles-")
        assert [(e.kind, e.tenant, e.unit, e.amount) for e in server.ledger()] == [
            ("reserve", "acme", "TOKENS", 100),
            ("commit", "acme", "TOKENS", 40),
        ]


def test_the_spec_unit_wins_over_the_default_unit(
    client: cycles.Client, server: LocalServer
) -> None:
    with client.reserve(100, action=ACTION, unit="USD_MICROCENTS") as r:
        assert r.unit == "USD_MICROCENTS"
        r.set_actual(1)
    with pytest.raises(cycles.InvalidArgumentError, match="differs"):
        with client.reserve(cycles.Amount("TOKENS", 5), action=ACTION, unit="USD_MICROCENTS"):
            pass
    assert [(e.kind, e.unit) for e in server.ledger()] == [
        ("reserve", "USD_MICROCENTS"),
        ("commit", "USD_MICROCENTS"),
    ]


def test_an_unknown_default_unit_is_a_config_error(server: LocalServer, tmp_path: Path) -> None:
    with pytest.raises(cycles.ConfigError):
        server.client(journal_dir=tmp_path, default_unit="PARSECS")
    with pytest.raises(cycles.ConfigError):
        server.async_client(journal_dir=tmp_path, default_unit="PARSECS")
    assert server.requests() == []


def test_cycles_unit_sets_the_default_unit_of_from_env(
    server: LocalServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CYCLES_BASE_URL", server.url)
    monkeypatch.setenv("CYCLES_API_KEY", server.api_key)
    monkeypatch.setenv("CYCLES_TENANT", server.tenant)
    monkeypatch.setenv("CYCLES_UNIT", "USD_MICROCENTS")
    with cycles.Client.from_env(journal_dir=tmp_path) as client:
        assert client.default_unit == "USD_MICROCENTS"
        with client.reserve(10, action=ACTION) as r:
            r.set_actual(1)
    monkeypatch.setenv("CYCLES_UNIT", "PARSECS")
    with pytest.raises(cycles.ConfigError):
        cycles.Client.from_env(journal_dir=tmp_path)
    assert [(e.kind, e.unit) for e in server.ledger()] == [
        ("reserve", "USD_MICROCENTS"),
        ("commit", "USD_MICROCENTS"),
    ]


# -- idempotency keys a header cannot carry (sent in the body only) -------------------------

ODD_KEYS = [" padded ", "trail ", "k\u00e9y", "\u6f22\u5b57-\U0001f600"]


@pytest.mark.parametrize("key", ODD_KEYS)
def test_odd_idempotency_keys_through_guarded_calls(
    client: cycles.Client, server: LocalServer, key: str
) -> None:
    with client.reserve(100, action=ACTION, idempotency_key=key) as r:
        r.set_actual(3)
    assert r.settlement.settled

    @client.guarded(100, action=ACTION, idempotency_key=key + "-g", actual=4)
    def work() -> str:
        return "ok"

    assert work() == "ok"
    with pytest.raises(Boom):
        with client.reserve(100, action=ACTION, idempotency_key=key + "-f"):
            raise Boom()
    keys = [e.idempotency_key for e in server.ledger()]
    assert keys == [
        key,
        f"{key}:commit",
        key + "-g",
        f"{key}-g:commit",
        key + "-f",
        f"{key}-f:release",
    ]
