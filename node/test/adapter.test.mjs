// conformance/adapters/node through its command line, as the runner starts it: a mapped test
// passes only when exactly that test ran and passed; missing, renamed, skipped, todo, failing
// and twice-matched tests fail the scenario, and so do malformed, escaping, duplicate and
// unmapped entries; misuse exits 2 with nothing on stdout. The committed node-map.json and
// node-redis-map.json name all 12 scenarios of the durable claim with tests defined in the
// test files.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";

import { NODE_DIR, REPO, tempDir } from "./support.mjs";

const ADAPTER = join(REPO, "conformance", "adapters", "node");
const FIXTURE = "test/fixtures/adapter-cases.test.mjs";
const ID = "CR-CORE-001";

/** Runs the adapter for `ID` with `entries` mapped; returns its exit status and parsed stdout. */
function adapt(entries, { id = ID, stdinId = id, args = [] } = {}) {
  const dir = tempDir("cycles-node-adapter-test-");
  const map = join(dir, "map.json");
  writeFileSync(map, JSON.stringify(entries === undefined ? {} : { [ID]: entries }));
  const r = spawnSync("python3", [ADAPTER, "--map", map, ...args, id], {
    input: JSON.stringify({ id: stdinId, level: "core", name: "n", precondition: "p", faults: [] }),
    encoding: "utf8",
  });
  return { status: r.status, result: r.stdout.trim() ? JSON.parse(r.stdout) : null, stdout: r.stdout, stderr: r.stderr };
}

const entry = (name) => `${FIXTURE}::${name}`;

test("adapter passes exactly one passing test and names it", () => {
  const { status, result } = adapt([entry("passes")]);
  assert.equal(status, 0);
  assert.deepEqual(result, { scenario_id: ID, passed: true, native_tests: [entry("passes")] });
});

test("adapter fails missing, skipped, todo, failing and twice-matched tests", () => {
  const cases = [
    ["no such test", /no test ran \(missing or renamed\?\)/],
    ["pass", /no test ran/], // a prefix of a real name: the pattern is anchored
    ["is skipped", /test skipped/],
    ["is todo", /test skipped|no test ran/],
    ["fails", /node --test exited with status 1 \(test failed/],
    ["twice (a+b)", /2 tests ran, expected exactly one/],
  ];
  for (const [name, why] of cases) {
    const { status, result } = adapt([entry(name)]);
    assert.equal(status, 1, name);
    assert.equal(result.passed, false, name);
    assert.deepEqual(result.native_tests, [entry(name)], name);
    assert.match(result.diagnostic, why, name);
  }
  // One failing entry among passing ones fails the scenario.
  const mixed = adapt([entry("passes"), entry("fails")]);
  assert.equal(mixed.result.passed, false);
});

test("adapter fails malformed, escaping, missing-file, duplicate and unmapped entries", () => {
  const bad = [
    [["passes"], /not of the form/],
    [["test/../../x.test.mjs::passes"], /outside node\/test/],
    [["test/nope.test.mjs::passes"], /no test file/],
    [[entry("passes"), entry("passes")], /duplicate native tests/],
    [[], /no native tests mapped/],
    [undefined, /no native tests mapped/],
  ];
  for (const [entries, why] of bad) {
    const { status, result } = adapt(entries);
    assert.equal(status, 1, JSON.stringify(entries));
    assert.equal(result.passed, false);
    assert.match(result.diagnostic, why, JSON.stringify(entries));
  }
});

test("adapter misuse exits 2 with nothing on stdout", () => {
  for (const opts of [{ stdinId: "CR-CORE-002" }, { args: ["--node", "/nonexistent/node"] }, { args: ["--bogus"] }]) {
    const r = adapt([entry("passes")], opts);
    assert.equal(r.status, 2, JSON.stringify(opts));
    assert.equal(r.stdout, "", JSON.stringify(opts));
  }
});

// Both committed maps: the file journal's and the Redis journal's (node-redis-map.json, run with
// CYCLES_TEST_JOURNAL_STORE=redis), so a renamed or missing mapped test fails here.
test("node-map.json and node-redis-map.json map every durable-claim scenario to tests defined in the test files", () => {
  const ids = [
    ...[1, 2, 3, 4].map((n) => `CR-CORE-00${n}`),
    ...[1, 2, 3, 4, 5, 6, 7].map((n) => `CR-DURABLE-00${n}`),
    "CR-BOUNDARY-001",
  ];
  for (const file of ["node-map.json", "node-redis-map.json"]) {
    const map = JSON.parse(readFileSync(join(REPO, "conformance", "adapters", file), "utf8"));
    assert.deepEqual(Object.keys(map).sort(), [...ids].sort(), file);
    for (const [id, entries] of Object.entries(map)) {
      assert.ok(entries.length > 0, `${file}: ${id}`);
      for (const e of entries) {
        const [path, name] = e.split("::");
        const src = readFileSync(join(NODE_DIR, path), "utf8");
        const defs = src.split("\n").filter((l) => l.startsWith(`test(${JSON.stringify(name)},`));
        assert.equal(defs.length, 1, `${file}: ${id}: ${e} defined once`);
      }
    }
  }
});
