// Every runtime operation against the local server over real HTTP, with typed camelCase
// results, and errors with their fields.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import {
  BudgetExceededError,
  Client,
  ClientClosedError,
  ConfigError,
  CyclesError,
  Decision,
  EventStatus,
  InvalidArgumentError,
  NotFoundError,
  ReasonCode,
  ReservationFinalizedError,
  TransportConnectError,
  Unit,
  UnauthorizedError,
} from "cycles-sdk";
import { ACTION, journalDir, startServer } from "./support.mjs";

let server;
let client;
const SUBJECT = { tenant: "acme", agent: "planner" };
const EST = { unit: "USD_MICROCENTS", amount: 1000 };

before(() => {
  server = startServer();
  client = server.client({ journalDir: journalDir() });
});
after(async () => {
  await client.close();
  server.stop();
});

let n = 0;
const key = (p) => `${p}-${process.pid}-${++n}`;

test("createReservation, getReservation, commitReservation", async () => {
  const created = await client.createReservation({ idempotencyKey: key("r"), subject: SUBJECT, action: ACTION, estimate: EST, ttlMs: 30000, metadata: { run_id: "x-1" } });
  assert.equal(created.decision, "ALLOW");
  assert.match(created.reservationId, /.+/);
  assert.deepEqual(created.reserved, EST);
  assert.equal(created.meta.status, 200);
  assert.ok(created.meta.requestId);
  assert.ok(created.remainingTtlMs > 0 && created.remainingTtlMs <= 30000);
  const got = await client.getReservation(created.reservationId);
  assert.equal(got.status, "ACTIVE");
  assert.equal(got.reservationId, created.reservationId);
  assert.deepEqual(got.metadata, { run_id: "x-1" }, "metadata keys are not renamed");
  const committed = await client.commitReservation(created.reservationId, { idempotencyKey: key("c"), actual: { unit: "USD_MICROCENTS", amount: 640 }, metrics: { tokensInput: 5, latencyMs: 12 } });
  assert.equal(committed.status, "COMMITTED");
  assert.deepEqual(committed.charged, { unit: "USD_MICROCENTS", amount: 640 });
  const entry = server.ledger().find((e) => e.kind === "commit" && e.reservation_id === created.reservationId);
  assert.equal(entry.amount, 640);
});

test("extendReservation and releaseReservation", async () => {
  const created = await client.createReservation({ idempotencyKey: key("r"), subject: SUBJECT, action: ACTION, estimate: EST, ttlMs: 10000 });
  const extended = await client.extendReservation(created.reservationId, { idempotencyKey: key("e"), extendByMs: 5000 });
  assert.equal(extended.status, "ACTIVE");
  assert.ok(extended.expiresAtMs > created.expiresAtMs);
  const released = await client.releaseReservation(created.reservationId, { idempotencyKey: key("rel"), reason: "done" });
  assert.equal(released.status, "RELEASED");
  assert.deepEqual(released.released, EST);
  await assert.rejects(
    client.commitReservation(created.reservationId, { idempotencyKey: key("c"), actual: EST }),
    (e) => e instanceof ReservationFinalizedError && e.httpStatus === 409 && e.serverCode === "RESERVATION_FINALIZED" && !e.retryable,
  );
});

test("decide and createEvent", async () => {
  const d = await client.decide({ idempotencyKey: key("d"), subject: SUBJECT, action: ACTION, estimate: EST });
  assert.equal(d.decision, "ALLOW");
  assert.ok(d.affectedScopes.includes("tenant:acme"));
  const ev = await client.createEvent({ idempotencyKey: key("ev"), subject: SUBJECT, action: ACTION, actual: { unit: "USD_MICROCENTS", amount: 77 } });
  assert.equal(ev.status, "APPLIED");
  assert.match(ev.eventId, /.+/);
  assert.ok(server.ledger().some((e) => e.kind === "event" && e.amount === 77));
});

test("open-enum constants (generated from core's types) match what the server sends", async () => {
  assert.equal(Unit.USD_MICROCENTS, "USD_MICROCENTS");
  assert.equal(ReasonCode.BUDGET_EXCEEDED, "BUDGET_EXCEEDED");
  const d = await client.decide({ idempotencyKey: key("d"), subject: SUBJECT, action: ACTION, estimate: { unit: Unit.USD_MICROCENTS, amount: 1 } });
  assert.equal(d.decision, Decision.ALLOW);
  const ev = await client.createEvent({ idempotencyKey: key("ev"), subject: SUBJECT, action: ACTION, actual: { unit: Unit.USD_MICROCENTS, amount: 1 } });
  assert.equal(ev.status, EventStatus.APPLIED);
  assert.deepEqual(Object.keys(Decision).sort(), ["ALLOW", "ALLOW_WITH_CAPS", "DENY"]);
});

test("a request without a subject is for the client's tenant (the bridge's rule, as a guard's)", async () => {
  const created = await client.createReservation({ idempotencyKey: key("nosub"), action: ACTION, estimate: EST });
  assert.equal(created.decision, "ALLOW");
  const got = await client.getReservation(created.reservationId);
  assert.deepEqual(got.subject, { tenant: "acme" });
  await client.releaseReservation(created.reservationId, { idempotencyKey: key("nosub-rel") });
  const d = await client.decide({ idempotencyKey: key("nosub-d"), action: ACTION, estimate: EST });
  assert.ok(d.affectedScopes.includes("tenant:acme"));
  const noTenant = new Client({ baseUrl: server.url, apiKey: server.apiKey, journalEnabled: false });
  await assert.rejects(
    noTenant.createEvent({ idempotencyKey: key("nosub-ev"), action: ACTION, actual: EST }),
    (e) => e instanceof InvalidArgumentError && e.message === "subject is required (or configure a tenant on the client)",
  );
  await noTenant.close();
});

test("getBalances, listReservations, listAllReservations", async () => {
  const b = await client.getBalances({ tenant: "acme" });
  assert.ok(b.balances.length >= 1);
  const bal = b.balances.find((x) => x.scopePath === "tenant:acme");
  assert.ok(bal, JSON.stringify(b.balances));
  assert.equal(bal.remaining.unit, "USD_MICROCENTS");
  const page = await client.listReservations({ tenant: "acme", limit: 2 });
  assert.ok(page.reservations.length >= 1 && page.reservations.length <= 2);
  assert.ok(page.reservations[0].reservationId);
  const all = await client.listAllReservations({ tenant: "acme", limit: 1 });
  assert.ok(Array.isArray(all));
  assert.ok(all.length >= 2, `${all.length}`);
  assert.ok(all.every((r) => typeof r.reservationId === "string"));
});

test("getEvidence and getEvidenceJwks", async () => {
  const created = await client.createReservation({ idempotencyKey: key("r"), subject: SUBJECT, action: ACTION, estimate: EST });
  assert.ok(created.cyclesEvidence, "the local server signs evidence");
  const env = await client.getEvidence(created.cyclesEvidence.evidenceId);
  assert.equal(typeof env.schemaVersion, "string");
  assert.equal(typeof env.signerDid, "string");
  assert.ok(env.payload);
  const jwks = await client.getEvidenceJwks();
  assert.ok(Array.isArray(jwks.keys) && jwks.keys.length >= 1);
});

test("errors carry their fields: NOT_FOUND", async () => {
  await assert.rejects(client.getReservation("rsv_missing"), (e) => {
    assert.ok(e instanceof NotFoundError && e instanceof CyclesError && e instanceof Error);
    assert.equal(e.name, "NotFoundError");
    assert.equal(e.errorName, "NOT_FOUND");
    assert.equal(e.code, 103);
    assert.equal(e.httpStatus, 404);
    assert.equal(e.serverCode, "NOT_FOUND");
    assert.ok(e.requestId);
    assert.equal(e.retryable, false);
    return true;
  });
});

test("a denial's error carries the server's cyclesEvidence", async () => {
  let denial;
  await assert.rejects(
    client.createReservation({ idempotencyKey: key("big"), subject: SUBJECT, action: ACTION, estimate: { unit: "USD_MICROCENTS", amount: 1e15 } }),
    (e) => {
      denial = e;
      return e instanceof BudgetExceededError && e.httpStatus === 409;
    },
  );
  const ref = denial.cyclesEvidence;
  assert.deepEqual(Object.keys(ref ?? {}).sort(), ["cyclesEvidenceUrl", "evidenceId"]);
  assert.match(ref.evidenceId, /^[0-9a-f]{64}$/);
  assert.ok(ref.cyclesEvidenceUrl.endsWith(`/${ref.evidenceId}`), ref.cyclesEvidenceUrl);
  // The reference is the server's: it serves the signed envelope of the denial.
  const env = await client.getEvidence(ref.evidenceId);
  assert.equal(env.evidenceId, ref.evidenceId);
  assert.equal(env.artifactType, "error");
});

test("an error without evidence has cyclesEvidence null", async () => {
  await assert.rejects(client.getEvidence("0".repeat(64)), (e) => {
    assert.ok(e instanceof NotFoundError);
    assert.equal(e.httpStatus, 404);
    assert.equal(e.cyclesEvidence, null);
    return true;
  });
});

test("errors: unauthorized never shows the key; connect failure; bad arguments", async () => {
  const secret = "sk-node-secret-123";
  const bad = new Client({ baseUrl: server.url, apiKey: secret, tenant: "acme", journalEnabled: false });
  await assert.rejects(bad.getBalances({ tenant: "acme" }), (e) => {
    assert.ok(e instanceof UnauthorizedError);
    assert.equal(e.httpStatus, 401);
    assert.ok(!JSON.stringify({ ...e, m: e.message }).includes(secret));
    return true;
  });
  await bad.close();
  const nowhere = new Client({ baseUrl: "http://127.0.0.1:1", apiKey: "k", journalEnabled: false, connectTimeoutMs: 500 });
  await assert.rejects(nowhere.decide({ idempotencyKey: "k", subject: SUBJECT, action: ACTION, estimate: EST }), (e) => e instanceof TransportConnectError && e.retryable && e.httpStatus === null);
  await nowhere.close();
  await assert.rejects(client.commitReservation("r", { idempotencyKey: "k" }), (e) => e instanceof InvalidArgumentError && /commit request/.test(e.message));
  assert.throws(() => new Client({ baseUrl: "not a url", apiKey: "k" }), (e) => e instanceof CyclesError && e.errorName === "CONFIG");
});

test("bad options are an InvalidArgumentError naming them, in the bridge's one wording", async () => {
  const base = { baseUrl: server.url, apiKey: server.apiKey, journalEnabled: false };
  const cases = [
    [null, /options must be an object/],
    [{ apiKey: "k" }, /^baseUrl is required$/],
    [{ baseUrl: server.url, apiKey: 5 }, /^apiKey must be a string, not 5$/],
    [{ ...base, journalDri: "/tmp" }, /^unknown option "journalDri" \(known: baseUrl, apiKey, tenant, defaultUnit, /],
    [{ ...base, tenant: 7 }, /tenant must be a string, not 7/],
    [{ ...base, journalDir: 5 }, /journalDir must be a string/],
    [{ ...base, journalEnabled: "yes" }, /journalEnabled must be a boolean, not "yes"/],
    [{ ...base, onEvent: 5 }, /onEvent must be a function/],
    // napi would have wrapped these to 4294967295 or truncated them; JSON would drop NaN.
    [{ ...base, requestTimeoutMs: -1 }, /^requestTimeoutMs must be an integer from 0 to 4294967295, not -1$/],
    [{ ...base, requestTimeoutMs: 1.5 }, /requestTimeoutMs must be an integer/],
    [{ ...base, requestTimeoutMs: NaN }, /requestTimeoutMs must be an integer.*not "NaN"/],
    [{ ...base, connectTimeoutMs: Infinity }, /connectTimeoutMs must be an integer.*not "Infinity"/],
    [{ ...base, requestTimeoutMs: "5" }, /requestTimeoutMs must be an integer.*not "5"/],
    [{ ...base, connectTimeoutMs: 2 ** 40 }, /connectTimeoutMs must be an integer from 0 to 4294967295/],
    [{ ...base, maxConcurrentRequests: -2 }, /maxConcurrentRequests must be an integer from 0/],
    [{ ...base, maxResponseBytes: -1 }, /maxResponseBytes must be an integer from 0/],
    [{ ...base, maxAttempts: -1 }, /maxAttempts must be an integer from 0/],
    [{ ...base, maxAttempts: "3" }, /maxAttempts must be an integer from 0/],
    [{ ...base, replayIntervalMs: -5 }, /replayIntervalMs must be an integer from 0/],
    [{ ...base, closeTimeoutMs: -1 }, /closeTimeoutMs must be an integer from 0/],
  ];
  for (const [options, message] of cases) {
    assert.throws(() => new Client(options), (e) => {
      assert.ok(e instanceof InvalidArgumentError, `${JSON.stringify(options)}: ${e}`);
      assert.equal(e.errorName, "INVALID_ARGUMENT");
      assert.match(e.message, message);
      return true;
    });
  }
  assert.throws(() => Client.fromEnv({ maxAttempts: -1 }), (e) => e instanceof InvalidArgumentError && /maxAttempts/.test(e.message));
  // fromEnv takes every option but the endpoint, which the environment gives.
  assert.throws(() => Client.fromEnv({ baseUrl: "http://x" }), (e) => e instanceof InvalidArgumentError && /^unknown option "baseUrl"/.test(e.message));
  // Core's own range checks still apply to well-typed values (ConfigError, as in every binding).
  assert.throws(() => new Client({ ...base, requestTimeoutMs: 90_000_000 }), (e) => e instanceof ConfigError && /at most 86400000/.test(e.message));
  // Zero is a value; whether it is a usable one is core's rule (ConfigError, as in Rust).
  assert.throws(() => new Client({ ...base, requestTimeoutMs: 0 }), ConfigError);
  assert.throws(() => new Client({ ...base, maxConcurrentRequests: 0 }), ConfigError);
  assert.throws(() => new Client({ ...base, maxResponseBytes: 0 }), (e) => e instanceof ConfigError && /max_response_bytes must be at least 1/.test(e.message));
  assert.throws(() => new Client({ ...base, maxAttempts: 0 }), (e) => e instanceof ConfigError && /settle max_attempts must be at least 1/.test(e.message));
  assert.throws(() => new Client({ ...base, replayIntervalMs: 0 }), ConfigError);
  // A Redis journal URL core cannot use: refused when the client is made, saying why.
  assert.throws(() => new Client({ ...base, journalUrl: "rediss://127.0.0.1/0" }), (e) => e instanceof ConfigError && /TLS/.test(e.message));
  assert.throws(() => new Client({ ...base, journalUrl: 5 }), (e) => e instanceof InvalidArgumentError && /journalUrl must be a string/.test(e.message));
  // Accepted at the edges: 0 ms is "no drain" for closeTimeoutMs.
  const ok = new Client({ ...base, closeTimeoutMs: 0, maxAttempts: 1, replayIntervalMs: 1, maxConcurrentRequests: 1, maxResponseBytes: 1 });
  // A bad drain bound is an InvalidArgumentError, and leaves the client open.
  await assert.rejects(ok.drain(-1), (e) => e instanceof InvalidArgumentError && /timeoutMs must be an integer from 0/.test(e.message));
  await assert.rejects(ok.close(1.5), (e) => e instanceof InvalidArgumentError && /timeoutMs/.test(e.message));
  assert.equal(ok.closed, false);
  assert.throws(() => ok.on("event", 5), (e) => e instanceof InvalidArgumentError && /listener must be a function/.test(e.message));
  // Never used its lifecycle: close() still resolves with a (clean, empty) drain report.
  assert.deepEqual(await ok.close(), { outcomes: [], remaining: [], quarantined: [], unjournaled: [], settled: 0, clean: true });
  assert.equal(ok.closed, true);
});

test("a closed client throws ClientClosedError", async () => {
  const c = server.client({ journalDir: journalDir() });
  await c.close();
  await c.close();
  assert.equal(c.closed, true);
  await assert.rejects(c.decide({ idempotencyKey: "k", subject: SUBJECT, action: ACTION, estimate: EST }), (e) => {
    assert.ok(e instanceof ClientClosedError);
    assert.equal(e.errorName, "RUNTIME");
    assert.equal(e.code, 3);
    return true;
  });
});

test("Client.fromEnv reads CYCLES_* variables (CYCLES_UNIT the default unit)", async () => {
  const vars = { CYCLES_BASE_URL: server.url, CYCLES_API_KEY: server.apiKey, CYCLES_TENANT: "acme", CYCLES_UNIT: "TOKENS" };
  const saved = Object.fromEntries(Object.keys(vars).map((k) => [k, process.env[k]]));
  try {
    Object.assign(process.env, vars);
    const c = Client.fromEnv({ journalEnabled: false });
    assert.equal(c.baseUrl, server.url);
    assert.equal(c.tenant, "acme");
    assert.equal(c.defaultUnit, "TOKENS");
    const d = await c.decide({ idempotencyKey: key("d"), subject: SUBJECT, action: ACTION, estimate: EST });
    assert.equal(d.decision, "ALLOW");
    await c.close();
    process.env.CYCLES_UNIT = "TOKEN";
    assert.throws(() => Client.fromEnv({ journalEnabled: false }), ConfigError);
  } finally {
    // Per key: replacing process.env itself would leave the real environment (what the
    // addon reads) as the test set it.
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  }
});

test("int64 results are exact over real HTTP: a budget of 2^63 - 1, amounts beyond 2^53 - 1", async () => {
  const MAX = 2n ** 63n - 1n;
  const s = startServer({ budgets: [{ scope: "tenant:acme", unit: "USD_MICROCENTS", allocated: MAX }] });
  const c = s.client({ journalDir: journalDir() });
  try {
    const bal = (await c.getBalances({ tenant: "acme" })).balances.find((b) => b.scopePath === "tenant:acme");
    // JSON.parse would have read 9223372036854775808 for both.
    assert.equal(bal.allocated.amount, MAX);
    assert.equal(bal.remaining.amount, MAX);

    const big = 2n ** 62n;
    const created = await c.createReservation({ idempotencyKey: key("r"), subject: SUBJECT, action: ACTION, estimate: { unit: "USD_MICROCENTS", amount: big } });
    assert.equal(created.reserved.amount, big);
    assert.equal(typeof created.expiresAtMs, "number", "a safe integer stays a number");
    const actual = 2n ** 53n + 1n; // the first integer a number cannot hold
    const committed = await c.commitReservation(created.reservationId, { idempotencyKey: key("c"), actual: { unit: "USD_MICROCENTS", amount: actual } });
    assert.deepEqual(committed.charged, { unit: "USD_MICROCENTS", amount: actual });
    assert.equal(s.ledger().find((e) => e.kind === "commit" && e.reservation_id === created.reservationId).amount, actual);
    const after = committed.balances.find((b) => b.scopePath === "tenant:acme");
    assert.equal(after.remaining.amount, MAX - actual);
    assert.equal(after.spent.amount, actual);

    // A guarded estimate beyond 2^53 - 1 reaches the server exactly too.
    const { value, outcome } = await c.guardedWithOutcome({ estimate: big, action: ACTION, actual: 7 }, async () => "done");
    assert.equal(value, "done");
    const reserved = s.ledger().find((e) => e.kind === "reserve" && e.reservation_id === outcome.reservationId);
    assert.equal(reserved.amount, big);
    assert.deepEqual(outcome.settlement.charged, { unit: "USD_MICROCENTS", amount: 7 });
    await assert.rejects(c.reserve({ estimate: 2n ** 63n, action: ACTION }), (e) => e instanceof InvalidArgumentError && /2\^63 - 1/.test(e.message));

    // Actuals beyond 2^53 - 1 are settled exactly too: setActual and add take a bigint.
    const huge = 2n ** 60n + 3n;
    const set = await c.guardedWithOutcome({ estimate: big, action: ACTION }, async (r) => {
      r.setActual(huge);
      return "set";
    });
    assert.deepEqual(set.outcome.settlement.charged, { unit: "USD_MICROCENTS", amount: huge });
    const added = await c.guardedWithOutcome({ estimate: big, action: ACTION }, async (r) => {
      r.add(2n ** 53n);
      r.add(1);
      r.add({ unit: "USD_MICROCENTS", amount: 2n ** 53n });
      return "added";
    });
    const sum = 2n ** 54n + 1n;
    assert.deepEqual(added.outcome.settlement.charged, { unit: "USD_MICROCENTS", amount: sum });
    const commits = s.ledger().filter((e) => e.kind === "commit").map((e) => [e.reservation_id, e.amount]);
    assert.deepEqual(commits.slice(-2), [[set.outcome.reservationId, huge], [added.outcome.reservationId, sum]]);
    await assert.rejects(
      c.guarded({ estimate: 5, action: ACTION }, async (r) => r.setActual(2n ** 63n)),
      (e) => e instanceof InvalidArgumentError && /2\^63 - 1/.test(e.message),
    );
    await assert.rejects(
      c.guarded({ estimate: 5, action: ACTION }, async (r) => r.add(2 ** 53)),
      (e) => e instanceof InvalidArgumentError && /safe integer/.test(e.message),
    );
  } finally {
    await c.close();
    s.stop();
  }
});

test("idempotency keys a header cannot carry work through raw operations (and replay)", async () => {
  // Keys of every operation, used exactly as written: this file's server is its own.
  for (const [i, base] of [" padded ", "trail ", "kéy", "漢字-😀"].entries()) {
    const k = (suffix) => `${base}${suffix}${i}${base}`;
    const created = await client.createReservation({ idempotencyKey: k("r"), subject: SUBJECT, action: ACTION, estimate: EST });
    assert.equal(created.decision, "ALLOW", JSON.stringify(base));
    const again = await client.createReservation({ idempotencyKey: k("r"), subject: SUBJECT, action: ACTION, estimate: EST });
    assert.equal(again.reservationId, created.reservationId, "the same key replays the same reservation");
    await client.extendReservation(created.reservationId, { idempotencyKey: k("e"), extendByMs: 1000 });
    const committed = await client.commitReservation(created.reservationId, { idempotencyKey: k("c"), actual: { unit: "USD_MICROCENTS", amount: 300 } });
    assert.equal(committed.status, "COMMITTED");
    const other = await client.createReservation({ idempotencyKey: k("r2"), subject: SUBJECT, action: ACTION, estimate: EST });
    await client.releaseReservation(other.reservationId, { idempotencyKey: k("rel"), reason: "unused" });
    const event = await client.createEvent({ idempotencyKey: k("ev"), subject: SUBJECT, action: ACTION, actual: { unit: "USD_MICROCENTS", amount: 7 } });
    assert.equal(event.status, "APPLIED");
    const keys = server
      .ledger()
      .filter((e) => e.reservation_id === created.reservationId || e.reservation_id === other.reservationId || e.idempotency_key === k("ev"))
      .map((e) => [e.kind, e.idempotency_key]);
    assert.deepEqual(keys, [
      ["reserve", k("r")],
      ["extend", k("e")],
      ["commit", k("c")],
      ["reserve", k("r2")],
      ["release", k("rel")],
      ["event", k("ev")],
    ]);
  }
});
