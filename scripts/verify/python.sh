#!/usr/bin/env bash
# The Python artifacts of a scripts/package.sh OUT, installed and run on their platforms:
#
#   scripts/verify/python.sh OUT ARM64_ROOT [--ci]
#
# - every wheel in OUT/python: its platform tag, ELF machine, NEEDED libraries and glibc
#   symbol versions (scripts/package/python.sh check_python_wheel);
# - the x86_64 manylinux wheel: installed in a fresh venv here; the package README's lifecycle
#   quick start, `cycles demo`, and `cycles serve` answering and stopping on SIGINT;
# - the aarch64 manylinux wheel: installed in a fresh venv of the arm64 root's own python3
#   (Debian bookworm, CPython 3.11, run by qemu-aarch64 through binfmt_misc); the quick start
#   and `cycles demo` (with a 60 s request timeout: emulation on a loaded machine is slow);
# - the musllinux wheels: checked only (no musl CPython here);
# - the sdist (not under --ci): `pip install` from a fresh venv, building the extension from
#   the sdist alone (a dev-profile build unless CYCLES_VERIFY_SDIST_PROFILE=release), then the
#   quick start.
# Under --ci the aarch64 manylinux wheel is required (and any other found is run too); otherwise each wheel found is
# run and the missing ones are reported. Needs root (chroot, a private mount namespace).
set -euo pipefail
REPO="$(cd "$(dirname "$0")/../.." && pwd)"
ROOT="$REPO"  # what scripts/package/*.sh call the repository
[[ $# -ge 2 ]] || { echo "usage: scripts/verify/python.sh OUT ARM64_ROOT [--ci]" >&2; exit 2; }
OUT="$(cd "$1" && pwd)"
ARM64_ROOT="$2"
CI=0
[[ "${3:-}" == --ci ]] && CI=1
log() { printf '== verify python: %s\n' "$*" >&2; }
# shellcheck source=../package/common.sh
source "$REPO/scripts/package/common.sh"
# shellcheck source=../package/python.sh
source "$REPO/scripts/package/python.sh"

WORK="$(mktemp -d "${TMPDIR:-/tmp}/cycles-verify-python.XXXXXX")"
INROOT=""
cleanup() {
    rm -rf "$WORK"
    [[ -n "$INROOT" ]] && rm -rf "${ARM64_ROOT:?}$INROOT"
    return 0
}
trap cleanup EXIT

# The first existing path of a glob's expansion, or nothing.
first() { local f; for f in "$@"; do [[ -e "$f" ]] && { echo "$f"; return; }; done; return 0; }
declare -A WHEEL
missing=()
for platform in "${ALL_PLATFORMS[@]}"; do
    WHEEL[$platform]="$(first "$OUT"/python/cycles_sdk-*"${PYTHON_WHEEL_TAG[$platform]}"*.whl)"
    if [[ -n "${WHEEL[$platform]}" ]]; then
        check_python_wheel "${WHEEL[$platform]}" "$platform"
    else
        missing+=("$platform")
    fi
done
# Under --ci the aarch64 wheel is the point (python/scripts/test.sh runs the x86_64 one).
if [[ $CI == 1 && -z "${WHEEL[linux-arm64-gnu]}" ]]; then
    echo "--ci needs the linux-arm64-gnu wheel in $OUT/python" >&2
    exit 1
fi

# The package README's lifecycle quick start, as a script (the block tests/test_readme.py runs).
python3 - "$REPO/python/README.md" "$WORK/quickstart.py" <<'PY'
import re, sys
blocks = [b for b in re.findall(r"```python\n(.*?)```", open(sys.argv[1]).read(), flags=re.S) if "client.guarded" in b]
assert blocks, "no lifecycle quick start in " + sys.argv[1]
open(sys.argv[2], "w").write(blocks[0])
PY
# Fails unless a quick start's output (FILE) is what the README promises.
check_quickstart() {
    grep -qx "answer 42" "$1" && grep -qx "settlement committed 150000" "$1" &&
        grep -qx "pending after close 0" "$1" || { cat "$1" >&2; echo "the quick start printed something else" >&2; return 1; }
}
check_demo() {
    grep -q '^Done. Next:' "$1" || { cat "$1" >&2; echo "cycles demo did not finish" >&2; return 1; }
}

if [[ -n "${WHEEL[linux-x64-gnu]}" ]]; then
    log "linux-x64-gnu: $(basename "${WHEEL[linux-x64-gnu]}") in a fresh venv ($(python3 --version))"
    python3 -m venv "$WORK/venv"
    "$WORK/venv/bin/pip" install -q --disable-pip-version-check --no-index "${WHEEL[linux-x64-gnu]}"
    (cd "$WORK" && timeout 120 venv/bin/python quickstart.py >x64-quickstart.out)
    check_quickstart "$WORK/x64-quickstart.out"
    timeout 120 "$WORK/venv/bin/cycles" demo >"$WORK/x64-demo.out"
    check_demo "$WORK/x64-demo.out"
    "$WORK/venv/bin/cycles" serve --port 0 >"$WORK/serve.out" &
    serve=$!
    for _ in $(seq 100); do grep -q '^press Ctrl-C' "$WORK/serve.out" && break; sleep 0.1; done
    url="$(sed -n 's/^cycles local server listening on //p' "$WORK/serve.out")"
    [[ -n "$url" ]] || { kill "$serve"; echo "cycles serve printed no URL" >&2; exit 1; }
    "$WORK/venv/bin/python" -c 'import sys, urllib.request as u; r = u.urlopen(u.Request(sys.argv[1] + "/v1/balances?tenant=acme", headers={"X-Cycles-API-Key": "cycles-local-key"}), timeout=10); sys.exit(r.status != 200)' "$url"
    kill -INT "$serve"
    wait "$serve" || { echo "cycles serve did not exit 0 on SIGINT" >&2; exit 1; }
    log "linux-x64-gnu: quick start, cycles demo, cycles serve until SIGINT: ok"
fi

if [[ -n "${WHEEL[linux-arm64-gnu]}" ]]; then
    [[ -x "$ARM64_ROOT/usr/bin/python3" ]] || { echo "no arm64 root at $ARM64_ROOT (scripts/verify/arm64-root.sh)" >&2; exit 1; }
    INROOT="/tmp/cycles-verify-python.$$"
    mkdir -p "$ARM64_ROOT$INROOT"
    cp "${WHEEL[linux-arm64-gnu]}" "$WORK/quickstart.py" "$ARM64_ROOT$INROOT/"
    arm_wheel="$INROOT/$(basename "${WHEEL[linux-arm64-gnu]}")"
    log "linux-arm64-gnu: $(basename "$arm_wheel") in a fresh venv of the arm64 root's python3 (qemu-aarch64)"
    # /proc for the runtime (CPU count, the journal's process checks); a private mount
    # namespace drops it when the run ends.
    unshare --mount --fork bash -euc '
        root="$1" dir="$2" wheel="$3"
        mount -t proc proc "$root/proc"
        chroot "$root" /usr/bin/uname -m | grep -qx aarch64
        chroot "$root" /usr/bin/python3 --version >&2
        # A venv without its own pip, filled by the root'"'"'s pip (Debian'"'"'s python3-pip): one pip
        # run under emulation instead of two (ensurepip, then the install).
        chroot "$root" /usr/bin/python3 -m venv --without-pip "$dir/venv"
        chroot "$root" /usr/bin/python3 -m pip --python "$dir/venv/bin/python" install -q \
            --disable-pip-version-check --no-index "$wheel"
        HOME="$dir" TMPDIR="$dir" timeout 600 chroot "$root" /bin/sh -c "cd $dir && venv/bin/python quickstart.py" >"$root$dir/quickstart.out"
        HOME="$dir" TMPDIR="$dir" timeout 600 chroot "$root" "$dir/venv/bin/cycles" demo --timeout-ms 60000 >"$root$dir/demo.out"
    ' _ "$ARM64_ROOT" "$INROOT" "$arm_wheel"
    check_quickstart "$ARM64_ROOT$INROOT/quickstart.out"
    check_demo "$ARM64_ROOT$INROOT/demo.out"
    log "linux-arm64-gnu: quick start and cycles demo under emulation: ok"
fi

for platform in linux-x64-musl linux-arm64-musl; do
    if [[ -n "${WHEEL[$platform]}" ]]; then
        log "$platform: $(basename "${WHEEL[$platform]}"): tag and ELF checked, not run (no musl CPython here)"
    fi
done

if [[ $CI == 0 ]]; then
    sdist="$(first "$OUT"/python/cycles_sdk-*.tar.gz)"
    if [[ -z "$sdist" ]]; then
        missing+=(sdist)
    else
        check_python_sdist "$sdist"
        profile="${CYCLES_VERIFY_SDIST_PROFILE:-dev}"
        log "sdist: pip install $(basename "$sdist") in a fresh venv (builds the extension, $profile profile)"
        python3 -m venv "$WORK/sdist-venv"
        # Its own cargo target dir, kept between runs; pip's build isolation fetches maturin.
        MATURIN_PEP517_ARGS="--profile $profile" \
            CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$REPO/target}/python-sdist" \
            "$WORK/sdist-venv/bin/pip" install -q --disable-pip-version-check "$sdist"
        (cd "$WORK" && timeout 120 sdist-venv/bin/python quickstart.py >sdist-quickstart.out)
        check_quickstart "$WORK/sdist-quickstart.out"
        "$WORK/sdist-venv/bin/cycles" --version >&2
        log "sdist: built by pip, quick start and cycles --version: ok"
    fi
fi
[[ ${#missing[@]} -eq 0 ]] || log "not in $OUT/python, not verified: ${missing[*]}"
log "ok"
