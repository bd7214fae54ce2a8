#!/usr/bin/env bash
# Builds the package in place: pinned devDependencies (npm ci), the native addon (release,
# through `napi build` only: napi's CLI and a plain `cargo build` would rebuild each other's
# artifacts), the generated loader and .d.ts, the TypeScript, the ESM entry points.
# Honours CARGO_TARGET_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ ! -d node_modules/@napi-rs/cli ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund --prefer-offline
fi
npx napi build --platform --release \
  --manifest-path ../bindings/node/Cargo.toml --package-json-path package.json \
  -o native --no-js --dts native.d.ts
rm -rf dist
npx tsc -p .
chmod +x dist/cli.js
node scripts/esm.mjs index testing timing journal pricing openai anthropic express ai langchain
