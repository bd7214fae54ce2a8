#!/usr/bin/env bash
# The JVM face's driver (prepare.sh first): the matrix protocol on stdin/stdout.
# The native library extracted by prepare.sh (cycles.native.path, docs/jvm.md); no
# shutdown-hook drain (the driver closes its own clients); SerialGC and C1 only: a start of
# about 0.3-0.5 s and the fastest run over ten thousand short requests.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../../../.." && pwd)"
FACE="${CARGO_TARGET_DIR:-$ROOT/target}/matrix-jvm/face"
[[ -f "$FACE/Face.class" && -f "$FACE/libcycles_jvm.so" ]] || { echo "the JVM face is not prepared: run conformance/matrix/faces/jvm/prepare.sh" >&2; exit 1; }
exec java -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Dcycles.native.path="$FACE/libcycles_jvm.so" \
    -Dcycles.shutdown.drain.ms=0 -cp "$FACE/cycles-sdk.jar:$FACE" Face
