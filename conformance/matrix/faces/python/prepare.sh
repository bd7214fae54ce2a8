#!/usr/bin/env bash
# Prepares the Python face: the venv python/scripts/test.sh leaves at $CYCLES_PY_CACHE/test-venv
# (the built wheel, runcycles 0.5.3 and the test dependencies installed). Reused when it
# imports both; otherwise built with `CYCLES_PY_BUILD_ONLY=1 python/scripts/test.sh` (wheel
# build and venv install only, no lint, no tests; minutes when cold). Progress on stderr.
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

if ready; then
    echo "== matrix python: reusing $CACHE/test-venv ($("$PY" -c 'import cycles, sys; print("cycles", cycles.__version__, "on CPython", sys.version.split()[0])'))" >&2
    exit 0
fi
echo "== matrix python: no usable venv at $CACHE/test-venv; building the wheel (python/scripts/test.sh, build only)" >&2
CYCLES_PYTHON="${CYCLES_PYTHON:-$(command -v python3)}" CYCLES_PY_BUILD_ONLY=1 \
    bash "$ROOT/python/scripts/test.sh" >&2
ready || { echo "matrix python: $CACHE/test-venv still does not import cycles and runcycles 0.5.3" >&2; exit 1; }
