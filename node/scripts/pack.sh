#!/usr/bin/env bash
# Writes the installable npm tarball (cycles-sdk-<version>.tgz, with the linux-x64-gnu addon)
# into OUT: `node/scripts/pack.sh OUT`. Builds first unless CYCLES_NODE_BUILT=1.
set -euo pipefail
out="${1:?usage: pack.sh OUT}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
cd "$(dirname "$0")/.."
[ "${CYCLES_NODE_BUILT:-0}" = 1 ] || bash scripts/build.sh
npm pack --pack-destination "$out" --silent
