// One process of a recovery test (spawned by recovery-support.mjs's Child; not a test file).
//
// argv[2] is a JSON spec; the process builds a FRESH client from it (nothing but the journal, on
// disk or in Redis, crosses from an earlier process), does one thing through the public API, closes the
// client without draining (what is left stays journaled), and writes its result JSON
// atomically to spec.result. A process the test kills with SIGKILL writes nothing.
//
// Modes: settle (reserve without heartbeat, set the actual and spec.metadata, finish: the SDK journals, then
// commits; result: the settlement), flush (replay every pending record once), drain (replay
// until the journal is empty or spec.timeout seconds). The result carries every event.
import { existsSync, renameSync, writeFileSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";

import { Client } from "cycles-sdk";
import * as journal from "cycles-sdk/journal";

const spec = JSON.parse(process.argv[2]);

function reportJson(r) {
  return {
    settled: r.settled,
    outcomes: r.outcomes.map((o) => [o.reservationId, o.status]),
    remaining: r.remaining.map((p) => p.reservationId),
    quarantined: r.quarantined,
  };
}

const events = [];
const client = new Client({
  baseUrl: spec.url,
  apiKey: spec.api_key,
  tenant: spec.tenant ?? undefined,
  journalDir: spec.dir,
  // The journal in Redis when the test runs on it (TestJournal.spec); spec.dir then stays unused.
  journalUrl: spec.journal_url ?? undefined,
  onEvent: (e) => events.push(e),
  maxAttempts: spec.max_attempts ?? 5,
  // The background replay's first pass runs when the lifecycle starts; later passes would
  // only add noise to what the test observes.
  replayIntervalMs: 3_600_000,
});
if (spec.go) {
  // Workers get ready first (the identity's key derivation is cached per process), say so,
  // then wait to be released together.
  journal.identityFingerprint(spec.url, spec.api_key, spec.tenant ?? null);
  writeFileSync(`${spec.result}.ready`, "");
  while (!existsSync(spec.go)) await sleep(1);
}
const out = { pid: process.pid };
if (spec.mode === "settle") {
  const r = await client.reserve({
    estimate: spec.estimate ?? 1_000,
    action: spec.action ?? { kind: "llm.completion", name: "test-model" },
    idempotencyKey: spec.key,
    heartbeat: false,
  });
  r.setActual(spec.amount);
  if (spec.metadata) r.setMetadata(spec.metadata);
  await r.finish();
  const s = r.settlement;
  out.settlement = s && { status: s.status, reservation_id: s.reservationId, not_before_ms: s.notBeforeMs, error_kind: s.errorKind };
} else if (spec.mode === "flush") {
  out.report = reportJson(await client.flush());
} else if (spec.mode === "drain") {
  out.report = reportJson(await client.drain((spec.timeout ?? 20) * 1000));
} else {
  throw new Error(`unknown mode ${spec.mode}`);
}
// 0: no drain at close; close() still delivers every pending event.
await client.close(0);
out.events = events;
writeFileSync(`${spec.result}.tmp`, JSON.stringify(out));
renameSync(`${spec.result}.tmp`, spec.result);
