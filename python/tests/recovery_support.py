"""Helpers of the recovery conformance tests (test_recovery_*.py): request and ledger filters,
journal file access (of tests that need the directory itself; the journal under test, a
directory or Redis, is tests/journal_store.py's), a recording HTTP forwarder, and driving
recovery_child.py processes.

Nothing here stands in for the server: every request goes over real HTTP to a LocalServer,
and every journal file is a real file written by the SDK (or, for foreign records, by the
test in the shared on-disk format)."""

from __future__ import annotations

import http.client
import http.server
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, TypeVar
from urllib.parse import urlsplit

from cycles import journal
from cycles.testing import LedgerEntry, LocalServer, RequestRecord

T = TypeVar("T")

CHILD = Path(__file__).resolve().parent / "recovery_child.py"
ACTION = {"kind": "llm.completion", "name": "test-model"}
USD = "USD_MICROCENTS"
# Reservation ids a lossy name scheme would merge (CR-DURABLE-007): record names must tell
# every one apart, in the directory and in Redis.
TRICKY_IDS = [
    "rsv/a", "rsv_a", "rsv.a", "rsv a", "rsv:a", "rsv%2Fa", "RSV/A", "rsv/a ", " rsv/a",
    "r\u00e9sum\u00e9", "re\u0301sume\u0301",  # the same text, composed and decomposed
    "\u0440\u0441\u0432", "\u4e88\u7d04-1", "\U0001f4b8", "rsv\\a", "../rsv", "a" * 300,
]  # fmt: skip


def settlement_requests(server: LocalServer, rid: str, key: str) -> list[RequestRecord]:
    """Commits of ``rid`` and events carrying ``key``, in arrival order."""
    return [
        r
        for r in server.requests()
        if (r.operation == "commitReservation" and r.reservation_id == rid)
        or (r.operation == "createEvent" and r.idempotency_key == key)
    ]


def settlements(server: LocalServer, rid: str, key: str) -> tuple[int, int]:
    """(applied commits of ``rid``, applied events with ``key``)."""
    ledger = server.ledger()
    commits = sum(1 for e in ledger if e.kind == "commit" and e.reservation_id == rid)
    events = sum(1 for e in ledger if e.kind == "event" and e.idempotency_key == key)
    return commits, events


def applied(server: LocalServer, kind: str) -> list[LedgerEntry]:
    return [e for e in server.ledger() if e.kind == kind]


def no_release(server: LocalServer) -> None:
    ops = [r.operation for r in server.requests()]
    assert "releaseReservation" not in ops, f"nothing releases a settled reservation: {ops}"


def plant(path: Path, data: bytes) -> None:
    """Writes a journal file whole, as another writer would: staged as ``*.tmp`` (which a scan
    skips) and renamed in, so a client's background replay scanning meanwhile never sees it
    half-written (an empty or partial file would be quarantined as corrupt)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    staged = path.with_name(path.name + ".tmp")
    staged.write_bytes(data)
    os.replace(staged, path)


def read_record(path: Path) -> journal.JournalRecord | None:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    return journal.parse_record(data)


def record_files(journal_dir: Path) -> list[Path]:
    """Record files (standard or legacy ``*.json``) of every partition."""
    return sorted(p for p in journal_dir.rglob("*.json") if p.is_file())


def commit_key(rec: journal.JournalRecord) -> str:
    assert rec.commit_body is not None
    return str(json.loads(rec.commit_body)["idempotency_key"])


def wait_for(limit: float, what: str, probe: Callable[[], T | None]) -> T:
    """Polls ``probe`` every millisecond until it returns something, or fails after ``limit``
    seconds."""
    deadline = time.monotonic() + limit
    while True:
        got = probe()
        if got is not None:
            return got
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.001)


class Child:
    """A recovery_child.py process: a fresh interpreter, a fresh client, the journal only."""

    def __init__(self, spec: dict[str, Any], result: Path) -> None:
        result.unlink(missing_ok=True)
        self.result = result
        spec = {**spec, "result": str(result)}
        # -I: the child imports the installed wheel exactly as the tests do, never a source tree.
        self.proc = subprocess.Popen(
            [sys.executable, "-I", str(CHILD), json.dumps(spec)],
            stdin=subprocess.DEVNULL,
        )

    def finish(self, limit: float = 30.0) -> dict[str, Any]:
        """Waits for a normal exit and returns the child's result."""
        try:
            code = self.proc.wait(limit)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"child did not finish within {limit}s") from None
        assert code == 0, f"child failed with status {code}"
        out: dict[str, Any] = json.loads(self.result.read_text())
        return out

    def kill9(self) -> None:
        """SIGKILL, then reap; the child must really die of it (not have finished)."""
        os.kill(self.proc.pid, signal.SIGKILL)
        code = self.proc.wait(10)
        assert code == -signal.SIGKILL, f"killed by SIGKILL: {code}"
        assert not self.result.exists(), "the child had not finished"

    def stop(self) -> None:
        """Cleanup after a failed test: never leave a child behind."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def events_of(result: dict[str, Any], kind: str, rid: str | None = None) -> list[dict[str, Any]]:
    return [
        e for e in result["events"]
        if e["kind"] == kind and (rid is None or e["reservation_id"] == rid)
    ]  # fmt: skip


class Tee:
    """A recording HTTP forwarder in front of a LocalServer: every request is passed on
    unchanged over real HTTP and its method, path and JSON body are kept, so a test can check
    the exact bytes the SDK sent (the server's request log keeps no bodies)."""

    def __init__(self, upstream: str) -> None:
        target = urlsplit(upstream)
        host, port = target.hostname or "127.0.0.1", target.port or 80
        seen: list[tuple[str, str, Any]] = []
        self.seen = seen
        lock = threading.Lock()

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass  # quiet: pytest shows failures

            def forward(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length) if length else b""
                with lock:
                    seen.append((self.command, self.path, json.loads(body) if body else None))
                conn = http.client.HTTPConnection(host, port, timeout=30)
                headers = {
                    k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")
                }
                conn.request(self.command, self.path, body=body or None, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
                self.send_response(resp.status)
                for k, v in resp.getheaders():
                    if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                        self.send_header(k, v)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                conn.close()

            do_GET = do_POST = forward

        self._httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()

    def bodies(self, method: str, path: str) -> list[Any]:
        return [b for (m, p, b) in self.seen if m == method and p == path]

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
