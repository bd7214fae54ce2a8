#!/usr/bin/env bash
# The jar: README.md's Java quick start compiled with plain javac against the jar alone, run
# with plain java here (x86_64 glibc) and inside the arm64 root with its own OpenJDK 17
# (aarch64 glibc, under qemu-user); every native in the jar checked (ELF machine, glibc symbol
# versions: none newer than 2.17 on glibc, none at all on musl; NEEDED). No musl JVM is on this
# machine, so the musl natives are checked, and the x86_64 one also loaded by musl's own
# loader (a musl-gcc program dlopen()s it with RTLD_NOW and finds a JNI entry point): every
# symbol it needs resolves against musl.
#
#   scripts/verify/java.sh OUT ARM64_ROOT [--ci]     # --ci: nothing (CI's JVM suite is
#                                                    # java/scripts/test.sh)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
OUT="$1" ARM64_ROOT="$2" CI="${3:-}"
VERIFY_LANG=java
# shellcheck source=common.sh
source "$ROOT/scripts/verify/common.sh"
[[ "$CI" == --ci ]] && { vlog "skipped under --ci"; exit 0; }
WORK="$(mktemp -d "${TMPDIR:-/tmp}/cycles-verify-java.XXXXXX")"
INROOT=""
trap 'rm -rf "$WORK"; [[ -z "$INROOT" ]] || rm -rf "${ARM64_ROOT:?}$INROOT"' EXIT
WANT="answer 42, charged 420000"
JAR="$(ls "$OUT"/java/cycles-sdk-*[0-9].jar 2>/dev/null | head -1)"
[[ -n "$JAR" ]] || { echo "no jar in $OUT/java (scripts/package.sh OUT --all-platforms java)" >&2; exit 1; }

python3 - "$JAR" "$WORK/jar" <<'PY'
import sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
z.extractall(sys.argv[2], [n for n in z.namelist() if n.startswith("native/") or n == "META-INF/LICENSE"])
PY
declare -A MACHINE=([linux-x86_64]=X86-64 [linux-aarch_64]=AArch64 [linux-x86_64-musl]=X86-64 [linux-aarch_64-musl]=AArch64)
for c in linux-x86_64 linux-aarch_64 linux-x86_64-musl linux-aarch_64-musl; do
    lib="$WORK/jar/native/$c/libcycles_jvm.so"
    [[ -f "$lib" ]] || { echo "the jar has no native/$c/libcycles_jvm.so" >&2; exit 1; }
    libc=gnu
    [[ "$c" == *-musl ]] && libc=musl
    facts="$(check_elf "$lib" "${MACHINE[$c]}" "$libc")" # an assignment: its failure stops the script
    vlog "native/$c: $facts"
done
vlog "META-INF/LICENSE: $(head -c 200 "$WORK/jar/META-INF/LICENSE" | grep -o 'Apache License' | head -1)"

command -v musl-gcc >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq musl-tools >/dev/null
cat >"$WORK/dlopen.c" <<'C'
#include <dlfcn.h>
#include <stdio.h>
int main(int argc, char **argv) {
    if (argc != 3) return 2;
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!h) { printf("dlopen: %s\n", dlerror()); return 1; }
    printf("%s %s\n", argv[2], dlsym(h, argv[2]) ? "found" : "missing");
    return 0;
}
C
musl-gcc "$WORK/dlopen.c" -o "$WORK/dlopen-musl"
# One of the JNI entry points Native.java binds (NativeDeclarationsTest checks them all).
sym=Java_dev_cycles_internal_Native_errorCodes
out="$("$WORK/dlopen-musl" "$WORK/jar/native/linux-x86_64-musl/libcycles_jvm.so" "$sym")" || { echo "$out" >&2; exit 1; }
[[ "$out" == "$sym found" ]] || { echo "musl dlopen: $out" >&2; exit 1; }
vlog "native/linux-x86_64-musl: loaded by musl's loader (dlopen RTLD_NOW): $sym found"

python3 - "$ROOT/README.md" "$WORK/QuickStart.java" <<'PY'
import re, sys
section = open(sys.argv[1]).read().split("## Java quick start", 1)[1]
open(sys.argv[2], "w").write(re.search(r"```java\n(.*?)```", section, re.S).group(1))
PY
mkdir -p "$WORK/quick"
javac --release 17 -cp "$JAR" -d "$WORK/quick" "$WORK/QuickStart.java"

start=$(date +%s)
out="$(cd "$WORK/quick" && timeout 60 java -cp "$JAR:." QuickStart)"
grep -qx "$WANT" <<<"$out" || { echo "QuickStart (x86_64) printed: $out" >&2; exit 1; }
vlog "linux-x86_64: quick start ($(java -version 2>&1 | head -1)): $WANT ($(( $(date +%s) - start ))s)"

INROOT="$(arm64_tempdir "$ARM64_ROOT")"
cp "$JAR" "$ARM64_ROOT$INROOT/cycles-sdk.jar"
cp "$WORK"/quick/*.class "$ARM64_ROOT$INROOT/"
start=$(date +%s)
out="$(arm64_run "$ARM64_ROOT" java -cp "$INROOT/cycles-sdk.jar:$INROOT" QuickStart)" ||
    { echo "QuickStart in the arm64 root failed: $out" >&2; exit 1; }
grep -qx "$WANT" <<<"$out" || { echo "QuickStart (aarch64) printed: $out" >&2; exit 1; }
jv="$(arm64_run "$ARM64_ROOT" java -version 2>&1 | head -1)"
vlog "linux-aarch_64: quick start in the arm64 root ($jv, qemu-user): $WANT ($(( $(date +%s) - start ))s)"
vlog "ok"
