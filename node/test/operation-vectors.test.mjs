// Every step of conformance/vectors/operations.json through the Client's typed methods (the
// shared per-operation test: a new operation adds a step to that file, not a test here).
// The vectors spell requests and results on the wire (snake_case); the Client takes and gives
// camelCase, so both sides go through the package's own fromWire / toWire.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, test } from "node:test";

import { fromWire, toWire } from "cycles-sdk";
import { REPO, journalDir, startServer } from "./support.mjs";

const DOC = JSON.parse(readFileSync(join(REPO, "conformance", "vectors", "operations.json"), "utf8"));

let server;
let client;
before(() => {
  server = startServer();
  client = server.client({ journalDir: journalDir() });
});
after(async () => {
  await client.close();
  server.stop();
});

const resolve = (v, saved) => {
  if (typeof v === "string" && v.startsWith("$")) return saved[v.slice(1)];
  if (Array.isArray(v)) return v.map((x) => resolve(x, saved));
  if (v && typeof v === "object") return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, resolve(x, saved)]));
  return v;
};

test("operation vectors: every step through the typed method", { skip: process.env.CYCLES_TEST_SERVER_MODE === "reference" }, async () => {
  assert.equal(DOC.format, "cycles-operation-vectors");
  assert.equal(DOC.version, 1);
  const saved = {};
  for (const step of DOC.steps) {
    const op = step.operation;
    const method = client[op]; // an operationId is the camelCase method name
    assert.equal(typeof method, "function", `Client has no method ${op}`);
    const args = [...resolve(step.path ?? [], saved)];
    if (step.args) args.push(fromWire(resolve(step.args, saved)));
    const result = await method.call(client, ...args);
    assert.equal(result.meta.status, step.expect.status, op);
    const { meta, ...body } = result;
    const wire = toWire(body);
    for (const [k, v] of Object.entries(resolve(step.expect.members ?? {}, saved))) {
      assert.deepEqual(wire[k], v, `${op}: ${k}`);
    }
    for (const [name, dotted] of Object.entries(step.save ?? {})) {
      saved[name] = dotted.split(".").reduce((o, p) => o[p], wire);
    }
  }
});
