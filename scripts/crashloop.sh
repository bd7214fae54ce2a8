#!/usr/bin/env bash
# The crash loop across languages (issue 32): each iteration a writer in one face (Rust,
# Python, Node, JVM, C, Kotlin, drawn from the seed) runs guarded actions against a local Cycles
# server with a journal and is SIGKILLed at a drawn point (before the journal write, after it,
# mid-request, after the server applied, mid-heartbeat); a different face then drains the same
# journal, and the server's ledger must hold every known actual exactly once and nothing else.
# Reproducible from the seed; the orchestrator is `cycles-matrix crashloop`
# (conformance/matrix/src/crashloop.rs), the drivers the matrix faces (PROTOCOL.md, `work`).
#
# Usage: scripts/crashloop.sh SEED ITERATIONS [--redis]
# --redis: the journal is a Redis the orchestrator starts (redis-server on PATH; AOF,
# appendfsync always); each writer's own directory is removed after its kill (its machine
# "lost"), and Redis is SIGKILLed and restarted between kill and drain, or mid-drain, when an
# iteration draws it. Every face is required: one that cannot be prepared fails the run. Honours CARGO_TARGET_DIR
# and CYCLES_PY_CACHE like scripts/matrix.sh, and reuses what the language suites leave.
set -euo pipefail
[[ ($# -eq 2 || ($# -eq 3 && "${3-}" == --redis)) && "$1" =~ ^[0-9]+$ && "$2" =~ ^[0-9]+$ ]] ||
    { echo "usage: scripts/crashloop.sh SEED ITERATIONS [--redis]" >&2; exit 2; }
store=("${@:3}")
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/cycles-target}"
faces=conformance/matrix/faces

echo "==> crash loop: build the orchestrator and prepare the faces" >&2
cargo build -q --locked -p cycles-matrix
for face in python c node jvm kotlin; do
    bash "$faces/$face/prepare.sh" || { echo "crash loop: the $face face cannot be prepared" >&2; exit 1; }
done

crashloop() {
    "$CARGO_TARGET_DIR/debug/cycles-matrix" crashloop --face rust=builtin \
        --face "python=$faces/python/run.sh" --face "node=$faces/node/run.sh" \
        --face "jvm=$faces/jvm/run.sh" --face "c=$faces/c/run.sh" --face "kotlin=$faces/kotlin/run.sh" \
        ${store[@]+"${store[@]}"} "$@"
}

echo "==> crash loop: self-test: with the drain skipped, the loop must fail" >&2
# Journaled actuals then stay unapplied: the loop must say so (6 iterations, one per face). Its
# own seed, 7, not the run's: the first six iterations of some seeds (32, with six faces) draw
# no point that leaves a journaled or sent actual unapplied (only kills after the commit was
# applied, or before the actual was known), so nothing would be there to catch. Seed 7 draws
# one in its second iteration (python -> c, mid_request), on a directory and on Redis alike.
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
out="$scratch/self-test.log"
if crashloop --seed 7 --iterations 6 --skip-drain --work "$scratch" >"$out" 2>&1; then
    cat "$out" >&2; echo "crash loop: it passed with no drain" >&2; exit 1
fi
grep -q "was never applied" "$out" || { cat "$out" >&2; echo "crash loop: the self-test did not name an unapplied actual" >&2; exit 1; }
echo "caught: $(grep -m1 "was never applied" "$out" | cut -c1-160)" >&2

echo "==> crash loop: seed $1, $2 iterations${3:+ (journal: Redis)}" >&2
crashloop --seed "$1" --iterations "$2"
