// The Node face's `work` op (conformance/matrix/PROTOCOL.md): guarded actions in a loop, for
// the crash loop (`cycles-matrix crashloop`), which SIGKILLs the face mid-way. Its own module
// so another op added to the face touches only the dispatch.
import { setTimeout as sleep } from "node:timers/promises";
import { Client } from "cycles-sdk";
import { journalUrl } from "./face.mjs";

/**
 * Every action in order through one client of the tenant, default unit and journal: a
 * guarded action under its key, bare estimate and TTL (the client's default when null), whose
 * work sleeps `sleep_ms`, sets the actual and returns. Answers each outcome.
 */
export async function work(r) {
  const cl = new Client({ baseUrl: r.url, apiKey: r.api_key, tenant: r.tenant, defaultUnit: r.default_unit, journalDir: r.journal_dir, ...journalUrl(r) });
  const outcomes = [];
  try {
    for (const a of r.actions) {
      const options = { action: { kind: "llm.completion", name: "crashloop" }, estimate: a.estimate, idempotencyKey: a.key };
      if (a.ttl_ms != null) options.ttlMs = a.ttl_ms;
      let handle = null;
      await cl.guarded(options, async (g) => {
        handle = g;
        await sleep(a.sleep_ms);
        g.setActual(a.actual);
      });
      outcomes.push(handle.settlement?.status ?? handle.outcome);
    }
  } finally {
    await cl.close(0);
  }
  return { ok: { outcomes } };
}
