"""Recovery conformance across REAL process deaths (CR-DURABLE-001, -002, -003, -004, -006 of
../shared/spec/scenarios.yaml). The settling process is recovery_child.py in a fresh
interpreter; it is killed with SIGKILL at a chosen moment and a fresh process rebuilds its
client from the journal alone. The LocalServer lives in this (pytest) process, so its ledger
and request log outlive every child. The journal is the one under test (tests/journal_store.py:
a directory, or with CYCLES_TEST_JOURNAL_STORE=redis a Redis the test starts, which every child
of the test shares and which outlives them all)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from journal_store import TestJournal
from recovery_support import (
    Child,
    commit_key,
    events_of,
    no_release,
    settlement_requests,
    settlements,
    wait_for,
)

from cycles import journal
from cycles.testing import LocalServer

pytestmark = pytest.mark.skipif(
    not hasattr(__import__("signal"), "SIGKILL"), reason="needs POSIX SIGKILL"
)


class Spawner:
    """Starts children for one test and makes sure none outlives it, nor its journals."""

    def __init__(self, server: LocalServer, tmp: Path) -> None:
        self.server, self.tmp = server, tmp
        self.children: list[Child] = []
        self.journals: list[TestJournal] = []
        self.journal = self.journal_at(tmp / "journal")
        # The default client identity's records: (base URL, API key, tenant).
        self.me = (server.url, server.api_key, server.tenant)

    def journal_at(self, dir: Path) -> TestJournal:
        """Another journal (another host's), closed after every child has stopped."""
        j = TestJournal(dir)
        self.journals.append(j)
        return j

    def __call__(self, name: str, store: TestJournal | None = None, **spec: Any) -> Child:
        base = {"url": self.server.url, "api_key": self.server.api_key,
                "tenant": self.server.tenant, **(store or self.journal).spec()}  # fmt: skip
        child = Child({**base, **spec}, self.tmp / f"{name}.json")
        self.children.append(child)
        return child

    def close(self) -> None:
        for c in self.children:
            c.stop()
        for j in self.journals:
            j.close()


@pytest.fixture
def spawn(server: LocalServer, tmp_path: Path):
    s = Spawner(server, tmp_path)
    try:
        yield s
    finally:
        s.close()


def first_commit(server: LocalServer) -> Any:
    return next((r for r in server.requests() if r.operation == "commitReservation"), None)


# -- CR-DURABLE-001 -------------------------------------------------------------------------


def _killed_in_flight(server: LocalServer, spawn: Spawner, fault: dict[str, Any], n: int) -> None:
    key = f"d1-{n}:commit"
    server.add_fault("commitReservation", fault)
    before = len(server.requests())
    p1 = spawn(f"p1-{n}", mode="settle", key=key[: -len(":commit")], amount=400)
    # Process 1 journals, sends the first commit; the server holds it (long enough for a
    # loaded machine to look at the disk); SIGKILL in flight.
    req = wait_for(20, "the first commit", lambda: next(
        (r for r in server.requests()[before:] if r.operation == "commitReservation"), None
    ))  # fmt: skip
    rid = req.reservation_id
    assert rid is not None
    j = spawn.journal
    rec = j.read(*spawn.me, rid)
    assert rec is not None, (
        f"the record is journaled while the first commit is in flight: {rid} {j.records()}"
    )
    in_flight = next(r for r in server.requests() if r.seq == req.seq)
    assert in_flight.status is None, "the commit is still in flight"
    p1.kill9()
    killed = time.monotonic()
    assert rec.reservation_id == rid and rec.mode == "commit"
    assert commit_key(rec) == key
    assert rec.recorded_at_ms is not None
    assert rec.recorded_at_ms <= req.received_at_ms, (
        "journal write precedes the first settlement request"
    )
    (listed,) = j.records()
    assert listed[1] == journal.file_name(rid), listed

    # The unresolved record survives the kill.
    survived = j.read(*spawn.me, rid)
    assert survived == rec

    # Process 2: a fresh process with the journal only.
    last_seq = server.requests()[-1].seq
    r2 = spawn(f"p2-{n}", mode="drain", timeout=20).finish()
    assert r2["report"]["remaining"] == [], r2
    assert [e["reservation_id"] for e in events_of(r2, "settlement_settled")] == [rid]
    assert j.record_of(*spawn.me, rid) is None, "successful replay removes the record"
    assert j.records() == [] and j.quarantined() == [], "nothing left in the journal"
    assert j.dir_untouched_on_redis()

    # Let the held first request end at the server, so a late apply would show.
    time.sleep(max(0.0, fault["ms"] / 1000 - (time.monotonic() - killed)) + 0.2)
    reqs = settlement_requests(server, rid, key)
    assert len(reqs) >= 2, reqs
    assert all(r.operation == "commitReservation" and r.idempotency_key == key for r in reqs)
    assert all(r.seq > last_seq for r in reqs[1:]), "later commits came from the restart"
    assert settlements(server, rid, key) == (1, 0), "settled at most once"


def test_first_commit_is_journaled_before_it_leaves_and_replayed_after_sigkill(
    server: LocalServer, spawn: Spawner
) -> None:
    """CR-DURABLE-001: the first commit is journaled before it leaves the process. Two rounds:
    the server applies the commit and holds the response, or holds the request before
    applying it; either way the process is SIGKILLed with the commit in flight, and a fresh
    process replays the surviving record with the same key, once, and removes it."""
    _killed_in_flight(server, spawn, {"kind": "delay_after_apply", "ms": 1_500}, 1)
    _killed_in_flight(server, spawn, {"kind": "delay", "ms": 1_500}, 2)
    no_release(server)


# -- CR-DURABLE-002 -------------------------------------------------------------------------


def test_replayed_expired_commit_switches_durably_to_event_mode_across_sigkill(
    server: LocalServer, spawn: Spawner
) -> None:
    """CR-DURABLE-002: a journaled commit is replayed by a fresh process after the
    reservation expired; the 410 switches the record to event mode ON DISK before the event
    leaves; that process is SIGKILLed with the event in flight; the next fresh process sends
    only the event (same key) and removes the record."""
    key = "d2:commit"
    # Process 1 leaves a commit record (its only attempt fails with a 500).
    server.add_fault("commitReservation", {"kind": "server_error", "status": 500})
    r1 = spawn("p1", mode="settle", key="d2", amount=400, max_attempts=1).finish()
    assert r1["settlement"]["status"] == "pending", r1
    rid = r1["settlement"]["reservation_id"]
    j = spawn.journal
    rec = j.read(*spawn.me, rid)
    assert rec is not None and rec.mode == "commit", "the journal contains the commit"
    assert len(settlement_requests(server, rid, key)) == 1

    # The reservation expires; the event will be applied and its response held.
    server.advance_clock(200_000)
    server.add_fault("createEvent", {"kind": "delay_after_apply", "ms": 1_000})

    # Process 2: commit -> 410 -> event mode persisted -> event in flight -> SIGKILL.
    p2 = spawn("p2", mode="drain", timeout=20)
    event = wait_for(20, "the event request", lambda: next(
        (r for r in settlement_requests(server, rid, key) if r.operation == "createEvent"),
        None))  # fmt: skip
    switched = j.read(*spawn.me, rid)
    assert switched is not None, "the record is present while the event is in flight"
    p2.kill9()
    assert event.status is None, "the event was in flight"
    assert switched.mode == "event", "event mode is persisted before the event attempt"
    assert commit_key(switched) == key
    assert switched.event_fallback_body is not None
    reqs = settlement_requests(server, rid, key)
    assert [(r.operation, r.status) for r in reqs[:2]] == [
        ("commitReservation", 500),
        ("commitReservation", 410),  # commit_same_key_after_restart
    ]
    assert len(reqs) == 3, reqs
    after_kill = j.read(*spawn.me, rid)
    assert after_kill is not None and after_kill.mode == "event"

    # Process 3: sends the event only, same key; success removes the record.
    r3 = spawn("p3", mode="drain", timeout=20).finish()
    assert r3["report"]["remaining"] == [], r3
    settled = events_of(r3, "settlement_settled", rid)
    assert [e["fields"]["mode"] for e in settled] == ["event"], r3
    assert j.record_of(*spawn.me, rid) is None, "successful event removes the record"
    assert j.records() == [] and j.dir_untouched_on_redis()
    reqs = settlement_requests(server, rid, key)
    assert len(reqs) >= 4, reqs
    assert all(r.operation == "createEvent" for r in reqs[2:]), (
        f"after the mode switch only events are sent: {reqs}"
    )
    assert all(r.idempotency_key == key for r in reqs)  # event_same_key_after_restart
    assert settlements(server, rid, key) == (0, 1), "settled once, by the event"
    (ev,) = [e for e in server.ledger() if e.kind == "event" and e.idempotency_key == key]
    assert (ev.unit, ev.amount) == ("USD_MICROCENTS", 400)
    no_release(server)


# -- CR-DURABLE-003 -------------------------------------------------------------------------


def test_rate_limit_floor_survives_sigkill_and_restart(server: LocalServer, spawn: Spawner) -> None:
    """CR-DURABLE-003: a 429 with ``Retry-After: 3`` persists the absolute floor; the process
    is SIGKILLed right after that journal write (while it waits inline); a fresh process
    started before the floor sends nothing; the next one retries no earlier than the floor,
    with the same key, and removes the record."""
    key = "d3:commit"
    server.add_fault("commitReservation", {"kind": "rate_limited", "retry_after": "3"})
    p1 = spawn("p1", mode="settle", key="d3", amount=400)
    first = wait_for(20, "the 429", lambda: first_commit(server))
    rid = first.reservation_id
    j = spawn.journal
    # Kill as soon as the floor is journaled (the child then waits inline for it).
    nb = wait_for(
        20, "the persisted floor", lambda: getattr(j.read(*spawn.me, rid), "not_before_ms", None)
    )
    p1.kill9()
    (first,) = settlement_requests(server, rid, key)
    assert first.status == 429
    assert nb >= first.received_at_ms + 3_000, "the floor honours Retry-After"
    rec = j.read(*spawn.me, rid)
    assert rec is not None and rec.not_before_ms == nb, "the floor survives the kill"

    # Restarted before Retry-After: a fresh process sends nothing.
    r2 = spawn("p2", mode="flush").finish()
    assert time.time() * 1000 < nb, "this check ran before the floor"
    assert r2["report"]["outcomes"] == [] and r2["report"]["remaining"] == [rid], r2
    assert len(settlement_requests(server, rid, key)) == 1

    # Another fresh process drains: no retry before the floor, then success removes it.
    r3 = spawn("p3", mode="drain", timeout=20).finish()
    assert r3["report"]["remaining"] == [], r3
    assert j.record_of(*spawn.me, rid) is None, "successful replay removes the record"
    assert j.records() == [] and j.dir_untouched_on_redis()
    reqs = settlement_requests(server, rid, key)
    assert len(reqs) == 2, reqs
    assert reqs[1].received_at_ms >= nb, "no retry before the persisted not_before"
    assert reqs[1].status == 200
    assert all(r.idempotency_key == key for r in reqs)  # commit_same_key_after_retry_after
    assert settlements(server, rid, key) == (1, 0)


# -- CR-DURABLE-004 -------------------------------------------------------------------------


def test_tenant_journal_survives_api_key_rotation_across_processes(tmp_path: Path) -> None:
    """CR-DURABLE-004: a record written under tenant ``acme`` with ``old-key`` is found and
    settled (same key) by a fresh process holding only ``new-key``; no journal file contains
    an API key; without the tenant, the new key's partition is another one."""
    cfg = {"tenants": [{"id": "acme", "api_keys": ["old-key", "new-key"]}]}
    with LocalServer(cfg) as server:
        spawn = Spawner(server, tmp_path)
        try:
            _rotation(server, spawn)
        finally:
            spawn.close()


def _rotation(server: LocalServer, spawn: Spawner) -> None:
    key = "d4:commit"
    server.add_fault("commitReservation", {"kind": "server_error", "status": 500})
    r1 = spawn("p1", api_key="old-key", tenant="acme", mode="settle", key="d4", amount=400,
               max_attempts=1).finish()  # fmt: skip
    assert r1["settlement"]["status"] == "pending", r1
    rid = r1["settlement"]["reservation_id"]
    j = spawn.journal
    # Everything the journal holds: every file of the directory, or every Redis key and value.
    stored = j.stored()
    assert j.records() and stored
    for name, data in stored:
        for secret in ("old-key", "new-key"):
            assert secret not in name and secret.encode() not in data, f"API key stored in {name}"
    assert journal.identity_fingerprint(server.url, "new-key", "acme") == (
        journal.identity_fingerprint(server.url, "old-key", "acme")
    )

    def tenant_record() -> bytes | None:
        return j.record_of(server.url, "new-key", "acme", rid)

    assert tenant_record() is not None, "the tenant partition does not depend on the key"

    # The new key WITHOUT the tenant is another partition: nothing to replay there.
    other = spawn("p-other", api_key="new-key", tenant=None, mode="flush").finish()
    assert other["report"] == {"settled": 0, "outcomes": [], "remaining": [], "quarantined": []}
    assert len(settlement_requests(server, rid, key)) == 1

    # Rotated: a fresh process with only the new key and the tenant finds and settles it.
    r2 = spawn("p2", api_key="new-key", tenant="acme", mode="drain", timeout=20).finish()
    assert r2["report"]["remaining"] == [], r2
    assert [e["reservation_id"] for e in events_of(r2, "settlement_settled")] == [rid]
    assert tenant_record() is None
    assert j.records() == [] and j.dir_untouched_on_redis()
    reqs = settlement_requests(server, rid, key)
    assert [(r.operation, r.idempotency_key, r.status) for r in reqs] == [
        ("commitReservation", key, 500),
        ("commitReservation", key, 200),  # commit_same_key_after_restart
    ]
    assert settlements(server, rid, key) == (1, 0)


# -- CR-DURABLE-006 -------------------------------------------------------------------------


def test_two_processes_replaying_one_journal_settle_the_record_once(
    server: LocalServer, spawn: Spawner
) -> None:
    """CR-DURABLE-006: two independent processes replay the same journal at the same moment
    while the server holds the first commit; the per-record lock lets one of them send it, the
    record is committed once with its stored key and removed."""
    key = "d6a:commit"
    server.add_fault("commitReservation", {"kind": "server_error", "status": 500})
    r0 = spawn("p0", mode="settle", key="d6a", amount=300, max_attempts=1).finish()
    rid = r0["settlement"]["reservation_id"]
    j = spawn.journal
    assert j.record_of(*spawn.me, rid) is not None, "the journal contains the commit"
    server.add_fault("commitReservation", {"kind": "delay", "ms": 400})
    go = spawn.tmp / "go-a"
    workers = [spawn(f"w{i}", mode="drain", timeout=20, go=str(go)) for i in range(2)]
    _release_together(workers, go)
    results = [w.finish() for w in workers]
    settled = [e for r in results for e in events_of(r, "settlement_settled", rid)]
    assert len(settled) == 1, results
    assert all(r["report"]["remaining"] in ([], [rid]) for r in results)
    reqs = settlement_requests(server, rid, key)
    assert [(r.operation, r.idempotency_key) for r in reqs] == [
        ("commitReservation", key),
        ("commitReservation", key),  # concurrent_commit_same_key (after the first 500)
    ]
    assert reqs[1].status == 200
    assert settlements(server, rid, key) == (1, 0), "settled at most once"
    assert j.record_of(*spawn.me, rid) is None, "the terminal record is removed"
    assert j.records() == [] and j.dir_untouched_on_redis()


def test_two_processes_with_copies_of_one_record_commit_concurrently_once(
    server: LocalServer, spawn: Spawner
) -> None:
    """CR-DURABLE-006 without the lock's help: two independent processes each hold a copy of
    the same record (two hosts), are released together and commit concurrently with the same
    key while the server holds the first commit. The server applies it once, both see
    success, and both terminal records are removed."""
    key = "d6b:commit"
    server.add_fault("commitReservation", {"kind": "server_error", "status": 500})
    r0 = spawn("p0", mode="settle", key="d6b", amount=300, max_attempts=1).finish()
    rid = r0["settlement"]["reservation_id"]
    src = spawn.journal.record_of(*spawn.me, rid)
    assert src is not None, "the journal contains the commit"
    # Two hosts' journals: two directories, or two Redis (one each).
    hosts = [spawn.journal_at(spawn.tmp / "host-a"), spawn.journal_at(spawn.tmp / "host-b")]
    for h in hosts:
        h.put(*spawn.me, journal.file_name(rid), src)
    spawn.journal.remove(*spawn.me, rid)
    server.add_fault("commitReservation", {"kind": "hold", "ms": 10_000})
    go = spawn.tmp / "go-b"
    workers = [
        spawn(f"h{i}", store=h, mode="drain", timeout=20, go=str(go)) for i, h in enumerate(hosts)
    ]
    _release_together(workers, go)
    results = [w.finish() for w in workers]
    for r in results:
        assert r["report"]["remaining"] == [], r
        assert [e["reservation_id"] for e in events_of(r, "settlement_settled")] == [rid], r
    reqs = settlement_requests(server, rid, key)[1:]  # after process 0's 500
    assert len(reqs) == 2, reqs
    assert all(r.idempotency_key == key and r.status == 200 for r in reqs)
    gap = reqs[1].received_mono_us - reqs[0].received_mono_us
    assert gap < 10_000_000, f"the second commit arrived while the first was held ({gap} us)"
    assert sum(r.replay for r in reqs) == 1, "one applied, one replayed"
    assert settlements(server, rid, key) == (1, 0), "applied once"
    for h in hosts:
        assert h.records() == [], "both terminal records removed"
        assert h.dir_untouched_on_redis()


def _release_together(workers: list[Child], go: Path) -> None:
    # Released only once every worker has built its client: they then race for real.
    wait_for(30, "the workers to be ready", lambda: all(
        Path(f"{w.result}.ready").exists() for w in workers) or None)  # fmt: skip
    go.write_bytes(b"")
