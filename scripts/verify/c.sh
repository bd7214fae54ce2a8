#!/usr/bin/env bash
# The C tarballs, each unpacked into a clean folder and README.md's C quick start compiled
# against it and run (the quick start starts its own local server in the library):
#
#   scripts/verify/c.sh OUT ARM64_ROOT [--ci]
#
#   linux-x64-gnu     gcc here, through the tarball's cycles.pc, shared and static; run here
#   linux-arm64-gnu   the arm64 root's own gcc (chroot, qemu-user), shared and static; run there
#   linux-x64-musl    musl-gcc (Debian's musl-tools): static, run here; and dynamic against
#                     libcycles.so, run here by musl's loader (/lib/ld-musl-x86_64.so.1)
#   linux-arm64-musl  zig cc -target aarch64-linux-musl, static; run under qemu-aarch64-static.
#                     The shared library is only checked (no aarch64 musl loader here)
#
# Every library is also checked: ELF machine, glibc symbol versions (none newer than 2.17 on
# glibc, none at all on musl), NEEDED. --ci: linux-arm64-gnu only. A tarball the run expects
# and OUT lacks is an error.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
OUT="$1" ARM64_ROOT="$2" CI="${3:-}"
VERIFY_LANG=c
# shellcheck source=common.sh
source "$ROOT/scripts/verify/common.sh"
# shellcheck source=../package/common.sh
source "$ROOT/scripts/package/common.sh"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/cycles-verify-c.XXXXXX")"
INROOT=""
trap 'rm -rf "$WORK"; [[ -z "$INROOT" ]] || rm -rf "${ARM64_ROOT:?}$INROOT"' EXIT
WANT="charged 420000"
platforms=("${ALL_PLATFORMS[@]}")
[[ "$CI" == --ci ]] && platforms=(linux-arm64-gnu)
# CYCLES_VERIFY_PLATFORMS="P1 P2": those only (checking one platform by hand).
[[ -z "${CYCLES_VERIFY_PLATFORMS:-}" ]] || read -ra platforms <<<"$CYCLES_VERIFY_PLATFORMS"

bash "$ROOT/bindings/c/scripts/quickstart.sh" >"$WORK/quickstart.c"
command -v musl-gcc >/dev/null || { [[ " ${platforms[*]} " != *-musl* ]] ||
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq musl-tools >/dev/null; }

# unpack PLATFORM DEST: the tarball's folder under DEST; prints its path.
unpack() {
    local tgz
    tgz="$(ls "$OUT"/c/cycles-c-*-"$1".tar.gz 2>/dev/null | grep -v '\.debug\.tar\.gz$' | head -1)"
    [[ -n "$tgz" ]] || { echo "no C tarball for $1 in $OUT/c (scripts/package.sh OUT --platform $1 c)" >&2; return 1; }
    mkdir -p "$2"
    tar -C "$2" -xzf "$tgz"
    echo "$2/$(basename "$tgz" .tar.gz)"
}

# expect NAME OUTPUT: the quick start's line.
expect() {
    grep -qx "$WANT" <<<"$2" || { echo "$1 printed: $2 (want: $WANT)" >&2; return 1; }
    vlog "$1: $WANT"
}

for platform in "${platforms[@]}"; do
    case "$platform" in
        linux-x64-*) machine=X86-64 ;;
        *) machine=AArch64 ;;
    esac
    libc="${platform##*-}"
    [[ "$libc" == gnu ]] || libc=musl
    prefix="$(unpack "$platform" "$WORK/$platform")"
    so="$(ls "$prefix"/lib/libcycles.so.*.*.*)"
    facts="$(check_elf "$so" "$machine" "$libc")" # an assignment: its failure stops the script
    vlog "$platform: $facts"
    for f in LICENSE README.md include/cycles.h lib/libcycles.a lib/pkgconfig/cycles.pc; do
        [[ -f "$prefix/$f" ]] || { echo "the $platform tarball lacks $f" >&2; exit 1; }
    done
    # The static library's objects are of the platform too (one member is enough).
    member="$(ar t "$prefix/lib/libcycles.a" | sed -n '/\.o$/{p;q}' || true)"
    (cd "$WORK" && ar x "$prefix/lib/libcycles.a" "$member" && [[ "$(elf_machine "$member")" == "$machine" ]]) ||
        { echo "libcycles.a ($platform) is not $machine" >&2; exit 1; }
    export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
    case "$platform" in
        linux-x64-gnu)
            cc "$WORK/quickstart.c" $(pkg-config --cflags --libs cycles) \
                -Wl,-rpath,"$(pkg-config --variable=libdir cycles)" -o "$WORK/q-$platform"
            expect "$platform shared (gcc, run here)" "$("$WORK/q-$platform")"
            cc "$WORK/quickstart.c" $(pkg-config --cflags cycles) "$prefix/lib/libcycles.a" \
                $(pkg-config --static --libs-only-l cycles | sed 's/-lcycles//') -o "$WORK/qs-$platform"
            expect "$platform static (gcc, run here)" "$("$WORK/qs-$platform")"
            ;;
        linux-arm64-gnu)
            # Into the root, then the root's own gcc through cycles.pc's flags for that prefix.
            INROOT="$(arm64_tempdir "$ARM64_ROOT")"
            cp -a "$prefix" "$ARM64_ROOT$INROOT/cycles"
            cp "$WORK/quickstart.c" "$ARM64_ROOT$INROOT/"
            p="$INROOT/cycles"
            pc=(pkg-config --define-variable=prefix="$p")
            start=$(date +%s)
            arm64_run "$ARM64_ROOT" gcc "$INROOT/quickstart.c" $("${pc[@]}" --cflags --libs cycles) \
                -Wl,-rpath,"$p/lib" -o "$INROOT/q"
            arm64_run "$ARM64_ROOT" gcc "$INROOT/quickstart.c" $("${pc[@]}" --cflags cycles) "$p/lib/libcycles.a" \
                $("${pc[@]}" --static --libs-only-l cycles | sed 's/-lcycles//') -o "$INROOT/qs"
            vlog "$platform: compiled shared and static with the root's gcc ($(arm64_run "$ARM64_ROOT" gcc -dumpfullversion), $(( $(date +%s) - start ))s under qemu)"
            [[ "$(elf_machine "$ARM64_ROOT$INROOT/q")" == AArch64 ]]
            expect "$platform shared (arm64 root gcc, run in the arm64 root)" "$(arm64_run "$ARM64_ROOT" "$INROOT/q")"
            expect "$platform static (arm64 root gcc, run in the arm64 root)" "$(arm64_run "$ARM64_ROOT" "$INROOT/qs")"
            rm -rf "${ARM64_ROOT:?}$INROOT"
            INROOT=""
            ;;
        linux-x64-musl)
            musl-gcc -static "$WORK/quickstart.c" $(pkg-config --cflags cycles) "$prefix/lib/libcycles.a" \
                $(pkg-config --static --libs-only-l cycles | sed 's/-lcycles//') -o "$WORK/qs-$platform"
            file -b "$WORK/qs-$platform" | grep -Eq 'statically linked|static-pie linked' ||
                { echo "musl-gcc -static made: $(file -b "$WORK/qs-$platform")" >&2; exit 1; }
            expect "$platform static (musl-gcc -static, run here)" "$("$WORK/qs-$platform")"
            musl-gcc "$WORK/quickstart.c" $(pkg-config --cflags --libs cycles) \
                -Wl,-rpath,"$(pkg-config --variable=libdir cycles)" -o "$WORK/q-$platform"
            readelf -lW "$WORK/q-$platform" | grep -q 'ld-musl-x86_64' ||
                { echo "musl-gcc's dynamic program has no musl interpreter" >&2; exit 1; }
            expect "$platform shared (musl-gcc, run here by musl's loader)" "$("$WORK/q-$platform")"
            ;;
        linux-arm64-musl)
            ensure_package_tools
            "$PACKAGE_TOOLS/bin/python" -m ziglang cc -target aarch64-linux-musl -static "$WORK/quickstart.c" $(pkg-config --cflags cycles) \
                "$prefix/lib/libcycles.a" $(pkg-config --static --libs-only-l cycles | sed 's/-lcycles//') \
                -o "$WORK/qs-$platform" 2>"$WORK/zig.err" || { cat "$WORK/zig.err" >&2; exit 1; }
            [[ "$(elf_machine "$WORK/qs-$platform")" == AArch64 ]]
            file -b "$WORK/qs-$platform" | grep -Eq 'statically linked|static-pie linked'
            expect "$platform static (zig cc, run under qemu-aarch64-static)" "$(qemu-aarch64-static "$WORK/qs-$platform")"
            vlog "$platform: libcycles.so only checked (no aarch64 musl loader on this machine)"
            ;;
    esac
done
vlog "ok: ${platforms[*]}"
