#!/usr/bin/env bash
# Prepares the JVM face: the SDK jar and Face.java compiled against it, in
# $CARGO_TARGET_DIR/matrix-jvm/face, with the jar's native library extracted next to them.
# The jar is reused when one is newer than every source it is built from: first the copy this
# script made before, then the one java/scripts/test.sh leaves in java/target; otherwise
# scripts/package.sh builds it (debug profile, tests skipped: java/scripts/test.sh runs them).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../../../.." && pwd)"
HERE="$ROOT/conformance/matrix/faces/jvm"
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
CACHE="$TARGET/matrix-jvm"
FACE="$CACHE/face"
log() { printf '== matrix jvm: %s\n' "$*" >&2; }

command -v javac >/dev/null || { echo "no javac: install a JDK 17+ (java/scripts/test.sh does)" >&2; exit 1; }

# The newest source the jar depends on (Rust core, bridge, JNI library, Java sources, pom).
newest_source() {
    find "$ROOT/core/src" "$ROOT/bindings/bridge/src" "$ROOT/bindings/jvm/src" "$ROOT/java/src/main" \
        "$ROOT/java/pom.xml" "$ROOT/Cargo.lock" -type f -printf '%T@\n' | sort -n | tail -1
}
fresh() { [[ -f "$1" ]] && awk -v j="$(stat -c %Y "$1")" -v s="$SRC" 'BEGIN { exit !(j >= s) }'; }

SRC="$(newest_source)"
JAR=""
for cand in "$FACE/cycles-sdk.jar" $(ls "$CACHE"/out/java/cycles-sdk-*[0-9].jar "$ROOT"/java/target/cycles-sdk-*[0-9].jar 2>/dev/null); do
    if fresh "$cand"; then JAR="$cand"; break; fi
done
mkdir -p "$FACE"
if [[ -z "$JAR" ]]; then
    log "no up-to-date jar: scripts/package.sh (debug, tests skipped)"
    CYCLES_PACKAGE_PROFILE=dev CYCLES_PACKAGE_SKIP_TESTS=1 "$ROOT/scripts/package.sh" "$CACHE/out" java
    JAR="$(ls "$CACHE"/out/java/cycles-sdk-*[0-9].jar)"
fi
if [[ "$JAR" != "$FACE/cycles-sdk.jar" ]]; then
    # A copy of its own, so a later `mvn clean` cannot take it away mid-run (mtime kept).
    cp -p "$JAR" "$FACE/cycles-sdk.jar"
    log "jar: $JAR"
fi
# The bundled native library, extracted once: run.sh names it with -Dcycles.native.path, so
# the driver does not copy some 60 MB (debug build) to a temporary directory at every start.
if [[ ! -f "$FACE/libcycles_jvm.so" || "$FACE/cycles-sdk.jar" -nt "$FACE/libcycles_jvm.so" ]]; then
    (cd "$FACE" && rm -rf native && jar xf cycles-sdk.jar native/linux-x86_64/libcycles_jvm.so &&
        mv native/linux-x86_64/libcycles_jvm.so . && rm -rf native && touch libcycles_jvm.so)
fi
if [[ ! -f "$FACE/Face.class" || ! -f "$FACE/Work.class" || "$HERE/Face.java" -nt "$FACE/Face.class" ||
      "$HERE/Work.java" -nt "$FACE/Work.class" || "$FACE/cycles-sdk.jar" -nt "$FACE/Face.class" ]]; then
    log "javac Face.java Work.java"
    javac --release 17 -Xlint:all -Werror -cp "$FACE/cycles-sdk.jar" -d "$FACE" "$HERE/Face.java" "$HERE/Work.java"
fi
log "ready ($FACE)"
