// The Node integration quick starts of docs/integrations.md ("Node": every js block of that
// section), each run verbatim as a plain ES module in its own node process, which must print
// the expected charges and exit by itself, and each type-checked with `tsc --strict`
// (noUnusedLocals, as the package's own settings; checkJs) against the built package and the
// pinned libraries of this folder.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

const HERE = dirname(fileURLToPath(import.meta.url));
const NODE_DIR = join(HERE, "..", "..");
const DOC = readFileSync(join(NODE_DIR, "..", "docs", "integrations.md"), "utf8");
const NODE_SECTION = DOC.slice(DOC.indexOf("\n## Node\n"));
const BLOCKS = [...NODE_SECTION.matchAll(/```js\n([\s\S]*?)```/g)].map((m) => m[1]);
// Inside this folder, so `openai`, `@anthropic-ai/sdk`, `@langchain/openai` and `cycles-sdk` resolve by name.
const DIR = join(HERE, ".quickstart");

const QUICKSTARTS = {
  openai: { from: "cycles-sdk/openai", out: [/^reply Hello from the fake provider\.$/m, /^streamed Hello from the fake provider\.$/m, /^remaining 986$/m] },
  anthropic: { from: "cycles-sdk/anthropic", out: [/^reply Hello from the fake provider\.$/m, /^streamed output tokens 5$/m, /^remaining 986$/m] },
  ai: { from: "cycles-sdk/ai", out: [/^reply Hello from the fake provider\.$/m, /^streamed Hello from the fake provider\.$/m, /^remaining 986$/m] },
  langchain: { from: "cycles-sdk/langchain", out: [/^reply Hello from the fake provider\.$/m, /^streamed Hello from the fake provider\.$/m, /^remaining 986$/m] },
  express: { from: "cycles-sdk/express", out: [/^answer 42$/m, /^charged 42$/m] },
};

function block(name) {
  const found = BLOCKS.filter((b) => b.includes(`from "${QUICKSTARTS[name].from}"`));
  assert.equal(found.length, 1, `one ${name} quick start in docs/integrations.md's Node section`);
  return found[0];
}

test("the Node integration quick starts: one per integration, run verbatim, each exits by itself", () => {
  assert.equal(BLOCKS.length, Object.keys(QUICKSTARTS).length, "every js block of the Node section is a quick start checked here");
  mkdirSync(DIR, { recursive: true });
  for (const [name, { out }] of Object.entries(QUICKSTARTS)) {
    const file = join(DIR, `${name}.mjs`);
    writeFileSync(file, block(name));
    const r = spawnSync(process.execPath, [file], { encoding: "utf8", timeout: 30_000 });
    assert.equal(r.error, undefined, `${name} did not exit in time: ${r.stderr}`);
    assert.equal(r.status, 0, r.stderr);
    for (const line of out) assert.match(r.stdout, line, `${name}: ${r.stdout}`);
  }
});

test("the Node integration quick starts type-check under tsc --strict", () => {
  mkdirSync(DIR, { recursive: true });
  const files = [];
  for (const name of Object.keys(QUICKSTARTS)) {
    writeFileSync(join(DIR, `${name}.mts`), block(name));
    writeFileSync(join(DIR, `${name}.mjs`), block(name));
    files.push(`${name}.mts`, `${name}.mjs`);
  }
  const config = {
    compilerOptions: {
      target: "ES2022",
      module: "nodenext",
      moduleResolution: "nodenext",
      lib: ["ES2022", "esnext.disposable"],
      strict: true,
      noUnusedLocals: true,
      allowJs: true,
      checkJs: true,
      noEmit: true,
      types: ["node"],
      // This folder's @types (node pinned to the package's own version, express for its quick start).
      typeRoots: [join(HERE, "node_modules", "@types")],
      // cycles-sdk is linked (file:../..): its declarations resolve their imports (@langchain/core)
      // from this folder, as in an app's node_modules, not from the package's own devDependencies.
      preserveSymlinks: true,
      // Declaration files are not re-checked (the libraries' are theirs, the package's are tsc's own output); the blocks are.
      skipLibCheck: true,
    },
    files,
  };
  writeFileSync(join(DIR, "tsconfig.json"), JSON.stringify(config, null, 2));
  const tsc = join(NODE_DIR, "node_modules", "typescript", "bin", "tsc");
  const r = spawnSync(process.execPath, [tsc, "-p", join(DIR, "tsconfig.json")], { encoding: "utf8", timeout: 120_000 });
  assert.equal(r.error, undefined, String(r.error));
  assert.equal(r.status, 0, `${r.stdout}${r.stderr}`);
});
