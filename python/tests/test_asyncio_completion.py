"""How asyncio awaitables complete (bindings/python/src/aio.rs): each event loop gets its own
completion queue, drained on the loop's own thread. These tests cover what must hold whatever
the mechanism: results reach the right future in large concurrent batches, several loops in
several threads run at once, a loop closed with work in flight leaves the process intact and
the next loop working, a cancelled await never stops the Rust work (a cancelled settlement
still settles), and no completion lands on a cancelled future. All over real HTTP against
the in-process local server.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import cycles
from cycles.testing import LocalServer

ACTION = cycles.Action("llm.completion", "openai:gpt-4o-mini")
USD = cycles.Unit.USD_MICROCENTS


def usd(n: int) -> cycles.Amount:
    return cycles.Amount(USD, n)


def wait_for(check: Callable[[], bool], what: str, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def kinds(server: LocalServer) -> list[str]:
    return [e.kind for e in server.ledger()]


def arrived(server: LocalServer, operation: str) -> int:
    return sum(1 for r in server.requests() if r.operation == operation)


@pytest.fixture
def unraisable() -> Iterator[list[Any]]:
    """Everything reported through ``sys.unraisablehook`` during the test (a completion that
    asyncio refused, e.g. set_result on a cancelled future, would land here)."""
    seen: list[Any] = []
    old = sys.unraisablehook
    sys.unraisablehook = seen.append
    try:
        yield seen
    finally:
        sys.unraisablehook = old


async def reserve_many(client: cycles.AsyncClient, tag: str, n: int) -> None:
    """`n` concurrent reservations, each with its own estimate: every result must carry its
    own amount, so a completion delivered to the wrong future shows."""
    created = await asyncio.gather(
        *(
            client.create_reservation(
                idempotency_key=f"{tag}-{i}", action=ACTION, estimate=usd(i + 1)
            )
            for i in range(n)
        )
    )
    assert [c.reserved for c in created] == [usd(i + 1) for i in range(n)]
    assert len({c.reservation_id for c in created}) == n


async def test_a_large_batch_completes_each_future_with_its_own_result(
    server: LocalServer,
) -> None:
    async with server.async_client() as client:
        await reserve_many(client, "batch", 200)


def test_loops_in_several_threads_at_once(server: LocalServer) -> None:
    errors: list[BaseException] = []
    start = threading.Barrier(4)

    async def one_loop(t: int, round_: int) -> None:
        async with server.async_client() as client:
            await reserve_many(client, f"t{t}-r{round_}", 25)
            async with client.reserve(100, action=ACTION) as r:
                r.set_actual(t + 1)
            assert r.settlement is not None

    def run(t: int) -> None:
        try:
            start.wait()
            # Two loops one after the other per thread: the second registers anew.
            for round_ in range(2):
                asyncio.run(one_loop(t, round_))
        except BaseException as e:  # reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=run, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(30)
    assert not errors, errors
    assert kinds(server).count("reserve") == 4 * 2 * 26
    commits = [e.amount or 0 for e in server.ledger() if e.kind == "commit"]
    assert sorted(commits) == sorted([1, 2, 3, 4] * 2)


def test_a_loop_closed_with_work_in_flight(server: LocalServer, unraisable: list[Any]) -> None:
    server.add_fault("createReservation", {"kind": "delay", "ms": 500}, times=1)
    client = server.async_client()
    loop = asyncio.new_event_loop()
    try:

        async def start() -> asyncio.Task[Any]:
            task = asyncio.ensure_future(
                client.create_reservation(idempotency_key="k-late", action=ACTION, estimate=usd(5))
            )
            await asyncio.sleep(0.05)
            return task

        pending = loop.run_until_complete(start())
    finally:
        loop.close()  # the reservation is still in flight, its future pending
    # That task can never finish (its loop is closed); it is the caller's to drop, and asyncio
    # would log it as destroyed while pending.
    pending._log_destroy_pending = False  # type: ignore[attr-defined]
    # The work completes on core's runtime for a loop that is gone.
    wait_for(lambda: kinds(server) == ["reserve"], "the in-flight reservation")
    time.sleep(0.05)  # its completion is queued for the closed loop: nothing may break

    async def again() -> None:
        await reserve_many(client, "after", 10)
        await client.aclose()

    asyncio.run(again())
    assert kinds(server) == ["reserve"] * 11
    assert not pending.done()
    assert unraisable == []


async def test_a_cancelled_call_still_runs_to_the_end(
    server: LocalServer, unraisable: list[Any]
) -> None:
    """Cancelling the await abandons the result, not the work (python/README.md): the request
    still reaches the server and applies. The same idempotency key then replays it."""
    # Long enough that the cancel surely comes first, even on a busy machine.
    server.add_fault("createReservation", {"kind": "delay", "ms": 1000}, times=1)
    async with server.async_client() as client:
        task = asyncio.ensure_future(
            client.create_reservation(idempotency_key="k-cancel", action=ACTION, estimate=usd(7))
        )
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert kinds(server) == []
        await asyncio.to_thread(wait_for, lambda: kinds(server) == ["reserve"], "the reservation")
        await asyncio.sleep(0.05)  # its completion reaches the loop and finds the future done
        again = await client.create_reservation(
            idempotency_key="k-cancel", action=ACTION, estimate=usd(7)
        )
        assert again.reserved == usd(7)
    assert kinds(server) == ["reserve"]
    assert unraisable == []


async def test_a_task_cancelled_while_settling_still_settles(
    server: LocalServer, tmp_path: Path, unraisable: list[Any]
) -> None:
    server.add_fault("commitReservation", {"kind": "delay", "ms": 1000}, times=1)
    async with server.async_client(journal_dir=tmp_path) as client:
        handles: list[cycles.GuardedReservation] = []

        async def work() -> None:
            async with client.reserve(1_000, action=ACTION) as r:
                handles.append(r)
                r.set_actual(42)

        task = asyncio.create_task(work())
        # The body is over and the commit is on the wire: the task awaits the settlement.
        await asyncio.to_thread(
            wait_for, lambda: arrived(server, "commitReservation") == 1, "the commit request"
        )
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.to_thread(
            wait_for, lambda: "commit" in kinds(server), "the settlement after the cancel"
        )
        assert [(e.kind, e.amount) for e in server.ledger()] == [
            ("reserve", 1_000),
            ("commit", 42),
        ]
        assert cycles.current_reservation() is None
        # Nothing left for the journal to replay: the settlement completed, not abandoned.
        report = await client.flush()
        assert report.settled == 0 and report.remaining == ()
    assert unraisable == []


async def test_errors_keep_their_typed_classes(server: LocalServer) -> None:
    async with server.async_client() as client:
        with pytest.raises(cycles.NotFoundError) as e:
            await client.get_reservation("rsv_missing")
        assert e.value.http_status == 404
        server.add_fault("decide", {"kind": "rate_limited", "retry_after": "2"}, times=1)
        with pytest.raises(cycles.RateLimitedError) as r:
            await client.decide(idempotency_key="k-429", action=ACTION, estimate=usd(1))
        assert r.value.retryable and r.value.retry_after == 2


def test_a_loop_that_cannot_watch_descriptors_gets_a_typed_error(server: LocalServer) -> None:
    class NoReaders(asyncio.SelectorEventLoop):
        def add_reader(self, fd: Any, callback: Any, *args: Any) -> None:  # type: ignore[override]
            raise NotImplementedError("no add_reader here")

    async def main() -> None:
        async with server.async_client() as client:
            with pytest.raises(cycles.CyclesRuntimeError, match="add_reader"):
                await client.decide(idempotency_key="k-nr", action=ACTION, estimate=usd(1))

    loop = NoReaders()
    try:
        loop.run_until_complete(main())
    finally:
        loop.close()
    assert arrived(server, "decide") == 0  # refused before any work started
