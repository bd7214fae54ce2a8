#!/usr/bin/env bash
# Regenerates java/src/main/java/dev/cycles/internal/Native.java from the natives! blocks of
# bindings/jvm/src (the macro's signature tables, rendered by bindings/jvm/src/native.rs
# through its test native_java_is_generated; cargo builds in $CARGO_TARGET_DIR). `--check`
# writes the rendering to a temporary file instead and fails when the committed file differs
# (java/scripts/test.sh runs it).
# Usage: java/scripts/gen-native.sh [--check]
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
check=0
if [ "${1:-}" = "--check" ]; then
    check=1
fi
file="$root/java/src/main/java/dev/cycles/internal/Native.java"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
(cd "$root" && CYCLES_NATIVE_JAVA_OUT="$tmp/Native.java" cargo test -q -p cycles-jvm --lib --locked \
    -- --exact native::tests::native_java_is_generated) >"$tmp/log" 2>&1 || { cat "$tmp/log" >&2; exit 1; }
# The test filter must have matched: a rendering that was never written is a failure.
if ! grep -q "^test result: ok. 1 passed" "$tmp/log" || [ ! -s "$tmp/Native.java" ]; then
    cat "$tmp/log" >&2
    echo "gen-native.sh: the generator test did not run" >&2
    exit 1
fi
if [ "$check" = 1 ]; then
    if ! diff -u "$file" "$tmp/Native.java" >&2; then
        echo "java/src/main/java/dev/cycles/internal/Native.java is stale: run java/scripts/gen-native.sh" >&2
        exit 1
    fi
    echo "Native.java matches the natives! blocks of bindings/jvm/src"
else
    cp "$tmp/Native.java" "$file"
fi
