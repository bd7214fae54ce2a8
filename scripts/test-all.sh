#!/usr/bin/env bash
# Runs every test of every language in this repository, the same way CI does.
# Usage: scripts/test-all.sh            (from anywhere inside the clone)
# Needs: a Rust toolchain and python3; installs the rest (rustfmt, clippy, schemathesis) itself.
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

step "local server fidelity against the OpenAPI spec (schemathesis)"
bash conformance/fidelity/run.sh

step "all test suites passed"
