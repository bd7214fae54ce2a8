#!/usr/bin/env bash
# Writes the Kotlin and Swift bindings of libcycles_uniffi with uniffi's own generator, pinned
# to the scaffolding's version (bindings/uniffi/bindgen, a workspace of its own):
#   kotlin/src/generated/kotlin/dev/cycles/kotlin/ffi/cycles_uniffi.kt
#   swift/Sources/CyclesFFI/CyclesFFI.swift, swift/Sources/CyclesFFIC/{CyclesFFIC.h, module.modulemap}
# --check: write them to a temporary folder and fail when a committed file differs (CI).
# Generated from the debug library (cargo build -p cycles-uniffi): the bindings depend only on
# the exported interface, which is the same in every profile.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../../.." && pwd)"
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
# The generator's own workspace builds into the same target folder.
export CARGO_TARGET_DIR="$TARGET"
check=false; [[ "${1:-}" == "--check" ]] && check=true
cd "$ROOT"
cargo build -q --locked -p cycles-uniffi
cargo build -q --locked --manifest-path bindings/uniffi/bindgen/Cargo.toml
LIB="$TARGET/debug/libcycles_uniffi.so"
OUT="$(mktemp -d "${TMPDIR:-/tmp}/cycles-uniffi-gen.XXXXXX")"
trap 'rm -rf "$OUT"' EXIT
gen() { "$TARGET/debug/uniffi-bindgen" generate --no-format --config bindings/uniffi/uniffi.toml -l "$1" -o "$OUT/$1" "$LIB" >/dev/null; }
gen kotlin
gen swift
# Where each generated file lives in the repository.
declare -A PLACE=(
    ["kotlin/dev/cycles/kotlin/ffi/cycles_uniffi.kt"]="kotlin/src/generated/kotlin/dev/cycles/kotlin/ffi/cycles_uniffi.kt"
    ["swift/CyclesFFI.swift"]="swift/Sources/CyclesFFI/CyclesFFI.swift"
    ["swift/CyclesFFIC.h"]="swift/Sources/CyclesFFIC/CyclesFFIC.h"
    ["swift/CyclesFFIC.modulemap"]="swift/Sources/CyclesFFIC/module.modulemap"
)
n=$(cd "$OUT" && find . -type f | wc -l)
[[ "$n" -eq "${#PLACE[@]}" ]] || { echo "uniffi-bindgen wrote $n files, this script places ${#PLACE[@]}" >&2; exit 1; }
drift=0
for f in "${!PLACE[@]}"; do
    dest="${PLACE[$f]}"
    if $check; then
        if ! cmp -s "$OUT/$f" "$dest"; then
            echo "generated file drifted: $dest (run bindings/uniffi/scripts/generate.sh)" >&2
            diff -u "$dest" "$OUT/$f" | head -20 >&2 || true
            drift=1
        fi
    else
        mkdir -p "$(dirname "$dest")"
        cp "$OUT/$f" "$dest"
    fi
done
[[ $drift -eq 0 ]] || exit 1
$check && echo "uniffi: ${#PLACE[@]} generated files match" >&2 || echo "uniffi: wrote ${#PLACE[@]} files" >&2
