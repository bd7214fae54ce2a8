#!/usr/bin/env bash
# The packed tarballs (cycles-sdk and this host's @cycles-sdk/linux-x64-gnu, as scripts/pack.sh
# writes them; or the ones in $CYCLES_NODE_TARBALLS, a scripts/package.sh OUT/node folder)
# installed offline into an empty folder and used from plain ESM (the integration subpaths too;
# cycles-sdk/langchain's import without @langchain/core names what to install), plain CommonJS and TypeScript
# (`tsc --noEmit --strict`, then the `await using` form compiled and run on this Node); the
# quick start of the installed package's README (the same block as docs/node.md's first js
# block) type-checked with `tsc --strict --noEmit` as TypeScript and as checked JavaScript,
# then run; the integrations' tokenizer "auto" without js-tiktoken and after installing it;
# `npx cycles-sdk` --version, demo, and serve stopped by SIGINT.
# Expects a built package (scripts/build.sh).
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
tarballs="${CYCLES_NODE_TARBALLS:-}"
if [ -z "$tarballs" ]; then
  tarballs="$tmp/packed"
  CYCLES_NODE_BUILT=1 bash "$here/scripts/pack.sh" "$tarballs" >/dev/null
fi
version="$(node -p 'require(process.argv[1]).version' "$here/package.json")"
main="$tarballs/cycles-sdk-$version.tgz"
platform="$tarballs/cycles-sdk-linux-x64-gnu-$version.tgz"
# What the tarballs carry: the main one a README and no addon, the platform one its addon.
listing="$(tar -tzf "$main")"
grep -qx package/README.md <<<"$listing" || { echo "$main has no README.md" >&2; exit 1; }
if [ -f "$here/../LICENSE" ]; then
  grep -qx package/LICENSE <<<"$listing" || { echo "$main has no LICENSE" >&2; exit 1; }
fi
if grep -q '\.node$' <<<"$listing"; then echo "$main carries an addon" >&2; exit 1; fi
tar -tzf "$platform" | grep -qx package/cycles.linux-x64-gnu.node || { echo "$platform has no addon" >&2; exit 1; }
mkdir "$tmp/app"
cd "$tmp/app"
echo '{"name": "app", "version": "1.0.0", "private": true}' > package.json
# The platform package first, so the main package's optional dependency on it is met offline
# (the other three platforms' are skipped: their os/cpu/libc do not match).
npm install --offline --no-audit --no-fund --silent "$platform" "$main"
[ -f node_modules/@cycles-sdk/linux-x64-gnu/cycles.linux-x64-gnu.node ] || { echo "the platform package is not installed" >&2; exit 1; }

cat > esm.mjs <<'JS'
import { createRequire } from "node:module";
import { Client, currentReservation } from "cycles-sdk";
import { LocalServer } from "cycles-sdk/testing";
const required = createRequire(import.meta.url)("cycles-sdk");
if (required.Client !== Client) throw new Error("ESM and CJS must share one module state");
const server = new LocalServer();
const client = new Client({ baseUrl: server.url, apiKey: server.apiKey, tenant: "acme", journalEnabled: false });
const out = await client.guarded({ estimate: 10, action: { kind: "k", name: "n" }, actual: 4 }, async (r) => currentReservation() === r);
// The integration subpaths load without their libraries (they guard the client they are given).
const { textTokens } = await import("cycles-sdk/pricing");
const { guardOpenAI } = await import("cycles-sdk/openai");
const { guardAnthropic } = await import("cycles-sdk/anthropic");
const { cycles: middleware } = await import("cycles-sdk/express");
const { cyclesMiddleware } = await import("cycles-sdk/ai");
if (textTokens("abcd") !== 1 || typeof guardOpenAI !== "function" || typeof guardAnthropic !== "function" || typeof middleware !== "function" || typeof cyclesMiddleware !== "function") throw new Error("the integration subpaths");
// cycles-sdk/langchain extends @langchain/core's BaseChatModel, not installed here: its import names what to install.
const missing = await import("cycles-sdk/langchain").then(() => null, (e) => e);
if (!missing || missing.code !== "MODULE_NOT_FOUND" || !missing.message.includes("npm install @langchain/core")) throw new Error(`cycles-sdk/langchain without @langchain/core: ${missing}`);
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
# The quick start exactly as the installed README has it, once as a .mts file (what a
# TypeScript user pastes) and once as the .mjs it is (checkJs): a user must not need a `!` to
# compile it. It is docs/node.md's first block, word for word.
node -e '
const fs = require("node:fs");
const first = (file) => [...fs.readFileSync(file, "utf8").matchAll(/```js\n([\s\S]*?)```/g)].map((m) => m[1])[0];
const block = first(process.argv[1]);
if (!block || !block.includes("from \"cycles-sdk\"")) throw new Error("no quick start block in " + process.argv[1]);
if (block !== first(process.argv[2])) throw new Error("the package README quick start differs from docs/node.md");
fs.writeFileSync("quickstart.mts", block);
fs.writeFileSync("quickstart.mjs", block);
' node_modules/cycles-sdk/README.md "$here/../docs/node.md"
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
timeout 20 node quickstart.mjs | tee quickstart.out
grep -qx "answer 42" quickstart.out && grep -qx "settlement committed 150000" quickstart.out ||
  { echo "the README quick start printed something else" >&2; exit 1; }

# tokenizer "auto" (src/tokenizer.ts): without js-tiktoken a prompt is core's estimate; after
# `npm install js-tiktoken` (from npm's cache when test/integrations put it there) the same call
# reserves js-tiktoken's count. The AI SDK middleware, driven as wrapLanguageModel drives it
# (it imports nothing from `ai`), over a stand-in model whose doGenerate reports usage.
# system "internationalization" is 5 tokens to core and 2 to o200k_base; user "日本語のテキスト"
# 2 and 6: reserved (4 + 5) + (4 + 2) + 50 = 65 without, (4 + 2) + (4 + 6) + 50 = 66 with.
cat > tokenizer.mjs <<'JS'
import { Client } from "cycles-sdk";
import { cyclesMiddleware } from "cycles-sdk/ai";
import { LocalServer } from "cycles-sdk/testing";
const server = new LocalServer({ budgets: [{ scope: "tenant:acme", unit: "TOKENS", allocated: 1000 }] });
const client = new Client({ baseUrl: server.url, apiKey: server.apiKey, tenant: "acme", journalEnabled: false });
const mw = cyclesMiddleware({ client });
const model = { modelId: "gpt-4o-mini", provider: "openai.chat" };
const prompt = [
  { role: "system", content: "internationalization" },
  { role: "user", content: [{ type: "text", text: "日本語のテキスト" }] },
];
const params = await mw.transformParams({ type: "generate", params: { prompt, maxOutputTokens: 50 }, model });
const usage = { inputTokens: { total: 1 }, outputTokens: { total: 1 } };
await mw.wrapGenerate({ doGenerate: async () => ({ usage, content: [] }), doStream: async () => ({}), params, model });
const reserved = server.ledger().find((e) => e.kind === "reserve").amount;
await client.close();
server.stop();
console.log("reserved", reserved);
JS
[ "$(timeout 20 node tokenizer.mjs)" = "reserved 65" ] || { echo "tokenizer auto without js-tiktoken: not core's estimate" >&2; exit 1; }
npm install --prefer-offline --no-audit --no-fund --silent js-tiktoken@1.0.21
[ "$(timeout 30 node tokenizer.mjs)" = "reserved 66" ] || { echo "tokenizer auto with js-tiktoken: not its count" >&2; exit 1; }

# The bin: the Rust command through the addon, no other executable in the package.
[ "$(npx --no-install cycles-sdk --version)" = "cycles $version" ] || { echo "npx cycles-sdk --version" >&2; exit 1; }
timeout 60 npx --no-install cycles-sdk demo >demo.out || { cat demo.out >&2; exit 1; }
grep -q '^Done. Next:' demo.out || { echo "npx cycles-sdk demo did not finish" >&2; exit 1; }
set +e
npx --no-install cycles-sdk serve --port nope >/dev/null 2>serve.err
status=$?
set -e
[ "$status" = 2 ] && grep -q "invalid value 'nope'" serve.err ||
  { echo "serve --port nope: exit $status" >&2; cat serve.err >&2; exit 1; }
node_modules/.bin/cycles-sdk serve --port 0 >serve.out &
serve=$!
for _ in $(seq 100); do grep -q '^press Ctrl-C' serve.out && break; sleep 0.1; done
url="$(sed -n 's/^cycles local server listening on //p' serve.out)"
[ -n "$url" ] || { kill "$serve"; echo "serve printed no URL" >&2; exit 1; }
node -e 'fetch(process.argv[1] + "/v1/balances?tenant=acme", { headers: { "X-Cycles-API-Key": "cycles-local-key" } }).then((r) => { if (r.status !== 200) process.exit(1); })' "$url"
kill -INT "$serve"
wait "$serve" || { echo "serve did not exit 0 on SIGINT" >&2; exit 1; }
echo "install check: ESM, CJS, TypeScript (strict), the README quick start (strict, then run), tokenizer auto without and with js-tiktoken, and npx cycles-sdk (--version, demo, serve until SIGINT) from the packed tarballs: ok"
