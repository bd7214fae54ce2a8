/**
 * `cycles-sdk/express`: a middleware that opens a reservation per request and settles it
 * when the response finishes or the client goes away. Tested with Express 5; it imports
 * nothing from it and uses only what Express 4 and connect-style servers have too.
 *
 * Before the handler runs, the estimate is reserved (a denial goes to `next(err)`: your
 * error handler answers it, the handler never runs). The reservation is `req.cycles` and
 * `res.locals.cycles` (also {@link reservationOf} and, inside the handler's async context,
 * `currentReservation()`); the handler reports usage on it (`setActual`, `add`) while the
 * heartbeat keeps its lease alive. When the response finishes, a status below 500 ends the
 * work as succeeded, 5xx as failed; a client that goes away first ends it as failed and
 * aborts `reservation.signal`. Either way the actual reported is committed, and a
 * reservation without one is released (nothing committed that nobody measured).
 *
 * @example
 * ```ts
 * import express from "express";
 * import { Client } from "cycles-sdk";
 * import { cycles, reservationOf } from "cycles-sdk/express";
 * const app = express();
 * app.use("/answer", cycles({ client: Client.fromEnv(), estimate: 1000, action: (req) => ({ kind: "http.request", name: `${req.method} /answer` }) }));
 * app.get("/answer", (req, res) => { reservationOf(res).setActual(420); res.json({ answer: 42 }); });
 * ```
 * @module
 */
import type { Client } from "./client";
import { InvalidArgumentError, MissingActualError } from "./errors";
import { type GuardedReservation, type Outcome, runWith } from "./lifecycle";
import type { Action, Amount, Subject } from "./models";

/** The request as the middleware reads it (Express's `Request` has all of it). */
export interface RequestLike {
  method?: string;
  /** The mount path of the router the middleware runs in (Express). */
  baseUrl?: string;
  path?: string;
  url?: string;
  cycles?: GuardedReservation;
}

/** The response as the middleware uses it (Express's `Response` has all of it). */
export interface ResponseLike {
  statusCode: number;
  writableFinished?: boolean;
  locals?: Record<string, unknown>;
  once(event: "finish" | "close", listener: () => void): unknown;
}

type PerRequest<T, Req> = T | ((req: Req) => T | Promise<T>);

/** Settings of {@link cycles}. */
export interface ExpressGuardOptions<Req extends RequestLike = RequestLike> {
  /** The Cycles client that reserves and settles. */
  client: Client;
  /** What each request reserves: an amount (in `unit`, default the client's), or a function of the request. */
  estimate: PerRequest<number | bigint | Amount, Req>;
  /** What is being done (default `{ kind: "http.request", name: "<METHOD> <path>" }`, the path without the query). */
  action?: PerRequest<Action, Req>;
  /** Who spends (default: the client's tenant). */
  subject?: PerRequest<Subject | undefined, Req>;
  /** Unit of a numeric estimate. */
  unit?: string;
  /** Lease length (the heartbeat extends it while the request runs). */
  ttlMs?: number;
  /** What a lost heartbeat does (default `warn`). */
  heartbeatPolicy?: "warn" | "fail_on_finalize" | "cancel";
  /**
   * Told how each reservation ended (the outcome), or what failed while settling it. Default:
   * a settlement error becomes a process warning; a succeeded request that reported no actual
   * is released without one.
   */
  onSettled?: (result: { outcome: Outcome | null; error: unknown }, req: Req) => void;
}

/** The reservation of a request the middleware guards (from `req` or `res`), or an error saying the middleware did not run. */
export function reservationOf(reqOrRes: RequestLike | ResponseLike): GuardedReservation {
  const r = (reqOrRes as RequestLike).cycles ?? ((reqOrRes as ResponseLike).locals?.cycles as GuardedReservation | undefined);
  if (r === undefined) throw new InvalidArgumentError("no Cycles reservation on this request: is the cycles() middleware mounted before this handler?");
  return r;
}

async function per<T, Req>(v: PerRequest<T, Req>, req: Req): Promise<T> {
  return typeof v === "function" ? await (v as (r: Req) => T | Promise<T>)(req) : v;
}

/**
 * The middleware: `app.use(cycles({ client, estimate }))`. Mount it on the routes it should
 * charge; its reservation lives from before the handler to the end of the response.
 */
export function cycles<Req extends RequestLike = RequestLike, Res extends ResponseLike = ResponseLike>(
  options: ExpressGuardOptions<Req>,
): (req: Req, res: Res, next: (err?: unknown) => void) => void {
  if (options === null || typeof options !== "object") throw new InvalidArgumentError("cycles() needs {client, estimate}");
  if (!options.client || typeof (options.client as { reserve?: unknown }).reserve !== "function") throw new InvalidArgumentError("cycles(): client must be a cycles-sdk Client");
  if (options.estimate === undefined) throw new InvalidArgumentError("cycles(): estimate is required (an amount, or a function of the request)");
  const report =
    options.onSettled ??
    ((result: { outcome: Outcome | null; error: unknown }) => {
      if (result.error !== null && !(result.error instanceof MissingActualError)) process.emitWarning(`cycles-sdk/express: settling a reservation failed: ${String(result.error)}`);
    });
  return (req, res, next) => {
    void (async () => {
      const gone = new AbortController();
      let r: GuardedReservation;
      try {
        const action = options.action === undefined ? { kind: "http.request", name: `${req.method ?? "GET"} ${req.path === undefined ? (req.url ?? "/").split("?")[0] : `${req.baseUrl ?? ""}${req.path}`}` } : await per(options.action, req);
        r = await options.client.reserve({
          estimate: await per(options.estimate, req),
          action,
          subject: options.subject === undefined ? undefined : await per(options.subject, req),
          unit: options.unit,
          ttlMs: options.ttlMs,
          heartbeatPolicy: options.heartbeatPolicy,
          signal: gone.signal,
        });
      } catch (e) {
        next(e);
        return;
      }
      req.cycles = r;
      if (res.locals !== undefined) res.locals.cycles = r;
      let ended = false;
      const end = (succeeded: boolean): void => {
        if (ended) return;
        ended = true;
        r.end(succeeded).then(
          (outcome) => report({ outcome, error: null }, req),
          (error: unknown) => report({ outcome: null, error }, req),
        );
      };
      res.once("finish", () => end(res.statusCode < 500));
      res.once("close", () => {
        if (ended || res.writableFinished) return;
        // The client went away before the response finished.
        gone.abort(new Error("the client closed the connection"));
        end(false);
      });
      runWith(r, () => next());
    })();
  };
}
