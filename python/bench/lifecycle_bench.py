"""Guarded-lifecycle benchmark: this SDK (``cycles``) against bare stdlib HTTP and ``runcycles``.

A guarded lifecycle is: reserve -> heartbeat armed -> the user function -> commit the actual.
Both SDKs run it through their decorator (``@client.guarded`` / ``@runcycles.cycles``) with the
same request: tenant ``acme``, action ``llm.completion``/``bench-model``, estimate 1000 and
actual 800 USD_MICROCENTS, ``ttl_ms`` 60000, ``overage_policy`` ALLOW_IF_AVAILABLE, default
timeouts, a trivial body.

One local server runs in its own process (``cycles serve`` on an ephemeral port, so its CPU is
not inside the measured process), shared by both SDKs. Every measurement runs in a fresh
Python subprocess (clean RSS, no state shared between the SDKs); repetitions alternate which
SDK goes first so server-side drift cancels out. After each run the tenant's ``spent``
balance must have grown by exactly (lifecycles x actual) and nothing may stay reserved,
or the run is reported as failed.

Beside the two SDKs: ``bare``, the same create and commit without an SDK (``http.client`` for
sync, a minimal ``asyncio.open_connection`` client for asyncio; journal off only, see the
"bare stdlib baselines" section below), issue 15's floor; and with ``--base DIR``, ``base``,
this SDK imported from another build, for before/after figures measured in the same run.

Scenarios:
- sync: one thread calls a guarded function in a loop for ``--seconds``;
- async: ``--concurrency`` asyncio tasks do the same on one event loop;
- memory: ``--tasks`` (10,000) asyncio tasks each enter a guarded call and hold it open
  until all of them are in flight; reported is the peak RSS increase over the RSS after
  start-up and warm-up.

Usage (``python/scripts/bench.sh`` builds the release wheel and runs this)::

    python lifecycle_bench.py [--quick] [--json PATH] [--journal on|off|both]
        [--scenarios sync,async,memory] [--sdks ours,bare,runcycles] [--base DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
import urllib.parse
import urllib.request
import uuid
from typing import Any

API_KEY = "cycles-local-key"
TENANT = "acme"
UNIT = "USD_MICROCENTS"
ESTIMATE = 1000
ACTUAL = 800
TTL_MS = 60_000
ACTION_KIND = "llm.completion"
ACTION_NAME = "bench-model"
# Large enough that no run of this benchmark can exhaust it (10k open reservations included).
BUDGET = 10**15

SDKS = ("ours", "bare", "runcycles")
# "base": our SDK from another build (--base DIR), for before/after figures in one run.
LABEL = {
    "ours": "cycles (ours)",
    "base": "cycles (--base build)",
    "bare": "bare stdlib",
    "runcycles": "runcycles 0.5.3",
}


# ---------------------------------------------------------------- bare stdlib baselines
#
# The wire without an SDK: the same create (POST /v1/reservations) and commit (POST
# /v1/reservations/{id}/commit) that our guarded lifecycle sends, with the same JSON bodies and
# headers (API key, Content-Type, Accept, X-Idempotency-Key), over one keep-alive connection,
# each response checked for a 2xx status and parsed with json.loads. No heartbeat, no journal,
# no retries, no validation: the floor a hand-written client pays.


def _create_body(key: str) -> bytes:
    return json.dumps(
        {
            "idempotency_key": key,
            "subject": {"tenant": TENANT},
            "action": {"kind": ACTION_KIND, "name": ACTION_NAME},
            "estimate": {"unit": UNIT, "amount": ESTIMATE},
            "ttl_ms": TTL_MS,
            "overage_policy": "ALLOW_IF_AVAILABLE",
        },
        separators=(",", ":"),
    ).encode()


def _commit_body(key: str) -> bytes:
    return json.dumps(
        {"idempotency_key": key, "actual": {"unit": UNIT, "amount": ACTUAL}},
        separators=(",", ":"),
    ).encode()


def _headers(key: str) -> dict[str, str]:
    return {
        "X-Cycles-API-Key": API_KEY,
        "Content-Type": "application/json",
        "Accept": "application/json",
        "X-Idempotency-Key": key,
    }


def _bare_sync_steps(url: str) -> tuple[Any, Any, Any]:
    """(create, commit, connection) over one http.client keep-alive connection: ``create()``
    reserves and gives ``(reservation_id, key)``, ``commit(reservation_id, key)`` commits the
    actual."""
    u = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname or "127.0.0.1", u.port)

    def post(path: str, key: str, body: bytes) -> Any:
        conn.request("POST", path, body, _headers(key))
        r = conn.getresponse()
        data = r.read()
        if not 200 <= r.status < 300:
            raise RuntimeError(f"POST {path}: HTTP {r.status}: {data[:200]!r}")
        return json.loads(data)

    def create() -> tuple[str, str]:
        key = f"bare-{uuid.uuid4()}"
        return post("/v1/reservations", key, _create_body(key))["reservation_id"], key

    def commit(rid: str, key: str) -> None:
        post(f"/v1/reservations/{rid}/commit", key + ":commit", _commit_body(key + ":commit"))

    return create, commit, conn


def _bare_sync(url: str) -> tuple[Any, Any]:
    """(create+commit function, object with close()) over one http.client keep-alive connection."""
    create, commit, conn = _bare_sync_steps(url)

    def pair() -> int:
        commit(*create())
        return 1

    return pair, conn


class _BareAsyncConn:
    """The smallest honest asyncio HTTP/1.1 client: one keep-alive connection, requests
    written by hand, responses read by status line, headers and Content-Length."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, host: str):
        self.reader, self.writer, self.host = reader, writer, host

    async def post(self, path: str, key: str, body: bytes) -> Any:
        head = "".join(f"{k}: {v}\r\n" for k, v in _headers(key).items())
        self.writer.write(
            (
                f"POST {path} HTTP/1.1\r\nHost: {self.host}\r\n{head}"
                f"Content-Length: {len(body)}\r\n\r\n"
            ).encode()
            + body
        )
        raw = await self.reader.readuntil(b"\r\n\r\n")
        lines = raw.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ", 2)[1])
        length = 0
        for line in lines[1:]:
            name, _, value = line.partition(":")
            if name.strip().lower() == "content-length":
                length = int(value)
        data = await self.reader.readexactly(length)
        if not 200 <= status < 300:
            raise RuntimeError(f"POST {path}: HTTP {status}: {data[:200]!r}")
        return json.loads(data)


class _BareAsync:
    """Create+commit pairs for asyncio tasks: each pair takes an idle connection (or opens
    one), so N concurrent tasks hold N keep-alive connections, like one connection per task."""

    def __init__(self, url: str) -> None:
        u = urllib.parse.urlsplit(url)
        self.host, self.port = u.hostname or "127.0.0.1", u.port or 80
        self.idle: list[_BareAsyncConn] = []
        self.all: list[_BareAsyncConn] = []

    async def __call__(self) -> int:
        if self.idle:
            c = self.idle.pop()
        else:
            reader, writer = await asyncio.open_connection(self.host, self.port)
            c = _BareAsyncConn(reader, writer, f"{self.host}:{self.port}")
            self.all.append(c)
        key = f"bare-{uuid.uuid4()}"
        created = await c.post("/v1/reservations", key, _create_body(key))
        rid = created["reservation_id"]
        ck = key + ":commit"
        await c.post(f"/v1/reservations/{rid}/commit", ck, _commit_body(ck))
        self.idle.append(c)
        return 1

    async def aclose(self) -> None:
        for c in self.all:
            c.writer.close()


# ---------------------------------------------------------------- worker side (subprocess)


def _status_kb(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def _reset_peak_rss() -> bool:
    # Writing 5 to clear_refs resets VmHWM (Linux >= 4.0), so the peak covers only the test.
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def _make_sync(sdk: str, url: str, journal_dir: str | None) -> tuple[Any, Any]:
    """(guarded function, client) for the sync scenario."""
    if sdk == "bare":
        return _bare_sync(url)
    if sdk in ("ours", "base"):
        import cycles

        client = cycles.Client(
            url,
            API_KEY,
            tenant=TENANT,
            journal_dir=journal_dir,
            journal_enabled=journal_dir is not None,
        )

        @client.guarded(
            ESTIMATE,
            action=cycles.Action(ACTION_KIND, ACTION_NAME),
            actual=ACTUAL,
            ttl_ms=TTL_MS,
            overage_policy="ALLOW_IF_AVAILABLE",
        )
        def work() -> int:
            return 1

        return work, client

    import runcycles  # type: ignore[import-untyped]

    client = runcycles.CyclesClient(_their_config(url, journal_dir))

    @runcycles.cycles(  # type: ignore[untyped-decorator]  # runcycles ships no types
        estimate=ESTIMATE,
        actual=ACTUAL,
        action_kind=ACTION_KIND,
        action_name=ACTION_NAME,
        ttl_ms=TTL_MS,
        client=client,
    )
    def twork() -> int:
        return 1

    return twork, client


def _make_async(sdk: str, url: str, journal_dir: str | None, hold: Any = None) -> tuple[Any, Any]:
    """(guarded coroutine function, client); ``hold`` is awaited inside the guarded body."""

    async def body() -> int:
        if hold is not None:
            await hold()
        return 1

    if sdk == "bare":
        bare = _BareAsync(url)
        return bare, bare
    if sdk in ("ours", "base"):
        import cycles

        client = cycles.AsyncClient(
            url,
            API_KEY,
            tenant=TENANT,
            journal_dir=journal_dir,
            journal_enabled=journal_dir is not None,
        )
        work = client.guarded(
            ESTIMATE,
            action=cycles.Action(ACTION_KIND, ACTION_NAME),
            actual=ACTUAL,
            ttl_ms=TTL_MS,
            overage_policy="ALLOW_IF_AVAILABLE",
        )(body)
        return work, client

    import runcycles

    client = runcycles.AsyncCyclesClient(_their_config(url, journal_dir))
    work = runcycles.cycles(
        estimate=ESTIMATE,
        actual=ACTUAL,
        action_kind=ACTION_KIND,
        action_name=ACTION_NAME,
        ttl_ms=TTL_MS,
        client=client,
    )(body)
    return work, client


def _their_config(url: str, journal_dir: str | None) -> Any:
    import runcycles

    return runcycles.CyclesConfig(
        base_url=url,
        api_key=API_KEY,
        tenant=TENANT,
        journal_enabled=journal_dir is not None,
        journal_dir=journal_dir,
    )


async def _aclose(client: Any) -> None:
    await client.aclose()


def worker_sync(a: dict[str, Any]) -> dict[str, Any]:
    work, client = _make_sync(a["sdk"], a["url"], a["journal_dir"])
    calls = 0
    end = time.perf_counter() + a["warmup_s"]
    while time.perf_counter() < end:
        work()
        calls += 1
    n = 0
    cpu0 = _cpu_s()
    t0 = time.perf_counter()
    end = t0 + a["seconds"]
    while time.perf_counter() < end:
        work()
        n += 1
    wall = time.perf_counter() - t0
    cpu = _cpu_s() - cpu0
    client.close()
    return {"calls": calls + n, "n": n, "wall_s": wall, "cpu_s": cpu}


async def _async_run(a: dict[str, Any]) -> dict[str, Any]:
    work, client = _make_async(a["sdk"], a["url"], a["journal_dir"])
    conc = a["concurrency"]

    async def loop(deadline: float) -> int:
        k = 0
        while time.perf_counter() < deadline:
            await work()
            k += 1
        return k

    warm = await asyncio.gather(*(loop(time.perf_counter() + a["warmup_s"]) for _ in range(conc)))
    cpu0 = _cpu_s()
    t0 = time.perf_counter()
    counts = await asyncio.gather(*(loop(t0 + a["seconds"]) for _ in range(conc)))
    wall = time.perf_counter() - t0
    cpu = _cpu_s() - cpu0
    await _aclose(client)
    n = sum(counts)
    return {"calls": sum(warm) + n, "n": n, "wall_s": wall, "cpu_s": cpu}


def worker_async(a: dict[str, Any]) -> dict[str, Any]:
    return asyncio.run(_async_run(a))


async def _memory_run(a: dict[str, Any]) -> dict[str, Any]:
    tasks_n = a["tasks"]
    gate = asyncio.Event()
    all_in = asyncio.Event()
    state = {"in": 0, "armed": False}

    async def hold() -> None:
        if state["armed"]:
            state["in"] += 1
            if state["in"] == tasks_n:
                all_in.set()
            await gate.wait()

    work, client = _make_async(a["sdk"], a["url"], a["journal_dir"], hold)
    # Warm-up: the client, its pool and runtime exist before the baseline is taken.
    warm = 0
    for _ in range(20):
        await work()
        warm += 1
    await asyncio.gather(*(work() for _ in range(20)))
    warm += 20
    import gc

    gc.collect()
    base_kb = _status_kb("VmRSS")
    hwm_reset = _reset_peak_rss()
    state["armed"] = True
    t0 = time.perf_counter()
    tasks = [asyncio.ensure_future(work()) for _ in range(tasks_n)]
    failed_early = 0
    deadline = t0 + a["timeout_s"]
    peak_sampled = base_kb
    while not all_in.is_set() and time.perf_counter() < deadline:
        await asyncio.wait([asyncio.ensure_future(all_in.wait())], timeout=0.25)
        peak_sampled = max(peak_sampled, _status_kb("VmRSS"))
        failed_early = sum(1 for t in tasks if t.done())
        if failed_early and state["in"] + failed_early >= tasks_n:
            break  # the rest failed: nothing more will come in
    all_in_s = time.perf_counter() - t0
    in_flight = state["in"]
    rss_all_in_kb = _status_kb("VmRSS")
    peak_sampled = max(peak_sampled, rss_all_in_kb)
    gate.set()
    # Bounded: a client that cannot settle is reported, not waited for forever.
    _, pending = await asyncio.wait(tasks, timeout=a["timeout_s"])
    for t in pending:
        t.cancel()
    results = await asyncio.gather(*tasks, return_exceptions=True)
    settle_s = time.perf_counter() - t0 - all_in_s
    peak_kb = _status_kb("VmHWM") if hwm_reset else max(peak_sampled, _status_kb("VmRSS"))
    errors: dict[str, int] = {}
    for r in results:
        if isinstance(r, BaseException):
            key = f"{type(r).__name__}: {str(r)[:120]}"
            errors[key] = errors.get(key, 0) + 1
    ok = sum(1 for r in results if not isinstance(r, BaseException))
    await _aclose(client)
    return {
        "calls": warm + ok,
        "warm": warm,
        "tasks": tasks_n,
        "in_flight": in_flight,
        "ok": ok,
        "failed": tasks_n - ok,
        "errors": errors,
        "base_rss_kb": base_kb,
        "rss_all_in_kb": rss_all_in_kb,
        "peak_rss_kb": peak_kb,
        "peak_from_hwm": hwm_reset,
        "all_in_s": all_in_s,
        "settle_s": settle_s,
    }


def worker_memory(a: dict[str, Any]) -> dict[str, Any]:
    return asyncio.run(_memory_run(a))


def worker_main(spec: str) -> None:
    a = json.loads(spec)
    _raise_nofile()
    try:
        fn = {"sync": worker_sync, "async": worker_async, "memory": worker_memory}[a["scenario"]]
        out = fn(a)
    except BaseException as e:  # report, do not hang the orchestrator
        out = {"error": f"{type(e).__name__}: {e}", "trace": traceback.format_exc()}
    print("RESULT " + json.dumps(out), flush=True)


def serve_main() -> None:
    """Fallback server process: the in-process LocalServer, in this separate process."""
    from cycles.testing import LocalServer

    cfg = {"budgets": [{"scope": f"tenant:{TENANT}", "unit": UNIT, "allocated": BUDGET}]}
    with LocalServer(cfg) as server:
        print(f"cycles local server listening on {server.url}", flush=True)
        sys.stdin.read()  # until the orchestrator closes our stdin


# ---------------------------------------------------------------- orchestrator side


def _raise_nofile() -> None:
    # 10,000 concurrent requests need more sockets than the usual soft limit of 1024.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = hard if hard != resource.RLIM_INFINITY else 65536
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))


class Server:
    def __init__(self, cycles_bin: str | None) -> None:
        if cycles_bin:
            cmd = [
                cycles_bin,
                "serve",
                "--port",
                "0",
                "--budget",
                f"tenant:{TENANT}={UNIT}:{BUDGET}",
            ]
            self.kind = "cycles serve (release binary, separate process)"
        else:
            cmd = [sys.executable, os.path.abspath(__file__), "--serve"]
            self.kind = "cycles.testing.LocalServer in a separate Python process"
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if "listening on " not in line:
            self.stop()
            raise SystemExit(f"the server did not start: {line!r}")
        self.url = line.split("listening on ", 1)[1].strip()

    def spent_reserved(self) -> tuple[int, int]:
        req = urllib.request.Request(
            f"{self.url}/v1/balances?tenant={TENANT}", headers={"X-Cycles-API-Key": API_KEY}
        )
        with urllib.request.urlopen(req, timeout=10) as r:
            body = json.load(r)
        for b in body["balances"]:
            if b["scope"] == f"tenant:{TENANT}" and b["spent"]["unit"] == UNIT:
                return b["spent"]["amount"], b["reserved"]["amount"]
        raise RuntimeError(f"no balance for tenant:{TENANT} {UNIT}: {body}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def run_worker(
    python: str, server: Server, spec: dict[str, Any], timeout: float, base: str | None = None
) -> dict[str, Any]:
    spent0, _ = server.spent_reserved()
    env = dict(os.environ)
    if spec["sdk"] == "base" and base:
        env["PYTHONPATH"] = os.path.abspath(base)  # its `cycles` shadows the installed one
    jdir = tempfile.mkdtemp(prefix=f"cycles-bench-journal-{spec['sdk']}-")
    spec = dict(spec, url=server.url, journal_dir=jdir if spec["journal"] else None)
    try:
        p = subprocess.run(
            [python, os.path.abspath(__file__), "--worker", json.dumps(spec)],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
        )
        lines = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")]
        if not lines:
            return {"error": f"worker exit {p.returncode}: {p.stderr[-2000:]}"}
        out: dict[str, Any] = json.loads(lines[-1][len("RESULT ") :])
        if "error" in out:
            return out
        # Every lifecycle must have committed its actual, and nothing may stay reserved.
        spent1, reserved = server.spent_reserved()
        expected = out["calls"] * ACTUAL
        if "warm" in out:
            out["committed"] = (spent1 - spent0) // ACTUAL - out["warm"]
        if spent1 - spent0 != expected or reserved != 0:
            out["verify_error"] = (
                f"spent grew by {spent1 - spent0}, expected {expected}; reserved {reserved}"
            )
        left = os.listdir(jdir) if os.path.isdir(jdir) else []
        if left:
            out["journal_left"] = len(left)
        return out
    except subprocess.TimeoutExpired:
        return {"error": f"worker timed out after {timeout:.0f} s"}
    finally:
        shutil.rmtree(jdir, ignore_errors=True)


def median(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None


def fmt_rate(x: float | None) -> str:
    return "n/a" if x is None else f"{x:,.0f}"


def fmt_ratio(a: float | None, b: float | None) -> str:
    if a is None or b is None or b == 0:
        return "n/a"
    return f"{a / b:.2f}x"


def fmt_mb(kb: float | None) -> str:
    return "n/a" if kb is None else f"{kb / 1024:,.1f} MB"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="short smoke run (1 s, 2 reps, 2k tasks)")
    ap.add_argument("--json", metavar="PATH", help="also write all raw results as JSON")
    ap.add_argument("--reps", type=int, default=5, help="repetitions per SDK and scenario")
    ap.add_argument("--seconds", type=float, default=3.0, help="measured time per repetition")
    ap.add_argument("--warmup", type=float, default=1.0, help="warm-up seconds per repetition")
    ap.add_argument(
        "--concurrency", default="1,50", help="asyncio tasks of the async scenario (comma list)"
    )
    ap.add_argument("--tasks", type=int, default=10_000, help="concurrent tasks (memory)")
    ap.add_argument("--memory-reps", type=int, default=3, help="repetitions of the memory test")
    ap.add_argument(
        "--journal",
        choices=("on", "off", "both"),
        default="both",
        help="settlement journal for the throughput scenarios (memory: on)",
    )
    ap.add_argument(
        "--scenarios", default="sync,async,memory", help="comma-separated subset to run"
    )
    ap.add_argument(
        "--sdks",
        default=",".join(SDKS),
        help="comma-separated subset of ours,bare,runcycles (bare: journal off only, no memory)",
    )
    ap.add_argument(
        "--cycles-bin",
        default=os.environ.get("CYCLES_BIN"),
        help="the `cycles` CLI binary for the server (default $CYCLES_BIN); without it the "
        "server is LocalServer in a separate Python process",
    )
    ap.add_argument("--python", default=sys.executable, help="interpreter for the workers")
    ap.add_argument(
        "--base",
        metavar="DIR",
        help="also run our SDK imported from DIR (e.g. `pip install --target DIR` of an older "
        "wheel) as the column 'base': before/after figures measured in the same run",
    )
    args = ap.parse_args()
    if args.quick:
        args.reps, args.seconds, args.warmup = 2, 1.0, 0.3
        args.tasks, args.memory_reps = 2_000, 1
    scenarios = [s.strip() for s in args.scenarios.split(",") if s.strip()]
    concs = [int(c) for c in str(args.concurrency).split(",")]
    journals = {"on": [True], "off": [False], "both": [True, False]}[args.journal]
    sdks = tuple(s.strip() for s in args.sdks.split(",") if s.strip())
    if not sdks or any(s not in SDKS for s in sdks):
        raise SystemExit(f"--sdks: a comma-separated subset of {','.join(SDKS)}")
    if args.base:
        if not os.path.isdir(os.path.join(args.base, "cycles")):
            raise SystemExit(f"--base: no cycles package in {args.base}")
        sdks = (sdks[0], "base", *sdks[1:])

    _raise_nofile()
    server = Server(args.cycles_bin)
    results: list[dict[str, Any]] = []
    try:
        print(f"server: {server.kind} at {server.url}", file=sys.stderr)
        plan = []
        for scenario in scenarios:
            for journal in journals if scenario != "memory" else [True]:
                for conc in concs if scenario == "async" else [1]:
                    plan.append((scenario, journal, conc))
        gave_up: set[str] = set()
        for scenario, journal, conc in plan:
            reps = args.memory_reps if scenario == "memory" else args.reps
            for rep in range(reps):
                order = sdks if rep % 2 == 0 else sdks[::-1]
                for sdk in order:
                    if scenario == "memory" and sdk in gave_up:
                        continue
                    # The bare baseline has no journal and no guarded call to hold open.
                    if sdk == "bare" and (journal or scenario == "memory"):
                        continue
                    spec = {
                        "scenario": scenario,
                        "sdk": sdk,
                        "journal": journal,
                        "seconds": args.seconds,
                        "warmup_s": args.warmup,
                        "concurrency": conc,
                        "tasks": args.tasks,
                        "timeout_s": 60.0,
                    }
                    timeout = 240.0 if scenario == "memory" else 60 + 3 * args.seconds
                    out = run_worker(args.python, server, spec, timeout, args.base)
                    results.append({**spec, "rep": rep, "result": out})
                    if scenario == "memory" and (
                        "error" in out or out.get("failed") or "verify_error" in out
                    ):
                        gave_up.add(sdk)  # minutes per failed attempt: once is enough
                    print(
                        f"{scenario:6} journal={'on ' if journal else 'off'} c={conc} rep {rep} "
                        f"{sdk:9} {_brief(scenario, out)}",
                        file=sys.stderr,
                    )
    finally:
        server.stop()

    table = render(results, args, server.kind)
    print(table)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": machine(), "args": vars(args), "runs": results}, f, indent=1)


def _brief(scenario: str, out: dict[str, Any]) -> str:
    if "error" in out:
        return "ERROR " + str(out["error"]).splitlines()[0][:200]
    extra = f" VERIFY: {out['verify_error']}" if "verify_error" in out else ""
    if scenario == "memory":
        return (
            f"ok {out['ok']}/{out['tasks']} in flight {out['in_flight']} "
            f"peak +{(out['peak_rss_kb'] - out['base_rss_kb']) / 1024:.1f} MB "
            f"all-in {out['all_in_s']:.1f}s settle {out['settle_s']:.1f}s"
            + (f" errors {out['errors']}" if out["errors"] else "")
            + extra
        )
    return (
        f"{out['n'] / out['wall_s']:,.0f}/s, {out['cpu_s'] / out['n'] * 1e6:,.0f} us CPU each"
        + extra
    )


def machine() -> dict[str, Any]:
    cpu = "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "load_avg_at_end": os.getloadavg(),
    }


def _ok(r: dict[str, Any]) -> bool:
    return "error" not in r and "verify_error" not in r


def render(results: list[dict[str, Any]], args: argparse.Namespace, server_kind: str) -> str:
    m = machine()
    order = ("ours", "base", "bare", "runcycles")
    present = [k for k in order if any(r["sdk"] == k for r in results)] or ["ours"]
    others = [k for k in present if k != "ours"]
    short = {"ours": "ours", "base": "base", "bare": "bare", "runcycles": "runcycles"}
    lines = [
        f"Machine: {m['cpu']}, {m['cores']} cores, CPython {m['python']}; server: {server_kind}; "
        f"load average at end {m['load_avg_at_end'][0]:.2f}.",
        f"Throughput: median of {args.reps} runs of {args.seconds:g} s (after {args.warmup:g} s "
        f"warm-up) each. Memory: "
        f"{args.tasks:,} concurrent guarded tasks, median of {args.memory_reps} runs.",
    ]
    if "bare" in present:
        lines.append(
            "Bare stdlib: the same create + commit over one keep-alive connection (http.client; "
            "asyncio streams, one connection per task), journal off only."
        )
    if "base" in present:
        lines.append(f"Base: our SDK imported from {args.base}.")
    lines += [
        "",
        "| scenario | "
        + " | ".join(LABEL[k] for k in present)
        + "".join(f" | ours / {short[k]}" for k in others)
        + " |",
        "|---|" + "---:|" * (len(present) + len(others)),
    ]

    def row(name: str, v: dict[str, Any], fmt: Any, ratio: bool = True) -> str:
        cells = [fmt(v.get(k)) if v.get(k) is not None or k != "bare" else "" for k in present]
        ratios = [fmt_ratio(v.get("ours"), v.get(k)) if ratio else "" for k in others]
        return f"| {name} | " + " | ".join(cells + ratios) + " |"

    def pick(scenario: str, journal: bool, sdk: str, conc: int = 1) -> list[dict[str, Any]]:
        return [
            r["result"]
            for r in results
            if r["scenario"] == scenario
            and r["journal"] == journal
            and r["sdk"] == sdk
            and (scenario == "memory" or r["concurrency"] == conc)
        ]

    notes: list[str] = []
    keys = []
    for r in results:
        k = (r["scenario"], r["journal"], r["concurrency"])
        if r["scenario"] != "memory" and k not in keys:
            keys.append(k)
    for scenario, journal, conc in keys:
        runs = {sdk: pick(scenario, journal, sdk, conc) for sdk in present}
        rate: dict[str, float | None] = {}
        cpu: dict[str, float | None] = {}
        for sdk in present:
            good = [r for r in runs[sdk] if _ok(r)]
            bad = len(runs[sdk]) - len(good)
            if bad:
                notes.append(
                    f"{scenario} journal {'on' if journal else 'off'}, {sdk}: "
                    f"{bad} failed run(s): {_first_error(runs[sdk])}"
                )
            rate[sdk] = median([r["n"] / r["wall_s"] for r in good])
            cpu[sdk] = median([r["cpu_s"] / r["n"] * 1e6 for r in good])
        what = "sync, 1 thread" if scenario == "sync" else f"asyncio, {conc} task(s)"
        j = "journal on" if journal else "journal off"
        lines.append(row(f"{what}, {j}: lifecycles/s (higher is better)", rate, fmt_rate))
        lines.append(
            row(f"{what}, {j}: client CPU µs per lifecycle (lower is better)", cpu, fmt_rate)
        )
    mem = {sdk: pick("memory", True, sdk) for sdk in present}
    if any(mem.values()):
        inc: dict[str, float | None] = {}
        held: dict[str, float | None] = {}
        allin: dict[str, float | None] = {}
        okc: dict[str, str | None] = {}
        for sdk in present:
            mem_runs = mem[sdk]
            full = [r for r in mem_runs if _ok(r) and r["failed"] == 0]
            inc[sdk] = median([r["peak_rss_kb"] - r["base_rss_kb"] for r in full])
            held[sdk] = median([r["rss_all_in_kb"] - r["base_rss_kb"] for r in full])
            allin[sdk] = median([r["all_in_s"] for r in full])
            okc[sdk] = (
                ", ".join(
                    "error" if "error" in r else f"{r.get('committed', 0):,}/{r['tasks']:,}"
                    for r in mem_runs
                )
                or None
            )
            for r in mem_runs:
                if "error" in r or r.get("failed") or "verify_error" in r:
                    notes.append(f"memory, {sdk}: {_first_error([r])}")
        t = f"{args.tasks:,} concurrent async tasks"
        per = {k: (None if v is None else v * 1024 / args.tasks) for k, v in inc.items()}
        lines += [
            row(f"{t}: lifecycles committed per run", okc, lambda x: x or "", ratio=False),
            row(f"{t}: peak RSS increase (lower is better)", inc, fmt_mb),
            row(f"{t}: RSS increase while all are held (lower is better)", held, fmt_mb),
            row(
                f"{t}: peak RSS increase per task",
                per,
                lambda x: "n/a" if x is None else f"{x:,.0f} B",
                ratio=False,
            ),
            row(
                f"{t}: seconds until all in flight (lower is better)",
                allin,
                lambda x: "n/a" if x is None else f"{x:.2f}",
            ),
        ]
    if notes:
        lines.append("")
        lines += [f"- {n}" for n in notes]
    return "\n".join(lines)


def _first_error(runs: list[dict[str, Any]]) -> str:
    for r in runs:
        if "error" in r:
            return str(r["error"]).splitlines()[0][:300]
        if "verify_error" in r:
            return "verification: " + str(r["verify_error"])
        if r.get("errors"):
            (k, v), *_ = r["errors"].items()
            return f"{r['failed']:,} of {r['tasks']:,} failed, e.g. {v:,} x {k}"
    return "?"


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--worker":
        worker_main(sys.argv[2])
    elif len(sys.argv) == 2 and sys.argv[1] == "--serve":
        serve_main()
    else:
        main()
