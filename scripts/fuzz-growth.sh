#!/usr/bin/env bash
# Whether a target's late inputs reach any source code its earlier ones did not: libFuzzer's
# "cov" counts edges of every monomorphised instantiation, so a target that decodes many types
# through serde's generic code can keep finding edges (the same source, another type) long
# after its source coverage stopped growing (docs/reliability.md, "What the late edges are").
#
# Usage: scripts/fuzz-growth.sh TARGET SINCE [UNTIL]
#   SINCE, UNTIL: times `date -d` reads ("2026-12-07 11:53"). "Before" is TARGET's kept set
#   plus the working corpus's inputs written up to SINCE; "all" adds those written since (up
#   to UNTIL if given: a window of a campaign the corpus has grown past).
#   Both are run once through a source-coverage build (cargo fuzz coverage, llvm-cov) and
#   compared: source regions (file, line, column) covered by "all" and not by "before", split
#   into this repository's code and dependencies, then the same per instantiation. libFuzzer
#   deletes an input it has replaced by a smaller one, so "before" can miss a little of what
#   it once covered: the comparison overstates what is new, never hides it. It can run beside
#   the fuzzer still writing the corpus (an input deleted meanwhile is left out).
#   Then what neither set reaches in this repository's files the target does reach, as spans of
#   lines for the files mostly covered: a function or a match arm no input selects (a name the
#   fuzzer cannot spell, a host entry the target does not call) shows there, not as an edge.
# Needs: what scripts/fuzz.sh needs (scripts/fuzz-env.sh), plus rustup's llvm-tools component
#   (added here).
# Env: as scripts/fuzz.sh (CARGO_TARGET_DIR: the build goes below it, in cycles-fuzz-cov/;
#   CYCLES_FUZZ_CORPUS, CYCLES_FUZZ_KEPT, CYCLES_FUZZ_TOOLS).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
usage="usage: scripts/fuzz-growth.sh TARGET SINCE [UNTIL]"
target="${1:?$usage}"
since="${2:?$usage}"
until="${3:-}"
[[ -f "fuzz/fuzz_targets/$target.rs" ]] || { echo "unknown target $target" >&2; exit 2; }
date -d "$since" >/dev/null 2>&1 || { echo "SINCE is not a time: $since" >&2; exit 2; }
[[ -z "$until" ]] || date -d "$until" >/dev/null 2>&1 || { echo "UNTIL is not a time: $until" >&2; exit 2; }

source "$root/scripts/fuzz-env.sh"
rustup component add llvm-tools --toolchain "$(rustup show active-toolchain | cut -d' ' -f1)" >/dev/null 2>&1
llvm="$(rustc --print sysroot)/lib/rustlib/$triple/bin"
[[ -x "$llvm/llvm-cov" ]] || { echo "no llvm-cov in $llvm (rustup component add llvm-tools)" >&2; exit 2; }

cov_dir="$target_root/cycles-fuzz-cov"
corpus="$corpus_root/$target"
kept="$kept_root/$target"
[[ -d "$corpus" ]] || { echo "no working corpus at $corpus" >&2; exit 2; }

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# The build: `coverage` builds the instrumented target and runs it over a corpus (one empty
# input here, as it refuses none); its profile in fuzz/coverage/ is not the one read below.
mkdir -p "$work/one" && : >"$work/one/empty"
if ! (cd fuzz && cargo fuzz coverage -s none -O --target-dir "$cov_dir" "$target" "$work/one") \
    >"$work/build.log" 2>&1; then
    cat "$work/build.log" >&2
    echo "fuzz-growth: build failed" >&2
    exit 1
fi
rm -rf "fuzz/coverage/$target" && rmdir fuzz/coverage 2>/dev/null || true
bin="$cov_dir/$triple/release/$target"

# The two sets, as hard links where they can be (a corpus holds 10^5 inputs); a fuzzer may
# still be writing the corpus (fuzz-growth.py sets).
until_epoch=inf
[[ -z "$until" ]] || until_epoch="$(date -d "$until" +%s.%N)"
python3 scripts/fuzz-growth.py sets "$work" "$(date -d "$since" +%s.%N)" "$until_epoch" "$kept" "$corpus"
for s in before all; do
    (cd "$work" && LLVM_PROFILE_FILE="$work/$s.profraw" "$bin" -runs=0 -timeout=10 \
        -rss_limit_mb=4096 "$work/$s" >"$work/$s.log" 2>&1) || {
        tail -20 "$work/$s.log" >&2
        echo "fuzz-growth: the $s set did not run through" >&2
        exit 1
    }
    "$llvm/llvm-profdata" merge -sparse "$work/$s.profraw" -o "$work/$s.profdata"
    "$llvm/llvm-cov" export "$bin" -instr-profile="$work/$s.profdata" -skip-expansions >"$work/$s.json"
done
echo "$target: inputs before $since: $(find "$work/before" -type f | wc -l), since: $(($(find "$work/all" -type f | wc -l) - $(find "$work/before" -type f | wc -l)))"
python3 scripts/fuzz-growth.py compare "$work/before.json" "$work/all.json" "$root"
python3 scripts/fuzz-growth.py missed "$work/all.json" "$root"
