#!/usr/bin/env bash
# Prepares the Python face: the venv python/scripts/test.sh leaves at $CYCLES_PY_CACHE/test-venv
# (the built wheel, runcycles 0.5.3 and the test dependencies installed). Reused when it
# imports both and its wheel is of these sources (its Python files the same as python/cycles,
# its native library newer than every Rust source it is built from); otherwise built with
# `CYCLES_PY_BUILD_ONLY=1 python/scripts/test.sh` (wheel build and venv install only, no lint,
# no tests; minutes when cold). Progress on stderr.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../../.." && pwd)"
CACHE="${CYCLES_PY_CACHE:-$HOME/.cache/cycles-python}"
PY="$CACHE/test-venv/bin/python"

ready() {
    [[ -x "$PY" ]] && "$PY" -c '
import cycles, runcycles
assert runcycles.__version__ == "0.5.3", runcycles.__version__
' >/dev/null 2>&1
}

# The installed package is these sources': the same Python files, a native library newer than
# every source of it (a venv another checkout or an older build installed is rebuilt).
current() {
    local pkg
    pkg="$("$PY" -c 'import os, cycles; print(os.path.dirname(cycles.__file__))' 2>/dev/null)" || return 1
    diff -rq -x __pycache__ -x '_native*.so' "$ROOT/python/cycles" "$pkg" >/dev/null || return 1
    local lib newest
    lib="$(ls "$pkg"/_native*.so 2>/dev/null | head -1)"
    [[ -n "$lib" ]] || return 1
    newest="$(find "$ROOT/core/src" "$ROOT/bindings/bridge/src" "$ROOT/bindings/python/src" \
        "$ROOT/bindings/python/Cargo.toml" "$ROOT/Cargo.lock" -type f -printf '%T@\n' | sort -n | tail -1)"
    awk -v l="$(stat -c %Y "$lib")" -v s="$newest" 'BEGIN { exit !(l >= s) }'
}

if ready && current; then
    echo "== matrix python: reusing $CACHE/test-venv ($("$PY" -c 'import cycles, sys; print("cycles", cycles.__version__, "on CPython", sys.version.split()[0])'))" >&2
    exit 0
fi
echo "== matrix python: no usable venv of these sources at $CACHE/test-venv; building the wheel (python/scripts/test.sh, build only)" >&2
CYCLES_PYTHON="${CYCLES_PYTHON:-$(command -v python3)}" CYCLES_PY_BUILD_ONLY=1 \
    bash "$ROOT/python/scripts/test.sh" >&2
ready && current || { echo "matrix python: $CACHE/test-venv still does not import cycles and runcycles 0.5.3 of these sources" >&2; exit 1; }
