#!/usr/bin/env bash
# The static `cycles` binaries: `file` says statically linked, no interpreter, no NEEDED, the
# arch's ELF machine; then `cycles demo` (the whole story against its embedded server) run
# here for x86_64 and under qemu-aarch64-static for aarch64, each copied alone into a clean
# folder first (nothing beside it to lean on).
#
#   scripts/verify/cli.sh OUT ARM64_ROOT [--ci]      # --ci: linux-x64-musl only
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
OUT="$1" CI="${3:-}"
VERIFY_LANG=cli
# shellcheck source=common.sh
source "$ROOT/scripts/verify/common.sh"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/cycles-verify-cli.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
platforms=(linux-x64-musl linux-arm64-musl)
[[ "$CI" == --ci ]] && platforms=(linux-x64-musl)
# CYCLES_VERIFY_PLATFORMS="P1 P2": those only (checking one platform by hand).
[[ -z "${CYCLES_VERIFY_PLATFORMS:-}" ]] || read -ra platforms <<<"$CYCLES_VERIFY_PLATFORMS"

for platform in "${platforms[@]}"; do
    bin="$(ls "$OUT"/cli/cycles-*-"$platform" 2>/dev/null | head -1)"
    [[ -n "$bin" ]] || { echo "no cycles binary for $platform in $OUT/cli (scripts/package.sh OUT --platform $platform cli)" >&2; exit 1; }
    case "$platform" in
        linux-x64-*) machine=X86-64 run=() ;;
        *) machine=AArch64 run=(qemu-aarch64-static) ;;
    esac
    kind="$(file -b "$bin")"
    grep -Eq 'statically linked|static-pie linked' <<<"$kind" || { echo "$bin: $kind" >&2; exit 1; }
    [[ "$(elf_machine "$bin")" == "$machine" && -z "$(elf_needed "$bin")" ]] ||
        { echo "$bin: $(elf_machine "$bin"), NEEDED: $(elf_needed "$bin")" >&2; exit 1; }
    ! readelf -lW "$bin" | grep -q 'program interpreter' || { echo "$bin has a program interpreter" >&2; exit 1; }
    file -b "$bin" | grep -q 'not stripped' && { echo "$bin is not stripped" >&2; exit 1; }
    vlog "$platform: $(basename "$bin"), $(du -h "$bin" | cut -f1), file: ${kind%%, BuildID*}"
    mkdir -p "$WORK/$platform"
    cp "$bin" "$WORK/$platform/cycles"
    start=$(date +%s)
    status=0
    (cd "$WORK/$platform" && env -i PATH=/usr/bin:/bin timeout 120 "${run[@]}" ./cycles demo --work-ms 4500) \
        >"$WORK/$platform/demo.log" 2>&1 || status=$?
    if [[ $status != 0 ]] || ! grep -q '^Done\. Next:' "$WORK/$platform/demo.log"; then
        cat "$WORK/$platform/demo.log" >&2
        echo "cycles demo ($platform) failed: exit $status" >&2
        exit 1
    fi
    vlog "$platform: cycles demo ran${run[*]:+ under ${run[*]}} in $(( $(date +%s) - start ))s: $(grep -c . "$WORK/$platform/demo.log") lines, ends \"Done.\""
done
vlog "ok: ${platforms[*]}"
