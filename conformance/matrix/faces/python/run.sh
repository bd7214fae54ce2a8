#!/usr/bin/env bash
# Runs the Python face's driver (PROTOCOL.md) in the venv prepare.sh checked.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CACHE="${CYCLES_PY_CACHE:-$HOME/.cache/cycles-python}"
exec "$CACHE/test-venv/bin/python" -X utf8 "$HERE/face.py"
