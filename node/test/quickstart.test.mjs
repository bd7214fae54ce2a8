// README.md's Node quick start (docs/node.md keeps an identical copy), run verbatim as a plain
// ES module in its own node process: it must print its results and exit by itself.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";

import { NODE_DIR, REPO } from "./support.mjs";

test("the README.md quick start runs verbatim and exits by itself", () => {
  const jsBlocks = (file) =>
    [...readFileSync(file, "utf8").matchAll(/```js\n([\s\S]*?)```/g)].map((m) => m[1]);
  const blocks = jsBlocks(join(REPO, "README.md"));
  assert.equal(blocks.length, 1, "README.md has exactly one js block");
  assert.deepEqual(jsBlocks(join(REPO, "docs", "node.md")), blocks, "docs/node.md's copy differs");
  // Inside the package folder, so `import "cycles-sdk"` resolves to this package by name.
  const dir = join(NODE_DIR, ".quickstart");
  mkdirSync(dir, { recursive: true });
  const file = join(dir, "quickstart.mjs");
  writeFileSync(file, blocks[0]);
  const r = spawnSync(process.execPath, [file], { encoding: "utf8", timeout: 15_000 });
  assert.equal(r.error, undefined, `did not exit in time: ${r.stderr}`);
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /^answer 42$/m);
  assert.match(r.stdout, /^settlement committed 150000$/m);
});
