#!/usr/bin/env bash
# Builds the C face into $CARGO_TARGET_DIR/matrix-c/face: face.c and the C tests' JSON reader
# (bindings/c/tests/json.c) compiled as C11 with -Wall -Wextra -Werror against an installed
# libcycles found through pkg-config. The install tree bindings/c/scripts/test.sh leaves in this
# checkout's C test tree (bindings/c/scripts/tests-tree.sh) is reused when it is newer than the
# library's sources;
# otherwise one is built (scripts/package.sh, debug profile) into $CARGO_TARGET_DIR/matrix-c/prefix.
# Idempotent: nothing is rebuilt when warm. Progress on stderr.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../../../.." && pwd)"
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
OUT="$TARGET/matrix-c"
log() { printf '== matrix face c: %s\n' "$*" >&2; }

for tool in cc pkg-config; do
    command -v "$tool" >/dev/null || { echo "the C face needs $tool" >&2; exit 1; }
done

# An install tree is current when its library is newer than every source it is built from.
current() { # prefix
    local lib="$1/c/lib/libcycles.so"
    [[ -f "$1/c/lib/pkgconfig/cycles.pc" && -e "$lib" ]] || return 1
    [[ -z "$(find "$ROOT/core/src" "$ROOT/bindings/bridge/src" "$ROOT/bindings/c/src" "$ROOT/bindings/c/include" \
        "$ROOT/conformance/server/src" "$ROOT/Cargo.lock" -newer "$lib" -print -quit)" ]]
}

PREFIX="$(bash "$ROOT/bindings/c/scripts/tests-tree.sh")/prefix"
if current "$PREFIX"; then
    log "reusing the C tests' install tree $PREFIX"
else
    PREFIX="$OUT/prefix"
    if current "$PREFIX"; then
        log "reusing $PREFIX"
    else
        log "building libcycles (debug profile) into $PREFIX"
        (cd "$ROOT" && cargo build -q -p cycles-c --locked)
        CYCLES_PACKAGE_PROFILE=dev "$ROOT/scripts/package.sh" "$PREFIX" c
    fi
fi

export PKG_CONFIG_PATH="$PREFIX/c/lib/pkgconfig"
LIBDIR="$(pkg-config --variable=libdir cycles)"
SOURCES=("$HERE/face.c" "$ROOT/bindings/c/tests/json.c" "$ROOT/bindings/c/tests/json.h")
mkdir -p "$OUT"
if [[ -x "$OUT/face" && -z "$(find "${SOURCES[@]}" "$LIBDIR/libcycles.so" -newer "$OUT/face" -print -quit)" ]]; then
    log "face is current"
    exit 0
fi
log "compiling $OUT/face against $LIBDIR"
# shellcheck disable=SC2046 # pkg-config prints several flags
cc -std=c11 -Wall -Wextra -Werror -D_GNU_SOURCE -O1 -g -I"$ROOT/bindings/c/tests" \
    "$HERE/face.c" "$ROOT/bindings/c/tests/json.c" $(pkg-config --cflags --libs cycles) \
    -Wl,-rpath,"$LIBDIR" -o "$OUT/face.tmp"
mv "$OUT/face.tmp" "$OUT/face"
log "ok"
