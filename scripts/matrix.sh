#!/usr/bin/env bash
# One behaviour in every language, proven in one command: the shared vectors, the
# reference-server corpus, a seeded differential of the timing math and journal helpers, the
# journal interop matrix (Rust, Python, Node, JVM, C, Kotlin and the official Python SDK
# runcycles 0.5.3 writing and draining each other's records) and every recovery adapter
# (durable claim) across all six faces; the face-by-check table is printed last and checked
# against docs/matrix.md. Protocol: conformance/matrix/PROTOCOL.md.
#
# Usage: scripts/matrix.sh [--write-doc]   (--write-doc regenerates docs/matrix.md and the table
#                                           between the matrix markers in README.md)
# Runs after the per-language suites (scripts/test-all.sh calls it last): it reuses what they
# leave (the Python test venv, the C CTest build, the Node build, java/target, kotlin/target's
# compiled tests), and each face's prepare.sh builds what is missing. Honours CARGO_TARGET_DIR,
# CYCLES_PY_CACHE and CYCLES_MATRIX_COUNT (inputs per timing function and planner, default
# 10000; the committed docs/matrix.md is for the default).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/cycles-target}"
doc_mode=(--check-doc docs/matrix.md --readme README.md)
[[ "${1:-}" == "--write-doc" ]] && doc_mode=(--write-doc docs/matrix.md --readme README.md)
count="${CYCLES_MATRIX_COUNT:-10000}"
[[ "$count" == 10000 ]] || doc_mode=()
faces=conformance/matrix/faces
reports="$CARGO_TARGET_DIR/recovery-conformance"
py_venv="${CYCLES_PY_CACHE:-$HOME/.cache/cycles-python}/test-venv"
step() { printf '\n==> matrix: [%ds] %s\n' "$SECONDS" "$*"; }

step "build the orchestrator and the conformance runner"
cargo build -q --locked -p cycles-matrix -p cycles-conformance-runner
matrix="$CARGO_TARGET_DIR/debug/cycles-matrix"
runner="$CARGO_TARGET_DIR/debug/cycles-conformance"

step "prepare the faces (C, Java and Kotlin drivers compile with warnings as errors)"
for face in python c node jvm kotlin runcycles; do
    bash "$faces/$face/prepare.sh"
done

step "lint the Python and Node drivers"
# The tools venv python/scripts/test.sh installs (pinned ruff and mypy); the lint settings are
# the Python package's (faces/ruff.toml extends them).
tools="${CYCLES_PY_CACHE:-$HOME/.cache/cycles-python}/tools/bin"
(cd "$faces" && "$tools/ruff" check python runcycles && "$tools/ruff" format --check python runcycles)
"$tools/mypy" --strict --python-executable "$py_venv/bin/python" \
    "$faces/python/face.py" "$faces/python/protocol.py" "$faces/python/work.py"
(cd "$faces/runcycles" && MYPYPATH=../python "$tools/mypy" --strict \
    --python-executable "$py_venv/bin/python" face.py)
node --check "$faces/node/face.mjs" && node --check "$faces/node/work.mjs"

# Each adapter maps every scenario to exact native tests and fails on a missing, renamed or
# skipped one; each writes its evidence report, which the matrix validates against the schema.
adapter() { # name implementation report args...
    local name="$1" impl="$2" report="$3" started="$SECONDS"
    shift 3
    step "recovery conformance, durable claim: $name (conformance/adapters/$name-map.json)"
    "$runner" --claim durable --report-json "$report" --implementation "$impl" "$@" ||
        { echo "$name recovery conformance FAILED; report: $report" >&2; exit 1; }
    # Each claim's time, so the two lanes can be balanced (CI's time budget).
    echo "$name recovery conformance: $((SECONDS - started)) s"
}
# The Rust adapter runs each mapped test as `cargo test -p cycles-core --test X -- --exact N`;
# building that package selection first makes each run a quick no-op build.
cargo test -q --locked -p cycles-core --no-run
# This checkout's CTest tree, brought up to date with these sources first (incrementally): the
# adapter must run the tests of the sources it stands in, never a tree built from others.
c_tree="$(bash bindings/c/scripts/tests-tree.sh --build)"
# The Kotlin classes compiled from this checkout's sources (the adapter recompiles them when its
# stamp says otherwise; done here once, not inside the first scenario's time limit).
python3 conformance/adapters/kotlin --build

# Every face's claim, then again with the journal in Redis (issue 35): the same mapped tests,
# each on a Redis it starts, looking into the journal only through the face's TestJournal
# (core/tests/common/store.rs, python/tests/journal_store.py, bindings/c/tests/recovery.h,
# node/test/recovery-support.mjs, java/src/test/java/dev/cycles/TestJournal.java,
# kotlin/src/test/kotlin/dev/cycles/kotlin/TestJournal.kt).
# Three lanes side by side: the claims mostly wait (child processes killed and restarted,
# leases lapsing, one process start per mapped test), so one after another they left the
# machine idle for minutes. Rust, C and Kotlin (one JVM per scenario) in one lane, Python in
# another, Node and the JVM (the heaviest, one Maven start per mapped test) in the third
# (balanced by the times each claim prints); each lane's log is printed whole when it ends.
lane_native() {
    adapter rust cycles-sdk/rust-core "$reports/recovery-conformance.json" --adapter conformance/adapters/rust
    CYCLES_TEST_JOURNAL_STORE=redis adapter rust-redis cycles-sdk/rust-core-redis-journal \
        "$reports/recovery-conformance-rust-redis.json" \
        --adapter conformance/adapters/rust --map conformance/adapters/rust-redis-map.json
    adapter c cycles-sdk/c "$reports/recovery-conformance-c.json" \
        --adapter conformance/adapters/c --build-dir "$c_tree/build"
    CYCLES_TEST_JOURNAL_STORE=redis adapter c-redis cycles-sdk/c-redis-journal \
        "$reports/recovery-conformance-c-redis.json" \
        --adapter conformance/adapters/c --build-dir "$c_tree/build" --map conformance/adapters/c-redis-map.json
    adapter kotlin cycles-sdk/kotlin "$reports/recovery-conformance-kotlin.json" --adapter conformance/adapters/kotlin
    CYCLES_TEST_JOURNAL_STORE=redis adapter kotlin-redis cycles-sdk/kotlin-redis-journal \
        "$reports/recovery-conformance-kotlin-redis.json" \
        --adapter conformance/adapters/kotlin --map conformance/adapters/kotlin-redis-map.json
}
lane_python() {
    adapter python cycles-sdk/python "$reports/recovery-conformance-python.json" \
        --adapter conformance/adapters/python --python "$py_venv/bin/python"
    CYCLES_TEST_JOURNAL_STORE=redis adapter python-redis cycles-sdk/python-redis-journal \
        "$reports/recovery-conformance-python-redis.json" \
        --adapter conformance/adapters/python --python "$py_venv/bin/python" \
        --map conformance/adapters/python-redis-map.json
}
lane_runtimes() {
    adapter node cycles-sdk/node "$reports/recovery-conformance-node.json" --adapter conformance/adapters/node
    CYCLES_TEST_JOURNAL_STORE=redis adapter node-redis cycles-sdk/node-redis-journal \
        "$reports/recovery-conformance-node-redis.json" \
        --adapter conformance/adapters/node --map conformance/adapters/node-redis-map.json
    adapter jvm cycles-sdk/jvm "$reports/recovery-conformance-jvm.json" --adapter conformance/adapters/jvm
    CYCLES_TEST_JOURNAL_STORE=redis adapter jvm-redis cycles-sdk/jvm-redis-journal \
        "$reports/recovery-conformance-jvm-redis.json" \
        --adapter conformance/adapters/jvm --map conformance/adapters/jvm-redis-map.json
}
mkdir -p "$reports"
lanes_failed=0
pids=()
for lane in native python runtimes; do
    "lane_$lane" >"$reports/lane-$lane.log" 2>&1 &
    pids+=($!)
done
i=0
for lane in native python runtimes; do
    wait "${pids[$i]}" || lanes_failed=1
    cat "$reports/lane-$lane.log"
    i=$((i + 1))
done
[[ "$lanes_failed" == 0 ]] || { echo "a recovery conformance claim FAILED (logs above)" >&2; exit 1; }

step "self-test: a deliberately broken face must fail the matrix"
# CYCLES_MATRIX_PERTURB (Python face only) adds 1 ms to next_delay, or renames standard
# journal files; the differential must catch each and name the smallest differing input.
for perturb in "timing:next_delay|timing: next_delay: python differs" \
               "journal:standard|journal: file names: python differs"; do
    out="$(mktemp)"
    if CYCLES_MATRIX_PERTURB="${perturb%%|*}" "$matrix" run --face rust=builtin \
        --face "python=$faces/python/run.sh" --only differential --count 300 >"$out" 2>&1; then
        cat "$out" >&2; echo "the matrix passed with ${perturb%%|*}" >&2; exit 1
    fi
    grep -q "${perturb#*|} on .* input(s); smallest:" "$out" ||
        { cat "$out" >&2; echo "the matrix did not name ${perturb%%|*}" >&2; exit 1; }
    echo "caught ${perturb%%|*}: $(grep -A1 "${perturb#*|}" "$out" | tail -1 | cut -c1-150)"
    rm -f "$out"
done

step "the matrix: vectors, corpus, differential ($count inputs each), journal, recovery"
"$matrix" run --count "$count" "${doc_mode[@]}" \
    --face rust=builtin \
    --face "python=$faces/python/run.sh" \
    --face "node=$faces/node/run.sh" \
    --face "jvm=$faces/jvm/run.sh" \
    --face "c=$faces/c/run.sh" \
    --face "kotlin=$faces/kotlin/run.sh" \
    --journal-face "runcycles=$faces/runcycles/run.sh" \
    --report "rust=$reports/recovery-conformance.json" \
    --report "python=$reports/recovery-conformance-python.json" \
    --report "node=$reports/recovery-conformance-node.json" \
    --report "jvm=$reports/recovery-conformance-jvm.json" \
    --report "c=$reports/recovery-conformance-c.json" \
    --report "kotlin=$reports/recovery-conformance-kotlin.json"
