// The captured reference-server corpus (shared/fixtures/reference-server/exchanges.jsonl)
// through core's response path (decodeResponse): every 2xx decodes to what the server meant,
// every error throws the right class with its fields. A missing corpus FAILS.
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";

import { CyclesError, InvalidRequestError, RateLimitedError, ServerError, decodeResponse, errorClass, fromWire } from "cycles-sdk";
import { REPO } from "./support.mjs";

const EXPECTED_EXCHANGES = 217;
const PATH = process.env.CYCLES_REFERENCE_CORPUS ?? join(REPO, "..", "shared", "fixtures", "reference-server", "exchanges.jsonl");

function withoutNulls(v) {
  if (Array.isArray(v)) return v.map(withoutNulls);
  if (v !== null && typeof v === "object") {
    return Object.fromEntries(Object.entries(v).filter(([, x]) => x !== null).map(([k, x]) => [k, withoutNulls(x)]));
  }
  return v;
}

function header(x, name) {
  const hit = Object.entries(x.response.headers).find(([k]) => k.toLowerCase() === name.toLowerCase());
  return hit ? String(hit[1]) : null;
}

function parsedBody(x) {
  try {
    const b = JSON.parse(x.response.body);
    return b !== null && typeof b === "object" && !Array.isArray(b) ? b : null;
  } catch {
    return null;
  }
}

function expectedClass(x, body) {
  const status = x.response.status;
  if (status === 429) return RateLimitedError;
  if (status >= 500) return ServerError;
  if (body && "error" in body) return errorClass(body.error);
  assert.equal(status, 400, x.name);
  return InvalidRequestError;
}

test("every exchange of the reference-server corpus decodes like the client", () => {
  assert.ok(existsSync(PATH), `the reference-server corpus is missing: ${PATH} (set CYCLES_REFERENCE_CORPUS)`);
  const corpus = readFileSync(PATH, "utf8").split("\n").filter((l) => l.trim()).map((l) => JSON.parse(l));
  assert.equal(corpus.length, EXPECTED_EXCHANGES);
  let ok = 0;
  let failed = 0;
  const withEvidence = [];
  for (const x of corpus) {
    const r = x.response;
    const headers = Object.entries(r.headers).map(([k, v]) => [k, String(v)]);
    if (r.status >= 200 && r.status < 300) {
      const { meta, ...result } = decodeResponse(x.operation, r.status, headers, r.body);
      assert.equal(meta.status, r.status, x.name);
      assert.equal(meta.requestId, header(x, "X-Request-Id"), x.name);
      assert.equal(meta.traceId, header(x, "X-Cycles-Trace-Id"), x.name);
      assert.deepEqual(withoutNulls(result), withoutNulls(fromWire(JSON.parse(r.body))), x.name);
      ok++;
      continue;
    }
    const body = parsedBody(x);
    let err;
    assert.throws(() => decodeResponse(x.operation ?? null, r.status, headers, r.body), (e) => ((err = e), e instanceof CyclesError), x.name);
    assert.equal(err.constructor, expectedClass(x, body), x.name);
    assert.equal(err.httpStatus, r.status, x.name);
    assert.equal(err.serverCode, body?.error ?? null, x.name);
    if (body && "message" in body) assert.equal(err.message, body.message, x.name);
    else assert.match(err.message, /non-JSON/, x.name);
    assert.equal(err.requestId, header(x, "X-Request-Id"), x.name);
    assert.equal(err.traceId, header(x, "X-Cycles-Trace-Id"), x.name);
    assert.deepEqual(err.details, body?.details ?? null, x.name);
    const ev = body?.cycles_evidence ?? null;
    assert.deepEqual(err.cyclesEvidence, ev && { evidenceId: ev.evidence_id, cyclesEvidenceUrl: ev.cycles_evidence_url }, x.name);
    if (err.cyclesEvidence) withEvidence.push(x.name);
    const ra = header(x, "Retry-After");
    assert.equal(err.retryAfterRaw, ra, x.name);
    assert.equal(err.retryAfterSeconds, ra === null ? null : Number(ra), x.name);
    assert.equal(err.retryable, r.status === 429 || r.status >= 500, x.name);
    failed++;
  }
  assert.equal(ok + failed, EXPECTED_EXCHANGES);
  assert.ok(ok > 50 && failed > 50, `${ok} successes, ${failed} errors`);
  assert.deepEqual(withEvidence, ["evidence_on.create_denied"], "the reference server's live denial carries its evidence");
});
