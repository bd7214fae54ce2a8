// cycles-sdk/express with the real `express` package (pinned in this folder) over real HTTP
// against the local Cycles server, asserting its ledger: the reservation per request on
// req.cycles, res.locals.cycles and currentReservation(); the handler's actual committed when
// the response finishes (also a 5xx's); released without one; a client that goes away ends it
// (signal aborted, what was reported committed); a denial goes to the error handler and the
// route never runs.
import assert from "node:assert/strict";
import { once } from "node:events";
import { request } from "node:http";
import { test } from "node:test";

import express from "express";
import { BudgetExceededError, currentReservation } from "cycles-sdk";
import { cycles, reservationOf } from "cycles-sdk/express";
import { LocalServer } from "cycles-sdk/testing";

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function withApp({ allocated = 1_000_000 } = {}, routes, body) {
  const server = new LocalServer({ budgets: [{ scope: "tenant:acme", unit: "TOKENS", allocated }] });
  const client = server.client({ journalEnabled: false, defaultUnit: "TOKENS" });
  const settled = [];
  const app = express();
  app.use("/work", cycles({ client, estimate: (req) => Number(req.query.estimate ?? 100), onSettled: (result, req) => settled.push({ ...result, path: req.path }) }));
  routes(app);
  app.use((err, _req, res, _next) => res.status(err instanceof BudgetExceededError ? 402 : 500).json({ error: err.errorName ?? String(err) }));
  const http = app.listen(0, "127.0.0.1");
  await once(http, "listening");
  const base = `http://127.0.0.1:${http.address().port}`;
  try {
    await body({ server, base, settled });
  } finally {
    http.close();
    await client.close();
    server.stop();
  }
}

const entries = (server, kind) => server.ledger().filter((e) => e.kind === kind);
/** Waits until `n` reservations have ended (they settle after the response is sent). */
async function settledCount(settled, n) {
  for (let i = 0; i < 300 && settled.length < n; i++) await sleep(10);
  assert.equal(settled.length, n, JSON.stringify(settled));
}

test("express: one reservation per request, the handler's actual committed; none reported: released", async () => {
  await withApp(
    {},
    (app) => {
      app.get("/work/answer", (req, res) => {
        assert.equal(res.locals.cycles, req.cycles);
        assert.equal(currentReservation(), req.cycles, "the handler runs in the reservation's context");
        reservationOf(res).setActual(42);
        res.json({ answer: 42 });
      });
      app.get("/work/nothing", (_req, res) => res.send("free"));
      app.get("/work/broken", (req, res) => {
        req.cycles.add(7);
        res.status(503).send("down");
      });
      app.get("/free", (_req, res) => res.send("not guarded"));
    },
    async ({ server, base, settled }) => {
      assert.deepEqual(await (await fetch(`${base}/work/answer?estimate=500`)).json(), { answer: 42 });
      await settledCount(settled, 1);
      assert.equal(entries(server, "reserve")[0].amount, 500);
      assert.equal(entries(server, "commit")[0].amount, 42);
      assert.equal(settled[0].outcome.kind, "settled");
      assert.equal(await (await fetch(`${base}/work/nothing`)).text(), "free");
      await settledCount(settled, 2);
      assert.equal(entries(server, "release").length, 1, "no actual reported: released");
      assert.equal((await fetch(`${base}/work/broken`)).status, 503);
      await settledCount(settled, 3);
      assert.equal(settled[2].outcome.kind, "work_failed");
      assert.equal(entries(server, "commit")[1].amount, 7, "a 5xx still commits what it reported");
      assert.equal(await (await fetch(`${base}/free`)).text(), "not guarded");
      assert.equal(entries(server, "reserve").length, 3);
      const sent = JSON.parse(server.requests().find((q) => q.operation === "createReservation").body);
      assert.deepEqual(sent.action, { kind: "http.request", name: "GET /work/answer" });
    },
  );
});

test("express: a client that goes away ends the reservation, aborts its signal, commits what was reported", async () => {
  let aborted = null;
  await withApp(
    {},
    (app) => {
      app.get("/work/slow", async (req, res) => {
        req.cycles.add(5);
        req.cycles.signal.addEventListener("abort", () => (aborted = true));
        await sleep(1500);
        if (!res.writableEnded) res.send("late");
      });
    },
    async ({ server, base, settled }) => {
      const url = new URL(`${base}/work/slow`);
      const req = request(url);
      req.on("error", () => undefined);
      req.end();
      await sleep(300);
      req.destroy();
      await settledCount(settled, 1);
      assert.equal(aborted, true);
      assert.equal(settled[0].outcome.kind, "work_failed");
      assert.equal(entries(server, "commit")[0].amount, 5);
    },
  );
});

test("express: a denial goes to the error handler; the route never runs", async () => {
  let ran = false;
  await withApp(
    { allocated: 50 },
    (app) => {
      app.get("/work/answer", (_req, res) => {
        ran = true;
        res.send("no");
      });
    },
    async ({ server, base }) => {
      const r = await fetch(`${base}/work/answer?estimate=100`);
      assert.equal(r.status, 402);
      assert.deepEqual(await r.json(), { error: "BUDGET_EXCEEDED" });
      assert.equal(ran, false);
      assert.equal(server.ledger().length, 0);
    },
  );
});
