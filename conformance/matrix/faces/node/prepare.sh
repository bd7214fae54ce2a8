#!/usr/bin/env bash
# Prepares the Node face: the `cycles-sdk` package built in place in node/ (what
# node/scripts/test.sh leaves; built with node/scripts/build.sh only when missing or older
# than its sources), linked as ./node_modules/cycles-sdk so face.mjs imports it by name as a
# user's code does. Honours CARGO_TARGET_DIR. Progress on stderr.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../../../.." && pwd)"
pkg="$repo/node"

addon="$(ls "$pkg"/native/cycles.*.node 2>/dev/null | head -1 || true)"
stale=""
if [ -z "$addon" ] || [ ! -f "$pkg/dist/esm/index.mjs" ]; then
  stale="not built"
elif [ -n "$(find "$repo/bindings/node/src" "$repo/bindings/bridge/src" "$repo/core/src" -newer "$addon" -print -quit)" ] \
  || [ -n "$(find "$pkg/src" -newer "$pkg/dist/esm/index.mjs" -print -quit)" ]; then
  stale="older than its sources"
fi
if [ -n "$stale" ]; then
  echo "node face: building the cycles-sdk package ($stale)" >&2
  bash "$pkg/scripts/build.sh" >&2
fi

mkdir -p "$here/node_modules"
ln -sfn ../../../../../node "$here/node_modules/cycles-sdk"
(cd "$here" && node --input-type=module -e 'await import("cycles-sdk"); await import("cycles-sdk/timing"); await import("cycles-sdk/journal")') >&2
echo "node face: ready ($(node --version))" >&2
