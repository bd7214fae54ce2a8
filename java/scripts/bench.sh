#!/usr/bin/env bash
# The JVM lifecycle benchmark (docs/benchmarks.md, "JVM guarded lifecycle"): release builds of
# the jar (tests skipped), the CLI and core's lifecycle-cpu bench; then `cycles serve` as a child
# (its CPU not counted) and java/bench/LifecycleBench.java in alternating rounds (the binding
# with the journal off and on, and a plain java.net.http create+commit pair), followed by core's
# own lifecycle-cpu (core's guarded lifecycle against a bare reqwest pair) for the comparison
# with core. Honours CARGO_TARGET_DIR.
#
#   java/scripts/bench.sh [ROUNDS [LIFECYCLES]]     # default 7 rounds of 1000
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
ROUNDS="${1:-7}"
N="${2:-1000}"
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

log "JVM: $ROUNDS rounds x $N lifecycles per path against $URL"
java -Dcycles.shutdown.drain.ms=0 -cp "$JAR:$WORK/classes" LifecycleBench "$URL" cycles-local-key "$ROUNDS" "$N"
kill "$SERVER"; SERVER=""

log "core: lifecycle-cpu ($ROUNDS rounds x $N)"
"$TARGET/release/lifecycle-cpu" --cycles-bin "$TARGET/release/cycles" --rounds "$ROUNDS" --lifecycles "$N"
