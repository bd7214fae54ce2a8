#!/usr/bin/env bash
# Prints README.md's C quick start (its one ```c block), failing when there is none or when
# docs/c.md's copy differs. bindings/c/scripts/test.sh and scripts/verify/c.sh compile it.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../../.." && pwd)"
block() { awk '/^```c$/{on=1; next} /^```$/{on=0} on' "$1"; }
code="$(block "$ROOT/README.md")"
[[ -n "$code" ]] || { echo "no c block in README.md" >&2; exit 1; }
[[ "$(block "$ROOT/docs/c.md")" == "$code" ]] || { echo "the c block in docs/c.md differs from README.md's" >&2; exit 1; }
printf '%s\n' "$code"
