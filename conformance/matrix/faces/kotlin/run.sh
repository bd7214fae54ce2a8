#!/usr/bin/env bash
# The Kotlin face's driver (prepare.sh first): the matrix protocol on stdin/stdout. JNA loads
# the libcycles_uniffi prepare.sh copied; SerialGC and C1 only, as the JVM face, for a short
# start and the fastest run over ten thousand short requests.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../../../.." && pwd)"
CACHE="${CARGO_TARGET_DIR:-$ROOT/target}/matrix-kotlin"
[[ -f "$CACHE/face/classes/FaceKt.class" && -f "$CACHE/native/libcycles_uniffi.so" ]] ||
    { echo "the Kotlin face is not prepared: run conformance/matrix/faces/kotlin/prepare.sh" >&2; exit 1; }
exec java -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Djna.library.path="$CACHE/native" \
    -cp "$CACHE/face/classes:$CACHE/lib/cycles-kotlin-0.1.0.jar:$(cat "$CACHE/face/classpath.txt")" FaceKt
