#!/usr/bin/env bash
# Checks `scripts/fuzz.sh keep` on a scratch copy of a committed kept set (never on fuzz/kept):
# the merge keeps every covered edge of the kept set and the working corpus together (and their
# features, within libFuzzer's run-to-run noise), in fewer files, each one of their inputs; and a
# merge that fails leaves the kept set as it was. Then that a run whose fuzzer somebody stops
# with SIGINT reports it as interrupted (exit 130), not as a finding.
# Run by scripts/test-all.sh after the fuzz smoke (whose build it reuses: CYCLES_FUZZ_BUILD).
#
# Usage: scripts/fuzz-keep-check.sh [TARGET]   (default path_encoding: a kept set of about a
#   thousand inputs, merged in seconds by the dev build)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
t="${1:-path_encoding}"
[[ -d "fuzz/kept/$t" ]] || { echo "fuzz-keep-check: no committed kept set for $t" >&2; exit 2; }
triple="$(rustc -vV | sed -n 's/^host: //p')"
case "${CYCLES_FUZZ_BUILD:-release}" in
    release) profile=release ;;
    dev) profile=debug ;;
    *) echo "CYCLES_FUZZ_BUILD must be release or dev" >&2; exit 2 ;;
esac
bin="${CARGO_TARGET_DIR:-$HOME/.cache/cycles-target}/cycles-fuzz/$triple/$profile/$t"

scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
fail() { echo "fuzz-keep-check: $*" >&2; exit 1; }

# The committed set split in two: every other input plays the kept set, the rest the working
# corpus, with a few inputs in both (a campaign re-finds what it was started from).
mkdir -p "$scratch/kept/$t" "$scratch/corpus/$t" "$scratch/union"
i=0
for f in "fuzz/kept/$t"/*; do
    if (( i % 2 )); then cp "$f" "$scratch/kept/$t/"; else cp "$f" "$scratch/corpus/$t/"; fi
    (( i % 7 == 0 )) && cp "$f" "$scratch/kept/$t/"
    i=$((i + 1))
done

run_keep() {
    CYCLES_FUZZ_KEPT="$scratch/kept" CYCLES_FUZZ_CORPUS="$scratch/corpus" \
        bash scripts/fuzz.sh keep "$t"
}
# libFuzzer's covered edges and features of a set of inputs (read once, no fuzzing).
features() { "$bin" -runs=0 "$@" 2>&1 | sed -n 's/.*INITED cov: \([0-9]*\) ft: \([0-9]*\).*/\1 \2/p' | tail -1; }

# A merge that fails (here: a memory limit no run can meet) must leave the kept set untouched.
before="$(cd "$scratch/kept/$t" && sha1sum -- * | sort)"
root_files="$(ls -A "$root")"
if CYCLES_FUZZ_RSS_MB=1 run_keep >"$scratch/failed.log" 2>&1; then
    fail "keep succeeded under a 1 MB memory limit (expected the merge to fail)"
fi
# What libFuzzer may write of a failed merge (the input running when the limit was hit) goes
# to the corpus root, never into the clone.
[[ "$(ls -A "$root")" == "$root_files" ]] || fail "a failed merge left files in $root"
[[ "$(cd "$scratch/kept/$t" && sha1sum -- * | sort)" == "$before" ]] \
    || fail "a failed merge changed the kept set"
[[ ! -e "$scratch/corpus/.$t.keeping" ]] || fail "a failed merge left its scratch directory"

# The union's features, before the merge (the seeds fuzz.sh generates into the corpus count).
run_keep >"$scratch/keep.log" 2>&1 || { cat "$scratch/keep.log" >&2; fail "keep failed"; }
cp "$scratch/corpus/$t"/* "$scratch/union/"
cp "fuzz/kept/$t"/* "$scratch/union/" # what the scratch kept set held before (a superset of it)
want="$(features "$scratch/union")"
got="$(features "$scratch/kept/$t")"
[[ -n "$want" && -n "$got" ]] || fail "no INITED line from $bin"
# Every covered edge is kept. libFuzzer's features (edges with hit-count buckets) vary by a few
# between two reads of the same inputs (one-time initialisation, hash seeds), so they are held
# to within 0.5 %.
read -r want_cov want_ft <<<"$want"
read -r got_cov got_ft <<<"$got"
[[ "$got_cov" == "$want_cov" ]] || fail "the merged set covers $got_cov edges, the inputs $want_cov"
(( got_ft * 1000 >= want_ft * 995 )) || fail "the merged set has $got_ft features, the inputs $want_ft"
n_union="$(find "$scratch/union" -type f | wc -l)"
n_kept="$(find "$scratch/kept/$t" -type f | wc -l)"
(( n_kept > 0 && n_kept < n_union )) || fail "$n_kept inputs kept of $n_union"
# Every kept input is one of the inputs merged, named by its SHA-1 (as libFuzzer names them).
(cd "$scratch/union" && sha1sum -- * | cut -c1-40 | sort -u) >"$scratch/union.sha1"
for f in "$scratch/kept/$t"/*; do
    h="$(sha1sum <"$f" | cut -c1-40)"
    [[ "$h" == "$(basename "$f")" ]] || fail "$(basename "$f") is not named by its SHA-1"
    grep -qx "$h" "$scratch/union.sha1" || fail "$h was not among the inputs"
done
echo "fuzz-keep-check: $t: $n_union inputs -> $n_kept kept; edges $want_cov -> $got_cov, features $want_ft -> $got_ft; a failed merge changed nothing"

# A run interrupted by hand: SIGINT to the fuzzer (as ^C sends it), found as fuzz.sh's child.
CYCLES_FUZZ_KEPT="$scratch/kept" CYCLES_FUZZ_CORPUS="$scratch/corpus" \
    bash scripts/fuzz.sh "$t" 120 1 >"$scratch/interrupted.log" 2>&1 &
runner=$!
fuzzer=""
for _ in $(seq 600); do
    fuzzer="$(pgrep -P "$runner" -f "/$t " || true)"
    [[ -n "$fuzzer" ]] && break
    sleep 0.2
done
[[ -n "$fuzzer" ]] || { kill "$runner" 2>/dev/null; fail "no fuzzer started by fuzz.sh $t"; }
sleep 2
kill -INT "$fuzzer"
rc=0
wait "$runner" || rc=$?
grep -q "interrupted (SIGINT)" "$scratch/interrupted.log" && ! grep -q FAILED "$scratch/interrupted.log" \
    || { cat "$scratch/interrupted.log" >&2; fail "an interrupted run was not reported as interrupted"; }
[[ $rc -eq 130 ]] || { cat "$scratch/interrupted.log" >&2; fail "an interrupted run exited $rc, not 130"; }
echo "fuzz-keep-check: $t: a run stopped by SIGINT is reported as interrupted (exit 130)"
