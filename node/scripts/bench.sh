#!/usr/bin/env bash
# The Node lifecycle benchmark (docs/benchmarks.md, "Node guarded lifecycle"): release builds of
# the addon and package (scripts/build.sh), the CLI and core's lifecycle-cpu bench; then
# `cycles serve` as a child (its CPU not counted) and node/bench/lifecycle.mjs: alternating
# rounds of the package's guarded lifecycle with the journal off and on and a plain `fetch`
# create+commit pair, core's own lifecycle-cpu (core's guarded lifecycle against a bare reqwest
# pair) in the same run, the ratios, and the memory of CONCURRENT guarded calls in flight.
# IN_FLIGHT lifecycles run at once in the CPU rounds (Node and core alike; default 1).
# Honours CARGO_TARGET_DIR.
#
#   node/scripts/bench.sh [ROUNDS [LIFECYCLES [CONCURRENT [IN_FLIGHT]]]]   # default 7 x 1000, 10000, 1
set -euo pipefail
NODE_DIR="$(cd "$(dirname "$0")/.." && pwd)"
ROOT="$(cd "$NODE_DIR/.." && pwd)"
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
ROUNDS="${1:-7}"
N="${2:-1000}"
CONCURRENT="${3:-10000}"
IN_FLIGHT="${4:-1}"
log() { printf '== node bench: %s\n' "$*" >&2; }
WORK="$(mktemp -d "${TMPDIR:-/tmp}/cycles-node-bench.XXXXXX")"
SERVER=""
cleanup() { [[ -n "$SERVER" ]] && kill "$SERVER" 2>/dev/null; rm -rf "$WORK"; }
trap cleanup EXIT

log "release builds: addon and package, cycles CLI, lifecycle-cpu"
bash "$NODE_DIR/scripts/build.sh" >&2
(cd "$ROOT" && cargo build -q --release --locked -p cycles-cli -p cycles-bench --bin cycles --bin lifecycle-cpu)

# shellcheck source=../../scripts/bench-server.sh
source "$ROOT/scripts/bench-server.sh"
bench_server_start "$TARGET/release/cycles" "$WORK"

log "$ROUNDS rounds x $N lifecycles per path ($IN_FLIGHT at a time) against $URL, then core's lifecycle-cpu, then $CONCURRENT in flight"
cd "$NODE_DIR"
node --expose-gc bench/lifecycle.mjs --url "$URL" --rounds "$ROUNDS" --lifecycles "$N" \
  --concurrent "$CONCURRENT" --in-flight "$IN_FLIGHT" --lifecycle-cpu "$TARGET/release/lifecycle-cpu" --cycles-bin "$TARGET/release/cycles"
