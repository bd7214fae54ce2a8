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
