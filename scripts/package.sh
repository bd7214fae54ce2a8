#!/usr/bin/env bash
# Builds what users install, into OUT/<language>/:
#
#   scripts/package.sh OUT [python] [c] [node] [java] ...   # no language: every language
#
#   OUT/python/cycles_sdk-*.whl        the portable abi3 manylinux2014 wheel (maturin + zig, as
#                                      python/scripts/test.sh builds it)
#   OUT/c/include/cycles.h             the committed cbindgen header
#   OUT/c/lib/libcycles.so.0.X.Y       + libcycles.so.0 (SONAME) and libcycles.so symlinks
#   OUT/c/lib/libcycles.a              the static library
#   OUT/c/lib/pkgconfig/cycles.pc      prefix=OUT/c; Libs.private from rustc's native-static-libs
#   OUT/node/cycles-sdk-*.tgz          the npm package with the linux-x64-gnu addon (npm pack)
#   OUT/java/cycles-sdk-X.Y.Z.jar      dev.cycles:cycles-sdk with native/<os>-<arch>/libcycles_jvm.so
#                                      (+ -sources.jar, -javadoc.jar); Maven runs the JUnit suite
#                                      unless CYCLES_PACKAGE_SKIP_TESTS=1
#
# Release builds by default; CYCLES_PACKAGE_PROFILE=dev builds the debug profile (the C tests
# use it: much faster, same ABI). Cargo builds in $CARGO_TARGET_DIR (default target/).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
[[ $# -ge 1 ]] || { echo "usage: scripts/package.sh OUT [python] [c] [node] [java] ..." >&2; exit 2; }
OUT="$(mkdir -p "$1" && cd "$1" && pwd)"
shift
LANGS=("$@")
[[ ${#LANGS[@]} -gt 0 ]] || LANGS=(python c node java)
PROFILE="${CYCLES_PACKAGE_PROFILE:-release}"
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
log() { printf '== package: %s\n' "$*" >&2; }

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

package_python() {
    local tools="${CYCLES_PACKAGE_TOOLS:-$HOME/.cache/cycles-package/tools}" stamp flags=()
    stamp="maturin==1.16.0 ziglang==0.12.1"
    if [[ ! -x "$tools/bin/maturin" || "$(cat "$tools/.stamp" 2>/dev/null)" != "$stamp" ]]; then
        rm -rf "$tools"
        python3 -m venv "$tools"
        "$tools/bin/python" -m pip install -q --disable-pip-version-check maturin==1.16.0 ziglang==0.12.1
        echo "$stamp" >"$tools/.stamp"
    fi
    [[ "$PROFILE" == release ]] && flags=(--release)
    log "Python: the abi3 manylinux2014 wheel ($PROFILE)"
    rm -rf "$OUT/python"
    (cd "$ROOT/python" && PATH="$tools/bin:$PATH" CARGO_TARGET_DIR="$TARGET/python-manylinux" \
        "$tools/bin/maturin" build "${flags[@]}" --zig --compatibility manylinux2014 \
        --out "$OUT/python" --quiet) >&2
    log "Python: $(ls "$OUT"/python/*.whl)"
}

package_node() {
    log "Node: npm tarball (release addon for linux-x64-gnu)"
    bash "$ROOT/node/scripts/pack.sh" "$OUT/node"
    log "Node: $(ls "$OUT"/node/*.tgz)"
}

package_java() {
    local dir stamp mvn=(mvn -B -q) skip=()
    dir="$TARGET/$([[ "$PROFILE" == dev ]] && echo debug || echo "$PROFILE")"
    log "Java: libcycles_jvm ($PROFILE) and dev.cycles:cycles-sdk"
    (cd "$ROOT" && cargo build -q -p cycles-jvm --locked --profile "$PROFILE")
    # Offline once this pom's plugins and dependencies were resolved into ~/.m2.
    stamp="$HOME/.m2/cycles-sdk-resolved-$(sha256sum "$ROOT/java/pom.xml" | cut -c1-16)"
    [[ -f "$stamp" ]] && mvn+=(-o)
    [[ "${CYCLES_PACKAGE_SKIP_TESTS:-0}" == 1 ]] && skip=(-DskipTests)
    (cd "$ROOT/java" && "${mvn[@]}" clean package "${skip[@]}" -Dcycles.native.dir="$dir") >&2
    mkdir -p "$(dirname "$stamp")" && touch "$stamp"
    rm -rf "$OUT/java"
    mkdir -p "$OUT/java"
    cp "$ROOT"/java/target/cycles-sdk-*.jar "$OUT/java/"
    log "Java: $(cd "$OUT/java" && ls)"
}

for lang in "${LANGS[@]}"; do
    case "$lang" in
        c) package_c ;;
        python) package_python ;;
        node) package_node ;;
        java) package_java ;;
        *) echo "unknown language: $lang (python, c, node, java)" >&2; exit 2 ;;
    esac
done
