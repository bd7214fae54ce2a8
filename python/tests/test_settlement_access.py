"""``GuardedReservation.settlement`` and ``Settlement.charged`` are typed non-optional (issue
28): they exist on every path that ends normally, and reading one that does not exist raises
``NotSettledError`` naming why; the ``..._or_none`` twins give ``None`` instead. Each case is
checked against what the server's ledger recorded."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import cycles
from cycles.testing import LocalServer

ACTION = cycles.Action("llm.completion", "openai:gpt-4o-mini")


def ledger(server: LocalServer) -> list[tuple[str, int | None]]:
    return [(e.kind, e.amount) for e in server.ledger()]


@pytest.fixture
def client(server: LocalServer, tmp_path: Path):
    c = server.client(journal_dir=tmp_path, settle_max_attempts=1, replay_interval=3600)
    try:
        yield c
    finally:
        c.close(timeout=0)


def test_a_settled_block_has_its_settlement_and_charge(
    client: cycles.Client, server: LocalServer
) -> None:
    with client.reserve(1_000, action=ACTION) as r:
        with pytest.raises(cycles.NotSettledError, match="still running") as running:
            r.settlement  # noqa: B018 - the read is what is tested
        assert running.value.reservation_id == r.reservation_id
        assert r.settlement_or_none is None
        r.set_actual(700)
    s = r.settlement
    assert s is r.settlement_or_none
    assert s.charged == cycles.Amount("USD_MICROCENTS", 700) == s.charged_or_none
    assert ledger(server) == [("reserve", 1_000), ("commit", 700)]


def test_the_settlement_and_lease_read_at_once_from_many_threads_are_the_same(
    client: cycles.Client,
) -> None:
    # They are decoded from the finished report on first read: readers racing for that first
    # read all see both, and the same objects afterwards.
    with client.reserve(1_000, action=ACTION) as r:
        r.set_actual(600)
    start = threading.Barrier(8)

    def read(_: int) -> tuple[object, object]:
        start.wait()
        return r.settlement_or_none, r.lease

    with ThreadPoolExecutor(8) as pool:
        seen = list(pool.map(read, range(8)))
    for settlement, lease in seen:
        assert settlement == r.settlement and lease == r.lease
        assert lease is not None and lease.end == "finished"
    assert r.settlement is r.settlement and r.lease is r.lease
    assert r.settlement.charged == cycles.Amount("USD_MICROCENTS", 600)
    body = r.settlement.body  # the server's commit response, handed over on first read
    assert body is not None and body["charged"] == {"unit": "USD_MICROCENTS", "amount": 600}


async def test_an_async_blocks_settlement_carries_the_servers_response(
    server: LocalServer, tmp_path: Path
) -> None:
    async with server.async_client(journal_dir=tmp_path) as c:
        async with c.reserve(1_000, action=ACTION) as r:
            r.set_actual(400)
    s = r.settlement
    assert s.charged == cycles.Amount("USD_MICROCENTS", 400)
    assert s.body is not None and s.body["status"] == "COMMITTED"
    assert s.body["released"] == {"unit": "USD_MICROCENTS", "amount": 600}
    assert r.lease is not None and r.lease.end == "finished"


def test_a_released_reservation_has_no_settlement(
    client: cycles.Client, server: LocalServer
) -> None:
    with pytest.raises(KeyError):
        with client.reserve(1_000, action=ACTION) as r:
            raise KeyError("before any usage")
    assert r.released and r.settlement_or_none is None
    with pytest.raises(cycles.NotSettledError, match="was released") as info:
        r.settlement  # noqa: B018
    e = info.value
    assert isinstance(e, cycles.InvalidArgumentError)
    assert e.reservation_id == r.reservation_id and e.status is None
    assert [k for k, _ in ledger(server)] == ["reserve", "release"]


def test_missing_actual_has_no_settlement(client: cycles.Client, server: LocalServer) -> None:
    with pytest.raises(cycles.MissingActualError):
        with client.reserve(1_000, action=ACTION) as r:
            pass
    with pytest.raises(cycles.NotSettledError, match="outcome missing_actual"):
        r.settlement  # noqa: B018
    assert [k for k, _ in ledger(server)] == ["reserve", "release"]


def test_a_pending_settlement_has_no_charge(client: cycles.Client, server: LocalServer) -> None:
    server.add_fault("commitReservation", {"kind": "server_error", "status": 503}, times=0)
    with client.reserve(1_000, action=ACTION) as r:
        r.set_actual(640)
    s = r.settlement  # a block that ended normally always has one
    assert s.pending and not s.settled and s.charged_or_none is None
    with pytest.raises(cycles.NotSettledError, match="is pending") as info:
        s.charged  # noqa: B018
    assert info.value.status == "pending" and info.value.reservation_id == r.reservation_id
    assert ("commit", 640) not in ledger(server)

    server.clear_faults()
    report = client.drain(5.0)
    assert [(o.status, o.charged.amount) for o in report.outcomes] == [("committed", 640)]
    assert ("commit", 640) in ledger(server)


def test_a_rejected_settlement_has_no_charge(client: cycles.Client, server: LocalServer) -> None:
    server.add_fault(
        "commitReservation", {"kind": "error", "status": 409, "code": "RESERVATION_FINALIZED"}
    )
    with client.reserve(1_000, action=ACTION) as r:
        r.set_actual(10)
    s = r.settlement
    assert s.status == "rejected" and s.charged_or_none is None
    with pytest.raises(cycles.NotSettledError, match="is rejected"):
        s.charged  # noqa: B018
    assert ledger(server) == [("reserve", 1_000)]
