#!/usr/bin/env bash
# Prints this checkout's C test tree: $CARGO_TARGET_DIR/cycles-c-tests/<key>, the key a hash
# of the checkout's path, so two checkouts sharing one target dir never delete or run each
# other's tree (CYCLES_C_TESTS_DIR overrides). It holds `prefix` (libcycles installed by
# scripts/package.sh) and `build` (the plain CTest build the recovery adapter runs).
#
#   bindings/c/scripts/tests-tree.sh             # print the directory
#   bindings/c/scripts/tests-tree.sh --install   # also bring prefix up to date with these
#                                                # sources (reinstalled when older), then print it
#   bindings/c/scripts/tests-tree.sh --build     # --install, and the CTest build (incremental)
#
# Progress on stderr; the directory alone on stdout.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../../.." && pwd)"
C="$ROOT/bindings/c"
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
KEY="$(printf '%s' "$ROOT" | sha256sum | cut -c1-12)"
TREE="${CYCLES_C_TESTS_DIR:-$TARGET/cycles-c-tests/$KEY}"
log() { printf '== c tests tree: %s\n' "$*" >&2; }
case "${1:-}" in
    "" | --install | --build) ;;
    *) echo "usage: bindings/c/scripts/tests-tree.sh [--install | --build]" >&2; exit 2 ;;
esac

if [[ "${1:-}" == "--install" || "${1:-}" == "--build" ]]; then
    lib="$TREE/prefix/c/lib/libcycles.so"
    if [[ ! -e "$lib" || -n "$(find "$ROOT/core/src" "$ROOT/bindings/bridge/src" "$C/src" "$C/include" \
        "$ROOT/conformance/server/src" "$ROOT/Cargo.lock" -newer "$lib" -print -quit)" ]]; then
        log "installing libcycles (debug profile) into $TREE/prefix"
        (cd "$ROOT" && cargo build -q -p cycles-c -p cycles-cli --locked)
        rm -rf "$TREE/prefix"
        mkdir -p "$TREE"
        CYCLES_PACKAGE_PROFILE=dev "$ROOT/scripts/package.sh" "$TREE/prefix" c >&2
    fi
fi
if [[ "${1:-}" == "--build" ]]; then
    CORPUS="${CYCLES_REFERENCE_CORPUS:-$ROOT/../shared/fixtures/reference-server/exchanges.jsonl}"
    export PKG_CONFIG_PATH="$TREE/prefix/c/lib/pkgconfig"
    log "CTest build $TREE/build (incremental)"
    cmake -S "$C/tests" -B "$TREE/build" -DCYCLES_VECTORS="$ROOT/conformance/vectors" \
        -DCYCLES_CORPUS="$CORPUS" >/dev/null
    cmake --build "$TREE/build" -j2 >/dev/null
fi
printf '%s\n' "$TREE"
