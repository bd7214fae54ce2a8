#!/usr/bin/env bash
# Runs every test of every language in this repository, the same way CI does.
# Usage: scripts/test-all.sh            (from anywhere inside the clone)
# Needs: the language toolchains (Rust, python3, Node 20, cc + CMake + valgrind, JDK 17+ with
# Maven); installs the rest (rustfmt, clippy, redis-server, pinned pip/npm/cargo tools,
# schemathesis) itself.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/cycles-target}"
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"

# Each step prints the seconds since the start, so a slow step shows in any CI log.
step() { printf '\n==> [%ds] %s\n' "$SECONDS" "$*"; }

step "toolchain components"
rustup component add rustfmt clippy >/dev/null 2>&1 || true

# The Redis journal store's tests (core/tests/journal_redis.rs) start their own redis-server.
if ! command -v redis-server >/dev/null; then
    echo "installing redis-server (Debian's package) for the Redis journal tests"
    SUDO=""; [[ $(id -u) -eq 0 ]] || SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends redis-server >/dev/null
fi

step "cargo fmt --check"
cargo fmt --all -- --check
cargo fmt --manifest-path fuzz/Cargo.toml -- --check   # its own workspace (scripts/fuzz.sh)

step "cargo clippy (warnings denied)"
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo clippy --manifest-path fuzz/Cargo.toml --all-targets --locked -- -D warnings   # its own workspace

step "cargo doc (rustdoc warnings denied: no broken or private intra-doc links)"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --locked -q

step "host models: generated from core's types, drift check (bindings/codegen)"
cargo run -q --locked -p cycles-codegen -- --check

step "cargo test (all Rust tests)"
cargo test --workspace --locked

step "fuzz smoke: every fuzz target 5 s from seeds of the vectors and the reference corpus (scripts/fuzz.sh)"
CYCLES_FUZZ_BUILD=dev bash scripts/fuzz.sh all 5   # the dev build: a fraction of the cold cost
# `fuzz.sh keep` on a scratch copy of a kept set: every edge kept, a failed merge changes nothing.
CYCLES_FUZZ_BUILD=dev bash scripts/fuzz-keep-check.sh

step "core client and lifecycle suites again, against the local server's reference mode"
# The reference server writes explicit nulls, null last-page cursors, 500s on routing errors...
# (conformance/server/README.md); these suites must pass against that dialect too.
CYCLES_TEST_SERVER_MODE=reference cargo test --locked -p cycles-core \
    --test operations --test errors --test guard --test lease

step "Python: lint, type-check, build the wheel, install it into clean venvs, pytest"
bash python/scripts/test.sh

step "C: libcycles header drift, installed tree, CTest plain / valgrind / ASAN+UBSan, corpus, lifetime, journal interop, quick start"; bash bindings/c/scripts/test.sh

step "Node: build the addon, tsc, node:test suite (count checked), drift check, install check"
bash node/scripts/test.sh

# The platform checks (cross builds in their own target dirs, the arm64 root, qemu runs) share
# nothing with the steps after this one but the CPU, and those steps mostly wait (JVM starts,
# recovery scenarios killing and restarting processes): run beside them, log printed at the end.
step "platforms, started in the background: the aarch64 glibc C quick start in a Debian arm64 root (qemu-user), the static musl CLI's demo, the aarch64 wheel and the Kotlin jar's quick start there too (scripts/verify-platforms.sh --ci; its log follows the last step)"
platforms_log="$(mktemp "${TMPDIR:-/tmp}/cycles-platforms.XXXXXX")"
# In a process group of its own (setsid), so that a failing step ends the run with the whole
# background check (cargo, qemu), not only its script.
setsid bash scripts/verify-platforms.sh --ci >"$platforms_log" 2>&1 &
platforms_pid=$!
platforms_printed=0
# A failing step ends the run: the background check is stopped, and what it logged so far is
# shown (else a failure of its own, or how far it got, would be lost with the log file).
on_exit() {
    local status=$?
    if [[ $status != 0 && $platforms_printed == 0 && -s "$platforms_log" ]]; then
        echo "== the background platform check, stopped by the failure above; the last 40 lines of its log:" >&2
        tail -n 40 "$platforms_log" >&2
    fi
    kill -- -"$platforms_pid" 2>/dev/null || true
    rm -f "$platforms_log"
}
trap on_exit EXIT

step "JVM: jar with libcycles_jvm, JUnit suite (-Xcheck:jni, both server modes), exit test and quick start with plain java"; bash java/scripts/test.sh

step "Kotlin (uniffi): libcycles_uniffi, the generated Kotlin and Swift drift check, JUnit suite on JDK 17 (counts checked, both server modes), exit test and quick start with plain java"
bash kotlin/scripts/test.sh

step "Spring Boot: the starter on the SDK jar, its JUnit suite (counts checked) against the local server, the Boot quick start with java -jar"
bash spring/scripts/test.sh

step "local server fidelity against the OpenAPI spec (schemathesis)"
bash conformance/fidelity/run.sh

step "cross-language matrix: vectors, corpus, differential, journal interop, recovery adapters (scripts/matrix.sh)"
bash scripts/matrix.sh

step "crash loop across languages: 15 seeded iterations, a writer SIGKILLed at five points, a different face drains (scripts/crashloop.sh)"
bash scripts/crashloop.sh 32 15

step "crash loop on the Redis journal: 10 seeded iterations, each writer's own directory removed after its kill, Redis SIGKILLed and restarted before or during some drains (scripts/crashloop.sh --redis)"
bash scripts/crashloop.sh 33 10 --redis

step "load with faults, short: 500 concurrent guarded actions per face under the 1% fault mix, ledger-checked (scripts/load.sh)"
CYCLES_LOAD_COUNT=500 bash scripts/load.sh

step "platforms (scripts/verify-platforms.sh --ci, run beside the steps since the Node one): its log"
platforms_status=0
wait "$platforms_pid" || platforms_status=$?
cat "$platforms_log"
platforms_printed=1
[[ $platforms_status == 0 ]] || { echo "scripts/verify-platforms.sh --ci FAILED (status $platforms_status)" >&2; exit 1; }

step "all test suites passed"
