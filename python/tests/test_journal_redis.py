"""``journal_url``: the settlement journal in Redis (core's Redis store), against a real
``redis-server`` (scripts/test-all.sh installs Debian's package) and the local server: a
settlement one client could not make is journaled in Redis and drained by another client
that shares nothing with it but Redis; a Redis that does not make writes durable is refused
when the settlement engine starts, a malformed URL when the client is made; a record's key is
the file store's name of its exact reservation id (CR-DURABLE-007 on Redis)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from journal_store import Db, RedisServer
from recovery_support import TRICKY_IDS

import cycles
from cycles import journal
from cycles.testing import LocalServer

ACTION = cycles.Action("llm.completion", "gpt-test")


def _redis(tmp: Path, aof: bool) -> Iterator[str]:
    server = RedisServer(tmp / "redis-data", aof)
    try:
        yield server.url
    finally:
        server.stop()


@pytest.fixture
def redis_url(tmp_path: Path) -> Iterator[str]:
    yield from _redis(tmp_path, aof=True)


def _ledger(server: LocalServer) -> list[tuple[str, int | None]]:
    return [(e.kind, e.amount) for e in server.ledger()]


def test_a_settlement_journaled_in_redis_is_drained_by_another_client(
    redis_url: str, tmp_path: Path
) -> None:
    with LocalServer() as server:
        server.add_fault("commitReservation", {"kind": "server_error", "status": 503}, times=0)
        # The first client's own journal directory is never used: its machine may vanish.
        first = server.client(
            journal_url=redis_url,
            journal_dir=tmp_path / "first",
            settle_max_attempts=1,
            replay_interval=3600,
        )
        with first.reserve(1_000, action=ACTION) as r:
            r.set_actual(640)
        s = r.settlement
        assert s is not None and s.status == "pending" and s.journaled is True
        first.close(timeout=0)
        assert not (tmp_path / "first").exists(), "nothing was written to the directory"
        assert ("commit", 640) not in _ledger(server)
        # The face's listing reads the Redis journal as the client names it.
        mine = (server.url, server.api_key, server.tenant)
        listed = journal.list_pending(redis_url, *mine)
        assert [p.reservation_id for p in listed] == [r.reservation_id]
        assert listed[0].file == journal.file_name(r.reservation_id) and not listed[0].legacy
        assert [p.reservation_id for p in journal.list_pending(redis_url)] == [r.reservation_id]
        assert journal.list_pending(redis_url, server.url, "another-key") == []

        server.clear_faults()
        other = server.client(
            journal_url=redis_url, journal_dir=tmp_path / "other", replay_interval=3600
        )
        try:
            report = other.drain(5.0)
            assert report.settled == 1 and report.remaining == ()
            assert report.outcomes[0].reservation_id == r.reservation_id
            assert report.outcomes[0].status == "committed"
        finally:
            other.close()
        assert _ledger(server).count(("commit", 640)) == 1
        assert journal.list_pending(redis_url, *mine) == []


def test_listing_a_redis_journal_that_cannot_be_read_says_why() -> None:
    with pytest.raises(cycles.InvalidArgumentError, match=re.escape("127.0.0.1:1")):
        journal.list_pending("redis://127.0.0.1:1/0")
    with pytest.raises(cycles.InvalidArgumentError, match="TLS"):
        journal.list_pending("rediss://127.0.0.1:1/0")


def test_a_redis_without_durable_writes_is_refused_unless_opted_out(tmp_path: Path) -> None:
    for url in _redis(tmp_path, aof=False):
        with LocalServer() as server:
            # Checked when the settlement engine starts: here, the first flush.
            refused = server.client(journal_url=url, journal_dir=tmp_path / "j")
            try:
                with pytest.raises(cycles.ConfigError, match="appendfsync always"):
                    refused.flush()
            finally:
                refused.close()
            c = server.client(journal_url=f"{url}?durability=none", journal_dir=tmp_path / "j")
            try:
                assert c.flush().remaining == ()
            finally:
                c.close()
            # A malformed URL is refused when the client is made.
            with pytest.raises(cycles.ConfigError, match="durability"):
                server.client(journal_url=f"{url}?durability=maybe", journal_dir=tmp_path / "j")


def test_redis_record_keys_are_the_file_names_of_the_exact_ids(
    redis_url: str, tmp_path: Path
) -> None:
    """CR-DURABLE-007 on Redis: a record's key ends in the file store's name of the exact,
    unnormalised UTF-8 id (``v2-<sha256>.json``, the shared name vectors' function), ids that
    differ only in ways a lossy scheme would erase never share a key, and each record reads
    back as its own: a client that shares nothing but Redis settles each once, by its id."""
    # The protocol caps an id at 128 characters: the longest ones here are at that cap.
    ids = [rid for rid in TRICKY_IDS if len(rid) <= 128] + ["x" * 128, "x" * 127 + "y"]
    unused = tmp_path / "unused"
    with LocalServer() as server:
        server.add_fault("commitReservation", {"kind": "server_error", "status": 503}, times=0)
        first = server.client(
            journal_url=redis_url, journal_dir=unused, settle_max_attempts=1, replay_interval=3600
        )
        try:
            for rid in ids:
                # The server gives the next reservation this id.
                server.add_fault("createReservation", {"kind": "reservation_id", "id": rid})
                with first.reserve(1_000, action=ACTION, heartbeat=False) as r:
                    r.set_actual(10)
                assert r.reservation_id == rid
                assert r.settlement is not None and r.settlement.journaled, rid
        finally:
            first.close(timeout=0)

        part = journal.identity_fingerprint(server.url, server.api_key, server.tenant)
        db = Db(redis_url)
        try:
            keys = db.keys("cycles:journal:*:r:*")
            names = {rid: f"v2-{hashlib.sha256(rid.encode()).hexdigest()}.json" for rid in ids}
            assert keys == sorted(f"cycles:journal:{{{part}}}:r:{n}" for n in names.values()), (
                "one key per id, named as the file store names it"
            )
            assert all(journal.file_name(rid) == n for rid, n in names.items())
            for rid, n in names.items():
                data = db.get(f"cycles:journal:{{{part}}}:r:{n}")
                assert data is not None and journal.parse_record(data).reservation_id == rid
        finally:
            db.close()

        server.clear_faults()
        other = server.client(journal_url=redis_url, journal_dir=unused, replay_interval=3600)
        try:
            report = other.drain(20.0)
        finally:
            other.close()
        assert report.remaining == ()
        assert sorted(str(o.reservation_id) for o in report.outcomes) == sorted(ids)
        assert {o.status for o in report.outcomes} == {"committed"}
        commits = sorted(str(e.reservation_id) for e in server.ledger() if e.kind == "commit")
        assert commits == sorted(ids), "each settled once, by its own id"
    assert not unused.exists(), "nothing was written to the directory"
