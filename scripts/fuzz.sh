#!/usr/bin/env bash
# Coverage-guided fuzzing (cargo fuzz, libFuzzer) of core's and the bridge's parsers and timing
# math: the targets of fuzz/ (docs/reliability.md, "Fuzzing").
#
# Usage: scripts/fuzz.sh TARGET|all SECONDS [SEED]
#        scripts/fuzz.sh keep TARGET|all
#   Runs each target for SECONDS from seeds generated out of the shared vectors and the
#   reference-server corpus (scripts/fuzz-seeds.py) and from the committed corpus of earlier
#   campaigns (fuzz/kept/<target>, read only; what a run finds goes to fuzz/corpus/<target>),
#   with a dictionary of the names the input selects by where the target has one
#   (scripts/fuzz-dict.py: the bridge's timing functions, options and spec members, pricing),
#   then prints one line a target: executions, exec/s, coverage (libFuzzer's covered edges and
#   features), corpus size, peak RSS. Exits non-zero if any target found a panic, a hang (-timeout) or an
#   allocation past -rss_limit_mb; the input is kept in fuzz/artifacts/<target>/ and the
#   reproduction command is printed. A target stopped by somebody's SIGINT (^C, kill -INT to the
#   fuzzer) is reported as interrupted, not as a finding, and ends the run (exit 130).
#   `keep` folds a target's working corpus into fuzz/kept/<target>: the smallest set of inputs
#   (libFuzzer's -set_cover_merge) that keeps every coverage feature of both, so what a
#   campaign found is committed and the next machine's campaign starts from it.
# Needs: stable Rust and a C++ compiler (libFuzzer is built from source by libfuzzer-sys),
#   python3. Installs cargo-fuzz itself (pinned, into a cache dir keyed by its version).
# Env: CARGO_TARGET_DIR (the build goes below it, in cycles-fuzz/), CYCLES_FUZZ_TOOLS (where
#   cargo-fuzz is installed), CYCLES_REFERENCE_CORPUS (the reference-server exchanges.jsonl,
#   default ../shared/fixtures/reference-server/ beside the clone, as the other suites),
#   CYCLES_FUZZ_CORPUS (corpus root, default fuzz/corpus), CYCLES_FUZZ_KEPT (the kept sets' root,
#   default fuzz/kept; scripts/fuzz-keep-check.sh points it at a scratch copy),
#   CYCLES_FUZZ_RSS_MB (default 2048),
#   CYCLES_FUZZ_BUILD (release, the default, for real runs; dev for CI's short smoke: the same
#   targets and checks, unoptimised, so a cold build takes a fraction of the time),
#   CYCLES_FUZZ_PLATEAU (seconds; unset: none): stop a target early once its covered edges have
#   not grown for that long ("fuzzed until nothing new is found"; SECONDS stays the cap).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

usage="usage: scripts/fuzz.sh TARGET|all SECONDS [SEED] | scripts/fuzz.sh keep TARGET|all"
keep=""
if [[ "${1:-}" == keep ]]; then
    keep=1
    target="${2:?$usage}"
else
    target="${1:?$usage}"
    seconds="${2:?$usage}"
    seed="${3:-1}"
    [[ "$seconds" =~ ^[0-9]+$ && "$seconds" -gt 0 ]] || { echo "SECONDS must be a positive integer" >&2; exit 2; }
    [[ "$seed" =~ ^[0-9]+$ ]] || { echo "SEED must be a non-negative integer" >&2; exit 2; }
fi

source "$root/scripts/fuzz-env.sh"

# Stable Rust: no sanitizer (-s none) needs no nightly. The code under test is safe Rust, so what
# ASAN would add is covered by Rust's own checks; the fuzz build keeps debug assertions and so
# overflow checks on, and libFuzzer's -rss_limit_mb catches unbounded allocation.
# Absolute (target_root): the build runs in fuzz/ and the targets from elsewhere.
export CARGO_TARGET_DIR="$target_root/cycles-fuzz"
build="${CYCLES_FUZZ_BUILD:-release}"
case "$build" in
    release) build_flags=() bin_dir="$CARGO_TARGET_DIR/$triple/release" ;;
    dev) build_flags=(--dev) bin_dir="$CARGO_TARGET_DIR/$triple/debug" ;;
    *) echo "CYCLES_FUZZ_BUILD must be release or dev, not $build" >&2; exit 2 ;;
esac
mkdir -p "$bin_dir"
all=(journal_record rawjson decode_response retry_after path_encoding event_json
    bridge_timing_json bridge_pricing_json bridge_options timing usage_reading)
if [[ "$target" == all ]]; then
    targets=("${all[@]}")
else
    [[ " ${all[*]} " == *" $target "* ]] || { echo "unknown target $target (known: ${all[*]})" >&2; exit 2; }
    targets=("$target")
fi

# One build of every target (they share all their dependencies); its output only on failure.
if ! (cd fuzz && cargo fuzz build -s none "${build_flags[@]}" --target "$triple") >"$bin_dir.build.log" 2>&1; then
    cat "$bin_dir.build.log" >&2
    echo "fuzz: build failed" >&2
    exit 1
fi

exchanges="${CYCLES_REFERENCE_CORPUS:-$root/../shared/fixtures/reference-server/exchanges.jsonl}"
python3 scripts/fuzz-seeds.py "$corpus_root" "$exchanges" >/dev/null
# Dictionaries of the names some targets' inputs select by (scripts/fuzz-dict.py), generated
# from the sources beside the seeds.
dicts="$corpus_root/.dict"
python3 scripts/fuzz-dict.py "$dicts" >/dev/null

# The bytes of the files below a directory.
bytes_in() { find "$1" -type f -printf '%s\n' | awk '{ n += $1 } END { print n + 0 }'; }

if [[ -n "$keep" ]]; then
    # The kept set and the working corpus merged into a fresh directory, then swapped in:
    # an interrupted merge leaves the committed set as it was.
    printf '%-20s %8s %10s %8s %10s\n' target before bytes after bytes
    for t in "${targets[@]}"; do
        mkdir -p "$kept_root/$t" "$corpus_root/$t"
        fresh="$corpus_root/.$t.keeping"
        rm -rf "$fresh" && mkdir -p "$fresh"
        # Run from the corpus root: what libFuzzer writes of an input the merge cannot run
        # (crash, hang, memory) goes to its current directory whatever -artifact_prefix says,
        # and from the repository root it would land in the clone.
        if ! (cd "$corpus_root" && "$bin_dir/$t" -set_cover_merge=1 -timeout=10 \
            -rss_limit_mb="${CYCLES_FUZZ_RSS_MB:-2048}" \
            "$fresh" "$kept_root/$t" "$corpus_root/$t") >"$bin_dir.$t.keep.log" 2>&1; then
            tail -20 "$bin_dir.$t.keep.log" >&2
            rm -rf "$fresh"
            echo "fuzz: keep $t: the merge failed" >&2
            exit 1
        fi
        before="$(find "$kept_root/$t" -type f | wc -l)" before_b="$(bytes_in "$kept_root/$t")"
        rm -rf "$kept_root/$t" && mv "$fresh" "$kept_root/$t"
        printf '%-20s %8s %10s %8s %10s\n' "$t" "$before" "$before_b" \
            "$(find "$kept_root/$t" -type f | wc -l)" "$(bytes_in "$kept_root/$t")"
    done
    exit 0
fi

logs="$(mktemp -d)"
trap 'rm -rf "$logs"' EXIT
# libFuzzer's status lines (`#N ... cov: ...`) of a log; none yet is not an error (pipefail).
status_lines() { grep -E '^#[0-9]+' "$1" || true; }
failed=0 interrupted=""
printf '%-20s %6s %10s %8s %6s %8s %7s %7s %7s  %s\n' target secs execs exec/s cov cov_grew ft corpus rss_mb result
for t in "${targets[@]}"; do
    mkdir -p "$corpus_root/$t" "fuzz/artifacts/$t"
    log="$logs/$t.log"
    rc=0
    started=$SECONDS
    kept=()
    [[ -d "$kept_root/$t" ]] && kept=("$kept_root/$t")
    dict=()
    [[ -f "$dicts/$t.dict" ]] && dict=(-dict="$dicts/$t.dict")
    "$bin_dir/$t" "$corpus_root/$t" "${kept[@]}" "${dict[@]}" -max_total_time="$seconds" -seed="$seed" -timeout=10 \
        -rss_limit_mb="${CYCLES_FUZZ_RSS_MB:-2048}" -print_final_stats=1 \
        -artifact_prefix="fuzz/artifacts/$t/" >"$log" 2>&1 &
    pid=$!
    stopped=""
    if [[ -n "${CYCLES_FUZZ_PLATEAU:-}" ]]; then
        # Watch the covered edges; once they have not grown for the plateau, interrupt
        # (libFuzzer prints its final stats and exits 72 on SIGINT).
        best=0 grown_at=$SECONDS
        while kill -0 "$pid" 2>/dev/null; do
            sleep 5
            c="$(status_lines "$log" | tail -1 | sed -n 's/.* cov: \([0-9]*\).*/\1/p')"
            if [[ -n "$c" && "$c" -gt "$best" ]]; then best=$c grown_at=$SECONDS; fi
            if (( SECONDS - grown_at >= CYCLES_FUZZ_PLATEAU )); then
                stopped=plateau
                kill -INT "$pid" 2>/dev/null || true
                break
            fi
        done
    fi
    wait "$pid" || rc=$?
    # 72 is libFuzzer's exit on SIGINT: ours at a plateau, or somebody's (^C, kill -INT) which
    # ends the run as interrupted, not as a finding.
    if [[ $rc -eq 72 && "$stopped" != plateau ]] && ! grep -q "Test unit written to" "$log"; then
        stopped=interrupted
    fi
    [[ -n "$stopped" && $rc -eq 72 ]] && rc=0
    ran=$((SECONDS - started))
    execs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)"
    speed="$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)"
    rss="$(sed -n 's/^stat::peak_rss_mb: *//p' "$log" | tail -1)"
    last="$(status_lines "$log" | tail -1)"
    cov="$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")"
    ft="$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")"
    corp="$(sed -n 's/.* corp: \([0-9]*\).*/\1/p' <<<"$last")"
    # When the covered edges last grew, as a share of this run's executions: a plateau shows
    # as a low share (nothing new found for the rest of the run).
    grew="$(status_lines "$log" | awk -v total="${execs:-0}" '
        { n = substr($1, 2) + 0; for (i = 2; i < NF; i++) if ($i == "cov:") c = $(i + 1) + 0
          if (c > best) { best = c; at = n } }
        END { if (total > 0) printf "%d%%", 100 * at / total; else print "?" }')"
    result=ok
    [[ "$stopped" == plateau ]] && result="ok (plateau: no new edge for ${CYCLES_FUZZ_PLATEAU} s)"
    [[ "$stopped" == interrupted ]] && result="interrupted (SIGINT) before the cap; nothing found"
    if [[ $rc -ne 0 ]]; then
        failed=1
        artifact="$(sed -n 's/.*Test unit written to \(.*\)/\1/p' "$log" | tail -1)"
        result="FAILED (exit $rc) ${artifact:-}"
        echo "---- $t log (tail)" >&2
        tail -40 "$log" >&2
        [[ -n "$artifact" ]] && echo "reproduce: $bin_dir/$t $artifact" >&2
    fi
    printf '%-20s %6s %10s %8s %6s %8s %7s %7s %7s  %s\n' "$t" "$ran" "${execs:-?}" "${speed:-?}" \
        "${cov:-?}" "${grew:-?}" "${ft:-?}" "${corp:-?}" "${rss:-?}" "$result"
    if [[ "$stopped" == interrupted ]]; then
        interrupted=1
        break
    fi
done
echo "seed $seed; cov = covered edges, cov_grew = when they last grew (share of the executions),"
echo "ft = coverage features (libFuzzer); corpus in $corpus_root (new inputs), read with $kept_root"
echo "(scripts/fuzz.sh keep TARGET|all folds what a campaign found into $kept_root, to commit)"
[[ $failed -eq 0 && -n "$interrupted" ]] && exit 130
exit $failed
