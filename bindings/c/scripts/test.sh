#!/usr/bin/env bash
# The C binding's tests: build libcycles, install it into a temp prefix (scripts/package.sh),
# check the committed header against cbindgen, compile the header as C11 and C++, then run the
# CTest suite (every program shared and static) plain, under valgrind and under ASAN+UBSan,
# each asserting how many tests ran (vectors, lifecycle, the reference-server corpus, and the
# recovery conformance tests); the process-lifetime programs and the journal interop with the
# Rust CLI and the Python wheel (plain); the valgrind and ASAN runs again against the release
# library users link (scripts/package.sh's release build); then the README.md C quick start,
# extracted, compiled through pkg-config and run under valgrind, against the debug and the
# release library. Cargo builds in $CARGO_TARGET_DIR.
# The install tree and the plain CTest build are kept in this checkout's tree
# (bindings/c/scripts/tests-tree.sh: $CARGO_TARGET_DIR/cycles-c-tests/<checkout key>;
# CYCLES_C_TESTS_DIR overrides): conformance/adapters/c runs the recovery tests from there.
# The recovery tests (recovery_*, forked and SIGKILLed children) and the fork tests run plain
# and under ASAN, not under valgrind.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../../.." && pwd)"
C="$ROOT/bindings/c"
log() { printf '== c: %s\n' "$*" >&2; }
WORK="$(mktemp -d "${TMPDIR:-/tmp}/cycles-c-test.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
BASE_TESTS=8   # vectors, lifecycle, corpus, async; shared and static
FORK_TESTS=2   # not under valgrind (it checks the forked child, which cannot clean up)
RECOVERY_TESTS=16
CORPUS="${CYCLES_REFERENCE_CORPUS:-$ROOT/../shared/fixtures/reference-server/exchanges.jsonl}"
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
KEEP="$(bash "$C/scripts/tests-tree.sh")"
# The Python direction of the journal interop uses the test venv python/scripts/test.sh leaves
# (CI runs it before this script); it must exist.
PY_VENV_PYTHON="${CYCLES_PY_CACHE:-$HOME/.cache/cycles-python}/test-venv/bin/python"

# The C toolchain the suite needs, and the redis-server and redis-cli the recovery tests run
# (the Redis record-keys test always, every journal test with CYCLES_TEST_JOURNAL_STORE=redis);
# CI images normally have them, a bare one gets them from apt.
missing=()
for tool in cc c++ cmake valgrind pkg-config nm readelf redis-server redis-cli; do
    command -v "$tool" >/dev/null || missing+=("$tool")
done
if [[ ${#missing[@]} -gt 0 ]]; then
    log "installing the C toolchain (missing: ${missing[*]})"
    SUDO=""; [[ $(id -u) -eq 0 ]] || SUDO="sudo"
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq build-essential cmake valgrind pkg-config binutils redis-server >/dev/null
fi

log "header: regenerate with the pinned cbindgen and compare"
bash "$C/scripts/header.sh" --check

log "build and install (debug profile) into $KEEP/prefix"
(cd "$ROOT" && cargo build -q -p cycles-c -p cycles-cli --locked)
rm -rf "$KEEP/prefix"
mkdir -p "$KEEP"
CYCLES_PACKAGE_PROFILE=dev "$ROOT/scripts/package.sh" "$KEEP/prefix" c
export PKG_CONFIG_PATH="$KEEP/prefix/c/lib/pkgconfig"
LIB="$KEEP/prefix/c/lib"
readelf -d "$LIB/libcycles.so" | grep -q 'SONAME.*\[libcycles.so.0\]' || { echo "SONAME is not libcycles.so.0" >&2; exit 1; }
exported="$(nm -D --defined-only "$LIB/libcycles.so" | awk '$2 == "T" {print $3}' | grep -vc '^cycles_' || true)"
[[ "$exported" == 0 ]] || { echo "libcycles.so exports $exported non-cycles_ functions" >&2; exit 1; }

log "header compiles as C11 (-Wall -Wextra -Werror -pedantic) and as C++"
printf '#include <cycles.h>\nint main(void) { return CYCLES_OK; }\n' >"$WORK/h.c"
cp "$WORK/h.c" "$WORK/h.cpp"
cc -std=c11 -Wall -Wextra -Werror -pedantic $(pkg-config --cflags cycles) -c "$WORK/h.c" -o "$WORK/h.o"
c++ -std=c++17 -Wall -Wextra -Werror -pedantic $(pkg-config --cflags cycles) -c "$WORK/h.cpp" -o "$WORK/hpp.o"

run_ctest() { # name build-dir expected-count cmake-args...
    local name="$1" dir="$2" expected="$3"
    shift 3
    log "ctest ($name)"
    # A kept build dir may come from a clone at another path: CMake refuses a cache made for
    # another source dir, and the programs are cheap to rebuild.
    rm -rf "$dir"
    cmake -S "$C/tests" -B "$dir" -DCYCLES_VECTORS="$ROOT/conformance/vectors" -DCYCLES_CORPUS="$CORPUS" "$@" >/dev/null
    cmake --build "$dir" -j2 >/dev/null
    (cd "$dir" && ctest --output-on-failure --no-tests=error -j2) | tee "$dir/ctest.log"
    grep -q "100% tests passed, 0 tests failed out of $expected" "$dir/ctest.log" ||
        { echo "expected $expected tests to pass ($name)" >&2; exit 1; }
}

VALGRIND="valgrind;--quiet;--suppressions=$C/tests/valgrind.supp;--error-exitcode=1;--leak-check=full;--errors-for-leak-kinds=definite,possible;--show-leak-kinds=definite,possible"
ALL=$((BASE_TESTS + FORK_TESTS + RECOVERY_TESTS))
run_ctest plain "$KEEP/build" "$ALL"
log "process lifetime: idle client, pending record, unfinished guard, event callback; each exits by itself"
for mode in idle pending guard callback; do
    start=$(date +%s%N)
    status=0
    timeout 10 "$KEEP/build/lifetime_shared" "$mode" >/dev/null || status=$?
    ms=$(( ($(date +%s%N) - start) / 1000000 ))
    [[ $status == 0 && $ms -lt 5000 ]] || { echo "lifetime $mode: status $status after $ms ms" >&2; exit 1; }
    echo "lifetime $mode: exit 0 in $ms ms"
done

log "journal interop: C <-> Rust CLI <-> Python wheel ($PY_VENV_PYTHON)"
[[ -x "$PY_VENV_PYTHON" ]] || { echo "no Python test venv at $PY_VENV_PYTHON: run python/scripts/test.sh first" >&2; exit 1; }
"$KEEP/build/interop_shared" "$TARGET/debug/cycles" "$PY_VENV_PYTHON" | tee "$WORK/interop.log" | grep '^interop'
grep -q '^interop: 6 cases: ok$' "$WORK/interop.log" || { echo "journal interop did not finish" >&2; exit 1; }

run_ctest valgrind "$WORK/build-valgrind" "$BASE_TESTS" -DCYCLES_WRAPPER="$VALGRIND" -DCYCLES_RECOVERY=OFF
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1 \
    run_ctest asan "$WORK/build-asan" "$ALL" -DCMAKE_C_FLAGS="-fsanitize=address,undefined -fno-omit-frame-pointer -g"

# What users link is the release build (cargo-zigbuild, glibc 2.17): the valgrind and ASAN runs
# again against it, as docs/reliability.md says. Built with line tables and symbols kept (the
# same optimised code; debug info does not change it) so that reports name their frames and
# valgrind.supp's entries match; in a target dir of its own, so the fingerprint never fights
# scripts/package.sh's stripped release build.
log "release library (line tables, symbols kept): build and install into $KEEP/release"
CARGO_TARGET_DIR="$TARGET/c-release-debuginfo" CARGO_PROFILE_RELEASE_DEBUG=line-tables-only \
    CARGO_PROFILE_RELEASE_STRIP=none CYCLES_PACKAGE_PROFILE=release \
    "$ROOT/scripts/package.sh" "$KEEP/release" c >/dev/null
PKG_CONFIG_PATH="$KEEP/release/c/lib/pkgconfig" run_ctest "valgrind, release library" \
    "$WORK/build-valgrind-release" "$BASE_TESTS" -DCYCLES_WRAPPER="$VALGRIND" -DCYCLES_RECOVERY=OFF
PKG_CONFIG_PATH="$KEEP/release/c/lib/pkgconfig" ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1 \
    run_ctest "asan, release library" "$WORK/build-asan-release" "$ALL" \
    -DCMAKE_C_FLAGS="-fsanitize=address,undefined -fno-omit-frame-pointer -g"

log "README.md C quick start (docs/c.md keeps the same copy): extracted, compiled through pkg-config (shared and static), run under valgrind"
bash "$C/scripts/quickstart.sh" >"$WORK/quickstart.c"
cc "$WORK/quickstart.c" $(pkg-config --cflags --libs cycles) -Wl,-rpath,"$(pkg-config --variable=libdir cycles)" -o "$WORK/quickstart"
cc "$WORK/quickstart.c" $(pkg-config --static --cflags cycles) "$LIB/libcycles.a" \
    $(pkg-config --static --libs-only-l cycles | sed 's/-lcycles//') -o "$WORK/quickstart-static"
out="$(valgrind --quiet --suppressions="$C/tests/valgrind.supp" --error-exitcode=1 --leak-check=full --errors-for-leak-kinds=definite,possible "$WORK/quickstart")"
grep -q '^charged 420000$' <<<"$out" || { echo "quick start printed: $out" >&2; exit 1; }
log "the quick start against the release library, under valgrind"
REL_PC="$KEEP/release/c/lib/pkgconfig"
cc "$WORK/quickstart.c" $(PKG_CONFIG_PATH="$REL_PC" pkg-config --cflags --libs cycles) \
    -Wl,-rpath,"$(PKG_CONFIG_PATH="$REL_PC" pkg-config --variable=libdir cycles)" -o "$WORK/quickstart-release"
out="$(valgrind --quiet --suppressions="$C/tests/valgrind.supp" --error-exitcode=1 --leak-check=full --errors-for-leak-kinds=definite,possible "$WORK/quickstart-release")"
grep -q '^charged 420000$' <<<"$out" || { echo "release quick start printed: $out" >&2; exit 1; }
"$WORK/quickstart-static" | grep -q '^charged 420000$'
log "ok"
