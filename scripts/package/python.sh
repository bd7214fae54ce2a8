# shellcheck shell=bash
# The Python wheel (maturin + zig).
# Sourced by scripts/package.sh (which sets ROOT, OUT, PROFILE, TARGET, PLATFORMS and log).

package_python() {
    local flags=()
    ensure_package_tools
    local tools="$PACKAGE_TOOLS"
    [[ "$PROFILE" == release ]] && flags=(--release)
    log "Python: the abi3 manylinux2014 wheel ($PROFILE)"
    rm -rf "$OUT/python"
    (cd "$ROOT/python" && PATH="$tools/bin:$PATH" CARGO_TARGET_DIR="$TARGET/python-manylinux" \
        "$tools/bin/maturin" build "${flags[@]}" --zig --compatibility manylinux2014 \
        --out "$OUT/python" --quiet) >&2
    log "Python: $(ls "$OUT"/python/*.whl)"
}
