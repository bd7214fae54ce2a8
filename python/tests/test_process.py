"""GIL release, fork safety, close() and context managers, the unknown-unit round trip, and
the committed stubs."""

from __future__ import annotations

import ast
import asyncio
import http.server
import json
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any, ClassVar

import pytest
from conftest import ACTION, usd

import cycles
from cycles import _native
from cycles.testing import LocalServer


def test_gil_is_released_while_a_call_waits(server: LocalServer) -> None:
    server.add_fault("decide", {"kind": "delay", "ms": 800})
    ticks = 0
    stop = threading.Event()

    def spin() -> None:
        nonlocal ticks
        while not stop.is_set():
            ticks += 1
            time.sleep(0.001)

    t = threading.Thread(target=spin)
    with server.client() as client:
        t.start()
        time.sleep(0.05)
        before = ticks
        start = time.monotonic()
        client.decide(idempotency_key="k", action=ACTION, estimate=usd(1))
        waited = time.monotonic() - start
        during = ticks - before
        stop.set()
        t.join()
    assert waited >= 0.75
    # A held GIL would freeze the other thread for the whole call (during ~ 0).
    assert during > 100, f"other thread ran {during} times in {waited:.2f}s"


def test_local_server_start_and_requests_release_the_gil(server: LocalServer) -> None:
    server.add_fault("createReservation", {"kind": "delay", "ms": 300}, times=0)
    results: list[object] = []
    with server.client() as client:
        threads = [
            threading.Thread(
                target=lambda i=i: results.append(
                    client.create_reservation(
                        idempotency_key=f"k{i}", action=ACTION, estimate=usd(1)
                    )
                )
            )
            for i in range(6)
        ]
        start = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.monotonic() - start
    assert len(results) == 6
    assert elapsed < 6 * 0.3 / 2, f"6 threads took {elapsed:.2f}s: calls were serialised"


FORK_CHILD = textwrap.dedent(
    """
    import asyncio, os, sys, time
    import cycles
    from cycles.testing import LocalServer

    A, E = cycles.Action("a", "b"), cycles.Amount("USD_MICROCENTS", 1)
    server = LocalServer()
    client = server.client()
    aclient = server.async_client()
    client.decide(idempotency_key="parent", action=A, estimate=E)
    asyncio.run(aclient.decide(idempotency_key="parent-a", action=A, estimate=E))
    pid = os.fork()
    if pid == 0:
        uses = {
            "sync": lambda: client.decide(idempotency_key="c1", action=A, estimate=E),
            "async": lambda: asyncio.run(
                aclient.decide(idempotency_key="c2", action=A, estimate=E)),
            "new client": lambda: cycles.Client(server.url, "k", tenant="acme").decide(
                idempotency_key="c3", action=A, estimate=E),
            "new server": lambda: LocalServer(),
        }
        failures = []
        for name, use in uses.items():
            start = time.monotonic()
            try:
                use()
                failures.append(name + ": succeeded in the child")
            except cycles.CyclesRuntimeError as e:
                if "fork" not in str(e) or e.code != 3 or time.monotonic() - start > 5:
                    failures.append(name + ": unclear error " + repr(e))
            except BaseException as e:
                failures.append(name + ": wrong exception " + repr(e))
        print("child failures:", failures, flush=True)
        # A normal exit (finalizers run over the inherited handles) must not hang either.
        server.stop()
        client.close()
        sys.exit(1 if failures else 0)
    _, status = os.waitpid(pid, 0)
    child = os.waitstatus_to_exitcode(status)
    # The parent is unaffected.
    client.decide(idempotency_key="parent-2", action=A, estimate=E)
    asyncio.run(aclient.decide(idempotency_key="parent-3", action=A, estimate=E))
    client.close()
    server.stop()
    print("child", child)
    sys.exit(child)
    """
)


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="needs os.fork")
def test_fork_child_fails_clearly_instead_of_hanging(tmp_path: Path) -> None:
    script = tmp_path / "fork_child.py"
    script.write_text(FORK_CHILD)
    # A separate interpreter: forking the multi-threaded pytest process itself is unsafe.
    proc = subprocess.run(
        [sys.executable, "-W", "ignore", str(script)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0, (proc.returncode, proc.stdout, proc.stderr)
    assert "child 0" in proc.stdout


def test_close_and_context_managers(server: LocalServer) -> None:
    with server.client() as client:
        assert not client.closed
        client.decide(idempotency_key="k", action=ACTION, estimate=usd(1))
    assert client.closed
    with pytest.raises(cycles.ClientClosedError) as e:
        client.decide(idempotency_key="k", action=ACTION, estimate=usd(1))
    assert isinstance(e.value, cycles.CyclesRuntimeError) and e.value.code == 3
    client.close()  # idempotent

    async def run() -> cycles.AsyncClient:
        async with server.async_client() as ac:
            await ac.decide(idempotency_key="k", action=ACTION, estimate=usd(1))
        with pytest.raises(cycles.ClientClosedError):
            await ac.decide(idempotency_key="k", action=ACTION, estimate=usd(1))
        return ac

    assert asyncio.run(run()).closed


def test_close_lets_in_flight_calls_finish(server: LocalServer) -> None:
    server.add_fault("decide", {"kind": "delay", "ms": 400})
    client = server.client()
    out: list[object] = []
    t = threading.Thread(
        target=lambda: out.append(
            client.decide(idempotency_key="k", action=ACTION, estimate=usd(1))
        )
    )
    t.start()
    time.sleep(0.1)
    client.close()
    t.join(5)
    assert out and isinstance(out[0], cycles.DecisionResult)


def test_local_server_lifecycle() -> None:
    budget = {"scope": "tenant:t1", "unit": "TOKENS", "allocated": 100}
    s = LocalServer({"tenants": [{"id": "t1", "api_keys": ["key-1"]}], "budgets": [budget]})
    assert s.running and s.url.startswith("http://127.0.0.1:") and s.tenant == "t1"
    with s.client() as c:
        r = c.create_reservation(idempotency_key="k", action=ACTION,
                                 estimate=cycles.Amount("TOKENS", 40))  # fmt: skip
        assert r.reserved == cycles.Amount("TOKENS", 40)
    now = s.now_ms()
    s.advance_clock(10_000)
    assert s.now_ms() >= now + 10_000
    (entry,) = s.ledger()
    assert (entry.kind, entry.tenant, entry.unit, entry.amount) == ("reserve", "t1", "TOKENS", 40)
    (req,) = s.requests()
    assert (req.operation, req.method, req.status) == ("createReservation", "POST", 200)
    s.add_fault({"operation": "decide", "fault": {"kind": "server_error", "status": 500}})
    s.clear_faults()
    s.stop()
    s.stop()
    assert not s.running
    with pytest.raises(cycles.InvalidArgumentError):
        s.ledger()
    with pytest.raises(cycles.InvalidArgumentError):
        LocalServer({"regime": {"extend": {"kind": "nonsense"}}})


class _StubHandler(http.server.BaseHTTPRequestHandler):
    seen: ClassVar[list[dict[str, Any]]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        _StubHandler.seen.append(body)
        unit = body["estimate"]["unit"]
        reply = {"decision": "ALLOW", "affected_scopes": ["tenant:acme"],
                 "reservation_id": "rsv_1", "reserved": {"unit": unit, "amount": 5},
                 "expires_at_ms": 2, "remaining_ttl_ms": 1, "scope_path": "tenant:acme",
                 "future_field": {"x": 1}}  # fmt: skip
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("X-Request-Id", "stub-req")
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


def test_unknown_unit_round_trips_unchanged() -> None:
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _StubHandler)
    t = threading.Thread(target=httpd.serve_forever, daemon=True)
    t.start()
    try:
        url = f"http://127.0.0.1:{httpd.server_address[1]}"
        for client in (cycles.Client(url, "k"), cycles.AsyncClient(url, "k")):
            result = client.create_reservation(
                idempotency_key="k", subject={"tenant": "acme"}, action=ACTION,
                estimate=cycles.Amount("GPU_SECONDS", 5),
            )  # fmt: skip
            if asyncio.iscoroutine(result):
                result = asyncio.run(result)
            assert result.reserved == cycles.Amount("GPU_SECONDS", 5)
            assert result.meta is not None and result.meta.request_id == "stub-req"
            client.close()
        assert [b["estimate"]["unit"] for b in _StubHandler.seen] == ["GPU_SECONDS"] * 2
    finally:
        httpd.shutdown()


def _stub_names(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return {n for n in names if not (n.startswith("_") and not n.startswith("__"))
            or n == "_debug_panic"}  # fmt: skip


def test_stubs_match_the_native_module() -> None:
    pkg = Path(cycles.__file__).parent
    assert (pkg / "py.typed").exists(), "py.typed ships in the wheel"
    stub = pkg / "_native.pyi"
    assert stub.exists(), "_native.pyi ships in the wheel"
    declared = _stub_names(stub)
    actual = {n for n in dir(_native) if not n.startswith("__") or n == "__version__"}
    actual -= {"__doc__", "__file__", "__loader__", "__name__", "__package__", "__spec__",
               "__all__"}  # fmt: skip
    assert declared == actual, (
        f"missing from stub: {actual - declared}; not in module: {declared - actual}"
    )
    tree = ast.parse(stub.read_text())
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            members = {n.name for n in node.body if isinstance(n, ast.FunctionDef)}
            real = {n for n in dir(getattr(_native, node.name)) if not n.startswith("_")}
            assert members - {"__init__"} == real, node.name


INTERRUPT = textwrap.dedent(
    """
    import _thread, signal, sys, threading, time
    import cycles
    from cycles.testing import LocalServer

    # A process started in the background by a non-interactive shell inherits SIGINT ignored,
    # and then Python installs no KeyboardInterrupt handler: interrupt_main would do nothing.
    signal.signal(signal.SIGINT, signal.default_int_handler)

    with LocalServer() as server, server.client() as client:
        server.add_fault("decide", {"kind": "delay", "ms": 5000})
        threading.Timer(0.3, _thread.interrupt_main).start()
        start = time.monotonic()
        try:
            client.decide(idempotency_key="k", action=cycles.Action("a", "b"),
                          estimate=cycles.Amount("USD_MICROCENTS", 1))
            print("not interrupted after", round(time.monotonic() - start, 2))
            sys.exit(1)
        except KeyboardInterrupt:
            waited = time.monotonic() - start
        # The client still works after the interrupted call.
        server.clear_faults()
        client.decide(idempotency_key="k2", action=cycles.Action("a", "b"),
                      estimate=cycles.Amount("USD_MICROCENTS", 1))
    print("interrupted after", round(waited, 2))
    sys.exit(0 if waited < 2 else 2)
    """
)


def test_ctrl_c_interrupts_a_blocking_call(tmp_path: Path) -> None:
    script = tmp_path / "interrupt.py"
    script.write_text(INTERRUPT)
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, (proc.returncode, proc.stdout, proc.stderr)
    assert "interrupted after" in proc.stdout
