#!/usr/bin/env python3
"""Writes libFuzzer dictionaries (`-dict=`) for the targets whose input names one of many
functions or members: every identifier-like string literal of the sources that read those
names (the bridge's timing functions, arguments and regimes, client options and guard spec
members), bare, as a JSON key and as a JSON string. Generated, never committed, so they
follow the sources.

Without them the fuzzer has to spell `"max_rtt_ms"` byte by byte before it can reach that
argument's error exit in one of several dozen functions (docs/reliability.md, "What the late
edges are"); with them such paths come in minutes.

Usage: scripts/fuzz-dict.py OUT_DIR
Writes OUT_DIR/<target>.dict and prints the count of tokens per target.
"""

import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BRIDGE = os.path.join("bindings", "bridge", "src")

# The sources (from the repository root) whose string literals are the names a target's input
# selects or keys by; `journal_url`'s parameters are parsed in core.
SOURCES = {
    "bridge_timing_json": [f"{BRIDGE}/timing_json.rs", f"{BRIDGE}/timing.rs"],
    "bridge_options": [
        f"{BRIDGE}/options.rs",
        f"{BRIDGE}/guard.rs",
        "core/src/journal/redis_store.rs",
    ],
    "bridge_pricing_json": [f"{BRIDGE}/pricing_json.rs"],
}

# Identifier-like, or a word with a leading minus (`"-infinite"`).
LITERAL = re.compile(r'"(-?[A-Za-z][A-Za-z0-9_]{1,63})"')


def tokens(files: list[str]) -> list[str]:
    found: set[str] = set()
    for name in files:
        with open(os.path.join(ROOT, name), encoding="utf-8") as f:
            found.update(LITERAL.findall(f.read()))
    return sorted(found)


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for target, files in sorted(SOURCES.items()):
        words = tokens(files)
        if not words:
            sys.exit(f"fuzz-dict: no names found for {target} in {files}")
        lines = []
        for w in words:
            # Identifier-like, so nothing to escape but the quotes of the JSON forms: bare (a
            # function name on the first line), a key, a string value.
            lines.append(f'"{w}"')
            lines.append(f'"\\"{w}\\":"')
            lines.append(f'"\\"{w}\\""')
        with open(os.path.join(out, f"{target}.dict"), "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
        print(f"{target}: {len(words)} names")


if __name__ == "__main__":
    main()
