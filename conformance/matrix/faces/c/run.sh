#!/usr/bin/env bash
# Runs the C face (conformance/matrix/PROTOCOL.md) built by prepare.sh.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../../../.." && pwd)"
FACE="${CARGO_TARGET_DIR:-$ROOT/target}/matrix-c/face"
[[ -x "$FACE" ]] || { echo "the C face is not built: run $(dirname "$0")/prepare.sh" >&2; exit 1; }
exec "$FACE" "$@"
