"""Compares two `llvm-cov export` documents of one binary (scripts/fuzz-growth.sh): the
source regions and the per-instantiation regions the second covers and the first does not.

Usage: fuzz-growth.py BEFORE.json ALL.json REPO_ROOT
"""

import json
import sys
from collections import Counter


def covered(path: str) -> tuple[set[tuple[str, int, int]], set[tuple[str, str, int]]]:
    """The covered source regions (file, line, column) and the covered regions of each
    instantiation (file, function symbol, region index)."""
    with open(path, encoding="utf-8") as f:
        data = json.load(f)["data"][0]
    source: set[tuple[str, int, int]] = set()
    inst: set[tuple[str, str, int]] = set()
    for fn in data["functions"]:
        files = fn["filenames"]
        for i, r in enumerate(fn["regions"]):
            # [line start, column start, line end, column end, count, file id, expanded id, kind]
            if r[4] > 0:
                source.add((files[r[5]], r[0], r[1]))
                inst.add((files[r[5]], fn["name"], i))
    return source, inst


def main() -> None:
    before_json, all_json, repo = sys.argv[1:4]
    repo = repo.rstrip("/") + "/"
    (src_a, inst_a), (src_b, inst_b) = covered(before_json), covered(all_json)
    new_src = src_b - src_a
    ours = sorted(r for r in new_src if r[0].startswith(repo))
    print(
        f"source regions covered: before {len(src_a)}, all {len(src_b)}; new {len(new_src)} "
        f"({len(ours)} in this repository), no longer covered {len(src_a - src_b)}"
    )
    for file, line, col in ours[:40]:
        print(f"  new here: {file[len(repo) :]}:{line}:{col}")
    theirs = Counter(r[0] for r in new_src if not r[0].startswith(repo))
    for file, n in theirs.most_common(10):
        print(f"  new in a dependency: {n} in {file}")
    new_inst = inst_b - inst_a
    print(
        f"instantiation regions covered: before {len(inst_a)}, all {len(inst_b)}; "
        f"new {len(new_inst)}, no longer covered {len(inst_a - inst_b)}"
    )
    for file, n in Counter(r[0] for r in new_inst).most_common(10):
        print(f"  new instantiation regions: {n} in {file.removeprefix(repo)}")


if __name__ == "__main__":
    main()
