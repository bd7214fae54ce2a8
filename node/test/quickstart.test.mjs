// The Node quick start: docs/node.md's first js block, which README.md carries as its only js
// block, run verbatim as a plain ES module in its own node process: it must print its results
// and exit by itself. (node/scripts/install-check.sh type-checks the same block under
// `tsc --strict --noEmit` against the packed package.)
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";

import { NODE_DIR, REPO } from "./support.mjs";

// README.md's block before issue 28: it reads `r.settlement.charged.amount` after finish(),
// which `tsc --strict` rejects (a settlement's `charged` is null while pending). README.md is
// not edited on this branch; until it takes docs/node.md's block it may still hold exactly
// this one, which is still run. Delete this allowance once README.md has the new block.
const PRE_ISSUE_28_README_BLOCK = "e27b74c81e2bddb3be4412c00513ceec7d9323ceeb557f8030c3fdd2c57e24ac";

const jsBlocks = (file) => [...readFileSync(file, "utf8").matchAll(/```js\n([\s\S]*?)```/g)].map((m) => m[1]);
const sha256 = (text) => createHash("sha256").update(text).digest("hex");

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

test("the quick start runs verbatim and exits by itself; README.md carries docs/node.md's block", (t) => {
  const [quickstart] = jsBlocks(join(REPO, "docs", "node.md"));
  assert.ok(quickstart?.includes('from "cycles-sdk"'), "docs/node.md's first js block is the quick start");
  runVerbatim(quickstart, "quickstart.mjs");
  const readme = jsBlocks(join(REPO, "README.md"));
  assert.equal(readme.length, 1, "README.md has exactly one js block");
  if (readme[0] === quickstart) return;
  assert.equal(sha256(readme[0]), PRE_ISSUE_28_README_BLOCK, "README.md's Node quick start differs from docs/node.md's");
  t.diagnostic("README.md still has the pre-issue-28 quick start: replace it with docs/node.md's block");
  runVerbatim(readme[0], "quickstart-readme.mjs");
});
