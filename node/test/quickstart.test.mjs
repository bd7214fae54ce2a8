// The Node quick start: docs/node.md's first js block, which README.md carries as its only js
// block, run verbatim as a plain ES module in its own node process: it must print its results
// and exit by itself. (node/scripts/install-check.sh type-checks the same block under
// `tsc --strict --noEmit` against the packed package.)
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";

import { NODE_DIR, REPO } from "./support.mjs";

const jsBlocks = (file) => [...readFileSync(file, "utf8").matchAll(/```js\n([\s\S]*?)```/g)].map((m) => m[1]);

function runVerbatim(block, name) {
  // Inside the package folder, so `import "cycles-sdk"` resolves to this package by name.
  const dir = join(NODE_DIR, ".quickstart");
  mkdirSync(dir, { recursive: true });
  const file = join(dir, name);
  writeFileSync(file, block);
  const r = spawnSync(process.execPath, [file], { encoding: "utf8", timeout: 15_000 });
  assert.equal(r.error, undefined, `${name} did not exit in time: ${r.stderr}`);
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /^answer 42$/m);
  assert.match(r.stdout, /^settlement committed 150000$/m);
}

test("the quick start runs verbatim and exits by itself; README.md carries docs/node.md's block", () => {
  const [quickstart] = jsBlocks(join(REPO, "docs", "node.md"));
  assert.ok(quickstart?.includes('from "cycles-sdk"'), "docs/node.md's first js block is the quick start");
  runVerbatim(quickstart, "quickstart.mjs");
  const readme = jsBlocks(join(REPO, "README.md"));
  assert.equal(readme.length, 1, "README.md has exactly one js block");
  assert.equal(readme[0], quickstart, "README.md's Node quick start differs from docs/node.md's");
});
