# shellcheck shell=bash
# Shared by scripts/package.sh, scripts/package/*.sh and the platform checks: the platforms we
# ship, and the pinned build tools (maturin, zig, cargo-zigbuild) in a venv outside the clone.

# The Linux platforms every artifact is built for: name (npm's os-cpu-libc spelling) -> Rust
# target triple. glibc targets link against glibc 2.17 (manylinux2014) through zig.
declare -gA PLATFORM_TRIPLE=(
    [linux-x64-gnu]=x86_64-unknown-linux-gnu
    [linux-arm64-gnu]=aarch64-unknown-linux-gnu
    [linux-x64-musl]=x86_64-unknown-linux-musl
    [linux-arm64-musl]=aarch64-unknown-linux-musl
)
ALL_PLATFORMS=(linux-x64-gnu linux-arm64-gnu linux-x64-musl linux-arm64-musl)
HOST_PLATFORM=linux-x64-gnu

# Folders a step stages in and removes when it is done: registered here as well, so a script
# that sources this file can remove them on any exit (scripts/package.sh's EXIT trap) when the
# step fails before its own rm.
SCRATCH=()
scratch() { SCRATCH+=("$@"); }

# The pinned tools; bumping a pin rebuilds the venv.
PACKAGE_TOOLS_PINS="maturin==1.16.0 ziglang==0.12.1 cargo-zigbuild==0.24.1"
PACKAGE_TOOLS="${CYCLES_PACKAGE_TOOLS:-$HOME/.cache/cycles-package/tools}"

# Installs the pinned tools once into $PACKAGE_TOOLS and puts them on PATH.
ensure_package_tools() {
    if [[ ! -x "$PACKAGE_TOOLS/bin/maturin" || "$(cat "$PACKAGE_TOOLS/.stamp" 2>/dev/null)" != "$PACKAGE_TOOLS_PINS" ]]; then
        rm -rf "$PACKAGE_TOOLS"
        python3 -m venv "$PACKAGE_TOOLS"
        # shellcheck disable=SC2086
        "$PACKAGE_TOOLS/bin/python" -m pip install -q --disable-pip-version-check $PACKAGE_TOOLS_PINS
        echo "$PACKAGE_TOOLS_PINS" >"$PACKAGE_TOOLS/.stamp"
    fi
    case ":$PATH:" in *":$PACKAGE_TOOLS/bin:"*) ;; *) export PATH="$PACKAGE_TOOLS/bin:$PATH" ;; esac
}

# Adds the Rust standard library of a target triple (once; rustup is a no-op afterwards).
ensure_rust_target() {
    rustup target list --installed | grep -qx "$1" || rustup target add "$1" >&2
}

# The Rust triple of a platform name, or a clear error.
platform_triple() {
    local t="${PLATFORM_TRIPLE[$1]:-}"
    [[ -n "$t" ]] || { echo "unknown platform: $1 (${ALL_PLATFORMS[*]})" >&2; return 2; }
    echo "$t"
}

# The zig target of a platform: glibc targets carry the glibc they link against (2.17).
platform_zig_target() {
    local t
    t="$(platform_triple "$1")" || return
    [[ "$t" == *-gnu ]] && t="$t.2.17"
    echo "$t"
}

# The platform's folder in the jar (NativeLoader computes the same name at run time):
# os-maven-plugin's arch names, with -musl on musl.
platform_jvm_classifier() {
    case "$1" in
        linux-x64-gnu) echo linux-x86_64 ;;
        linux-arm64-gnu) echo linux-aarch_64 ;;
        linux-x64-musl) echo linux-x86_64-musl ;;
        linux-arm64-musl) echo linux-aarch_64-musl ;;
        *) echo "unknown platform: $1 (${ALL_PLATFORMS[*]})" >&2; return 2 ;;
    esac
}

# Cargo's target dir of one platform's zig builds. KIND `lib` holds the shared libraries (on musl
# built with -crt-static off, which a shared library needs); KIND `static` the static musl CLI:
# the two sets of flags would rebuild each other in one dir.
platform_target_dir() { echo "${TARGET:?}/platforms/$1-$2"; }

# Where platform_cargo PLATFORM KIND leaves its artifacts.
platform_artifact_dir() {
    echo "$(platform_target_dir "$1" "$2")/$(platform_triple "$1")/$([[ "${PROFILE:?}" == dev ]] && echo debug || echo "$PROFILE")"
}

# platform_cargo PLATFORM KIND SUBCOMMAND ARGS... [-- RUSTC-ARGS]: cargo-zigbuild for the
# platform (zigbuild or rustc), in its target dir, with $PROFILE. Prints cargo's stdout.
platform_cargo() {
    local platform="$1" kind="$2" sub="$3" triple var flags=""
    shift 3
    triple="$(platform_triple "$platform")"
    ensure_package_tools
    ensure_rust_target "$triple"
    var="CARGO_TARGET_$(tr 'a-z-' 'A-Z_' <<<"$triple")_RUSTFLAGS"
    [[ "$kind" == lib && "$triple" == *-musl ]] && flags="-C target-feature=-crt-static"
    local args=() rest=()
    while [[ $# -gt 0 && "$1" != -- ]]; do args+=("$1"); shift; done
    [[ $# -gt 0 ]] && rest=("$@")
    (cd "$ROOT" && env "$var=$flags" CARGO_TARGET_DIR="$(platform_target_dir "$platform" "$kind")" \
        cargo-zigbuild "$sub" "${args[@]}" --locked --profile "$PROFILE" \
        --target "$(platform_zig_target "$platform")" "${rest[@]}")
}

# The objcopy that reads the platform's ELF files: llvm-objcopy (any arch) when present, else
# binutils' (Debian's binutils-aarch64-linux-gnu for aarch64, installed when missing).
platform_objcopy() {
    if command -v llvm-objcopy >/dev/null; then echo llvm-objcopy; return; fi
    case "$1" in
        linux-x64-*) echo objcopy ;;
        linux-arm64-*)
            if ! command -v aarch64-linux-gnu-objcopy >/dev/null; then
                local sudo=""; [[ $(id -u) -eq 0 ]] || sudo=sudo
                $sudo apt-get -o DPkg::Lock::Timeout=600 install -y -qq binutils-aarch64-linux-gnu >/dev/null
            fi
            echo aarch64-linux-gnu-objcopy ;;
    esac
}

# strip_artifact PLATFORM FILE [DEBUG]: FILE loses its debug info and symbol table (a shared
# library keeps its dynamic symbols; an archive only loses debug sections, as its symbols are
# what a link needs); with DEBUG, the debug info goes there first and FILE names it in a
# .gnu_debuglink (gdb finds DEBUG beside FILE or in a .debug/ folder next to it).
strip_artifact() {
    local objcopy file="$2" debug="${3:-}" how=--strip-all
    objcopy="$(platform_objcopy "$1")"
    case "$file" in
        *.a) how=--strip-debug ;;
        *.so | *.so.*) how=--strip-unneeded ;;
    esac
    if [[ -n "$debug" ]]; then
        "$objcopy" --only-keep-debug "$file" "$debug"
        "$objcopy" "$how" "$file"
        (cd "$(dirname "$debug")" && "$objcopy" --add-gnu-debuglink="$(basename "$debug")" "$file")
    else
        "$objcopy" "$how" "$file"
    fi
}
