#!/usr/bin/env bash
# Python binding: lint and type-check (the package, its quick starts, and scripts/*.py, the fuzz
# tooling), build the abi3 wheel, install THE WHEEL into a fresh virtual
# environment and run the pytest suite from outside the source tree, so the installed
# package is what is tested. Exits non-zero on any failure.
#
#   python/scripts/test.sh                 # debug build (fast); tests on the oldest and newest CPython found
#   CYCLES_PY_RELEASE=1 python/scripts/test.sh   # release build
#   CYCLES_PYTHON=/path/to/python3.X python/scripts/test.sh   # one given interpreter only
#   CYCLES_PY_BUILD_ONLY=1 python/scripts/test.sh   # build and install the venvs, no lint, no tests
#                                                   # (the matrix's Python faces prepare this way)
#
# Venvs live under ~/.cache (never in the repo); Cargo builds in $CARGO_TARGET_DIR
# (default ~/.cache/cycles-target, shared with the rest of the workspace).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
PKG="$ROOT/python"
CACHE="${CYCLES_PY_CACHE:-$HOME/.cache/cycles-python}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/cycles-target}"

# Pinned tools.
MATURIN_VERSION=1.16.0
RUFF_VERSION=0.17.6
MYPY_VERSION=2.4.1
PYTEST_VERSION=9.2.0
PYTEST_ASYNCIO_VERSION=1.5.0
# The official Python SDK, a test dependency: the interop tests and the benchmark run against it.
RUNCYCLES_VERSION=0.5.3
# Test dependencies of the guard-context tests (test_lifecycle_contexts.py): anyio's worker
# threads and Starlette's StreamingResponse step sync generators in copied contexts.
# Starlette 1.7.0 is the newest release that still supports CPython 3.10 (the abi3 floor).
ANYIO_VERSION=4.16.0
STARLETTE_VERSION=1.7.0
# The model clients the fake provider is tested with (tests/test_fake_provider.py), and that
# the integrations (issue 30) wrap.
OPENAI_VERSION=3.51.0
ANTHROPIC_VERSION=2.10.0
# The LangChain integration (tests/test_integration_langchain.py): langchain-core 1.8 needs
# CPython >= 3.11, so it is installed, type-checked and tested on the interpreters that have it
# (the newest here); on 3.10 that one test module says it is skipped and why.
# The integrations' tokenizer="auto" (cycles/integrations/tokenizer.py) uses tiktoken when it is
# installed. tiktoken downloads each encoding's file on first use, which CI cannot; litellm's
# wheel carries the o200k_base file under its cache name, so test.sh takes that one file from
# it (litellm itself is not installed) and tests/test_integration_tokenizer.py points
# TIKTOKEN_CACHE_DIR at it. tiktoken checks the file's published SHA-256 when it reads it.
TIKTOKEN_VERSION=0.14.0
TIKTOKEN_DATA_LITELLM_VERSION=1.110.2
O200K_FILE=fb374d419588a4632f3f557e76b4b70aebbca790
LANGCHAIN_CORE_VERSION=1.8.1
LANGCHAIN_OPENAI_VERSION=1.7.4
LANGGRAPH_VERSION=1.2.22
# The OpenAI Agents SDK integration (tests/test_integration_openai_agents.py). openai-agents
# 0.24.0 needs starlette >= 1.3.1 (and, through mcp, sse-starlette, which takes its newest
# release that fits the interpreter: 3.5.1 on 3.10, 3.7.1 on 3.11+); STARLETTE_VERSION above
# satisfies both, so the one pin installs on every interpreter here, 3.10 included (pip check
# is clean on 3.10 and 3.13). It is installed in the same pip call as that pin, so pip resolves
# them together: on its own, pip takes the newest starlette (1.10, CPython 3.11+). The tool venv
# has it too, so the main mypy run checks the integration and its test.
OPENAI_AGENTS_VERSION=0.24.0
# zig links the extension against glibc 2.17 symbols, so the wheel is manylinux2014 (portable
# to any x86_64 Linux with glibc >= 2.17) instead of this host's glibc; maturin audits it.
# maturin's zig support takes ziglang < 0.13.
ZIGLANG_VERSION=0.12.1
# The recovery tests' look into a journal kept in Redis (tests/journal_store.py, run with
# CYCLES_TEST_JOURNAL_STORE=redis): the official client, test-only, because it is binary-safe
# and tells a missing key from an empty one, and the crash tests poll the journal every
# millisecond over one connection (redis-cli would be a process per look).
REDIS_PY_VERSION=8.1.0

log() { printf '== python: %s\n' "$*" >&2; }

# CPython >= 3.10 interpreters: the oldest first (the abi3 floor), then the newest.
usable() { "$1" -c 'import sys; sys.exit(0 if sys.implementation.name == "cpython" and sys.version_info >= (3, 10) else 1)' >/dev/null 2>&1; }
version_of() { "$1" -c 'import sys; print("%d.%d" % sys.version_info[:2])'; }
find_pythons() {
    if [[ -n "${CYCLES_PYTHON:-}" ]]; then
        usable "$CYCLES_PYTHON" || { echo "CYCLES_PYTHON=$CYCLES_PYTHON is not CPython >= 3.10" >&2; return 1; }
        echo "$CYCLES_PYTHON"
        return
    fi
    local found=() seen=" " c v
    for c in python3.10 python3.11 python3.12 python3.13 python3.14 \
             "$HOME"/.pyenv/versions/3.1[0-9]*/bin/python3 python3; do
        usable "$c" || continue
        v="$(version_of "$c")"
        [[ "$seen" == *" $v "* ]] && continue
        seen+="$v "
        found+=("$v $c")
    done
    [[ ${#found[@]} -gt 0 ]] || { echo "no CPython >= 3.10 found (set CYCLES_PYTHON)" >&2; return 1; }
    mapfile -t sorted < <(printf '%s\n' "${found[@]}" | sort -t. -k1,1n -k2,2n)
    echo "${sorted[0]#* }"
    [[ ${#sorted[@]} -gt 1 ]] && echo "${sorted[-1]#* }"
    return 0
}
mapfile -t PYTHONS < <(find_pythons)
[[ ${#PYTHONS[@]} -gt 0 ]] || exit 1
BUILD_PY="${PYTHONS[0]}"

# Tool venv (maturin, ruff, mypy; pytest for type-checking the tests), reused while the pins are unchanged.
TOOLS="$CACHE/tools"
STAMP="maturin==$MATURIN_VERSION ruff==$RUFF_VERSION mypy==$MYPY_VERSION pytest==$PYTEST_VERSION runcycles==$RUNCYCLES_VERSION anyio==$ANYIO_VERSION starlette==$STARLETTE_VERSION openai==$OPENAI_VERSION anthropic==$ANTHROPIC_VERSION tiktoken==$TIKTOKEN_VERSION openai-agents==$OPENAI_AGENTS_VERSION ziglang==$ZIGLANG_VERSION redis==$REDIS_PY_VERSION $(version_of "$BUILD_PY")"
if [[ ! -x "$TOOLS/bin/python" || "$(cat "$TOOLS/.stamp" 2>/dev/null)" != "$STAMP" ]]; then
    log "creating the tool venv $TOOLS"
    rm -rf "$TOOLS"
    "$BUILD_PY" -m venv "$TOOLS"
    "$TOOLS/bin/python" -m pip install -q --disable-pip-version-check \
        "maturin==$MATURIN_VERSION" "ruff==$RUFF_VERSION" "mypy==$MYPY_VERSION" \
        "pytest==$PYTEST_VERSION" "pytest-asyncio==$PYTEST_ASYNCIO_VERSION" \
        "runcycles==$RUNCYCLES_VERSION" "anyio==$ANYIO_VERSION" "starlette==$STARLETTE_VERSION" \
        "openai==$OPENAI_VERSION" "anthropic==$ANTHROPIC_VERSION" "tiktoken==$TIKTOKEN_VERSION" \
        "openai-agents==$OPENAI_AGENTS_VERSION" "ziglang==$ZIGLANG_VERSION" "redis==$REDIS_PY_VERSION"
    echo "$STAMP" >"$TOOLS/.stamp"
fi

WORK="$(mktemp -d "${TMPDIR:-/tmp}/cycles-python-test.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT

BUILD_ONLY="${CYCLES_PY_BUILD_ONLY:-0}"
if [[ "$BUILD_ONLY" != "1" ]]; then
    log "ruff check + format check; mypy --strict on the package (against its _native.pyi) and the bench, mypy on the tests"
    "$TOOLS/bin/ruff" check --no-cache "$PKG"
    "$TOOLS/bin/ruff" format --no-cache --check "$PKG"
    # (The LangChain integration and its test need CPython >= 3.11: checked below, against the
    # newest interpreter's venv.)
    NOLC=(--exclude 'cycles/integrations/langchain\.py$' --exclude 'tests/test_integration_langchain\.py$')
    (cd "$PKG" && "$TOOLS/bin/mypy" --strict --no-incremental --cache-dir=/dev/null "${NOLC[@]}" cycles \
        && "$TOOLS/bin/mypy" --strict --no-incremental --cache-dir=/dev/null bench \
        && "$TOOLS/bin/mypy" --no-incremental --cache-dir=/dev/null "${NOLC[@]}" cycles tests)
    # What users copy must type-check as written: the quick starts, extracted verbatim (line
    # numbers are the READMEs'), and the static checks of the public types.
    log "mypy --strict on the quick starts as written (READMEs, docs/integrations.md), and tests/typecheck_guarded.py"
    "$TOOLS/bin/python" "$PKG/scripts/readme_blocks.py" "$WORK/readme" "$ROOT/README.md" \
        "$PKG/README.md" "$ROOT/docs/integrations.md" >&2
    (cd "$PKG" && "$TOOLS/bin/mypy" --strict --no-incremental --cache-dir=/dev/null \
        "$WORK"/readme/*.py tests/typecheck_guarded.py)
    # The repository's own Python tooling, under the package's ruff settings: the fuzz tooling,
    # the artifact checks, the bench's trace summary, the recovery adapters (scripts without a
    # .py suffix) and the fidelity hooks (their mypy run needs schemathesis: fidelity/run.sh).
    log "ruff check + format check, mypy --strict on the repository's Python tooling (scripts/, conformance/)"
    ADAPTERS=()
    for f in "$ROOT"/conformance/adapters/*; do [[ "$f" == *.json ]] || ADAPTERS+=("$f"); done
    TOOLING=("$ROOT"/scripts/*.py "$ROOT"/scripts/verify/*.py "$ROOT"/conformance/bench/*.py
        "$ROOT"/conformance/fidelity/*.py "${ADAPTERS[@]}")
    "$TOOLS/bin/ruff" check --no-cache --config "$PKG/pyproject.toml" "${TOOLING[@]}"
    "$TOOLS/bin/ruff" format --no-cache --check --config "$PKG/pyproject.toml" "${TOOLING[@]}"
    STRICT=("$TOOLS/bin/mypy" --strict --no-incremental --cache-dir=/dev/null)
    for dir in scripts scripts/verify conformance/bench; do
        (cd "$ROOT/$dir" && "${STRICT[@]}" ./*.py)
    done
    # One run each: every adapter is a `__main__` to mypy.
    for f in "${ADAPTERS[@]}"; do "${STRICT[@]}" "$f"; done
fi

PROFILE=()
[[ "${CYCLES_PY_RELEASE:-0}" == "1" ]] && PROFILE=(--release)
log "building the portable wheel (maturin ${PROFILE[*]:-debug}, zig, manylinux2014)"
# Its own target dir: zig as the C compiler changes ring's build, and sharing the workspace's
# target dir would rebuild that dependency tree back and forth with every `cargo test`.
(cd "$PKG" && PATH="$TOOLS/bin:$PATH" CARGO_TARGET_DIR="$CARGO_TARGET_DIR/python-manylinux" \
    "$TOOLS/bin/maturin" build "${PROFILE[@]}" --interpreter "$BUILD_PY" \
    --zig --compatibility manylinux2014 --out "$WORK/wheels" --quiet) >&2
WHEEL="$(ls "$WORK"/wheels/*.whl)"
case "$WHEEL" in *-abi3-manylinux2014_*|*-abi3-*manylinux_2_17_*) ;;
    *) echo "not a portable abi3 manylinux2014 wheel: $WHEEL" >&2; exit 1 ;; esac
log "built $(basename "$WHEEL")"

# The tests run from a copy outside the source tree: `import cycles` can only find the wheel.
cp -r "$PKG/tests" "$WORK/tests"
export CYCLES_VECTORS="$ROOT/conformance/vectors/heartbeat.json"
export CYCLES_README="$PKG/README.md"
export CYCLES_ROOT_README="$ROOT/README.md"
export CYCLES_INTEGRATIONS_DOC="$ROOT/docs/integrations.md"
# The pinned Cycles spec and fixtures beside the clone (tests/conftest.py: shared_file).
export CYCLES_SHARED="$ROOT/../shared"
# The captured reference-server corpus lives in the shared folder next to the clone.
export CYCLES_REFERENCE_CORPUS="${CYCLES_REFERENCE_CORPUS:-$CYCLES_SHARED/fixtures/reference-server/exchanges.jsonl}"
export RUST_BACKTRACE=0

# tiktoken's o200k_base file, taken once from litellm's wheel (see TIKTOKEN_DATA_LITELLM_VERSION).
TIKTOKEN_CACHE="$CACHE/tiktoken-o200k-$TIKTOKEN_DATA_LITELLM_VERSION"
if [[ "$BUILD_ONLY" != "1" && ! -f "$TIKTOKEN_CACHE/$O200K_FILE" ]]; then
    log "taking tiktoken's o200k_base file from litellm==$TIKTOKEN_DATA_LITELLM_VERSION's wheel"
    "$TOOLS/bin/python" -m pip download -q --disable-pip-version-check --no-deps \
        "litellm==$TIKTOKEN_DATA_LITELLM_VERSION" -d "$WORK/litellm"
    mkdir -p "$TIKTOKEN_CACHE.tmp"
    "$TOOLS/bin/python" - "$WORK"/litellm/litellm-*.whl "$TIKTOKEN_CACHE.tmp" "$O200K_FILE" <<'PY'
import sys, zipfile
wheel, out, name = sys.argv[1:]
with zipfile.ZipFile(wheel) as z:
    data = z.read(f"litellm/litellm_core_utils/tokenizers/{name}")
with open(f"{out}/{name}", "wb") as f:
    f.write(data)
PY
    rm -rf "$TIKTOKEN_CACHE" && mv "$TIKTOKEN_CACHE.tmp" "$TIKTOKEN_CACHE"
fi
export CYCLES_TIKTOKEN_CACHE="$TIKTOKEN_CACHE"

status=0
# The suites run side by side, one pytest process per interpreter (and the reference-mode
# rerun): they mostly wait on loopback servers and timers (load average about 0.6 with one
# running), so running them one after another left the machine idle for minutes. Each writes
# its own log, printed whole when it ends.
pids=()
logs=()
suite() { # name command...
    local log="$WORK/pytest-$1.log"
    shift
    logs+=("$log")
    (cd "$WORK" && "$@") >"$log" 2>&1 &
    pids+=("$!")
}
for py in "${PYTHONS[@]}"; do
    v="$(version_of "$py")"
    VENV="$CACHE/test-venv-$v"
    log "fresh venv for CPython $v: install the wheel, pytest"
    rm -rf "$VENV"
    "$py" -m venv "$VENV"
    LANGCHAIN=()
    if "$py" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
        LANGCHAIN=("langchain-core==$LANGCHAIN_CORE_VERSION" "langchain-openai==$LANGCHAIN_OPENAI_VERSION"
            "langgraph==$LANGGRAPH_VERSION")
    fi
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check \
        "$WHEEL" "pytest==$PYTEST_VERSION" "pytest-asyncio==$PYTEST_ASYNCIO_VERSION" \
        "runcycles==$RUNCYCLES_VERSION" "anyio==$ANYIO_VERSION" "starlette==$STARLETTE_VERSION" \
        "openai==$OPENAI_VERSION" "anthropic==$ANTHROPIC_VERSION" "tiktoken==$TIKTOKEN_VERSION" \
        "openai-agents==$OPENAI_AGENTS_VERSION" "redis==$REDIS_PY_VERSION" "${LANGCHAIN[@]}"
    if [[ "$BUILD_ONLY" != "1" && ${#LANGCHAIN[@]} -gt 0 ]]; then
        # --python-version: as this interpreter runs it (mypy's own would be the tool venv's 3.10,
        # under which the libraries type differently).
        log "CPython $v: mypy --strict on the LangChain integration and its test (against this venv)"
        (cd "$PKG" && "$TOOLS/bin/mypy" --strict --no-incremental --cache-dir=/dev/null \
            --python-version "$v" --python-executable "$VENV/bin/python" cycles/integrations/langchain.py \
            tests/test_integration_langchain.py) || status=1
    fi
    if [[ "$BUILD_ONLY" == "1" ]]; then
        ln -sfn "$VENV" "$CACHE/test-venv"
        continue
    fi
    log "CPython $v: pytest started (its output follows when it ends)"
    # -p no:cacheprovider: the side-by-side runs share the test folder.
    suite "$v" "$VENV/bin/python" -m pytest -q -p no:cacheprovider "$WORK/tests"
    # The reference mode is the server's dialect, not the interpreter's: once, on the newest.
    if [[ "$py" == "${PYTHONS[-1]}" ]]; then
        log "CPython $v: client and lifecycle suites again, against the server's reference mode (started)"
        suite "$v-reference" env CYCLES_TEST_SERVER_MODE=reference "$VENV/bin/python" -m pytest -q \
            -p no:cacheprovider "$WORK/tests/test_operations.py" "$WORK/tests/test_lifecycle.py" \
            "$WORK/tests/test_lifecycle_outcomes.py"
    fi
    # The newest interpreter's venv (wheel + pytest installed) stays for the recovery
    # conformance adapter (conformance/adapters/python), which scripts/test-all.sh runs next.
    ln -sfn "$VENV" "$CACHE/test-venv"
done
for i in "${!pids[@]}"; do
    wait "${pids[$i]}" || { status=1; echo "FAILED: $(basename "${logs[$i]}" .log)" >&2; }
    log "$(basename "${logs[$i]}" .log):"
    cat "${logs[$i]}"
done
exit "$status"
