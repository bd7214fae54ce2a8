#!/usr/bin/env bash
# The Kotlin jar: every native in it checked (ELF machine, no glibc symbol newer than 2.17,
# NEEDED), then docs/kotlin.md's quick start compiled and run against the jar alone
# (kotlin/scripts/install-check.sh: a fresh folder, the jar and the dependencies its own pom
# declares, plain java, JNA's load log showing linux-x86-64/libcycles_uniffi.so taken from the
# jar) here (x86_64 glibc), and the same class files and jars run inside the arm64 root by its
# own OpenJDK 17 (aarch64 glibc, under qemu-user), where JNA must take
# linux-aarch64/libcycles_uniffi.so from the jar. The jar carries no musl library (JNA's
# resource prefix cannot tell musl from glibc: scripts/package/kotlin.sh), so nothing of musl
# is checked here.
#
#   scripts/verify/kotlin.sh OUT ARM64_ROOT [--ci]    # the same under --ci (dev profile: the
#                                                     # host library, plain cargo, checked for
#                                                     # its machine only, not glibc 2.17)
#
# verify-platforms: ci=linux-x64-gnu,linux-arm64-gnu full=linux-x64-gnu,linux-arm64-gnu
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
[[ $# -ge 2 ]] || { echo "usage: scripts/verify/kotlin.sh OUT ARM64_ROOT [--ci]" >&2; exit 2; }
OUT="$1" ARM64_ROOT="$2" CI="${3:-}"
# shellcheck disable=SC2034 # read by common.sh (vlog)
VERIFY_LANG=kotlin
# shellcheck source=common.sh
source "$ROOT/scripts/verify/common.sh"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/cycles-verify-kotlin.XXXXXX")"
INROOT=""
trap 'rm -rf "$WORK"; [[ -z "$INROOT" ]] || rm -rf "${ARM64_ROOT:?}$INROOT"' EXIT
WANT="answer 42, charged 150000"
JAR=""
for f in "$OUT"/kotlin/cycles-kotlin-*[0-9].jar; do [[ -f "$f" ]] && { JAR="$f"; break; }; done
[[ -n "$JAR" ]] || { echo "no jar in $OUT/kotlin (scripts/package.sh OUT --platform linux-x64-gnu --platform linux-arm64-gnu kotlin)" >&2; exit 1; }

python3 - "$JAR" "$WORK/jar" <<'PY'
import sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
z.extractall(sys.argv[2], [n for n in z.namelist() if n.endswith("/libcycles_uniffi.so")])
PY
declare -A MACHINE=([linux-x86-64]=X86-64 [linux-aarch64]=AArch64)
for prefix in linux-x86-64 linux-aarch64; do
    lib="$WORK/jar/$prefix/libcycles_uniffi.so"
    [[ -f "$lib" ]] || { echo "the jar has no $prefix/libcycles_uniffi.so" >&2; exit 1; }
    if [[ "$CI" == --ci && "$prefix" == linux-x86-64 ]]; then
        # The host's dev build is plain cargo against this machine's glibc (scripts/package/
        # kotlin.sh, as for the JVM and C), so only its machine is checked; the release build
        # (zigbuild, glibc 2.17) is checked in full.
        machine="$(elf_machine "$lib")"
        [[ "$machine" == X86-64 ]] || { echo "$lib: machine $machine, expected X86-64" >&2; exit 1; }
        facts="$machine (dev build against the host's glibc $(elf_max_glibc "$lib")), NEEDED: $(elf_needed "$lib")"
    else
        facts="$(check_elf "$lib" "${MACHINE[$prefix]}" gnu)"
    fi
    vlog "$prefix: $facts"
done
for d in "$WORK"/jar/*; do
    case "${d##*/}" in
        linux-x86-64 | linux-aarch64) ;;
        *) echo "the jar carries a native for ${d##*/} too" >&2; exit 1 ;;
    esac
done

# Here: the install check, which keeps the compiled quick start and its class path's jars.
start=$(date +%s)
CYCLES_KOTLIN_INSTALL_KEEP="$WORK/quick" bash "$ROOT/kotlin/scripts/install-check.sh" "$JAR"
vlog "linux-x86-64: install check ($(java -version 2>&1 | head -1)): $WANT, the library from the jar ($(( $(date +%s) - start ))s)"

# The arm64 root: the same classes and jars, its own java, no jna.library.path.
INROOT="$(arm64_tempdir "$ARM64_ROOT")"
cp -r "$WORK/quick/classes" "$WORK/quick/lib" "$ARM64_ROOT$INROOT/"
start=$(date +%s)
out="$(ARM64_TIMEOUT="${ARM64_TIMEOUT:-300}" arm64_run "$ARM64_ROOT" java -Djna.debug_load=true \
    -cp "$INROOT/classes:$INROOT/lib/*" QuickStartKt 2>&1)" ||
    { echo "$out" >&2; echo "the quick start failed in the arm64 root" >&2; exit 1; }
grep -qx "$WANT" <<<"$out" || { echo "$out" >&2; echo "the quick start (aarch64) did not print its line" >&2; exit 1; }
grep -q "resource.*jar:file:.*cycles-kotlin.*linux-aarch64/libcycles_uniffi.so" <<<"$out" ||
    { echo "$out" >&2; echo "libcycles_uniffi was not loaded from the jar's linux-aarch64/" >&2; exit 1; }
jv="$(arm64_run "$ARM64_ROOT" java -version 2>&1 | head -1)"
vlog "linux-aarch64: quick start in the arm64 root ($jv, qemu-user): $WANT, the library from the jar's linux-aarch64/ ($(( $(date +%s) - start ))s)"
vlog "ok"
