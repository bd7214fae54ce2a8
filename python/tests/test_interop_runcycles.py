"""Interop with the official Python SDK, ``runcycles`` 0.5.3 (a test dependency): a settlement
journaled by either SDK is drained by the other, against the in-process LocalServer over real
HTTP, and applied exactly once (shared/design/JOURNAL.md is the format both write).

runcycles replays a journal directory once per process, when its retry engine first gets a
client (here: when a ``CyclesLifecycle`` is built); every test uses its own ``tmp_path``, so
each gets that one replay.
"""

from __future__ import annotations

import json
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

import pytest
import runcycles  # type: ignore[import-untyped]
from recovery_support import applied, record_files
from runcycles import journal as rc_journal  # type: ignore[import-untyped]
from runcycles.lifecycle import CyclesLifecycle  # type: ignore[import-untyped]
from runcycles.retry import CommitRetryEngine  # type: ignore[import-untyped]

import cycles
from cycles.testing import LocalServer

ACTION = cycles.Action("llm.completion", "openai:gpt-4o-mini")
CHILD = Path(__file__).with_name("interop_child.py")

assert runcycles.__version__ == "0.5.3", runcycles.__version__


# -- helpers --------------------------------------------------------------------------------


def rc_config(
    server: LocalServer,
    journal_dir: Path,
    *,
    base_url: str | None = None,
    tenant: str | None = "default",
    **kw: Any,
) -> Any:
    """A runcycles config for ``server`` journaling under ``journal_dir``."""
    return runcycles.CyclesConfig(
        base_url=base_url or server.url,
        api_key=server.api_key,
        tenant=server.tenant if tenant == "default" else tenant,
        journal_dir=str(journal_dir),
        retry_initial_delay=0.01,
        # Its atexit hook waits this long for live retry threads; keep pytest's exit quick.
        retry_flush_timeout=1.0,
        **kw,
    )


def rc_guarded_call(server: LocalServer, config: Any, actual: int, *, expire: bool = False) -> str:
    """One runcycles ``@cycles`` call; returns its reservation id. ``expire``: the reservation
    expires on the server while the call runs, so the commit gets 410."""
    seen: list[str] = []
    kw: dict[str, Any] = {"ttl_ms": 1_000, "grace_period_ms": 0} if expire else {}

    with runcycles.CyclesClient(config) as client:

        @runcycles.cycles(
            1_000,
            actual=actual,
            action_kind=ACTION.kind,
            action_name=ACTION.name,
            client=client,
            **kw,
        )
        def work() -> None:
            seen.append(runcycles.get_cycles_context().reservation_id)
            if expire:
                server.advance_clock(10_000)  # past ttl + grace

        work()
    return seen[0]


def rc_replay(config: Any, timeout: float = 10.0) -> None:
    """Triggers runcycles' journal replay as an application would (building its lifecycle hands
    the retry engine a client) and waits for its background retries to finish."""
    engine = CommitRetryEngine(config)
    with runcycles.CyclesClient(config) as client:
        CyclesLifecycle(client, engine, {})
        engine.flush(timeout)


def our_client(server: LocalServer, journal_dir: Path, **kw: Any) -> cycles.Client:
    kw.setdefault("tenant", server.tenant)
    base_url = kw.pop("base_url", server.url)
    return cycles.Client(base_url, server.api_key, journal_dir=journal_dir, **kw)


def partition(
    server: LocalServer,
    journal_dir: Path,
    *,
    base_url: str | None = None,
    tenant: str | None = "default",
) -> Path:
    """Our partition directory for this identity, checked against runcycles' own fingerprint."""
    url = base_url or server.url
    t = server.tenant if tenant == "default" else tenant
    fp = cycles.journal.identity_fingerprint(url, server.api_key, t)
    assert fp == rc_journal.auth_fingerprint(url, server.api_key, t)
    return journal_dir / fp


def requests_of(server: LocalServer, operation: str) -> list[cycles.testing.RequestRecord]:
    return [r for r in server.requests() if r.operation == operation]


def wait_until(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.005)


def read_record(path: Path) -> dict[str, Any]:
    d: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return d


def pending_ours(server: LocalServer, journal_dir: Path, *, mode: str = "commit") -> Path:
    """Our guarded reservation (idempotency key ``interop``, actual 700) whose settlement keeps
    failing (the caller's fault), closed with a bounded drain: its record stays pending.
    Returns the record's path."""
    kw: dict[str, Any] = {}
    if mode == "event":
        kw = {"ttl_ms": 1_000, "grace_period_ms": 0, "heartbeat": False}
    # Not a `with` block: its exit would close again and drain for the full close_timeout.
    client = our_client(server, journal_dir, settle_max_attempts=1)
    try:
        with client.reserve(1_000, action=ACTION, idempotency_key="interop", **kw) as r:
            if mode == "event":
                server.advance_clock(10_000)  # past ttl + grace: the commit gets 410
            r.set_actual(700)
    finally:
        report = client.close(0.2)
    assert r.settlement is not None and r.settlement.pending, r.settlement
    assert report is not None
    assert [p.reservation_id for p in report.remaining] == [r.reservation_id]
    [path] = record_files(journal_dir)
    assert path == partition(server, journal_dir) / cycles.journal.file_name(r.reservation_id)
    rec = read_record(path)
    assert rec["reservation_id"] == r.reservation_id and rec["mode"] == mode
    return path


# -- runcycles journals, ours drains ----------------------------------------------------------


@pytest.mark.parametrize(
    ("tenant", "slash"),
    [("acme", ""), (None, "/")],
    ids=["tenant-principal", "api-key-principal-trailing-slash"],
)
def test_record_of_a_killed_runcycles_process_is_drained_by_ours(
    server: LocalServer, tmp_path: Path, tenant: str | None, slash: str
) -> None:
    # Every commit resets the connection (not applied): runcycles journals and retries in memory.
    server.add_fault("commitReservation", {"kind": "connection_reset"}, times=0)
    base_url = server.url + slash  # the base URL is used verbatim by both SDKs
    args = {
        "base_url": base_url,
        "api_key": server.api_key,
        "tenant": tenant,
        "subject_tenant": server.tenant,
        "journal_dir": str(tmp_path),
        "estimate": 1_000,
        "actual": 700,
    }
    child = subprocess.Popen(
        [sys.executable, str(CHILD), json.dumps(args)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        ready, _, _ = select.select([child.stdout], [], [], 60)
        assert ready, "the runcycles child did not finish its guarded call"
        rid = json.loads(child.stdout.readline())["reservation_id"]
        # The record is on disk before the kill (runcycles journals before its first commit).
        part = partition(server, tmp_path, base_url=base_url, tenant=tenant)
        assert [p.name for p in tmp_path.iterdir()] == [part.name]
        [path] = record_files(tmp_path)
        assert path == part / cycles.journal.file_name(rid)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(10)
        if child.stdin is not None:
            child.stdin.close()
        if child.stdout is not None:
            child.stdout.close()
    assert child.returncode == -signal.SIGKILL

    rec = read_record(path)
    key = rec["commit_body"]["idempotency_key"]
    assert (rec["base_url"], rec["mode"], rec["commit_body"]["actual"]["amount"]) == (
        base_url,
        "commit",
        700,
    )
    assert applied(server, "commit") == []
    attempts = requests_of(server, "commitReservation")
    assert attempts and {(q.idempotency_key, q.fault) for q in attempts} == {
        (key, "connection_reset")
    }
    assert [p.reservation_id for p in cycles.journal.list_pending(tmp_path)] == [rid]

    server.clear_faults()
    with our_client(server, tmp_path, base_url=base_url, tenant=tenant) as client:
        report = client.drain(10)
    assert report.remaining == ()
    [commit] = applied(server, "commit")
    assert (commit.reservation_id, commit.idempotency_key, commit.amount) == (rid, key, 700)
    assert not path.exists()
    assert record_files(tmp_path) == []


def test_runcycles_lost_commit_response_is_replayed_by_ours_not_reapplied(
    server: LocalServer, tmp_path: Path
) -> None:
    # The commit applies but its response is lost: runcycles (retry off) keeps its record.
    server.add_fault("commitReservation", {"kind": "drop_response_after_apply"}, times=1)
    rid = rc_guarded_call(server, rc_config(server, tmp_path, retry_enabled=False), 700)
    [path] = record_files(tmp_path)
    assert path == partition(server, tmp_path) / cycles.journal.file_name(rid)
    key = read_record(path)["commit_body"]["idempotency_key"]
    assert len(applied(server, "commit")) == 1

    with our_client(server, tmp_path) as client:
        report = client.drain(10)
    assert report.remaining == ()
    assert not path.exists()
    # Our replay sent runcycles' body byte-faithfully: the server recognised the same payload
    # (a replay, 200), not a different one (409 IDEMPOTENCY_MISMATCH), and applied nothing new.
    last = requests_of(server, "commitReservation")[-1]
    assert (last.idempotency_key, last.status, last.replay) == (key, 200, True)
    [commit] = applied(server, "commit")
    assert (commit.reservation_id, commit.idempotency_key, commit.amount) == (rid, key, 700)


def test_runcycles_event_record_is_drained_by_ours(server: LocalServer, tmp_path: Path) -> None:
    config = rc_config(server, tmp_path, retry_enabled=False)
    rid = rc_guarded_call(server, config, 600, expire=True)
    [path] = record_files(tmp_path)
    rec = read_record(path)
    assert rec["mode"] == "event" and rec["commit_body"] is None
    key = rec["event_fallback_body"]["idempotency_key"]
    assert requests_of(server, "commitReservation")[-1].status == 410
    assert applied(server, "commit") == [] and applied(server, "event") == []

    with our_client(server, tmp_path) as client:
        report = client.drain(10)
    assert report.remaining == ()
    assert not path.exists()
    [event] = applied(server, "event")
    assert (event.idempotency_key, event.amount) == (key, 600)
    assert applied(server, "commit") == []
    assert rid == rec["event_fallback_body"]["metadata"]["recovered_reservation_id"]


# -- ours journals, runcycles drains ----------------------------------------------------------


@pytest.mark.parametrize(
    ("fault", "applied_by_runcycles"),
    [("server_error", True), ("drop_response_after_apply", False)],
    ids=["commit-never-applied", "commit-applied-response-lost"],
)
def test_our_pending_record_is_drained_by_runcycles(
    server: LocalServer, tmp_path: Path, fault: str, applied_by_runcycles: bool
) -> None:
    spec: dict[str, Any] = {"kind": fault}
    if fault == "server_error":
        spec["status"] = 503
    server.add_fault("commitReservation", spec, times=0)
    path = pending_ours(server, tmp_path)
    rid = read_record(path)["reservation_id"]
    assert len(applied(server, "commit")) == (0 if applied_by_runcycles else 1)
    server.clear_faults()
    sent_by_us = len(requests_of(server, "commitReservation"))

    rc_replay(rc_config(server, tmp_path))

    assert not path.exists()
    by_runcycles = requests_of(server, "commitReservation")[sent_by_us:]
    assert [(q.idempotency_key, q.status) for q in by_runcycles] == [("interop:commit", 200)]
    # When our commit had applied, runcycles' resend of our body is the same payload to the
    # server: an idempotent replay, nothing applied again.
    assert by_runcycles[0].replay is not applied_by_runcycles
    [commit] = applied(server, "commit")
    assert (commit.reservation_id, commit.idempotency_key, commit.amount) == (
        rid,
        "interop:commit",
        700,
    )

    # Our next drain finds nothing left to do and sends nothing.
    with our_client(server, tmp_path) as client:
        report = client.drain(5)
    assert (report.outcomes, report.remaining) == ((), ())
    assert len(requests_of(server, "commitReservation")) == sent_by_us + 1
    assert len(applied(server, "commit")) == 1


def test_our_event_record_is_drained_by_runcycles(server: LocalServer, tmp_path: Path) -> None:
    server.add_fault("createEvent", {"kind": "server_error", "status": 503}, times=0)
    path = pending_ours(server, tmp_path, mode="event")
    fallback = read_record(path)["event_fallback_body"]
    assert fallback["metadata"]["recovery_reason"] == "commit_after_reservation_expired"
    assert applied(server, "event") == []
    server.clear_faults()

    rc_replay(rc_config(server, tmp_path))

    assert not path.exists()
    [event] = applied(server, "event")
    assert (event.idempotency_key, event.amount) == ("interop:commit", 700)
    assert applied(server, "commit") == []
    assert requests_of(server, "createEvent")[-1].status == 201
    assert [q.status for q in requests_of(server, "commitReservation")] == [410]


# -- both replay ----------------------------------------------------------------------------


def test_both_sdks_replaying_one_record_at_once_settle_it_once(
    server: LocalServer, tmp_path: Path
) -> None:
    server.add_fault("commitReservation", {"kind": "server_error", "status": 503}, times=0)
    path = pending_ours(server, tmp_path)
    rid = read_record(path)["reservation_id"]
    server.clear_faults()
    sent_by_us = len(requests_of(server, "commitReservation"))
    # The server holds the first commit (runcycles') before applying it, so ours is sent and
    # settles while runcycles' is still in flight: the worst interleaving for a double spend.
    server.add_fault("commitReservation", {"kind": "delay", "ms": 1_000}, times=1)

    seen = len(server.requests())
    replayer = threading.Thread(target=rc_replay, args=(rc_config(server, tmp_path),))
    replayer.start()
    try:
        wait_until(lambda: any(q.path.endswith(f"/{rid}/commit") for q in server.requests()[seen:]))
        with our_client(server, tmp_path) as client:
            report = client.drain(10)
    finally:
        replayer.join(15)
    assert not replayer.is_alive()

    assert report.remaining == ()
    assert not path.exists()
    sent = requests_of(server, "commitReservation")[sent_by_us:]
    assert {q.idempotency_key for q in sent} == {"interop:commit"}
    # Every answer was a success (the first to arrive applied, the other a replay), never a
    # 409. `None`: a request of ours abandoned in flight because the other SDK finished the
    # record first (the journal emptied, so drain returned and close stopped our replay);
    # harmless, the key is the same.
    assert {q.status for q in sent} <= {200, None} and 200 in {q.status for q in sent}, sent
    assert [q.fault for q in sent].count("delay") == 1  # runcycles' request, held at the server
    assert [q.replay for q in sent if q.status == 200].count(False) == 1, sent
    [commit] = applied(server, "commit")
    assert (commit.reservation_id, commit.amount) == (rid, 700)


# -- Retry-After floor ----------------------------------------------------------------------


def test_runcycles_rate_limit_floor_is_honoured_by_ours(
    server: LocalServer, tmp_path: Path
) -> None:
    server.add_fault("commitReservation", {"kind": "rate_limited", "retry_after": "2"}, times=1)
    rid = rc_guarded_call(server, rc_config(server, tmp_path, retry_enabled=False), 700)
    [path] = record_files(tmp_path)
    floor = read_record(path)["not_before_ms"]
    assert isinstance(floor, int)

    with our_client(server, tmp_path) as client:
        early = client.flush()
        assert time.time() * 1000 < floor, "flush ran after the floor; the check is void"
        assert [p.reservation_id for p in early.remaining] == [rid]
        assert len(requests_of(server, "commitReservation")) == 1  # nothing sent before it
        report = client.drain(10)
    assert report.remaining == ()
    assert not path.exists()
    last = requests_of(server, "commitReservation")[-1]
    assert last.status == 200 and last.received_at_ms >= floor
    assert len(applied(server, "commit")) == 1


def test_our_rate_limit_floor_is_honoured_by_runcycles(server: LocalServer, tmp_path: Path) -> None:
    server.add_fault("commitReservation", {"kind": "rate_limited", "retry_after": "2"}, times=0)
    path = pending_ours(server, tmp_path)
    floor = read_record(path)["not_before_ms"]
    assert isinstance(floor, int)
    server.clear_faults()
    sent_by_us = len(requests_of(server, "commitReservation"))
    assert time.time() * 1000 < floor, "the replay starts after the floor; the check is void"

    rc_replay(rc_config(server, tmp_path))

    assert not path.exists()
    [by_runcycles] = requests_of(server, "commitReservation")[sent_by_us:]
    assert by_runcycles.status == 200 and by_runcycles.received_at_ms >= floor
    assert len(applied(server, "commit")) == 1
