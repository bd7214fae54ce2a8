#!/usr/bin/env bash
# Builds what users install for every Linux platform and runs each artifact's quick start on
# its platform, by emulation where the machine is not that platform (docs/packaging.md, "Proof
# on this machine"):
#
#   scripts/verify-platforms.sh [--ci] [--out DIR]
#
# 1. scripts/package.sh DIR for the platforms each check needs (full: all four; release
#    profile), while scripts/verify/arm64-root.sh makes (once, cached by its stamp) the Debian
#    arm64 root the aarch64 glibc artifacts run in ($CYCLES_ARM64_ROOT, default
#    ~/.cache/cycles-verify/arm64-root);
# 2. scripts/verify/contents.py DIR LANG...: every artifact packaged carries the LICENSE and a
#    README with no relative link;
# 3. scripts/verify/LANG.sh DIR ARM64_ROOT [--ci] for c, cli, java, and python, node and
#    kotlin when those scripts exist. Each prints what it ran where and fails on anything else.
#
# --ci (scripts/test-all.sh): the dev profile and the part that fits CI's time: the aarch64
# glibc C quick start in the arm64 root, the x86_64 static musl CLI's demo, and what the
# python/node/kotlin checks run under --ci (kotlin: the jar with both glibc libraries, its
# quick start here and in the arm64 root). The languages a check needs under --ci and in full are in
# CI_PLATFORMS / FULL_PLATFORMS below (a verify script may override its own with a line
# `# verify-platforms: ci=PLATFORM,... full=PLATFORM,...`; `ci=` empty skips it under --ci).
# DIR defaults to $CARGO_TARGET_DIR/verify-platforms (or target/verify-platforms).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
usage() { echo "usage: scripts/verify-platforms.sh [--ci] [--out DIR]" >&2; exit 2; }
CI="" OUT=""
while [[ $# -gt 0 ]]; do
    case "$1" in
        --ci) CI=--ci ;;
        --out) [[ $# -ge 2 ]] || usage; OUT="$2"; shift ;;
        --out=*) OUT="${1#*=}" ;;
        *) usage ;;
    esac
    shift
done
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
OUT="${OUT:-$TARGET/verify-platforms}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
ARM64_ROOT="${CYCLES_ARM64_ROOT:-$HOME/.cache/cycles-verify/arm64-root}"
log() { printf '== verify-platforms: %s\n' "$*" >&2; }
ALL="linux-x64-gnu,linux-arm64-gnu,linux-x64-musl,linux-arm64-musl"
GNU="linux-x64-gnu,linux-arm64-gnu"
declare -A CI_PLATFORMS=([c]=linux-arm64-gnu [cli]=linux-x64-musl [java]="" [python]=linux-arm64-gnu [node]="" [kotlin]="$GNU")
declare -A FULL_PLATFORMS=([c]="$ALL" [cli]="linux-x64-musl,linux-arm64-musl" [java]="$ALL" [python]="$ALL" [node]="$ALL"
    [kotlin]="$GNU")

langs=()
for lang in c cli java python node kotlin; do
    script="$ROOT/scripts/verify/$lang.sh"
    [[ -f "$script" ]] || { log "$lang: no scripts/verify/$lang.sh: skipped"; continue; }
    line="$(sed -n 's/^# verify-platforms: //p' "$script" | head -1)"
    for kv in $line; do
        case "$kv" in
            ci=*) CI_PLATFORMS[$lang]="${kv#ci=}" ;;
            full=*) FULL_PLATFORMS[$lang]="${kv#full=}" ;;
        esac
    done
    langs+=("$lang")
done

start=$(date +%s)
# The root builds (debootstrap and qemu: mostly downloads and emulated dpkg) while cargo compiles.
bash "$ROOT/scripts/verify/arm64-root.sh" "$ARM64_ROOT" >"$OUT/arm64-root.out" 2>"$OUT/arm64-root.err" &
root_pid=$!

if [[ -n "$CI" ]]; then
    export CYCLES_PACKAGE_PROFILE=dev
fi
# The JUnit suite and the other languages' own suites are their test scripts' job.
export CYCLES_PACKAGE_SKIP_TESTS=1
run=()
for lang in "${langs[@]}"; do
    if [[ -n "$CI" ]]; then plats="${CI_PLATFORMS[$lang]}"; else plats="${FULL_PLATFORMS[$lang]}"; fi
    [[ -n "$plats" ]] || { log "$lang: nothing under --ci"; continue; }
    args=()
    for p in ${plats//,/ }; do args+=(--platform "$p"); done
    log "package $lang (${plats//,/ }; ${CYCLES_PACKAGE_PROFILE:-release})"
    t=$(date +%s)
    "$ROOT/scripts/package.sh" "$OUT" "${args[@]}" "$lang"
    log "package $lang: $(( $(date +%s) - t ))s"
    run+=("$lang")
done

# Every artifact packaged carries the LICENSE and a README whose links work off the repository.
[[ ${#run[@]} -eq 0 ]] || python3 "$ROOT/scripts/verify/contents.py" "$OUT" "${run[@]}"

if ! wait "$root_pid"; then
    cat "$OUT/arm64-root.err" >&2
    echo "scripts/verify/arm64-root.sh failed" >&2
    exit 1
fi
log "arm64 root: $(cat "$OUT/arm64-root.out") ($(grep -q debootstrap "$OUT/arm64-root.err" && echo made now || echo cached))"

for lang in "${run[@]}"; do
    t=$(date +%s)
    bash "$ROOT/scripts/verify/$lang.sh" "$OUT" "$ARM64_ROOT" $CI
    log "verify $lang: ok ($(( $(date +%s) - t ))s)"
done
# Every artifact's size (docs/packaging.md lists them).
python3 "$ROOT/scripts/verify/sizes.py" "$OUT" >&2
log "all passed (${run[*]}${CI:+, --ci}) in $(( $(date +%s) - start ))s"
