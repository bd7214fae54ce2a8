// Shared helpers of the node:test suite: a local server per test file, clients with their own
// journal directory, and the repository paths of the shared fixtures.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

import { LocalServer } from "cycles-sdk/testing";

export const NODE_DIR = join(dirname(fileURLToPath(import.meta.url)), "..");
export const REPO = join(NODE_DIR, "..");
export const ACTION = { kind: "llm.completion", name: "openai:gpt-4o-mini" };

const made = [];
// Each test file runs in its own process: its directories go when it exits (children included,
// which have exited by then).
process.once("exit", () => {
  for (const dir of made) rmSync(dir, { recursive: true, force: true });
});

/** A fresh directory under the OS temp dir, removed when this test process exits. */
export function tempDir(prefix) {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  made.push(dir);
  return dir;
}

/** A fresh journal directory. */
export function journalDir() {
  return tempDir("cycles-node-test-");
}

/** A local server (mode from CYCLES_TEST_SERVER_MODE, as the Python suite does). */
export function startServer(config = {}) {
  const mode = process.env.CYCLES_TEST_SERVER_MODE;
  return new LocalServer(mode ? { ...config, mode } : config);
}

/** The kinds of the requests the server received, by operation name. */
export function ops(server) {
  return server.requests().map((r) => r.operation);
}
