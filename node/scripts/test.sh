#!/usr/bin/env bash
# The Node package's whole check: build (addon, loader, TypeScript), the generated-surface
# drift check, the node:test suite with its test count checked, the install check.
# The suite includes the fake provider's tests with the real model client libraries (their own
# pinned folder, test/integrations), the recovery conformance tests and the journal interop, which drains with
# the Rust CLI (built here) and the Python test venv python/scripts/test.sh leaves (run it
# first; a missing venv fails the interop tests).
# Honours CARGO_TARGET_DIR and CYCLES_PY_CACHE. Usage: node/scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."

# node --test passes silently when nothing matches: the suite must run exactly this many.
EXPECTED_TESTS=112
# The client and lifecycle suites again against the local server's reference mode.
REFERENCE_SUITES=(test/operations.test.mjs test/lifecycle.test.mjs)
EXPECTED_REFERENCE_TESTS=41
# The fake model provider with the real model client libraries, the integrations guarding them (openai, anthropic, ai, langchain, express), the tokenizers and their quick starts (test/integrations).
EXPECTED_INTEGRATION_TESTS=48

bash scripts/build.sh
(cd .. && cargo build -q --locked -p cycles-cli)
export CYCLES_NODE_INTEROP_CLI="${CARGO_TARGET_DIR:-$(cd .. && pwd)/target}/debug/cycles"
export CYCLES_NODE_INTEROP_PYTHON="${CYCLES_PY_CACHE:-$HOME/.cache/cycles-python}/test-venv/bin/python"
if [ ! -x "$CYCLES_NODE_INTEROP_PYTHON" ]; then
  echo "no Python test venv at $CYCLES_NODE_INTEROP_PYTHON (the journal interop needs it): run python/scripts/test.sh first" >&2
  exit 1
fi

# The generated .d.ts is committed: a build that changes them fails here.
if git rev-parse --git-dir >/dev/null 2>&1; then
  if ! git diff --exit-code -- native/native.d.ts; then
    echo "node/native/native.d.ts drifted from the addon: commit the regenerated files" >&2
    exit 1
  fi
fi

log="$(mktemp)"
trap 'rm -f "$log"' EXIT

# Runs node --test on the given files; fails unless exactly $1 tests ran and all passed.
run_suite() {
  local expected="$1"
  shift
  set +e
  node --test --test-reporter=tap "$@" >"$log" 2>&1
  local status=$?
  set -e
  grep -E '^(not ok|# (tests|pass|fail|skipped|todo|cancelled) )' "$log" || true
  pass="$(sed -n 's/^# pass //p' "$log" | tail -1)"
  local fail
  fail="$(sed -n 's/^# fail //p' "$log" | tail -1)"
  if [ "$status" -ne 0 ] || [ "${fail:-1}" != 0 ]; then
    cat "$log" >&2
    echo "node tests failed" >&2
    exit 1
  fi
  if [ "${pass:-0}" != "$expected" ]; then
    echo "expected $expected node tests to pass, ${pass:-0} did" >&2
    exit 1
  fi
}

run_suite "$EXPECTED_TESTS" test/*.test.mjs
total="$pass"
echo "-- again against the local server's reference mode"
CYCLES_TEST_SERVER_MODE=reference run_suite "$EXPECTED_REFERENCE_TESTS" "${REFERENCE_SUITES[@]}"
total=$((total + pass))
# The real model client libraries are test-only dependencies, pinned in their own folder's
# package.json and lock (not this package's devDependencies), installed into that folder.
if [ ! -d test/integrations/node_modules/openai ] \
  || [ test/integrations/package-lock.json -nt test/integrations/node_modules/.package-lock.json ]; then
  (cd test/integrations && npm ci --no-audit --no-fund --prefer-offline)
fi
echo "-- the integrations with the real openai, @anthropic-ai/sdk, ai, @langchain/* and express packages, against the fake provider"
run_suite "$EXPECTED_INTEGRATION_TESTS" test/integrations/*.test.mjs
total=$((total + pass))

bash scripts/install-check.sh
echo "${total} passed, 0 failed"
