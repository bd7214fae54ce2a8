#!/usr/bin/env bash
# Fidelity check: fuzz the local Cycles server against the runtime spec with schemathesis.
# Usage: conformance/fidelity/run.sh [extra schemathesis args...]
# Env: FIDELITY_MAX_EXAMPLES (default 100), FIDELITY_PYTHON, FIDELITY_VENV (default
# ~/.cache/cycles-fidelity-venv-<python version>), FIDELITY_FAULT (harness self-test, see below).
set -euo pipefail

ROOT="$(git -C "$(dirname "$0")" rev-parse --show-toplevel)"
SPEC="$ROOT/../shared/spec/cycles-protocol-v0.yaml"
[ -f "$SPEC" ] || {
  echo "missing ../shared/spec/cycles-protocol-v0.yaml (the pinned Cycles runtime API 0.1.25.16, expected beside the clone) at $SPEC;" \
    "upstream: https://github.com/runcycles/cycles-protocol/blob/main/cycles-protocol-v0.yaml (see docs/authorities.md)" >&2
  exit 2
}
# Prefer a newer CPython: 3.11.7's ast.parse can raise "AST constructor recursion depth
# mismatch" inside hypothesis' strategy repr, which schemathesis reports as a runtime error.
PY="${FIDELITY_PYTHON:-}"
if [ -z "$PY" ]; then
  for cand in python3.13 python3.12 "$HOME"/.pyenv/versions/3.1[2-9]*/bin/python3 python3; do
    if "$cand" -c 'import sys; sys.exit(0)' >/dev/null 2>&1; then PY="$cand"; break; fi
  done
fi
PYVER="$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
VENV="${FIDELITY_VENV:-$HOME/.cache/cycles-fidelity-venv-$PYVER}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/cycles-target}"
MAX_EXAMPLES="${FIDELITY_MAX_EXAMPLES:-100}"

if [ ! -x "$VENV/bin/schemathesis" ]; then
  "$PY" -m venv "$VENV"
  "$VENV/bin/pip" install -q --upgrade pip
  "$VENV/bin/pip" install -q 'schemathesis>=4,<5'
fi
# The hooks type-checked against the schemathesis installed here, with the pinned mypy the
# Python suite installs (python/scripts/test.sh, which test-all.sh runs before this).
MYPY="${CYCLES_PY_CACHE:-$HOME/.cache/cycles-python}/tools/bin/mypy"
[ -x "$MYPY" ] || { echo "no $MYPY: run python/scripts/test.sh first (it installs the pinned mypy)" >&2; exit 2; }
(cd "$(dirname "$0")" && "$MYPY" --strict --no-incremental --cache-dir=/dev/null \
  --python-executable "$VENV/bin/python" hooks.py)

(cd "$ROOT" && cargo build -q -p cycles-local-server --example serve)
WORK="$(mktemp -d)"
SERVER_PID=""
cleanup() {
  if [ -n "$SERVER_PID" ]; then kill "$SERVER_PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

# Huge tenant budgets in two units so fuzzed amounts keep succeeding (every derived scope of
# an acme subject includes tenant:acme, so deeper subjects reach the success paths too).
cat > "$WORK/config.json" <<'JSON'
{
  "budgets": [
    {"scope": "tenant:acme", "unit": "USD_MICROCENTS", "allocated": 9000000000000000000},
    {"scope": "tenant:acme", "unit": "TOKENS", "allocated": 9000000000000000000}
  ]
}
JSON
"$CARGO_TARGET_DIR/debug/examples/serve" "$WORK/config.json" > "$WORK/url" 2> "$WORK/server.log" &
SERVER_PID=$!
for _ in $(seq 1 100); do
  [ -s "$WORK/url" ] && break
  sleep 0.1
done
URL="$(head -1 "$WORK/url")"
[ -n "$URL" ] || { echo "server did not start" >&2; cat "$WORK/server.log" >&2; exit 2; }
echo "server at $URL"
# Self-test of the harness: FIDELITY_FAULT='{"operation":"decide","fault":{"kind":"malformed_success","shape":"wrong_field_type"}}'
# must make this script fail.
if [ -n "${FIDELITY_FAULT:-}" ]; then
  curl -fsS -X POST -H 'content-type: application/json' -d "$FIDELITY_FAULT" "$URL/__cycles/faults" >/dev/null
fi

# Checks:
#  - status_code_conformance, content_type_conformance, response_schema_conformance,
#    response_headers_conformance, not_a_server_error: the server must stay inside the spec.
# Not enabled, on purpose:
#  - negative_data_rejection / positive_data_acceptance: the server may (and, like the reference
#    server, does) reject subject values outside ^[a-zA-Z0-9_.-]+$ with 400, which the spec
#    allows in prose but does not encode as a schema pattern, so positive fuzzed subjects are
#    legitimately rejected; and several query parameters are free strings the spec tells servers
#    to ignore when unknown/blank.
#  - use_after_free / ensure_resource_availability / ignored_auth: stateful checks that assume
#    REST resource semantics the protocol does not follow (e.g. a released reservation still
#    exists; evidence is public by design).
export CYCLES_URL="$URL" SCHEMATHESIS_HOOKS=hooks PYTHONPATH="$(cd "$(dirname "$0")" && pwd)${PYTHONPATH:+:$PYTHONPATH}"
"$VENV/bin/schemathesis" run "$SPEC" \
  --url "$URL" \
  --header "X-Cycles-API-Key: cycles-local-key" \
  --checks status_code_conformance,content_type_conformance,response_schema_conformance,response_headers_conformance,not_a_server_error \
  --max-examples "$MAX_EXAMPLES" \
  --phases examples,coverage,fuzzing \
  --workers 2 \
  --seed 1 \
  --no-color \
  "$@" && STATUS=0 || STATUS=$?

# How deep the fuzzing got: responses per operation and status (from the server's request log).
curl -fsS "$URL/__cycles/requests" | "$VENV/bin/python" -c '
import collections, json, sys
counts = collections.Counter((r["operation"] or "-", r["status"]) for r in json.load(sys.stdin))
for (op, status), n in sorted(counts.items(), key=lambda kv: (kv[0][0], str(kv[0][1]))):
    print(f"  {op:22} {status}: {n}")
' || true
exit "$STATUS"
