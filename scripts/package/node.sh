# shellcheck shell=bash
# The npm package.
# Sourced by scripts/package.sh (which sets ROOT, OUT, PROFILE, TARGET, PLATFORMS and log).

package_node() {
    log "Node: npm tarball (release addon for linux-x64-gnu)"
    bash "$ROOT/node/scripts/pack.sh" "$OUT/node"
    log "Node: $(ls "$OUT"/node/*.tgz)"
}
