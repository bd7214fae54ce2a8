# shellcheck shell=bash
# The C library: header, shared and static library, pkg-config file.
# Sourced by scripts/package.sh (which sets ROOT, OUT, PROFILE, TARGET, PLATFORMS and log).

package_c() {
    local version dir libdir static_libs
    version="$(cargo metadata --no-deps --format-version 1 --manifest-path "$ROOT/Cargo.toml" |
        python3 -c 'import json,sys; print(next(p["version"] for p in json.load(sys.stdin)["packages"] if p["name"]=="cycles-c"))')"
    log "C: libcycles $version ($PROFILE)"
    # One build of the final crate prints the static library's native dependencies; the
    # dependency graph itself is not rebuilt (extra rustc flags reach the final crate only).
    static_libs="$(cd "$ROOT" && cargo rustc -q -p cycles-c --lib --locked --profile "$PROFILE" \
        -- --print native-static-libs 2>&1 | sed -n 's/.*native-static-libs: //p' | tail -1)"
    [[ -n "$static_libs" ]] || { echo "rustc printed no native-static-libs" >&2; exit 1; }
    dir="$TARGET/$([[ "$PROFILE" == dev ]] && echo debug || echo "$PROFILE")"
    libdir="$OUT/c/lib"
    rm -rf "$OUT/c"
    mkdir -p "$OUT/c/include" "$libdir/pkgconfig"
    cp "$ROOT/bindings/c/include/cycles.h" "$OUT/c/include/"
    cp "$dir/libcycles.so" "$libdir/libcycles.so.$version"
    ln -s "libcycles.so.$version" "$libdir/libcycles.so.0"
    ln -s "libcycles.so.0" "$libdir/libcycles.so"
    cp "$dir/libcycles.a" "$libdir/libcycles.a"
    cat >"$libdir/pkgconfig/cycles.pc" <<PC
prefix=$OUT/c
libdir=\${prefix}/lib
includedir=\${prefix}/include

Name: cycles
Description: Cycles SDK: runtime budget authority for AI agents (C API of cycles-core)
Version: $version
Cflags: -I\${includedir}
Libs: -L\${libdir} -lcycles
Libs.private: $static_libs
PC
    log "C: installed into $OUT/c"
}
