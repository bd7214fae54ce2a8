# shellcheck shell=bash
# The npm packages, into OUT/node/ (the napi-rs layout, docs/packaging.md "Node"):
#
#   cycles-sdk-X.Y.Z.tgz                   the package (TypeScript build, loader, `cycles-sdk`
#                                          bin), optionalDependencies on the four below
#   cycles-sdk-<platform>-X.Y.Z.tgz        @cycles-sdk/<platform>: cycles.<platform>.node,
#                                          one per platform in $PLATFORMS
#
# The addons are built with cargo-zigbuild (glibc targets against glibc 2.17; musl ones with
# -crt-static off, since an addon is a shared library) and checked (check_node_addon) before
# they are packed. Sourced by scripts/package.sh (which sets ROOT, OUT, PROFILE, TARGET,
# PLATFORMS and log); scripts/verify/node.sh sources it for check_node_addon.

# npm's os/cpu/libc fields of each platform package, and the ELF machine of its addon.
declare -gA NODE_CPU=([linux-x64-gnu]=x64 [linux-arm64-gnu]=arm64 [linux-x64-musl]=x64 [linux-arm64-musl]=arm64)
declare -gA NODE_LIBC=([linux-x64-gnu]=glibc [linux-arm64-gnu]=glibc [linux-x64-musl]=musl [linux-arm64-musl]=musl)
declare -gA NODE_ELF_MACHINE=(
    [linux-x64-gnu]="Advanced Micro Devices X86-64" [linux-arm64-gnu]=AArch64
    [linux-x64-musl]="Advanced Micro Devices X86-64" [linux-arm64-musl]=AArch64
)
NODE_SCOPE=@cycles-sdk
# What a glibc addon may link (the manylinux2014 set); a musl addon links libc.so (and
# libgcc_s.so.1 for unwinding) only.
NODE_GNU_LIBS="libc.so.6 libm.so.6 libpthread.so.0 libdl.so.2 librt.so.1 libgcc_s.so.1 ld-linux-x86-64.so.2 ld-linux-aarch64.so.1"
NODE_MUSL_LIBS="libc.so libgcc_s.so.1"

package_node() {
    ensure_package_tools
    local version platform triple so profile_dir=debug flags=()
    version="$(node_version)"
    [[ "$PROFILE" == release ]] && { flags=(--release); profile_dir=release; }
    rm -rf "$OUT/node"
    mkdir -p "$OUT/node"
    log "Node: the TypeScript build and the host addon (node/scripts/build.sh)"
    bash "$ROOT/node/scripts/build.sh" >&2
    for platform in "${PLATFORMS[@]}"; do
        triple="$(platform_triple "$platform")"
        ensure_rust_target "$triple"
        local zig_target="$triple" rustflags="${RUSTFLAGS:-}"
        case "$platform" in
            *-gnu) zig_target="$triple.2.17" ;;
            *-musl) rustflags="$rustflags -C target-feature=-crt-static" ;;
        esac
        log "Node: the $platform addon ($PROFILE, cargo zigbuild --target $zig_target)"
        # Its own target dir: zig as the C compiler changes ring's build. Release addons are
        # stripped of their symbol tables by the linker (the profile's strip).
        (cd "$ROOT" && RUSTFLAGS="$rustflags" CARGO_TARGET_DIR="$TARGET/node-zig" CARGO_PROFILE_RELEASE_STRIP=symbols \
            cargo zigbuild -q --locked -p cycles-node "${flags[@]}" --target "$zig_target") >&2
        so="$TARGET/node-zig/$triple/$profile_dir/libcycles_node.so"
        check_node_addon "$so" "$platform"
        node_platform_tarball "$so" "$platform" "$OUT/node" "$version"
    done
    node_main_tarball "$OUT/node" "$version"
    log "Node: $(cd "$OUT/node" && for f in *.tgz; do printf '%s (%s KiB) ' "$f" "$(du -k "$f" | cut -f1)"; done)"
}

# The package's version (node/package.json).
node_version() { node -p 'require(process.argv[1]).version' "$ROOT/node/package.json"; }

# Packs @cycles-sdk/PLATFORM around ADDON into OUTDIR (cycles-sdk-PLATFORM-VERSION.tgz).
node_platform_tarball() {
    local addon="$1" platform="$2" outdir="$3" version="$4" stage
    stage="$(mktemp -d "${TMPDIR:-/tmp}/cycles-node-$platform.XXXXXX")"
    scratch "$stage"
    cp "$addon" "$stage/cycles.$platform.node"
    write_platform_package "$stage" "$platform" "$version"
    (cd "$stage" && npm pack --pack-destination "$outdir" --silent) >/dev/null
    rm -rf "$stage"
}

# Packs cycles-sdk (node/dist, the .d.ts of the addon, README, LICENSE) into OUTDIR, with
# optionalDependencies on every platform package (npm installs the one matching os, cpu and
# libc). Expects a built node/ (node/scripts/build.sh).
node_main_tarball() {
    local outdir="$1" version="$2" stage
    stage="$(mktemp -d "${TMPDIR:-/tmp}/cycles-node-main.XXXXXX")"
    scratch "$stage"
    mkdir -p "$stage/native"
    cp -r "$ROOT/node/dist" "$stage/"
    cp "$ROOT/node/native/native.d.ts" "$stage/native/"
    cp "$ROOT/node/README.md" "$stage/"
    copy_license "$stage"
    node -e '
        const fs = require("fs");
        const [src, dest, scope, version, ...platforms] = process.argv.slice(1);
        const pkg = JSON.parse(fs.readFileSync(src, "utf8"));
        delete pkg.devDependencies;
        pkg.optionalDependencies = Object.fromEntries(platforms.map((p) => [`${scope}/${p}`, version]));
        fs.writeFileSync(dest, JSON.stringify(pkg, null, 2) + "\n");
    ' "$ROOT/node/package.json" "$stage/package.json" "$NODE_SCOPE" "$version" "${ALL_PLATFORMS[@]}"
    (cd "$stage" && npm pack --pack-destination "$outdir" --silent) >/dev/null
    rm -rf "$stage"
}

# The platform package's package.json, README and LICENSE in DIR (beside its .node).
write_platform_package() {
    local dir="$1" platform="$2" version="$3"
    node -e '
        const [dir, scope, platform, version, cpu, libc] = process.argv.slice(1);
        const pkg = {
            name: `${scope}/${platform}`, version,
            description: `The native addon of cycles-sdk for ${platform} (installed by cycles-sdk; not used directly)`,
            license: "Apache-2.0", os: ["linux"], cpu: [cpu], libc: [libc],
            main: `cycles.${platform}.node`, files: [`cycles.${platform}.node`],
            engines: { node: ">=20.17" },
        };
        require("fs").writeFileSync(`${dir}/package.json`, JSON.stringify(pkg, null, 2) + "\n");
    ' "$dir" "$NODE_SCOPE" "$platform" "$version" "${NODE_CPU[$platform]}" "${NODE_LIBC[$platform]}"
    cat >"$dir/README.md" <<MD
# $NODE_SCOPE/$platform

The native addon of [cycles-sdk](https://www.npmjs.com/package/cycles-sdk) for Linux
${NODE_CPU[$platform]} with ${NODE_LIBC[$platform]}. Install \`cycles-sdk\`, not this package: npm
adds it as an optional dependency on this platform only.
MD
    copy_license "$dir"
}

# The repository's LICENSE into DIR (every package carries it).
copy_license() { cp "$ROOT/LICENSE" "$1/LICENSE"; }

# Fails unless FILE is PLATFORM's addon: ELF machine, NEEDED libraries, glibc symbols <= 2.17
# (gnu) or none at all (musl).
check_node_addon() {
    local file="$1" platform="$2" needed lib newest allowed
    readelf -h "$file" | grep -q "Machine: *${NODE_ELF_MACHINE[$platform]}" ||
        { echo "$file: not ${NODE_ELF_MACHINE[$platform]}" >&2; return 1; }
    case "$platform" in *-musl) allowed="$NODE_MUSL_LIBS" ;; *) allowed="$NODE_GNU_LIBS" ;; esac
    needed="$(readelf -d "$file" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')"
    for lib in $needed; do
        [[ " $allowed " == *" $lib "* ]] || { echo "$file: links $lib (NEEDED: $needed)" >&2; return 1; }
    done
    newest="$(objdump -T "$file" | { grep -o 'GLIBC_[0-9.]*' || true; } | sort -uV | tail -1)"
    case "$platform" in
        *-musl) [[ -z "$newest" ]] || { echo "$file: a musl addon with glibc symbols ($newest)" >&2; return 1; } ;;
        *) [[ "$(printf '%s\n' "$newest" GLIBC_2.17 | sort -V | tail -1)" == GLIBC_2.17 ]] ||
            { echo "$file: needs $newest, above GLIBC_2.17" >&2; return 1; } ;;
    esac
    log "Node: $(basename "$file"): NEEDED ${needed% }; newest glibc symbol ${newest:-none}; $(du -k "$file" | cut -f1) KiB"
}
