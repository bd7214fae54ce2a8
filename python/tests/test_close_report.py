"""``close()`` / ``aclose()`` return a drain report always (issue 28): for a client whose
lifecycle never ran, when closed twice, and after a ``with`` / ``async with`` exit. Real HTTP
against the in-process LocalServer; what was settled is read from its ledger."""

from __future__ import annotations

from pathlib import Path

import pytest

import cycles
from cycles.testing import LocalServer

ACTION = cycles.Action("llm.completion", "openai:gpt-4o-mini")
EMPTY = cycles.DrainReport(outcomes=(), remaining=(), quarantined=())


def ledger(server: LocalServer) -> list[tuple[str, int | None]]:
    return [(e.kind, e.amount) for e in server.ledger()]


def pending_record(server: LocalServer, journal: Path) -> str:
    """Leaves one settlement of 70 journaled (its commit failed) and returns its reservation."""
    with server.client(journal_dir=journal, settle_max_attempts=1, replay_interval=3600) as c:
        server.add_fault("commitReservation", {"kind": "server_error", "status": 503}, times=0)
        with c.reserve(100, action=ACTION) as r:
            r.set_actual(70)
        assert r.settlement.pending
        report = c.close(timeout=0)
    server.clear_faults()
    assert [p.reservation_id for p in report.remaining] == [r.reservation_id]
    return r.reservation_id


def test_a_client_that_never_ran_a_guarded_call_reports_an_empty_drain(
    server: LocalServer, tmp_path: Path
) -> None:
    client = server.client(journal_dir=tmp_path)
    client.get_balances(tenant=server.tenant)  # a plain operation starts no lifecycle
    report = client.close()
    assert isinstance(report, cycles.DrainReport)
    assert report == EMPTY and report.clean and report.settled == 0
    assert client.closed
    again = client.close()
    assert again == EMPTY
    # Nothing was looked at or sent: the only request is the balance read.
    assert [q.operation for q in server.requests()] == ["getBalances"]


def test_a_never_used_client_leaves_another_process_records_alone(
    server: LocalServer, tmp_path: Path
) -> None:
    rid = pending_record(server, tmp_path)
    sent = len(server.requests())
    report = server.client(journal_dir=tmp_path).close()
    # No lifecycle ran, so no replay: the record stays for a client that uses its lifecycle.
    assert report == EMPTY
    assert len(server.requests()) == sent
    assert [p.reservation_id for p in cycles.journal.list_pending(tmp_path)] == [rid]
    # A client that does use its lifecycle replays it (its background replay or drain()).
    with server.client(journal_dir=tmp_path) as again:
        assert again.drain(5.0).remaining == ()
    assert ("commit", 70) in ledger(server)
    assert cycles.journal.list_pending(tmp_path) == []


def test_closed_twice_the_second_report_drains_nothing(server: LocalServer, tmp_path: Path) -> None:
    client = server.client(journal_dir=tmp_path, settle_max_attempts=1, replay_interval=3600)
    server.add_fault("commitReservation", {"kind": "server_error", "status": 503}, times=0)
    with client.reserve(100, action=ACTION) as r:
        r.set_actual(70)
    assert r.settlement.pending
    server.clear_faults()
    report = client.close()
    assert [(o.reservation_id, o.status) for o in report.outcomes] == [
        (r.reservation_id, "committed")
    ]
    assert report.remaining == () and report.quarantined == ()
    sent = len(server.requests())
    again = client.close(timeout=1.0)
    assert again == EMPTY
    assert len(server.requests()) == sent
    assert ledger(server).count(("commit", 70)) == 1


def test_with_exit_closes_and_a_later_close_still_reports(
    server: LocalServer, tmp_path: Path
) -> None:
    with server.client(journal_dir=tmp_path) as client:
        with client.reserve(10, action=ACTION) as r:
            r.set_actual(4)
    assert client.closed
    report = client.close()
    assert isinstance(report, cycles.DrainReport) and report.clean
    assert ledger(server) == [("reserve", 10), ("commit", 4)]
    assert r.settlement.charged.amount == 4

    with server.client(journal_dir=tmp_path) as unused:
        pass
    assert unused.close() == EMPTY


def test_close_reports_what_it_settled(server: LocalServer, tmp_path: Path) -> None:
    client = server.client(journal_dir=tmp_path, settle_max_attempts=1, replay_interval=3600)
    server.add_fault("commitReservation", {"kind": "server_error", "status": 502}, times=0)
    with client.reserve(100, action=ACTION) as r:
        r.set_actual(80)
    server.clear_faults()
    report = client.close()
    assert report.settled == 1 and report.remaining == ()
    assert [(o.reservation_id, o.charged.amount) for o in report.outcomes] == [
        (r.reservation_id, 80)
    ]
    assert ("commit", 80) in ledger(server)


async def test_async_close_reports_always(server: LocalServer, tmp_path: Path) -> None:
    never = server.async_client(journal_dir=tmp_path)
    assert await never.aclose() == EMPTY
    assert await never.aclose() == EMPTY
    assert never.close() == EMPTY  # the synchronous close of an AsyncClient too

    async with server.async_client(journal_dir=tmp_path) as unused:
        pass
    assert await unused.aclose() == EMPTY


async def test_async_close_reports_the_settlements_its_drain_made(
    server: LocalServer, tmp_path: Path
) -> None:
    client = server.async_client(journal_dir=tmp_path, settle_max_attempts=1, replay_interval=3600)
    server.add_fault("commitReservation", {"kind": "connection_reset"}, times=0)
    async with client.reserve(100, action=ACTION) as r:
        r.set_actual(60)
    assert r.settlement.pending
    server.clear_faults()
    report = await client.aclose()
    # The drain runs before the close; its settlement is in the report (it used to be lost).
    assert report.settled == 1 and report.remaining == () and report.quarantined == ()
    assert report.outcomes[0].reservation_id == r.reservation_id
    assert ("commit", 60) in ledger(server)
    again = await client.aclose()
    assert again == EMPTY


async def test_async_close_zero_timeout_lists_what_is_left(
    server: LocalServer, tmp_path: Path
) -> None:
    client = server.async_client(journal_dir=tmp_path, settle_max_attempts=1, replay_interval=3600)
    server.add_fault("commitReservation", {"kind": "server_error", "status": 500}, times=0)
    async with client.reserve(100, action=ACTION) as r:
        r.set_actual(55)
    report = await client.aclose(timeout=0)
    assert report.outcomes == ()
    assert [p.reservation_id for p in report.remaining] == [r.reservation_id]
    assert ("commit", 55) not in ledger(server)


def test_close_timeout_is_checked_even_when_nothing_ran(server: LocalServer) -> None:
    client = server.client()
    with pytest.raises(cycles.InvalidArgumentError, match="timeout"):
        client.close(timeout=-1)
    assert not client.closed
    assert client.close() == EMPTY
