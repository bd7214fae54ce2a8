#!/usr/bin/env bash
# Regenerates bindings/c/include/cycles.h with the pinned cbindgen (installed on first use into
# $CYCLES_TOOLS, default ~/.cache/cycles-tools). `--check` fails when the committed header differs.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
tools="${CYCLES_TOOLS:-$HOME/.cache/cycles-tools}"
cbindgen="$tools/bin/cbindgen"
if ! "$cbindgen" --version 2>/dev/null | grep -qx 'cbindgen 0.29.4'; then
    cargo install cbindgen --version 0.29.4 --locked --root "$tools"
fi
out="$here/include/cycles.h"
if [ "${1:-}" = "--check" ]; then
    tmp="$(mktemp)"
    trap 'rm -f "$tmp"' EXIT
    "$cbindgen" --quiet --config "$here/cbindgen.toml" --crate cycles-c --output "$tmp" "$here"
    if ! cmp -s "$tmp" "$out"; then
        diff -u "$out" "$tmp" | head -40 >&2 || true
        echo "bindings/c/include/cycles.h is stale: run bindings/c/scripts/header.sh" >&2
        exit 1
    fi
    echo "cycles.h matches its sources"
else
    "$cbindgen" --quiet --config "$here/cbindgen.toml" --crate cycles-c --output "$out" "$here"
fi
