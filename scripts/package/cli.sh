# shellcheck shell=bash
# The `cycles` command: one static musl binary per arch, stripped.
# Sourced by scripts/package.sh (which sets ROOT, OUT, PROFILE, TARGET, PLATFORMS and log).
#
#   OUT/cli/cycles-X.Y.Z-linux-x64-musl      static (no interpreter, no NEEDED), runs on any
#   OUT/cli/cycles-X.Y.Z-linux-arm64-musl    Linux of that arch, glibc or musl
#   OUT/cli/cycles-X.Y.Z-ARCH.debug          its debug info (named by the binary's .gnu_debuglink)
#   OUT/cli/LICENSE
#
# A static binary serves glibc and musl systems alike, so each requested platform maps to its
# arch's musl build (asking for linux-x64-gnu and linux-x64-musl builds linux-x64-musl once).
# Built by cargo-zigbuild in $TARGET/platforms/PLATFORM-static (musl's default crt-static).

package_cli() {
    local version platform dir bin arches=()
    version="$(cargo metadata --no-deps --format-version 1 --manifest-path "$ROOT/Cargo.toml" |
        python3 -c 'import json,sys; print(next(p["version"] for p in json.load(sys.stdin)["packages"] if p["name"]=="cycles-cli"))')"
    for platform in "${PLATFORMS[@]}"; do
        platform="${platform%-*}-musl"
        [[ " ${arches[*]} " == *" $platform "* ]] || arches+=("$platform")
    done
    rm -rf "$OUT/cli"
    mkdir -p "$OUT/cli"
    cp "$ROOT/LICENSE" "$OUT/cli/"
    for platform in "${arches[@]}"; do
        log "CLI: cycles $version for $platform, static ($PROFILE)"
        platform_cargo "$platform" static zigbuild -q -p cycles-cli --bin cycles >&2
        dir="$(platform_artifact_dir "$platform" static)"
        bin="$OUT/cli/cycles-$version-$platform"
        cp "$dir/cycles" "$bin"
        strip_artifact "$platform" "$bin" "$bin.debug"
        # A static binary has no program interpreter and no NEEDED entry.
        if readelf -lW "$bin" | grep -q 'Requesting program interpreter' || readelf -dW "$bin" | grep -q NEEDED; then
            echo "$bin is not statically linked" >&2
            return 1
        fi
    done
    log "CLI: $(cd "$OUT/cli" && ls | tr '\n' ' ')"
}
