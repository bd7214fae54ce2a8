#!/usr/bin/env bash
# Builds the C face into $CARGO_TARGET_DIR/matrix-c/face: face.c and the C tests' JSON reader
# (bindings/c/tests/json.c) compiled as C11 with -Wall -Wextra -Werror against an installed
# libcycles found through pkg-config: the install tree of this checkout's C test tree
# (bindings/c/scripts/tests-tree.sh --install: reused when newer than the library's sources,
# otherwise reinstalled there, debug profile).
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

# This checkout's C test tree's install, reinstalled there when older than its sources.
PREFIX="$(bash "$ROOT/bindings/c/scripts/tests-tree.sh" --install)/prefix"

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
