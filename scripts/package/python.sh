# shellcheck shell=bash
# The Python distributions: one abi3 wheel per platform in $PLATFORMS (maturin --zig:
# manylinux2014 for glibc, musllinux_1_2 for musl) and the sdist, into OUT/python/. Each wheel
# is checked before it is kept (check_python_wheel below): its platform tag, its ELF machine,
# what the extension links (NEEDED) and, for manylinux, that no glibc symbol is newer than 2.17.
# Sourced by scripts/package.sh (which sets ROOT, OUT, PROFILE, TARGET, PLATFORMS and log);
# scripts/verify/python.sh sources it for check_python_wheel.

# The wheel platform tag and the ELF machine (readelf -h) of each platform.
declare -gA PYTHON_WHEEL_TAG=(
    [linux-x64-gnu]=manylinux_2_17_x86_64
    [linux-arm64-gnu]=manylinux_2_17_aarch64
    [linux-x64-musl]=musllinux_1_2_x86_64
    [linux-arm64-musl]=musllinux_1_2_aarch64
)
declare -gA PYTHON_ELF_MACHINE=(
    [linux-x64-gnu]="Advanced Micro Devices X86-64"
    [linux-arm64-gnu]=AArch64
    [linux-x64-musl]="Advanced Micro Devices X86-64"
    [linux-arm64-musl]=AArch64
)
# Libraries a manylinux2014 extension may link (PEP 599's list, the part a Rust cdylib uses).
PYTHON_MANYLINUX_LIBS="libc.so.6 libm.so.6 libpthread.so.0 libdl.so.2 librt.so.1 libgcc_s.so.1 ld-linux-x86-64.so.2 ld-linux-aarch64.so.1"

package_python() {
    ensure_package_tools
    local flags=() platform triple compat
    [[ "$PROFILE" == release ]] && flags=(--release --strip)
    rm -rf "$OUT/python"
    mkdir -p "$OUT/python"
    for platform in "${PLATFORMS[@]}"; do
        triple="$(platform_triple "$platform")"
        case "$platform" in *-musl) compat=musllinux_1_2 ;; *) compat=manylinux2014 ;; esac
        ensure_rust_target "$triple"
        log "Python: the abi3 $compat wheel for $platform ($PROFILE)"
        # One target dir for every wheel (cargo keeps each triple apart inside it), apart from
        # the workspace's: zig as the C compiler changes ring's build.
        (cd "$ROOT/python" && CARGO_TARGET_DIR="$TARGET/python-manylinux" \
            maturin build "${flags[@]}" --target "$triple" --zig --compatibility "$compat" \
            --out "$OUT/python/.$platform" --quiet) >&2
        local wheel
        wheel="$(ls "$OUT/python/.$platform"/*.whl)"
        check_python_wheel "$wheel" "$platform"
        mv "$wheel" "$OUT/python/"
        rmdir "$OUT/python/.$platform"
    done
    log "Python: the sdist"
    (cd "$ROOT/python" && maturin sdist --out "$OUT/python") >&2
    check_python_sdist "$(ls "$OUT"/python/cycles_sdk-*.tar.gz)"
    log "Python: $(cd "$OUT/python" && ls | tr '\n' ' ')"
}

# Fails unless WHEEL is the abi3 wheel of PLATFORM: tag, console script, LICENSE, ELF machine,
# NEEDED libraries and (manylinux) glibc symbol versions <= 2.17; (musllinux) no glibc at all.
check_python_wheel() {
    local wheel="$1" platform="$2" tag="${PYTHON_WHEEL_TAG[$2]}" dir so needed lib newest
    case "$(basename "$wheel")" in
        cycles_sdk-*-cp310-abi3-*"$tag"*.whl) ;;
        *) echo "$wheel: not the cp310-abi3 $tag wheel of $platform" >&2; return 1 ;;
    esac
    dir="$(mktemp -d)"
    scratch "$dir"
    (cd "$dir" && python3 -m zipfile -e "$wheel" .)
    grep -Eqx 'cycles ?= ?cycles._cli:main' "$dir"/cycles_sdk-*.dist-info/entry_points.txt ||
        { echo "$wheel: no cycles console script" >&2; rm -rf "$dir"; return 1; }
    grep -q "^Tag: cp310-abi3-.*$tag" "$dir"/cycles_sdk-*.dist-info/WHEEL ||
        { echo "$wheel: WHEEL metadata lacks the $tag tag" >&2; rm -rf "$dir"; return 1; }
    # PEP 639: the licence text in .dist-info/licenses/, named by METADATA's License-File.
    cmp -s "$ROOT/LICENSE" "$(ls "$dir"/cycles_sdk-*.dist-info/licenses/LICENSE 2>/dev/null | head -1)" &&
        grep -qx 'License-File: LICENSE' "$dir"/cycles_sdk-*.dist-info/METADATA ||
        { echo "$wheel: no LICENSE in .dist-info/licenses/ (or METADATA does not name it)" >&2; rm -rf "$dir"; return 1; }
    so="$(ls "$dir"/cycles/_native*.so)"
    readelf -h "$so" | grep -q "Machine: *${PYTHON_ELF_MACHINE[$platform]}" ||
        { echo "$wheel: the extension is not ${PYTHON_ELF_MACHINE[$platform]}" >&2; rm -rf "$dir"; return 1; }
    needed="$(readelf -d "$so" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')"
    for lib in $needed; do
        case "$platform" in
            *-musl) [[ "$lib" == libc.so ]] ;;
            *) [[ " $PYTHON_MANYLINUX_LIBS " == *" $lib "* ]] ;;
        esac || { echo "$wheel: the extension links $lib (NEEDED: $needed)" >&2; rm -rf "$dir"; return 1; }
    done
    newest="$(objdump -T "$so" | { grep -o 'GLIBC_[0-9.]*' || true; } | sort -uV | tail -1)"
    case "$platform" in
        *-musl) [[ -z "$newest" ]] ||
            { echo "$wheel: a musllinux extension with glibc symbols ($newest)" >&2; rm -rf "$dir"; return 1; } ;;
        *) [[ "$(printf '%s\n' "$newest" GLIBC_2.17 | sort -V | tail -1)" == GLIBC_2.17 ]] ||
            { echo "$wheel: needs $newest, above manylinux2014's GLIBC_2.17" >&2; rm -rf "$dir"; return 1; } ;;
    esac
    log "Python: $(basename "$wheel"): NEEDED ${needed% }; newest glibc symbol ${newest:-none}; $(du -k "$wheel" | cut -f1) KiB"
    rm -rf "$dir"
}

# Fails unless the sdist carries every workspace crate the extension builds from, and LICENSE.
check_python_sdist() {
    local sdist="$1" listing crate
    listing="$(tar -tzf "$sdist")"
    for crate in core conformance/server conformance/fake-provider bindings/bridge bindings/cli bindings/python; do
        grep -q "^[^/]*/$crate/Cargo.toml$" <<<"$listing" ||
            { echo "$sdist: lacks the crate $crate" >&2; return 1; }
    done
    grep -q '^[^/]*/Cargo.lock$' <<<"$listing" || { echo "$sdist: no Cargo.lock" >&2; return 1; }
    grep -q '^[^/]*/LICENSE$' <<<"$listing" || { echo "$sdist: no LICENSE" >&2; return 1; }
    log "Python: $(basename "$sdist"): $(wc -l <<<"$listing") files, $(du -k "$sdist" | cut -f1) KiB"
}
