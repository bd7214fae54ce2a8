"""Guards exited in another context than the one they were entered in (issue 9, section 3).

A generator holding ``with client.reserve(...)`` / ``client.stream(...)`` can be resumed by
another asyncio task, stepped on worker threads (``asyncio.to_thread``, anyio's
``to_thread.run_sync``, Starlette's streaming responses), closed by ``aclose()`` from
another task, or collected without being closed. Each step runs in a different
``contextvars`` context, so the context variable behind ``current_reservation()`` cannot be
reset where the guard exits. Settlement must not depend on it: every test here checks the
server's LEDGER (what was committed or released, exactly once), that the settlement happened
at exit (the handle's ``settlement`` / ``outcome``), and that the heartbeat extends nothing
once the guard exited. All over real HTTP against the in-process local server.
"""

from __future__ import annotations

import asyncio
import contextvars
import gc
import threading
import time
from pathlib import Path
from typing import Any, AsyncGenerator, AsyncIterator, Callable, Iterator, MutableMapping

import anyio
import anyio.to_thread
import pytest
from starlette.responses import StreamingResponse

import cycles
from cycles.testing import LocalServer

ACTION = cycles.Action("llm.completion", "openai:gpt-4o-mini")
# Set by each worker-thread step: proves the steps run in different contexts.
PROBE: contextvars.ContextVar[object] = contextvars.ContextVar("probe", default=None)
# A lease the heartbeat extends within about a second with a 0.5 s request timeout.
TTL_MS = 2_000
TIMEOUT_S = 0.5
# Longer than that cadence: a heartbeat still running would extend within this window.
QUIET_S = 1.5


class Boom(Exception):
    """The body's own exception; it must come out unchanged."""


def settled(server: LocalServer) -> list[tuple[str, int | None]]:
    """What the server applied beyond reserves and extensions, in order."""
    return [(e.kind, e.amount) for e in server.ledger() if e.kind not in ("reserve", "extend")]


def extends(server: LocalServer, rid: str) -> int:
    return sum(
        1
        for r in server.requests()
        if r.operation == "extendReservation" and r.reservation_id == rid
    )


def wait_for(check: Callable[[], bool], what: str, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def wait_for_heartbeat(server: LocalServer, rid: str) -> None:
    """Blocks until the heartbeat extended `rid` once: it is running (so a quiet window after
    exit proves it stopped)."""
    wait_for(lambda: extends(server, rid) > 0, "a heartbeat extension", timeout=QUIET_S)


def assert_heartbeat_stopped(server: LocalServer, rid: str) -> None:
    before = extends(server, rid)
    time.sleep(QUIET_S)
    assert extends(server, rid) == before, "the heartbeat went on extending after exit"


async def await_heartbeat(server: LocalServer, rid: str) -> None:
    await asyncio.to_thread(wait_for_heartbeat, server, rid)


async def await_heartbeat_stopped(server: LocalServer, rid: str) -> None:
    await asyncio.to_thread(assert_heartbeat_stopped, server, rid)


@pytest.fixture
def client(server: LocalServer, tmp_path: Path):
    c = server.client(journal_dir=tmp_path, request_timeout=TIMEOUT_S)
    try:
        yield c
    finally:
        c.close()


@pytest.fixture
async def aclient(server: LocalServer, tmp_path: Path):
    c = server.async_client(journal_dir=tmp_path, request_timeout=TIMEOUT_S)
    try:
        yield c
    finally:
        await c.aclose()


def in_new_task(agen: AsyncIterator[Any]) -> asyncio.Task[Any]:
    """One step of `agen` in a new task (a new context copied from the caller's)."""

    async def step() -> Any:
        return await agen.__anext__()

    return asyncio.create_task(step())


# -- async generators resumed, closed or dropped by other tasks -----------------------------


@pytest.mark.parametrize("form", ["async_with", "sync_with"])
async def test_async_generator_resumed_by_other_tasks_settles_at_exit(
    form: str, client: cycles.Client, aclient: cycles.AsyncClient, server: LocalServer
) -> None:
    handles: list[cycles.GuardedReservation] = []

    async def body(r: cycles.GuardedReservation) -> AsyncIterator[int]:
        handles.append(r)
        for i in range(3):
            r.add(10)
            yield i

    async def gen() -> AsyncIterator[int]:
        if form == "async_with":
            async with aclient.stream(1_000, action=ACTION, ttl_ms=TTL_MS) as r:
                async for i in body(r):
                    yield i
        else:
            with client.stream(1_000, action=ACTION, ttl_ms=TTL_MS) as r:
                async for i in body(r):
                    yield i

    agen = gen()
    assert await agen.__anext__() == 0  # entered in this test's own context
    r = handles[0]
    assert cycles.current_reservation() is r
    await await_heartbeat(server, r.reservation_id)
    assert await in_new_task(agen) == 1
    assert await in_new_task(agen) == 2
    with pytest.raises(StopAsyncIteration):
        await in_new_task(agen)  # the guard exits in yet another task
    assert r.outcome == "settled" and r.settlement is not None
    assert r.settlement.status == "committed"
    assert settled(server) == [("commit", 30)]
    # The entering context could not be reset from the exiting one; it no longer reports
    # the finished reservation.
    assert cycles.current_reservation() is None
    await await_heartbeat_stopped(server, r.reservation_id)


@pytest.mark.parametrize("known", [True, False])
async def test_aclose_from_another_task_settles_known_usage_else_releases(
    known: bool, aclient: cycles.AsyncClient, server: LocalServer
) -> None:
    handles: list[cycles.GuardedReservation] = []

    async def gen() -> AsyncGenerator[int, None]:
        async with aclient.stream(1_000, action=ACTION, ttl_ms=TTL_MS) as r:
            handles.append(r)
            for i in range(10):
                if known:
                    r.add(7)
                yield i

    agen = gen()
    assert await in_new_task(agen) == 0
    assert await in_new_task(agen) == 1
    r = handles[0]
    await await_heartbeat(server, r.reservation_id)
    await asyncio.create_task(agen.aclose())  # GeneratorExit inside the guard, another task
    assert r.outcome == "work_failed"
    if known:
        assert r.settlement is not None and r.settlement.status == "committed"
        assert settled(server) == [("commit", 14)]
    else:
        assert r.released
        assert settled(server) == [("release", 1_000)]
    await await_heartbeat_stopped(server, r.reservation_id)


async def test_async_generator_collected_unclosed_is_finalized_and_settled(
    aclient: cycles.AsyncClient, server: LocalServer
) -> None:
    handles: list[cycles.GuardedReservation] = []

    async def gen() -> AsyncIterator[int]:
        async with aclient.stream(1_000, action=ACTION, ttl_ms=TTL_MS) as r:
            handles.append(r)
            for i in range(10):
                r.add(5)
                yield i

    async def consume_two() -> None:
        agen = gen()
        async for i in agen:
            if i == 1:
                break  # no aclose(): the generator is left suspended inside the guard

    await asyncio.create_task(consume_two())
    r = handles[0]
    gc.collect()  # asyncio's finalizer hook schedules aclose() in a new task
    await asyncio.to_thread(wait_for, lambda: r.outcome is not None, "the guard's exit")
    assert settled(server) == [("commit", 10)]
    assert r.settlement is not None and r.settlement.status == "committed"
    await await_heartbeat_stopped(server, r.reservation_id)


async def test_task_cancelled_inside_the_guard_settles_known_usage(
    aclient: cycles.AsyncClient, server: LocalServer
) -> None:
    handles: list[cycles.GuardedReservation] = []
    started = asyncio.Event()

    async def work() -> None:
        async with aclient.stream(1_000, action=ACTION, ttl_ms=TTL_MS) as r:
            handles.append(r)
            r.add(42)
            started.set()
            await asyncio.sleep(3600)

    task = asyncio.create_task(work())
    await started.wait()
    await await_heartbeat(server, handles[0].reservation_id)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert settled(server) == [("commit", 42)]
    await await_heartbeat_stopped(server, handles[0].reservation_id)


# -- sync generators stepped on worker threads ----------------------------------------------


def stream_gen(
    client: cycles.Client, handles: list[cycles.GuardedReservation], steps: int = 3
) -> Iterator[int]:
    with client.stream(1_000, action=ACTION, ttl_ms=TTL_MS) as r:
        handles.append(r)
        for i in range(steps):
            r.add(10)
            yield i


async def test_sync_generator_stepped_by_asyncio_to_thread(
    client: cycles.Client, server: LocalServer
) -> None:
    handles: list[cycles.GuardedReservation] = []
    it = stream_gen(client, handles)
    done = object()
    leaked: list[object] = []

    def step() -> Any:
        leaked.append(PROBE.get())  # a step never sees the previous step's context
        PROBE.set("seen")
        return next(it, done)

    assert await asyncio.to_thread(step) == 0
    await await_heartbeat(server, handles[0].reservation_id)
    assert await asyncio.to_thread(step) == 1
    assert await asyncio.to_thread(step) == 2
    assert await asyncio.to_thread(step) is done  # the guard exits here
    assert leaked == [None] * 4
    r = handles[0]
    assert r.settlement is not None and r.settlement.status == "committed"
    assert settled(server) == [("commit", 30)]
    await await_heartbeat_stopped(server, r.reservation_id)


def test_sync_generator_stepped_on_different_threads(
    client: cycles.Client, server: LocalServer
) -> None:
    handles: list[cycles.GuardedReservation] = []
    it = stream_gen(client, handles)
    results: list[Any] = []
    threads: set[str] = set()

    def step() -> None:
        threads.add(threading.current_thread().name)
        results.append(next(it, None))

    for n in range(4):
        t = threading.Thread(target=step, name=f"step-{n}")
        t.start()
        t.join()
        if n == 0:
            wait_for_heartbeat(server, handles[0].reservation_id)
    assert results == [0, 1, 2, None]
    assert threads == {"step-0", "step-1", "step-2", "step-3"}
    r = handles[0]
    assert r.settlement is not None and r.settlement.status == "committed"
    assert settled(server) == [("commit", 30)]
    assert cycles.current_reservation() is None
    assert_heartbeat_stopped(server, r.reservation_id)


class _Done(Exception):
    """StopIteration cannot cross a future; Starlette uses its own exception the same way."""


def _next(it: Iterator[Any], leaked: list[object]) -> Any:
    leaked.append(PROBE.get())
    PROBE.set("seen")
    try:
        return next(it)
    except StopIteration:
        raise _Done from None


async def test_sync_generator_stepped_by_anyio_run_sync(
    client: cycles.Client, server: LocalServer
) -> None:
    handles: list[cycles.GuardedReservation] = []
    it = stream_gen(client, handles)
    leaked: list[object] = []
    got = [await anyio.to_thread.run_sync(_next, it, leaked)]
    await await_heartbeat(server, handles[0].reservation_id)
    while True:
        try:
            got.append(await anyio.to_thread.run_sync(_next, it, leaked))
        except _Done:
            break
    assert got == [0, 1, 2]
    assert leaked == [None] * 4  # every step ran in a fresh copy of this task's context
    r = handles[0]
    assert r.settlement is not None and r.settlement.status == "committed"
    assert settled(server) == [("commit", 30)]
    await await_heartbeat_stopped(server, r.reservation_id)


def test_sync_generator_raising_on_another_thread_settles_known_usage(
    client: cycles.Client, server: LocalServer
) -> None:
    def gen() -> Iterator[int]:
        with client.stream(1_000, action=ACTION, ttl_ms=TTL_MS) as r:
            r.add(9)
            yield 0
            raise Boom("stream broke")

    it = gen()
    errors: list[BaseException] = []

    def step() -> None:
        try:
            next(it)
        except BaseException as e:  # recorded for the assertion below
            errors.append(e)

    for _ in range(2):
        t = threading.Thread(target=step)
        t.start()
        t.join()
    assert len(errors) == 1 and isinstance(errors[0], Boom)  # unchanged, no ValueError
    assert settled(server) == [("commit", 9)]


def test_sync_generator_collected_unclosed_settles(
    client: cycles.Client, server: LocalServer
) -> None:
    handles: list[cycles.GuardedReservation] = []
    it = stream_gen(client, handles, steps=10)
    t = threading.Thread(target=next, args=(it,))  # entered on another thread
    t.start()
    t.join()
    del it, t  # finalized here: GeneratorExit inside the guard, in this thread's context
    gc.collect()
    assert settled(server) == [("commit", 10)]
    assert handles[0].outcome == "work_failed"


# -- Starlette streaming responses ----------------------------------------------------------


async def run_asgi(response: StreamingResponse, receive: Callable[[], Any]) -> list[bytes]:
    """Calls a Starlette response as an ASGI server would; returns the body chunks sent."""
    body: list[bytes] = []

    async def send(message: MutableMapping[str, Any]) -> None:
        if message["type"] == "http.response.body" and message.get("body"):
            body.append(message["body"])

    scope = {"type": "http", "asgi": {"spec_version": "2.0"}, "method": "GET", "path": "/"}
    await response(scope, receive, send)
    return body


async def test_starlette_streaming_response_settles_the_streamed_usage(
    client: cycles.Client, server: LocalServer
) -> None:
    handles: list[cycles.GuardedReservation] = []

    def tokens() -> Iterator[bytes]:
        with client.stream(1_000, action=ACTION, ttl_ms=TTL_MS) as r:
            handles.append(r)
            for i in range(4):
                r.add(25)
                if i == 0:
                    wait_for_heartbeat(server, r.reservation_id)
                yield f"tok{i} ".encode()

    never = asyncio.Event()

    async def receive() -> dict[str, Any]:
        await never.wait()  # the client stays connected
        return {"type": "http.disconnect"}

    body = await run_asgi(StreamingResponse(tokens(), media_type="text/plain"), receive)
    assert b"".join(body) == b"tok0 tok1 tok2 tok3 "
    r = handles[0]
    assert r.settlement is not None and r.settlement.status == "committed"
    assert settled(server) == [("commit", 100)]
    await await_heartbeat_stopped(server, r.reservation_id)


async def test_starlette_client_disconnect_mid_stream_settles_what_was_streamed(
    client: cycles.Client, server: LocalServer
) -> None:
    handles: list[cycles.GuardedReservation] = []
    sent_two = threading.Event()

    def tokens() -> Iterator[bytes]:
        with client.stream(1_000, action=ACTION, ttl_ms=TTL_MS) as r:
            handles.append(r)
            for i in range(1_000):
                r.add(25)
                if i == 1:
                    sent_two.set()
                yield f"tok{i} ".encode()
                time.sleep(0.01)

    async def receive() -> dict[str, Any]:
        await asyncio.to_thread(sent_two.wait)
        return {"type": "http.disconnect"}  # the client goes away mid-stream

    await run_asgi(StreamingResponse(tokens(), media_type="text/plain"), receive)
    # Starlette cancelled the streaming task and dropped the suspended generator, which is
    # finalized (GeneratorExit inside the guard): the usage streamed so far is settled.
    gc.collect()
    await asyncio.to_thread(wait_for, lambda: bool(settled(server)), "the settlement")
    r = handles[0]
    (kind, amount), *rest = settled(server)
    assert kind == "commit" and rest == []
    assert amount is not None and amount >= 50 and amount % 25 == 0
    assert r.actual == amount
    await await_heartbeat_stopped(server, r.reservation_id)


# -- decorator and the rest of the exit paths -----------------------------------------------


async def test_decorated_coroutine_cancelled_settles_known_usage(
    aclient: cycles.AsyncClient, server: LocalServer
) -> None:
    started = asyncio.Event()

    @aclient.guarded(1_000, action=ACTION, ttl_ms=TTL_MS)
    async def work() -> None:
        r = cycles.current_reservation()
        assert r is not None
        r.add(11)
        started.set()
        await asyncio.sleep(3600)

    task = asyncio.create_task(work())
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert settled(server) == [("commit", 11)]


async def test_decorated_function_run_by_to_thread(
    client: cycles.Client, server: LocalServer
) -> None:
    @client.guarded(1_000, action=ACTION, actual=lambda n: n * 2)
    def work(n: int) -> int:
        assert cycles.current_reservation() is not None
        return n

    assert await asyncio.to_thread(work, 21) == 21
    assert settled(server) == [("commit", 42)]


def test_guarded_refuses_generator_functions(client: cycles.Client) -> None:
    def gen() -> Iterator[int]:
        yield 1

    async def agen() -> AsyncIterator[int]:
        yield 1

    for fn in (gen, agen):
        with pytest.raises(cycles.InvalidArgumentError, match="generator function"):
            client.guarded(1_000, action=ACTION)(fn)


def test_keyboard_interrupt_in_the_body_settles_known_usage_and_propagates(
    client: cycles.Client, server: LocalServer
) -> None:
    with pytest.raises(KeyboardInterrupt):
        with client.stream(1_000, action=ACTION) as r:
            r.add(3)
            raise KeyboardInterrupt
    assert r.outcome == "work_failed"
    assert settled(server) == [("commit", 3)]
    assert cycles.current_reservation() is None


def test_nesting_across_a_generator_exit_elsewhere_keeps_the_outer(
    client: cycles.Client, server: LocalServer
) -> None:
    with client.reserve(1_000, action=ACTION) as outer:
        it = stream_gen(client, [], steps=1)
        assert next(it) == 0  # the inner guard entered in this context
        assert cycles.current_reservation() is not outer

        def finish() -> None:
            assert next(it, None) is None  # ...and exits on another thread

        t = threading.Thread(target=finish)
        t.start()
        t.join()
        # The finished inner guard is skipped: the outer one is current again.
        assert cycles.current_reservation() is outer
        outer.set_actual(1)
    assert cycles.current_reservation() is None
    assert settled(server) == [("commit", 10), ("commit", 1)]


def test_a_handle_dropped_without_its_block_exiting_is_settled_by_core(
    client: cycles.Client, server: LocalServer
) -> None:
    ids: list[str] = []

    def abandon() -> None:
        # Entered, never exited (a host that lost the context manager): only the handle's
        # collection is left to end it. The thread's context dies with the thread.
        r = client.stream(1_000, action=ACTION, ttl_ms=TTL_MS).__enter__()
        ids.append(r.reservation_id)
        r.add(8)
        wait_for_heartbeat(server, r.reservation_id)

    t = threading.Thread(target=abandon)
    t.start()
    t.join()
    del t
    gc.collect()
    wait_for(lambda: bool(settled(server)), "core's background settlement")
    assert settled(server) == [("commit", 8)]
    assert_heartbeat_stopped(server, ids[0])
