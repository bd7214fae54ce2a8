"""The two halves of scripts/fuzz-growth.sh's work that are not llvm's.

Usage: fuzz-growth.py sets WORK SINCE_EPOCH UNTIL_EPOCH KEPT CORPUS
         WORK/before: the inputs of KEPT and those of CORPUS last written at or before
         SINCE_EPOCH (seconds); WORK/all: those and the rest of CORPUS written up to
         UNTIL_EPOCH (`inf`: all of it).
       fuzz-growth.py compare BEFORE.json ALL.json REPO_ROOT
         The source regions and the per-instantiation regions the second `llvm-cov export`
         document covers and the first does not.
       fuzz-growth.py missed ALL.json REPO_ROOT
         What no input reaches in the repository's files that some input does.
"""

import errno
import json
import os
import shutil
import sys
from collections import Counter


def gather(dest: str, inputs: list[str]) -> None:
    """Hard-links (copies, across file systems) each input into dest. An input that is gone by
    the time it is reached is skipped: a fuzzer still running deletes an input it has replaced
    by a smaller one with the same coverage, so the set loses nothing by it."""
    os.makedirs(dest, exist_ok=True)
    for path in inputs:
        target = os.path.join(dest, os.path.basename(path))
        if os.path.exists(target):
            continue  # libFuzzer names an input by its content's hash: the same input
        try:
            try:
                os.link(path, target)
            except OSError as e:
                if e.errno != errno.EXDEV:
                    raise
                shutil.copyfile(path, target)
        except FileNotFoundError:
            continue


def files(directory: str) -> list[str]:
    """The inputs of a corpus directory (none if it does not exist)."""
    if not os.path.isdir(directory):
        return []
    return [e.path for e in os.scandir(directory) if e.is_file()]


def sets(work: str, since: float, until: float, kept: str, corpus: str) -> None:
    before, since_inputs = files(kept), list[str]()
    for path in files(corpus):
        try:
            written = os.stat(path).st_mtime
        except FileNotFoundError:
            continue
        if written <= since:
            before.append(path)
        elif written <= until:
            since_inputs.append(path)
    gather(os.path.join(work, "before"), before)
    gather(os.path.join(work, "all"), before + since_inputs)


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


def compare(before_json: str, all_json: str, repo: str) -> None:
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
    # The first set's regions the second misses: a target whose path depends on more than its
    # input (a per-process hash seed, state left by an earlier input) shows here.
    for file, line, col in sorted(src_a - src_b)[:10]:
        print(f"  no longer: {file.removeprefix(repo)}:{line}:{col}")
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


def missed(all_json: str, repo: str) -> None:
    """What the whole corpus never reaches in this repository's files it reaches at all: per
    file its covered share of code regions, then the never-covered regions as spans of lines
    (regions a few lines apart joined) where they matter: inside a function some input enters,
    or anywhere in a file mostly covered. So a match arm no input selects, or a function of the
    target's module that it never calls, shows; a file it only passes through (error types,
    shared helpers) is one line."""
    repo = repo.rstrip("/") + "/"
    with open(all_json, encoding="utf-8") as f:
        data = json.load(f)["data"][0]
    hit: dict[tuple[str, int, int], bool] = {}
    entered: set[tuple[str, int, int]] = set()  # regions of functions some input enters
    for fn in data["functions"]:
        files = fn["filenames"]
        ran = fn["count"] > 0
        for r in fn["regions"]:
            file = files[r[5]]
            if r[7] == 0 and file.startswith(repo):  # code regions of ours
                key = (file.removeprefix(repo), r[0], r[1])
                hit[key] = hit.get(key, False) or r[4] > 0
                if ran:
                    entered.add(key)
    reached = {k[0] for k, v in hit.items() if v}
    print("never reached, in this repository's files the corpus reaches:")
    spans = 0
    for file in sorted(reached):
        regions = sorted((k[1], k[2]) for k in hit if k[0] == file)
        never = [(line, col) for line, col in regions if not hit[(file, line, col)]]
        print(f"  {file}: {len(regions) - len(never)} of {len(regions)} regions covered")
        mostly = len(never) * 2 <= len(regions)
        # [first line, last line, regions], a region within 2 lines of the last joining it.
        runs: list[list[int]] = []
        for line, col in never:
            if not mostly and (file, line, col) not in entered:
                continue
            if runs and line <= runs[-1][1] + 2:
                runs[-1][1:] = [line, runs[-1][2] + 1]
            else:
                runs.append([line, line, 1])
        for first, last, count in runs:
            if spans < 80:
                span = f"{first}" if first == last else f"{first}-{last}"
                print(f"    never: {file}:{span} ({count} region{'s' if count > 1 else ''})")
            spans += 1
    if spans > 80:
        print(f"  ... {spans - 80} more spans")


def main() -> None:
    usage = __doc__.split("Usage: ")[1] if __doc__ else ""
    match sys.argv[1:]:
        case ["sets", work, since, until, kept, corpus]:
            sets(work, float(since), float(until), kept, corpus)
        case ["compare", before_json, all_json, repo]:
            compare(before_json, all_json, repo)
        case ["missed", all_json, repo]:
            missed(all_json, repo)
        case _:
            sys.exit("usage: " + usage)


if __name__ == "__main__":
    main()
