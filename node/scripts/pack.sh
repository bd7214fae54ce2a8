#!/usr/bin/env bash
# Writes the installable npm tarballs into OUT: `node/scripts/pack.sh OUT`, i.e.
# cycles-sdk-<version>.tgz and cycles-sdk-linux-x64-gnu-<version>.tgz (@cycles-sdk/linux-x64-gnu)
# around the addon node/scripts/build.sh built for this host (linked against this host's glibc;
# `scripts/package.sh OUT node` builds the portable glibc-2.17 and musl ones). Builds first
# unless CYCLES_NODE_BUILT=1.
set -euo pipefail
out="${1:?usage: pack.sh OUT}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
log() { printf '== node pack: %s\n' "$*" >&2; }
# shellcheck source=../../scripts/package/common.sh
source "$ROOT/scripts/package/common.sh"
# shellcheck source=../../scripts/package/node.sh
source "$ROOT/scripts/package/node.sh"
[ "${CYCLES_NODE_BUILT:-0}" = 1 ] || bash "$ROOT/node/scripts/build.sh"
version="$(node_version)"
node_platform_tarball "$ROOT/node/native/cycles.linux-x64-gnu.node" linux-x64-gnu "$out" "$version"
node_main_tarball "$out" "$version"
