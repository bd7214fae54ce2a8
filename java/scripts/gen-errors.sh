#!/usr/bin/env bash
# Regenerates java/src/main/java/dev/cycles/errors from core's error table (through the built
# native library). `--check` writes them to a temporary directory instead and fails when the
# committed classes differ (java/scripts/test.sh runs it).
# Usage: java/scripts/gen-errors.sh [--check] [path/to/libcycles_jvm.so]
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
check=0
if [ "${1:-}" = "--check" ]; then
    check=1
    shift
fi
lib="${1:-${CARGO_TARGET_DIR:-$here/../target}/debug/libcycles_jvm.so}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
javac -sourcepath "$here/src/main/java" -d "$tmp/classes" "$here"/src/main/java/dev/cycles/CyclesException.java \
    "$here"/src/main/java/dev/cycles/ClientClosedException.java \
    "$here"/src/main/java/dev/cycles/internal/*.java
out="$here/src/main/java"
[ "$check" = 1 ] && out="$tmp/src"
java -cp "$tmp/classes" -Dcycles.native.path="$lib" "$here/scripts/GenErrors.java" "$out"
if [ "$check" = 1 ]; then
    if ! diff -ru "$here/src/main/java/dev/cycles/errors" "$out/dev/cycles/errors" >&2; then
        echo "java/src/main/java/dev/cycles/errors is stale: run java/scripts/gen-errors.sh" >&2
        exit 1
    fi
    echo "dev.cycles.errors matches core's table"
fi
