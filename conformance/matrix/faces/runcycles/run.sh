#!/usr/bin/env bash
# Runs the runcycles face's driver (PROTOCOL.md; journal ops only) in the Python test venv.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CACHE="${CYCLES_PY_CACHE:-$HOME/.cache/cycles-python}"
exec "$CACHE/test-venv/bin/python" -X utf8 "$HERE/face.py"
