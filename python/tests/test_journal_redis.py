"""``journal_url``: the settlement journal in Redis (core's Redis store), against a real
``redis-server`` (scripts/test-all.sh installs Debian's package) and the local server: a
settlement one client could not make is journaled in Redis and drained by another client
that shares nothing with it but Redis; a Redis that does not make writes durable is refused
when the settlement engine starts, a malformed URL when the client is made."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import cycles
from cycles.testing import LocalServer

ACTION = cycles.Action("llm.completion", "gpt-test")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _redis(tmp: Path, aof: bool) -> Iterator[str]:
    exe = shutil.which("redis-server")
    assert exe, "redis-server is not installed (apt-get install redis-server; test-all.sh does)"
    port = _free_port()
    args = [exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--dir", str(tmp)]
    if aof:
        args += ["--appendonly", "yes", "--appendfsync", "always"]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "redis-server did not come up"
                time.sleep(0.02)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        proc.kill()
        proc.wait()


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
