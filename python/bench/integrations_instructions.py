"""Instructions per model call of each Python integration against the bare library call,
counted by callgrind (docs/benchmarks.md, "Integrations"): the same paths as
``integrations_bench.py``, each in a process of its own under ``valgrind --tool=callgrind``.

Why a second measure: the CPU-time bench needs an idle machine (on a shared VM its rounds swing
by 20-40 %, and two runs disagreed on whether the goal is met). Callgrind counts the
instructions the process executes, every thread (Python's and core's runtime threads alike),
which does not depend on what else the machine runs. It does not see cache misses or stalls,
so it is a cost model, not a time: it ranks where the work is and says whether a change
removed work, while the CPU-time bench says what that is worth on a quiet machine.

Each path runs twice, ``--calls`` warm-up calls and then none or ``--measured`` calls, with
``PYTHONHASHSEED=0``; instructions per call are the difference over ``--measured``, so start-up
and warm-up cancel out. The server and the fake provider are child processes, not counted.

    python integrations_instructions.py --cycles-bin BIN [--calls 100] [--measured 200]
        [--path "openai guarded" ...] [--json PATH] [--keep DIR]

``python/scripts/bench.sh --instructions`` builds the release wheel and CLI and runs this.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))

#: The paths counted by default: the ``openai`` guard, its yardsticks, and the other guards.
DEFAULT_PATHS = [
    "openai bare",
    "openai guarded",
    "openai by hand",
    "openai inside an http.client pair",
    "anthropic bare",
    "anthropic guarded",
    "sdk create + commit",
    "http.client create + commit",
    "sdk lifecycle",
]

_TOTALS = re.compile(r"^(?:totals|summary):\s+(\d+)", re.M)


def count(cycles_bin: str, path: str, calls: int, rounds: int, out: str) -> int:
    """Instructions of one run of ``path`` (``calls`` warm-up calls, then ``rounds`` x
    ``calls``) under callgrind."""
    cmd = [
        "valgrind",
        "--tool=callgrind",
        f"--callgrind-out-file={out}",
        sys.executable,
        os.path.join(HERE, "integrations_bench.py"),
        "--cycles-bin",
        cycles_bin,
        "--only",
        path,
        "--calls",
        str(calls),
        "--rounds",
        str(rounds),
    ]
    env = dict(os.environ, PYTHONHASHSEED="0")
    done = subprocess.run(
        cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    if done.returncode != 0:
        raise SystemExit(f"{path!r} failed under callgrind:\n{done.stderr[-3000:]}")
    with open(out) as f:
        m = _TOTALS.search(f.read())
    if m is None:
        raise SystemExit(f"no totals in {out}")
    return int(m.group(1))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cycles-bin", required=True, help="the cycles CLI (serve, fake-provider)")
    p.add_argument("--calls", type=int, default=100, help="warm-up calls (and the round size)")
    p.add_argument("--measured", type=int, default=200, help="calls counted, a multiple of --calls")
    p.add_argument("--path", action="append", help="a path to count (repeatable)")
    p.add_argument("--json", help="also write the figures here")
    p.add_argument(
        "--keep", help="keep the callgrind files in this directory (for callgrind_annotate)"
    )
    a = p.parse_args()
    if a.measured <= 0 or a.measured % a.calls:
        raise SystemExit("--measured must be a positive multiple of --calls")
    paths = a.path or DEFAULT_PATHS
    keep = a.keep or tempfile.mkdtemp(prefix="cycles-callgrind-")
    os.makedirs(keep, exist_ok=True)
    per_call: dict[str, float] = {}
    for path in paths:
        slug = re.sub(r"[^a-z0-9]+", "-", path.lower()).strip("-")
        base = count(a.cycles_bin, path, a.calls, 0, os.path.join(keep, f"{slug}.warm.out"))
        full = count(
            a.cycles_bin, path, a.calls, a.measured // a.calls, os.path.join(keep, f"{slug}.out")
        )
        per_call[path] = (full - base) / a.measured
        print(f"{path}: {per_call[path]:,.0f} instructions per call", file=sys.stderr)

    print(
        f"Instructions per call (callgrind, every thread of the client; {a.measured} calls "
        f"after {a.calls} warm-up; Python {sys.version.split()[0]}):\n"
    )
    print("| path | instructions per call |")
    print("|---|---:|")
    for k, v in per_call.items():
        print(f"| {k} | {v:,.0f} |")
    out: dict[str, Any] = {"calls": a.calls, "measured": a.measured, "per_call": per_call}
    m = per_call
    if all(k in m for k in ("openai bare", "openai guarded", "openai inside an http.client pair")):
        added = m["openai guarded"] - m["openai bare"]
        pair = m["openai inside an http.client pair"] - m["openai bare"]
        out["openai_added_per_pair_in_place"] = added / pair
        print(
            f"\nthe openai guard adds {added:,.0f} instructions to the bare call; an http.client "
            f"create + commit around it adds {pair:,.0f}: {added / pair:.2f}x that pair in place"
        )
        if "openai by hand" in m:
            own = m["openai guarded"] - m["openai by hand"]
            out["openai_guard_beyond_by_hand"] = own
            print(f"the guard beyond the same lifecycle by hand: {own:,.0f} instructions per call")
    print(f"\ncallgrind files: {keep}", file=sys.stderr)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=2)


if __name__ == "__main__":
    main()
