#!/usr/bin/env bash
# Builds what users install, into OUT/<language>/:
#
#   scripts/package.sh OUT [--all-platforms | --platform NAME]... [python] [c] [cli] [node] [java] [kotlin] ...
#
# No language: python, c, cli, node, java and kotlin. Platforms (scripts/package/common.sh):
# linux-x64-gnu (the host, the default), linux-arm64-gnu, linux-x64-musl, linux-arm64-musl;
# --all-platforms takes all four (the Kotlin jar carries the two glibc ones: JNA's layout). What each language writes is documented in scripts/package/<language>.sh and in
# docs/packaging.md.
#
#   OUT/python/cycles_sdk-*.whl        one abi3 wheel per platform (manylinux2014 for glibc,
#                                      musllinux_1_2 for musl; maturin + zig), checked
#   OUT/python/cycles_sdk-X.Y.Z.tar.gz the sdist (every workspace crate the extension needs)
#   OUT/node/cycles-sdk-X.Y.Z.tgz      the npm package cycles-sdk (no addon; optionalDependencies)
#   OUT/node/cycles-sdk-<platform>-X.Y.Z.tgz  @cycles-sdk/<platform>: its addon (cargo-zigbuild)
#   OUT/c/cycles-c-X.Y.Z-PLATFORM.tar.gz   include/, lib/ (shared + static, stripped),
#                                      lib/pkgconfig/cycles.pc (relocatable), README.md,
#                                      LICENSE; + .debug.tar.gz with the debug info
#   OUT/c/{include,lib}                the host platform's install tree (the C tests use it)
#   OUT/cli/cycles-X.Y.Z-linux-ARCH-musl  the `cycles` command, static, stripped (+ .debug)
#   OUT/java/cycles-sdk-X.Y.Z.jar      dev.cycles:cycles-sdk with native/CLASSIFIER/libcycles_jvm.so
#                                      per platform (+ -sources.jar, -javadoc.jar); Maven runs
#                                      the JUnit suite unless CYCLES_PACKAGE_SKIP_TESTS=1
#   OUT/kotlin/cycles-kotlin-X.Y.Z.jar  dev.cycles:cycles-kotlin with libcycles_uniffi.so in JNA's
#                                      layout (linux-x86-64/, linux-aarch64/; glibc platforms
#                                      only), checked by kotlin/scripts/install-check.sh
#
# Release builds by default; CYCLES_PACKAGE_PROFILE=dev builds the debug profile (the C tests
# use it: much faster, same ABI). Cargo builds in $CARGO_TARGET_DIR (default target/); other
# platforms than the host, and every release build, through cargo-zigbuild in
# $CARGO_TARGET_DIR/platforms/ (scripts/package/common.sh platform_cargo).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
usage() { echo "usage: scripts/package.sh OUT [--all-platforms | --platform NAME]... [python] [c] [cli] [node] [java] [kotlin] ..." >&2; exit 2; }
[[ $# -ge 1 ]] || usage
OUT="$(mkdir -p "$1" && cd "$1" && pwd)"
shift
# shellcheck source=package/common.sh
source "$ROOT/scripts/package/common.sh"
LANGS=()
PLATFORMS=()
while [[ $# -gt 0 ]]; do
    case "$1" in
        --all-platforms) PLATFORMS=("${ALL_PLATFORMS[@]}") ;;
        --platform) [[ $# -ge 2 ]] || usage; platform_triple "$2" >/dev/null; PLATFORMS+=("$2"); shift ;;
        --platform=*) platform_triple "${1#*=}" >/dev/null; PLATFORMS+=("${1#*=}") ;;
        -*) usage ;;
        *) LANGS+=("$1") ;;
    esac
    shift
done
# Without languages a language none of whose platforms was asked for is skipped, not an error
# (the Kotlin jar for musl platforms only); named, it fails.
LANGS_DEFAULTED=0
[[ ${#LANGS[@]} -gt 0 ]] || { LANGS=(python c cli node java kotlin); LANGS_DEFAULTED=1; }
[[ ${#PLATFORMS[@]} -gt 0 ]] || PLATFORMS=("$HOST_PLATFORM")
PROFILE="${CYCLES_PACKAGE_PROFILE:-release}"
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
export ROOT OUT PROFILE TARGET LANGS_DEFAULTED
log() { printf '== package: %s\n' "$*" >&2; }
# The staging and scratch folders the languages register (common.sh scratch) go however the run
# ends: a failed build, a refused check or ^C leaves no staging in OUT or in the temp folder.
trap 'rm -rf "${SCRATCH[@]}"' EXIT

for lang in "${LANGS[@]}"; do
    [[ -f "$ROOT/scripts/package/$lang.sh" && "$lang" != common ]] ||
        { echo "unknown language: $lang ($(cd "$ROOT/scripts/package" && ls | sed -n 's/\.sh$//p' | grep -vx common | tr '\n' ' '))" >&2; exit 2; }
    # shellcheck disable=SC1090
    source "$ROOT/scripts/package/$lang.sh"
    "package_$lang"
done
