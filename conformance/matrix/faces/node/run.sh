#!/usr/bin/env bash
# Runs the Node face (PROTOCOL.md on stdin/stdout); prepare.sh first.
here="$(cd "$(dirname "$0")" && pwd)"
if [ ! -e "$here/node_modules/cycles-sdk/dist/esm/index.mjs" ]; then
  echo "node face: not prepared (run $here/prepare.sh)" >&2
  exit 1
fi
exec node "$here/face.mjs"
