#!/usr/bin/env bash
# Runs every test of every language in this repository, the same way CI does.
# Usage: scripts/test-all.sh            (from anywhere inside the clone)
# Needs: the language toolchains (Rust, python3, Node 20, cc + CMake + valgrind, JDK 17+ with
# Maven); installs the rest (rustfmt, clippy, pinned pip/npm/cargo tools, schemathesis) itself.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/cycles-target}"
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"

step() { printf '\n==> %s\n' "$*"; }

step "toolchain components"
rustup component add rustfmt clippy >/dev/null 2>&1 || true

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy (warnings denied)"
cargo clippy --workspace --all-targets --locked -- -D warnings

step "cargo test (all Rust tests)"
cargo test --workspace --locked

step "core client and lifecycle suites again, against the local server's reference mode"
# The reference server writes explicit nulls, null last-page cursors, 500s on routing errors...
# (conformance/server/README.md); these suites must pass against that dialect too.
CYCLES_TEST_SERVER_MODE=reference cargo test --locked -p cycles-core \
    --test operations --test errors --test guard --test lease

step "recovery conformance: durable claim (conformance/adapters/rust-map.json)"
# The adapter runs each mapped test as `cargo test -p cycles-core --test X -- --exact NAME`;
# building exactly that package selection first makes each of those runs a quick no-op build.
cargo build -q --locked -p cycles-conformance-runner
cargo test -q --locked -p cycles-core --no-run
recovery_report="${CYCLES_RECOVERY_REPORT:-$CARGO_TARGET_DIR/recovery-conformance/recovery-conformance.json}"
if "$CARGO_TARGET_DIR/debug/cycles-conformance" --claim durable \
    --report-json "$recovery_report" --implementation cycles-sdk/rust-core \
    --adapter conformance/adapters/rust; then
  echo "recovery conformance report: $recovery_report"
else
  echo "recovery conformance FAILED; report: $recovery_report" >&2
  exit 1
fi

step "Python: lint, type-check, build the wheel, install it into clean venvs, pytest"
bash python/scripts/test.sh

step "recovery conformance: durable claim of the Python SDK (conformance/adapters/python-map.json)"
# python/scripts/test.sh leaves <cache>/test-venv: the newest CPython's venv with the wheel.
py_venv="${CYCLES_PY_CACHE:-$HOME/.cache/cycles-python}/test-venv"
py_report="${CYCLES_PY_RECOVERY_REPORT:-$CARGO_TARGET_DIR/recovery-conformance/recovery-conformance-python.json}"
if "$CARGO_TARGET_DIR/debug/cycles-conformance" --claim durable \
    --report-json "$py_report" --implementation cycles-sdk/python \
    --adapter conformance/adapters/python --python "$py_venv/bin/python"; then
  echo "Python recovery conformance report: $py_report"
else
  echo "Python recovery conformance FAILED; report: $py_report" >&2
  exit 1
fi

step "C: libcycles header drift, installed tree, CTest plain / valgrind / ASAN+UBSan, corpus, lifetime, journal interop, quick start"; bash bindings/c/scripts/test.sh

step "recovery conformance: durable claim of the C library (conformance/adapters/c-map.json)"
# bindings/c/scripts/test.sh leaves its plain CTest build in $CARGO_TARGET_DIR/cycles-c-tests/build.
c_report="${CYCLES_C_RECOVERY_REPORT:-$CARGO_TARGET_DIR/recovery-conformance/recovery-conformance-c.json}"
if "$CARGO_TARGET_DIR/debug/cycles-conformance" --claim durable \
    --report-json "$c_report" --implementation cycles-sdk/c \
    --adapter conformance/adapters/c --build-dir "$CARGO_TARGET_DIR/cycles-c-tests/build"; then
  echo "C recovery conformance report: $c_report"
else
  echo "C recovery conformance FAILED; report: $c_report" >&2
  exit 1
fi

step "Node: build the addon, tsc, node:test suite (count checked), drift check, install check"
bash node/scripts/test.sh

step "recovery conformance: durable claim of the Node package (conformance/adapters/node-map.json)"
# node/scripts/test.sh leaves the package built in place (node/dist, node/native/*.node).
node_report="${CYCLES_NODE_RECOVERY_REPORT:-$CARGO_TARGET_DIR/recovery-conformance/recovery-conformance-node.json}"
if "$CARGO_TARGET_DIR/debug/cycles-conformance" --claim durable \
    --report-json "$node_report" --implementation cycles-sdk/node \
    --adapter conformance/adapters/node; then
  echo "Node recovery conformance report: $node_report"
else
  echo "Node recovery conformance FAILED; report: $node_report" >&2
  exit 1
fi

step "JVM: jar with libcycles_jvm, JUnit suite (-Xcheck:jni, both server modes), exit test and quick start with plain java"; bash java/scripts/test.sh

step "recovery conformance: durable claim of the JVM binding (conformance/adapters/jvm-map.json)"
# java/scripts/test.sh leaves java/target built (test classes, native library); each mapped
# test runs alone through offline Surefire.
jvm_report="${CYCLES_JVM_RECOVERY_REPORT:-$CARGO_TARGET_DIR/recovery-conformance/recovery-conformance-jvm.json}"
if "$CARGO_TARGET_DIR/debug/cycles-conformance" --claim durable \
    --report-json "$jvm_report" --implementation cycles-sdk/jvm --adapter conformance/adapters/jvm; then
  echo "JVM recovery conformance report: $jvm_report"
else
  echo "JVM recovery conformance FAILED; report: $jvm_report" >&2
  exit 1
fi

step "local server fidelity against the OpenAPI spec (schemathesis)"
bash conformance/fidelity/run.sh

step "all test suites passed"
