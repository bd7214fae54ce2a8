#!/usr/bin/env bash
# The JVM lifecycle benchmark (docs/benchmarks.md, "JVM guarded lifecycle"): release builds of
# the jar (tests skipped), the CLI and core's lifecycle-cpu bench; then `cycles serve` as a child
# (its CPU not counted) and java/bench/LifecycleBench.java (15,000 warm-up lifecycles per path,
# a fixed pre-touched heap) in alternating rounds (the binding
# with the journal off and on, and a plain java.net.http create+commit pair), followed by core's
# own lifecycle-cpu (core's guarded lifecycle against a bare reqwest pair) for the comparison
# with core, then (a fresh JVM) the memory of CONCURRENT guarded calls in flight (guardedAsync),
# two passes. Honours CARGO_TARGET_DIR.
#
#   java/scripts/bench.sh [ROUNDS [LIFECYCLES [CONCURRENT]]]   # default 7 rounds of 1000, 10000 in flight
#   JAVA_BENCH_OPTS=-Dbench.warmup=3000 java/scripts/bench.sh 5 1000 0       # a shorter warm-up
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
ROUNDS="${1:-7}"
N="${2:-1000}"
CONCURRENT="${3:-10000}"
log() { printf '== java bench: %s\n' "$*" >&2; }
WORK="$(mktemp -d "${TMPDIR:-/tmp}/cycles-java-bench.XXXXXX")"
SERVER=""
cleanup() { [[ -n "$SERVER" ]] && kill "$SERVER" 2>/dev/null; rm -rf "$WORK"; }
trap cleanup EXIT

log "release builds: jar (tests skipped), cycles CLI, lifecycle-cpu"
CYCLES_PACKAGE_SKIP_TESTS=1 "$ROOT/scripts/package.sh" "$WORK/out" java
(cd "$ROOT" && cargo build -q --release --locked -p cycles-cli -p cycles-bench --bin cycles --bin lifecycle-cpu)
JAR="$(ls "$WORK"/out/java/cycles-sdk-*[0-9].jar)"
mkdir -p "$WORK/classes"
javac --release 17 -Xlint:all -Werror -cp "$JAR" -d "$WORK/classes" "$ROOT/java/bench/LifecycleBench.java"

# shellcheck source=../../scripts/bench-server.sh
source "$ROOT/scripts/bench-server.sh"
bench_server_start "$TARGET/release/cycles" "$WORK"

log "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
log "JVM: $ROUNDS rounds x $N lifecycles per path against $URL"
# A fixed heap touched at start: the rounds measure lifecycles, not the kernel's first touch
# of young-generation pages (a cost a long-running JVM pays once; docs/benchmarks.md).
# JAVA_BENCH_OPTS: extra JVM options for the rounds (e.g. -Dbench.warmup=3000), word-split.
# shellcheck disable=SC2086
java -Xms256m -Xmx256m -XX:+AlwaysPreTouch -Dcycles.shutdown.drain.ms=0 ${JAVA_BENCH_OPTS:-} \
    -cp "$JAR:$WORK/classes" LifecycleBench "$URL" cycles-local-key "$ROUNDS" "$N" 0

log "core: lifecycle-cpu ($ROUNDS rounds x $N)"
"$TARGET/release/lifecycle-cpu" --cycles-bin "$TARGET/release/cycles" --rounds "$ROUNDS" --lifecycles "$N"

if [[ "$CONCURRENT" -gt 0 ]]; then
    # A fresh JVM: a fixed heap, touched at start (RSS then moves with native memory only, not
    # with the heap growing or shrinking around System.gc()); the binding's INFO event lines
    # (one per settlement, to stderr) quietened for this part only.
    printf 'handlers=java.util.logging.ConsoleHandler\n.level=INFO\ndev.cycles.level=WARNING\n' >"$WORK/logging.properties"
    log "JVM: $CONCURRENT guarded calls in flight (guardedAsync), two passes"
    java -Xms256m -Xmx256m -XX:+AlwaysPreTouch -Djava.util.logging.config.file="$WORK/logging.properties" \
        -Dcycles.shutdown.drain.ms=0 -cp "$JAR:$WORK/classes" LifecycleBench "$URL" cycles-local-key 0 0 "$CONCURRENT" 2
fi
kill "$SERVER"; SERVER=""
log "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
