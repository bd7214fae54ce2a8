#!/usr/bin/env bash
# The packed tarball installed offline into an empty folder and used from plain ESM, plain
# CommonJS and TypeScript (`tsc --noEmit --strict`, then the `await using` form compiled and
# run on this Node). Expects a built package (scripts/build.sh).
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
CYCLES_NODE_BUILT=1 bash "$here/scripts/pack.sh" "$tmp" >/dev/null
mkdir "$tmp/app"
cd "$tmp/app"
echo '{"name": "app", "version": "1.0.0", "private": true}' > package.json
npm install --offline --no-audit --no-fund --silent "$tmp"/cycles-sdk-*.tgz

cat > esm.mjs <<'JS'
import { createRequire } from "node:module";
import { Client, currentReservation } from "cycles-sdk";
import { LocalServer } from "cycles-sdk/testing";
const required = createRequire(import.meta.url)("cycles-sdk");
if (required.Client !== Client) throw new Error("ESM and CJS must share one module state");
const server = new LocalServer();
const client = new Client({ baseUrl: server.url, apiKey: server.apiKey, tenant: "acme", journalEnabled: false });
const out = await client.guarded({ estimate: 10, action: { kind: "k", name: "n" }, actual: 4 }, async (r) => currentReservation() === r);
await client.close();
server.stop();
console.log("esm ok", out);
JS
cat > cjs.cjs <<'JS'
const { Client } = require("cycles-sdk");
const { LocalServer } = require("cycles-sdk/testing");
(async () => {
  const server = new LocalServer();
  const client = new Client({ baseUrl: server.url, apiKey: server.apiKey, tenant: "acme", journalEnabled: false });
  const r = await client.reserve({ estimate: 10, action: { kind: "k", name: "n" } });
  r.setActual(3);
  await r.finish();
  await client.close();
  server.stop();
  console.log("cjs ok", r.settlement.status);
})();
JS
cat > check.ts <<'TS'
import { Client, CyclesError, type DrainReport, type GuardedReservation } from "cycles-sdk";
import { LocalServer } from "cycles-sdk/testing";

async function main(): Promise<void> {
  using server = new LocalServer();
  await using client = new Client({ baseUrl: server.url, apiKey: server.apiKey, tenant: "acme", journalEnabled: false });
  {
    await using r: GuardedReservation = await client.reserve({ estimate: 100n, action: { kind: "k", name: "n" } });
    r.add(40);
  }
  const cost: number = await client.guarded(
    { estimate: { unit: "USD_MICROCENTS", amount: 10 }, action: { kind: "k", name: "n" }, actual: (x: number) => x },
    async () => 6,
  );
  const report: DrainReport = await client.flush();
  try {
    await client.getReservation("nope");
  } catch (e) {
    if (!(e instanceof CyclesError) || e.httpStatus !== 404) throw e;
  }
  console.log("ts ok", cost, report.clean);
}
void main();
TS
cat > tsconfig.json <<JSON
{
  "compilerOptions": {
    "target": "ES2022", "module": "nodenext", "moduleResolution": "nodenext",
    "lib": ["ES2022", "esnext.disposable"], "strict": true, "outDir": "out",
    "types": ["node"], "typeRoots": ["$here/node_modules/@types"]
  },
  "files": ["check.ts"]
}
JSON
tsc="$here/node_modules/typescript/bin/tsc"
node "$tsc" --noEmit --strict -p .
node "$tsc" -p .
for script in esm.mjs cjs.cjs out/check.js; do
  timeout 20 node "$script"
done
echo "install check: ESM, CJS and TypeScript (strict) from the packed tarball: ok"
