#!/usr/bin/env bash
# Python lifecycle benchmark: this SDK against bare stdlib HTTP (the same create + commit) and
# the official runcycles==0.5.3, on one local `cycles serve` process, in the same run
# (python/bench/lifecycle_bench.py; docs/benchmarks.md).
#
#   python/scripts/bench.sh                         # full run, prints a markdown table
#   python/scripts/bench.sh --quick                 # smoke run (about 3 minutes)
#   python/scripts/bench.sh --json /tmp/bench.json  # any lifecycle_bench.py option passes through
#   python/scripts/bench.sh --sdks ours,bare --scenarios sync,async --journal off  # fast iteration
#
# Builds the RELEASE wheel and the release `cycles` CLI, then reuses one venv under
# ~/.cache/cycles-python-bench (the wheel is reinstalled every run). Progress goes to stderr,
# the table to stdout.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
CACHE="${CYCLES_BENCH_CACHE:-$HOME/.cache/cycles-python-bench}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/cycles-target}"
PY="${CYCLES_PYTHON:-python3}"

MATURIN_VERSION=1.16.0
RUNCYCLES_VERSION=0.5.3

log() { printf '== bench: %s\n' "$*" >&2; }

VENV="$CACHE/venv"
STAMP="maturin==$MATURIN_VERSION runcycles==$RUNCYCLES_VERSION $("$PY" -c 'import sys; print(sys.version)')"
if [[ ! -x "$VENV/bin/python" || "$(cat "$VENV/.stamp" 2>/dev/null)" != "$STAMP" ]]; then
    log "creating the bench venv $VENV"
    rm -rf "$VENV"
    "$PY" -m venv "$VENV"
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check \
        "maturin==$MATURIN_VERSION" "runcycles==$RUNCYCLES_VERSION"
    echo "$STAMP" >"$VENV/.stamp"
fi

log "building the release wheel and the release cycles CLI"
WHEELS="$CACHE/wheels"
rm -rf "$WHEELS"
(cd "$ROOT/python" && "$VENV/bin/maturin" build --release --interpreter "$VENV/bin/python" \
    --out "$WHEELS" --quiet) >&2
(cd "$ROOT" && cargo build --release --quiet -p cycles-cli) >&2
"$VENV/bin/python" -m pip install -q --disable-pip-version-check --force-reinstall --no-deps \
    "$WHEELS"/*.whl

log "running (the workers and the server are child processes of this run)"
cd "$CACHE"  # outside the source tree: `import cycles` finds the installed wheel
exec "$VENV/bin/python" "$ROOT/python/bench/lifecycle_bench.py" \
    --cycles-bin "$CARGO_TARGET_DIR/release/cycles" "$@"
