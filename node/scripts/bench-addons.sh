#!/usr/bin/env bash
# Two builds of the native addon side by side (docs/benchmarks.md, "One threadsafe function per
# environment"): against one `cycles serve`, runs node/bench/lifecycle.mjs with A's addon, then
# B's, PAIRS times, each with the paths `off` (the package's guarded lifecycle, journal off),
# `hop` (one native round trip, no I/O) and `net` (the same two requests hand-framed on
# node:net sockets, no addon). The machine's drift between processes is large, so each run's
# guarded lifecycle is read as a ratio to its own `net` probe, measured in the same process;
# the summary gives the medians of those ratios and of `hop` for A and B.
# Needs the package built (node/scripts/build.sh) and the release CLI (cargo build --release
# -p cycles-cli). Puts the package's own addon back at exit. Honours CARGO_TARGET_DIR.
#
#   node/scripts/bench-addons.sh A.node B.node [PAIRS [IN_FLIGHT]]   # default 6 pairs, 16 in flight
set -euo pipefail
NODE_DIR="$(cd "$(dirname "$0")/.." && pwd)"
ROOT="$(cd "$NODE_DIR/.." && pwd)"
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
[[ $# -ge 2 ]] || { sed -n 's/^#   //p' "$0" >&2; exit 2; }
A="$(realpath "$1")"
B="$(realpath "$2")"
PAIRS="${3:-6}"
IN_FLIGHT="${4:-16}"
# The addon napi built for this platform (native/cycles.<platform>.node).
ADDON="$(ls "$NODE_DIR"/native/cycles.*.node 2>/dev/null | head -1)"
[[ -n "$ADDON" ]] || { echo "no built addon in $NODE_DIR/native: run node/scripts/build.sh" >&2; exit 1; }
WORK="$(mktemp -d "${TMPDIR:-/tmp}/cycles-node-ab.XXXXXX")"
cp "$ADDON" "$WORK/own.node"
SERVER=""
cleanup() {
  cp "$WORK/own.node" "$ADDON"
  [[ -n "$SERVER" ]] && kill "$SERVER" 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT

# shellcheck source=../../scripts/bench-server.sh
source "$ROOT/scripts/bench-server.sh"
bench_server_start "$TARGET/release/cycles" "$WORK"

cd "$NODE_DIR"
for i in $(seq "$PAIRS"); do
  for side in A B; do
    if [[ $side == A ]]; then cp "$A" "$ADDON"; else cp "$B" "$ADDON"; fi
    node --expose-gc bench/lifecycle.mjs --url "$URL" --rounds 3 --lifecycles 1024 --warmup 300 \
      --concurrent 0 --in-flight "$IN_FLIGHT" --paths off,hop,net | grep '^median' | sed "s/^/$side $i /"
  done
done | tee "$WORK/runs.txt"

# Per run: off / net and hop (µs CPU per lifecycle is the field before "µs").
awk '
  { for (f = 1; f <= NF; f++) if ($f == "µs") cpu = $(f - 1); gsub(",", "", cpu) }
  /guarded/ { off[$1, $2] = cpu }
  /round trip/ { hop[$1] = hop[$1] " " cpu }
  /net socket/ { ratio[$1] = ratio[$1] " " sprintf("%.2f", off[$1, $2] / cpu) }
  function median(list,   v, n, i, j, t) {
    n = split(list, v, " ")
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (v[j] + 0 < v[i] + 0) { t = v[i]; v[i] = v[j]; v[j] = t }
    return (n % 2) ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
  }
  END {
    for (s = 0; s < 2; s++) {
      side = s ? "B" : "A"
      printf "%s: guarded / net probe, median %.2fx (runs:%s); native round trip median %.1f µs (runs:%s)\n", \
        side, median(ratio[side]), ratio[side], median(hop[side]), hop[side]
    }
  }' "$WORK/runs.txt"
