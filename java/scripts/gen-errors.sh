#!/usr/bin/env bash
# Regenerates java/src/main/java/dev/cycles/errors from core's error table (through the built
# native library). Usage: java/scripts/gen-errors.sh [path/to/libcycles_jvm.so]
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
lib="${1:-${CARGO_TARGET_DIR:-$here/../target}/debug/libcycles_jvm.so}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
javac -d "$tmp" "$here"/src/main/java/dev/cycles/CyclesException.java \
    "$here"/src/main/java/dev/cycles/ClientClosedException.java \
    "$here"/src/main/java/dev/cycles/internal/*.java
java -cp "$tmp" -Dcycles.native.path="$lib" "$here/scripts/GenErrors.java" "$here/src/main/java"
