#!/usr/bin/env python3
"""Where a settlement's time goes in the kernel: sums a `perf trace` log of the journal's file
syscalls per kind, per settlement (docs/benchmarks.md, "Where a settlement's time goes").

    perf trace -e openat,unlink,rename,fsync -o ours.trace \\
        target/release/settle-throughput --only ours --concurrency 64 --settlements 512 --rounds 3
    python3 conformance/bench/trace_summary.py ours.trace 1536   # settlements traced (512 x 3)

`perf trace` prints a syscall that blocks as a start line and a "[continued]" line on the same
thread; the two are joined here. `openat` calls are told apart by their flags and result
(perf does not resolve the file names): O_EXCL creates the temp record, O_CREAT opens the lock
table, ENOENT is a probe for an existing record, anything else opens a directory to fsync it.
Durations perf reports wrapped (negative) are left out and counted.
"""

import re
import sys
from collections import defaultdict

LINE = re.compile(r"^\s*[\d.]+ \(\s*([\d.]*)(?: ms)?\s*\): (\S+?)/(\d+) (.*)$")
START = re.compile(r"(\w+)\((.*?)\)\s*(?:= (.*?))?\s*(\.\.\.)?$")
CONTINUED = re.compile(r"\.\.\. \[continued\]: (\w+)\(\)\)\s+= (.*)$")


def kind(syscall: str, args: str, result: str) -> str:
    """The row a call belongs to."""
    if syscall != "openat":
        return syscall
    m = re.search(r"flags: ([\w|]+)", args)
    flags = m.group(1) if m else ""
    if "ENOENT" in result:
        return "openat: probe for an existing record (ENOENT)"
    if "EXCL" in flags:
        return "openat: temp record created (O_EXCL)"
    if "CREAT" in flags:
        return "openat: lock table (O_CREAT)"
    return "openat: a directory, to fsync it"


def main() -> None:
    if len(sys.argv) != 3:
        sys.exit("usage: trace_summary.py TRACE SETTLEMENTS")
    path, settlements = sys.argv[1], int(sys.argv[2])
    rows: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    started: dict[str, tuple[str, str]] = {}
    wrapped = 0
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            m = LINE.match(line)
            if not m:
                continue
            ms, tid, rest = float(m.group(1) or 0), m.group(3), m.group(4).strip()
            c = CONTINUED.match(rest)
            if c:
                if tid not in started:
                    continue
                (syscall, args), result = started.pop(tid), c.group(2)
            else:
                s = START.match(rest)
                if not s:
                    continue
                syscall, args, result = s.group(1), s.group(2), s.group(3)
                if result is None:  # blocked: its duration comes on the continued line
                    started[tid] = (syscall, args)
                    continue
            if ms > 1e4:
                wrapped += 1
                continue
            row = rows[kind(syscall, args, result)]
            row[0] += 1
            row[1] += ms
    total = sum(ms for _, ms in rows.values()) or 1.0
    print("| call | per settlement | mean ms | ms per settlement | share |")
    print("|---|---:|---:|---:|---:|")
    for name, (n, ms) in sorted(rows.items(), key=lambda r: -r[1][1]):
        cells = [name, f"{n / settlements:.2f}", f"{ms / n:.2f}", f"{ms / settlements:.2f}"]
        print(f"| {' | '.join(cells)} | {100 * ms / total:.0f}% |")
    print(f"\n{wrapped} calls with a wrapped duration left out")


if __name__ == "__main__":
    main()
