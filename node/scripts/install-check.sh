#!/usr/bin/env bash
# The packed tarball installed offline into an empty folder and used from plain ESM, plain
# CommonJS and TypeScript (`tsc --noEmit --strict`, then the `await using` form compiled and
# run on this Node); the Node quick start (docs/node.md's first js block, README.md's copy)
# type-checked with `tsc --strict --noEmit` as TypeScript and as checked JavaScript.
# Expects a built package (scripts/build.sh).
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
import { Client, CyclesError, type DrainReport, type GuardedReservation, type Int64 } from "cycles-sdk";
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
  const { value, outcome } = await client.guardedWithOutcome({ estimate: 10, action: { kind: "k", name: "n" }, actual: 2 }, async () => "v");
  const charged: Int64 | undefined = outcome.settlement.status === "committed" ? outcome.settlement.charged.amount : undefined;
  // @ts-expect-error: the LocalServer config is typed, a misspelt key does not compile
  void (() => new LocalServer({ budget: [] }));
  const report: DrainReport = await client.flush();
  try {
    await client.getReservation("nope");
  } catch (e) {
    if (!(e instanceof CyclesError) || e.httpStatus !== 404) throw e;
  }
  console.log("ts ok", cost, value, charged, report.clean);
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
# The quick start exactly as documented, once as a .mts file (what a TypeScript user pastes)
# and once as the .mjs it is (checkJs): a user must not need a `!` to compile it.
node -e '
const fs = require("node:fs");
const [block] = [...fs.readFileSync(process.argv[1], "utf8").matchAll(/```js\n([\s\S]*?)```/g)].map((m) => m[1]);
if (!block || !block.includes("from \"cycles-sdk\"")) throw new Error("no quick start block in " + process.argv[1]);
fs.writeFileSync("quickstart.mts", block);
fs.writeFileSync("quickstart.mjs", block);
' "$here/../docs/node.md"
cat > tsconfig.quickstart.json <<JSON
{
  "extends": "./tsconfig.json",
  "compilerOptions": { "allowJs": true, "checkJs": true, "noEmit": true },
  "files": ["quickstart.mts", "quickstart.mjs"]
}
JSON
tsc="$here/node_modules/typescript/bin/tsc"
node "$tsc" --noEmit --strict -p .
node "$tsc" --noEmit --strict -p tsconfig.quickstart.json
node "$tsc" -p .
for script in esm.mjs cjs.cjs out/check.js; do
  timeout 20 node "$script"
done
echo "install check: ESM, CJS, TypeScript (strict) and the quick start type-checked (strict) from the packed tarball: ok"
