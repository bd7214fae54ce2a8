#!/usr/bin/env bash
# Load with faults (issue 32): every face (Rust, Python, Node, JVM, C, Kotlin) runs N concurrent
# guarded actions against a fresh local server that faults 1% of reserves and commits (503s, lost
# responses, 429s: conformance/matrix/src/load.rs, fault_mix); what settlement could not finish
# stays journaled and is drained; then the server's ledger must show each action reserved once
# and committed once, nothing doubled and nothing left held. Prints wall time and peak RSS per
# face (docs/reliability.md, "Load with faults").
#
# Usage: scripts/load.sh [--release] [face...]   (default all six; CYCLES_LOAD_COUNT, default
#                                                  10000; --release builds the orchestrator and
#                                                  the Rust face optimised, as for the figures)
# Reuses what the language suites and scripts/matrix.sh leave (each face's prepare.sh builds
# what is missing). Honours CARGO_TARGET_DIR and CYCLES_PY_CACHE.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/cycles-target}"
profile=debug
cargo_profile=()
if [[ "${1:-}" == "--release" ]]; then
    profile=release
    cargo_profile=(--release)
    shift
fi
faces=("$@")
[[ ${#faces[@]} -gt 0 ]] || faces=(rust python node jvm c kotlin)
count="${CYCLES_LOAD_COUNT:-10000}"

printf '\n==> load: build the orchestrator (%s)\n' "$profile"
cargo build -q --locked "${cargo_profile[@]}" -p cycles-matrix
args=()
for face in "${faces[@]}"; do
    case "$face" in
        rust) args+=(--face rust=builtin) ;;
        python | node | jvm | c | kotlin)
            bash "conformance/matrix/faces/$face/prepare.sh"
            args+=(--face "$face=conformance/matrix/faces/$face/run.sh")
            ;;
        *) echo "load: unknown face $face (rust, python, node, jvm, c, kotlin)" >&2; exit 2 ;;
    esac
done
printf '\n==> load: %s guarded actions per face under the 1%% fault mix\n' "$count"
"$CARGO_TARGET_DIR/$profile/cycles-matrix" load --count "$count" "${args[@]}"
