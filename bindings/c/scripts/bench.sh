#!/usr/bin/env bash
# The C lifecycle benchmark (docs/benchmarks.md, "C guarded lifecycle against core"): the
# release install tree of libcycles (scripts/package.sh OUT c), the CLI and core's
# lifecycle-cpu bench; bindings/c/bench/lifecycle.c compiled with cc -O2 against the committed
# header (through the tree's pkg-config file), plus a bare libcurl baseline when libcurl's
# headers are there or apt can install them (CYCLES_BENCH_CURL=0 skips it); then `cycles serve`
# as a child (its CPU not counted) and the bench: alternating rounds of the C guarded
# lifecycle with the journal off and on (and libcurl), core's own lifecycle-cpu (core's guarded
# lifecycle against a bare reqwest pair) in the same run, the ratios, and the memory of
# CONCURRENT guarded calls in flight through the async API. Honours CARGO_TARGET_DIR.
#
#   bindings/c/scripts/bench.sh [ROUNDS [LIFECYCLES [CONCURRENT]]]   # default 7 x 1000, 10000 in flight
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../../.." && pwd)"
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
ROUNDS="${1:-7}"
N="${2:-1000}"
CONCURRENT="${3:-10000}"
log() { printf '== c bench: %s\n' "$*" >&2; }
WORK="$(mktemp -d "${TMPDIR:-/tmp}/cycles-c-bench.XXXXXX")"
SERVER=""
cleanup() { [[ -n "$SERVER" ]] && kill "$SERVER" 2>/dev/null; rm -rf "$WORK"; }
trap cleanup EXIT

log "release builds: libcycles install tree, cycles CLI, lifecycle-cpu"
"$ROOT/scripts/package.sh" "$WORK/out" c
(cd "$ROOT" && cargo build -q --release --locked -p cycles-cli -p cycles-bench --bin cycles --bin lifecycle-cpu)

# The libcurl baseline is optional: its headers from apt when missing, else the bench runs without it.
curl_flags=()
paths="off,on"
if [[ "${CYCLES_BENCH_CURL:-1}" == 1 ]]; then
    if ! pkg-config --exists libcurl; then
        log "installing libcurl4-openssl-dev for the libcurl baseline"
        SUDO=""; [[ $(id -u) -eq 0 ]] || SUDO="sudo"
        { $SUDO apt-get update -qq && $SUDO apt-get install -y -qq libcurl4-openssl-dev; } >/dev/null 2>&1 ||
            log "libcurl4-openssl-dev not installable: no libcurl baseline"
    fi
    if pkg-config --exists libcurl; then
        read -r -a curl_flags <<<"-DCYCLES_BENCH_CURL $(pkg-config --cflags --libs libcurl)"
        paths="off,on,curl"
    fi
fi

log "cc -O2 bindings/c/bench/lifecycle.c (paths: $paths)"
export PKG_CONFIG_PATH="$WORK/out/c/lib/pkgconfig"
read -r -a cycles_flags <<<"$(pkg-config --cflags --libs cycles)"
cc -std=c11 -O2 -Wall -Wextra -Werror "$ROOT/bindings/c/bench/lifecycle.c" "${cycles_flags[@]}" \
    -Wl,-rpath,"$(pkg-config --variable=libdir cycles)" -pthread "${curl_flags[@]}" -o "$WORK/lifecycle"

# shellcheck source=../../../scripts/bench-server.sh
source "$ROOT/scripts/bench-server.sh"
bench_server_start "$TARGET/release/cycles" "$WORK"

log "$ROUNDS rounds x $N lifecycles per path against $URL, then core's lifecycle-cpu, then $CONCURRENT in flight"
log "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
"$WORK/lifecycle" --url "$URL" --rounds "$ROUNDS" --lifecycles "$N" --concurrent "$CONCURRENT" \
    --paths "$paths" --journal-dir "$WORK/journal" \
    --lifecycle-cpu "$TARGET/release/lifecycle-cpu" --cycles-bin "$TARGET/release/cycles"
log "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
