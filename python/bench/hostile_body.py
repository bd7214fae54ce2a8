"""Peak memory of a client whose server answers with an endless body (docs/reliability.md,
"Hostile servers").

A loopback stub answers every request with ``200`` and an endless chunked body (64 KiB
chunks until the client hangs up). Each case runs in a fresh interpreter: a ``cycles.Client``
(request timeout T s, default 1) makes N ``create_reservation`` calls, and the case prints
its bound, the error classes raised, the growth of the process's peak RSS (``ru_maxrss``) over the
calls, and their wall time. A bound of 4294967295 (the largest the option takes) stands in
for the unbounded reader the client had before ``max_response_bytes``.

    python bench/hostile_body.py [BOUND:CALLS[:T] ...]    # BOUND: bytes, or "default" (1 MiB)
"""

from __future__ import annotations

import socket
import subprocess
import sys
import tempfile
import threading

CHUNK = b"10000\r\n" + b" " * 0x10000 + b"\r\n"
HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n"

CHILD = """
import json, resource, sys, time
import cycles
def peak_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
url, bound, calls, timeout = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
kw = {} if bound == "default" else {"max_response_bytes": int(bound)}
before, kinds, t = peak_mb(), set(), time.monotonic()
with cycles.Client(url, "k", request_timeout=timeout, journal_enabled=False, **kw) as c:
    for i in range(calls):
        try:
            c.create_reservation(idempotency_key=f"k-{i}", subject={"tenant": "acme"},
                action={"kind": "k", "name": "n"}, estimate={"unit": "TOKENS", "amount": 1})
        except cycles.CyclesError as e:
            kinds.add(type(e).__name__)
print(json.dumps({"bound": bound, "calls": calls, "timeout_s": timeout, "errors": sorted(kinds),
    "peak_growth_mb": round(peak_mb() - before, 1), "seconds": round(time.monotonic() - t, 2)}))
"""


def _endless(conn: socket.socket) -> None:
    with conn:
        data = b""
        while b"\r\n\r\n" not in data:
            got = conn.recv(4096)
            if not got:
                return
            data += got
        try:
            conn.sendall(HEAD)
            while True:
                conn.sendall(CHUNK)
        except OSError:
            return


def _serve(listener: socket.socket) -> None:
    while True:
        try:
            conn, _ = listener.accept()
        except OSError:
            return
        threading.Thread(target=_endless, args=(conn,), daemon=True).start()


def main(cases: list[str]) -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    threading.Thread(target=_serve, args=(listener,), daemon=True).start()
    url = f"http://127.0.0.1:{listener.getsockname()[1]}"
    default = ["1024:10", "default:1", "default:10", "default:50", "4294967295:1", "4294967295:1:5"]
    for case in cases or default:
        bound, calls, *timeout = case.split(":")
        # Outside any source tree: `-c` puts the working directory first on sys.path.
        out = subprocess.run(
            [sys.executable, "-c", CHILD, url, bound, calls, timeout[0] if timeout else "1"],
            capture_output=True,
            text=True,
            cwd=tempfile.gettempdir(),
        )
        print(out.stdout.strip() or out.stderr.strip(), flush=True)
    listener.close()


if __name__ == "__main__":
    main(sys.argv[1:])
