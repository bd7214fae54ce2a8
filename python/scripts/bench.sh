#!/usr/bin/env bash
# Python lifecycle benchmark: this SDK against bare stdlib HTTP (the same create + commit) and
# the official runcycles==0.5.3, on one local `cycles serve` process, in the same run
# (python/bench/lifecycle_bench.py; docs/benchmarks.md).
#
#   python/scripts/bench.sh                         # full run, prints a markdown table
#   python/scripts/bench.sh --quick                 # smoke run (about 3 minutes)
#   python/scripts/bench.sh --json /tmp/bench.json  # any lifecycle_bench.py option passes through
#   python/scripts/bench.sh --sdks ours,bare --scenarios sync,async --journal off  # fast iteration
#   python/scripts/bench.sh --integrations [--rounds 5 --calls 200]  # the integrations' client CPU
#                                   # per call against the bare libraries (integrations_bench.py)
#   python/scripts/bench.sh --instructions [--measured 200]  # the same paths' instructions per
#                                   # call under callgrind (integrations_instructions.py)
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

INTEGRATIONS=0
if [[ "${1:-}" == "--integrations" ]]; then
    INTEGRATIONS=1
    shift
elif [[ "${1:-}" == "--instructions" ]]; then
    INTEGRATIONS=2
    shift
    command -v valgrind >/dev/null || { echo "--instructions needs valgrind (apt-get install valgrind)" >&2; exit 1; }
fi
# The integrations' libraries at test.sh's pins (one source of truth for the versions).
eval "$(grep -E '^(STARLETTE|OPENAI|ANTHROPIC|OPENAI_AGENTS|LANGCHAIN_CORE|LANGCHAIN_OPENAI)_VERSION=' \
    "$ROOT/python/scripts/test.sh")"
LIBS=("starlette==$STARLETTE_VERSION" "openai==$OPENAI_VERSION" "anthropic==$ANTHROPIC_VERSION"
    "openai-agents==$OPENAI_AGENTS_VERSION")
if "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then  # as in test.sh
    LIBS+=("langchain-core==$LANGCHAIN_CORE_VERSION" "langchain-openai==$LANGCHAIN_OPENAI_VERSION")
fi

VENV="$CACHE/venv"
STAMP="maturin==$MATURIN_VERSION runcycles==$RUNCYCLES_VERSION ${LIBS[*]} $("$PY" -c 'import sys; print(sys.version)')"
if [[ ! -x "$VENV/bin/python" || "$(cat "$VENV/.stamp" 2>/dev/null)" != "$STAMP" ]]; then
    log "creating the bench venv $VENV"
    rm -rf "$VENV"
    "$PY" -m venv "$VENV"
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check \
        "maturin==$MATURIN_VERSION" "runcycles==$RUNCYCLES_VERSION" "${LIBS[@]}"
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

cd "$CACHE"  # outside the source tree: `import cycles` finds the installed wheel
if [[ "$INTEGRATIONS" == "2" ]]; then
    log "counting the integrations' instructions per call under callgrind (slow: minutes a path)"
    exec "$VENV/bin/python" "$ROOT/python/bench/integrations_instructions.py" \
        --cycles-bin "$CARGO_TARGET_DIR/release/cycles" "$@"
fi
if [[ "$INTEGRATIONS" == "1" ]]; then
    log "running the integrations benchmark (the server and the fake provider are child processes)"
    exec "$VENV/bin/python" "$ROOT/python/bench/integrations_bench.py" \
        --cycles-bin "$CARGO_TARGET_DIR/release/cycles" "$@"
fi
log "running (the workers and the server are child processes of this run)"
exec "$VENV/bin/python" "$ROOT/python/bench/lifecycle_bench.py" \
    --cycles-bin "$CARGO_TARGET_DIR/release/cycles" "$@"
