"""A server that sends more than a Cycles body (issue 32, "Hostile servers"): the client stops
reading at ``max_response_bytes`` and raises the typed error of a response that is not the
operation's, instead of buffering until its timeout. Before the bound, an endless chunked body
raised this process's peak memory by about 310 MB within a 1 s timeout; the child below
measures its own peak (``ru_maxrss``) around ten such calls."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator

import pytest

import cycles

CHUNK = b"10000\r\n" + b" " * 0x10000 + b"\r\n"


def _serve(listener: socket.socket) -> None:
    while True:
        try:
            conn, _ = listener.accept()
        except OSError:
            return
        threading.Thread(target=_endless, args=(conn,), daemon=True).start()


def _endless(conn: socket.socket) -> None:
    with conn:
        data = b""
        while b"\r\n\r\n" not in data:
            got = conn.recv(4096)
            if not got:
                return
            data += got
        try:
            conn.sendall(
                b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                b"transfer-encoding: chunked\r\n\r\n"
            )
            while True:
                conn.sendall(CHUNK)
        except OSError:
            return  # the client hung up: what is tested


@pytest.fixture
def endless() -> Iterator[str]:
    listener = socket.create_server(("127.0.0.1", 0))
    threading.Thread(target=_serve, args=(listener,), daemon=True).start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    listener.close()


def reserve(client: cycles.Client) -> None:
    client.create_reservation(
        idempotency_key="k-1",
        subject={"tenant": "acme"},
        action={"kind": "llm.completion", "name": "m"},
        estimate={"unit": "TOKENS", "amount": 1},
    )


def test_an_endless_body_stops_at_the_bound(endless: str) -> None:
    with cycles.Client(
        endless, "k", request_timeout=20, max_response_bytes=65536, journal_enabled=False
    ) as c:
        with pytest.raises(cycles.AmbiguousSuccessError) as info:
            reserve(c)
    assert "exceeds max_response_bytes (65536 bytes)" in str(info.value)


CHILD = """
import json, resource, sys
import cycles
def peak_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
before = peak_mb()
kinds = []
with cycles.Client(sys.argv[1], "k", request_timeout=1, journal_enabled=False) as c:
    for i in range(10):
        try:
            c.create_reservation(idempotency_key=f"k-{i}", subject={"tenant": "acme"},
                action={"kind": "k", "name": "n"}, estimate={"unit": "TOKENS", "amount": 1})
        except cycles.CyclesError as e:
            kinds.append(type(e).__name__)
print(json.dumps({"kinds": kinds, "peak_growth_mb": peak_mb() - before}))
"""


def test_memory_stays_bounded_by_the_default(endless: str) -> None:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, endless],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.strip().splitlines()[-1])
    # Each call ends at the 1 MiB default bound, not at its 1 s timeout.
    assert got["kinds"] == ["AmbiguousSuccessError"] * 10, got
    # A bound on what is held, not a speed: ten bodies of 1 MiB each, read one at a time,
    # leave well under 64 MB of growth (without the bound one call alone took ~310 MB).
    assert got["peak_growth_mb"] < 64, got
