# shellcheck shell=bash
# The C library: header, shared and static library, pkg-config file, one tarball per platform.
# Sourced by scripts/package.sh (which sets ROOT, OUT, PROFILE, TARGET, PLATFORMS and log).
#
#   OUT/c/cycles-c-X.Y.Z-PLATFORM.tar.gz        cycles-c-X.Y.Z-PLATFORM/{include/cycles.h,
#                                               lib/libcycles.so.X.Y.Z (+ .so.0, .so links),
#                                               lib/libcycles.a, lib/pkgconfig/cycles.pc,
#                                               README.md, LICENSE}: stripped; on musl the
#                                               archive carries Rust's LLVM libunwind
#   OUT/c/cycles-c-X.Y.Z-PLATFORM.debug.tar.gz  the same folder with lib/libcycles.so.X.Y.Z.debug
#                                               (the shared library's debug info; extract both
#                                               into one place and gdb finds it) and LICENSE
#   OUT/c/{include,lib}                         the host platform's install tree (unstripped),
#                                               when the host platform is built: the C tests
#                                               compile against it
#
# cycles.pc is relocatable: its prefix is ${pcfiledir}/../.., wherever the tree is unpacked.
# The host platform in the dev profile is built with plain cargo into $TARGET (the tests' fast
# path, sharing their build; the install tree only, no tarball); every other build is
# cargo-zigbuild's, glibc targets at glibc 2.17, in $TARGET/platforms/PLATFORM-lib.

package_c() {
    local version platform
    version="$(cargo metadata --no-deps --format-version 1 --manifest-path "$ROOT/Cargo.toml" |
        python3 -c 'import json,sys; print(next(p["version"] for p in json.load(sys.stdin)["packages"] if p["name"]=="cycles-c"))')"
    rm -rf "$OUT/c"
    mkdir -p "$OUT/c"
    for platform in "${PLATFORMS[@]}"; do
        package_c_platform "$platform" "$version"
    done
    log "C: $(cd "$OUT/c" && ls -d -- *.tar.gz include 2>/dev/null | tr '\n' ' ')"
}

# The C library of one platform: its tarballs, and the host install tree for the host platform.
package_c_platform() {
    local platform="$1" version="$2" static_libs stage name out
    log "C: libcycles $version for $platform ($PROFILE)"
    # The build of the final crate prints the static library's native dependencies (rustc's
    # flag reaches the final crate only: the dependency graph is not rebuilt).
    local sodir adir
    if [[ "$platform" == "$HOST_PLATFORM" && "$PROFILE" == dev ]]; then
        out="$(cd "$ROOT" && cargo rustc -q -p cycles-c --lib --locked --profile dev \
            -- --print native-static-libs 2>&1)" || { echo "$out" >&2; return 1; }
        sodir="$TARGET/debug" adir="$TARGET/debug"
    elif [[ "$platform" == *-musl ]]; then
        # musl: the shared library needs crt-static off, while the static library keeps musl's
        # default (crt-static, libunwind bundled) so that `musl-gcc -static` links it; the
        # static one shares its build with the static CLI.
        platform_cargo "$platform" lib rustc -q -p cycles-c --lib --crate-type cdylib >&2
        out="$(platform_cargo "$platform" static rustc -q -p cycles-c --lib --crate-type staticlib \
            -- --print native-static-libs 2>&1)" || { echo "$out" >&2; return 1; }
        sodir="$(platform_artifact_dir "$platform" lib)" adir="$(platform_artifact_dir "$platform" static)"
    else
        out="$(platform_cargo "$platform" lib rustc -q -p cycles-c --lib -- --print native-static-libs 2>&1)" ||
            { echo "$out" >&2; return 1; }
        sodir="$(platform_artifact_dir "$platform" lib)" adir="$sodir"
    fi
    static_libs="$(sed -n 's/.*native-static-libs: //p' <<<"$out" | tail -1)"
    [[ -n "$static_libs" ]] || { echo "rustc printed no native-static-libs for $platform" >&2; return 1; }
    # musl: rustc wants -lunwind, the LLVM libunwind it links into executables itself, which a
    # musl system seldom has (musl-gcc has libgcc_eh, not libunwind): the archive carries it.
    local unwind=""
    if [[ "$platform" == *-musl ]]; then
        unwind="$(rustc --print sysroot)/lib/rustlib/$(platform_triple "$platform")/lib/self-contained/libunwind.a"
        [[ -f "$unwind" ]] || { echo "no $unwind (rustup target add $(platform_triple "$platform"))" >&2; return 1; }
        static_libs="$(sed 's/\(^\| \)-lunwind\( \|$\)/\1/' <<<"$static_libs")"
    fi

    name="cycles-c-$version-$platform"
    stage="$OUT/c/.stage/$name"
    rm -rf "$OUT/c/.stage"
    c_install_tree "$stage" "$sodir" "$adir" "$version" "$static_libs"
    if [[ -n "$unwind" ]]; then
        # llvm-ar (zig's) reads every arch's objects for the archive's symbol index.
        printf 'CREATE %s\nADDLIB %s\nADDLIB %s\nSAVE\nEND\n' "$stage/lib/libcycles-merged.a" \
            "$stage/lib/libcycles.a" "$unwind" | "$PACKAGE_TOOLS/bin/python" -m ziglang ar -M
        mv "$stage/lib/libcycles-merged.a" "$stage/lib/libcycles.a"
    fi
    cp "$ROOT/LICENSE" "$ROOT/bindings/c/README.md" "$stage/"
    if [[ "$platform" == "$HOST_PLATFORM" ]]; then
        cp -a "$stage/include" "$stage/lib" "$OUT/c/"
        # The tests' dev build: the install tree only (packing its ~200 MB is no release).
        if [[ "$PROFILE" == dev ]]; then
            rm -rf "$OUT/c/.stage"
            return
        fi
    fi
    mkdir -p "$OUT/c/.stage/debug/$name/lib"
    cp "$ROOT/LICENSE" "$OUT/c/.stage/debug/$name/"
    strip_artifact "$platform" "$stage/lib/libcycles.so.$version" "$OUT/c/.stage/debug/$name/lib/libcycles.so.$version.debug"
    strip_artifact "$platform" "$stage/lib/libcycles.a"
    tar -C "$OUT/c/.stage" --owner=0 --group=0 --numeric-owner -czf "$OUT/c/$name.tar.gz" "$name"
    tar -C "$OUT/c/.stage/debug" --owner=0 --group=0 --numeric-owner -czf "$OUT/c/$name.debug.tar.gz" "$name"
    rm -rf "$OUT/c/.stage"
}

# c_install_tree PREFIX SO-DIR A-DIR VERSION STATIC-LIBS: include/, lib/ (libcycles.so from
# SO-DIR, libcycles.a from A-DIR) and lib/pkgconfig/cycles.pc.
c_install_tree() {
    local prefix="$1" sodir="$2" adir="$3" version="$4" static_libs="$5" libdir="$1/lib"
    mkdir -p "$prefix/include" "$libdir/pkgconfig"
    cp "$ROOT/bindings/c/include/cycles.h" "$prefix/include/"
    cp "$sodir/libcycles.so" "$libdir/libcycles.so.$version"
    ln -s "libcycles.so.$version" "$libdir/libcycles.so.0"
    ln -s "libcycles.so.0" "$libdir/libcycles.so"
    cp "$adir/libcycles.a" "$libdir/libcycles.a"
    # ${pcfiledir}: pkg-config's (and pkgconf's) folder of this file, so the tree can move.
    cat >"$libdir/pkgconfig/cycles.pc" <<PC
prefix=\${pcfiledir}/../..
libdir=\${prefix}/lib
includedir=\${prefix}/include

Name: cycles
Description: Cycles SDK: runtime budget authority for AI agents (C API of cycles-core)
Version: $version
Cflags: -I\${includedir}
Libs: -L\${libdir} -lcycles
Libs.private: $static_libs
PC
}
