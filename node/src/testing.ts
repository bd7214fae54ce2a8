/**
 * `cycles-sdk/testing`: {@link LocalServer}, the in-memory Cycles server of this project
 * (`cycles-local-server`) in-process, for users' own tests. It binds 127.0.0.1 on an
 * ephemeral port and serves the whole runtime plane.
 * @module
 */
import { Client, type ClientOptions } from "./client";
import { InvalidArgumentError, call } from "./errors";
import { parseJson, stringifyJson } from "./json";
import type { Caps, Int64 } from "./models";
import { native, type NativeFakeProvider, type NativeLocalServer } from "./native";
import { requiredMs } from "./options";

/** The tenant the default server knows. */
export const DEFAULT_TENANT = "acme";
/** The API key the default server accepts. */
export const DEFAULT_API_KEY = "cycles-local-key";

/** One tenant of a {@link LocalServer} and the API keys that authenticate as it. */
export interface LocalServerTenant {
  /** Tenant id (the `tenant` subject value). */
  id: string;
  /** Keys accepted in `X-Cycles-API-Key` (default `["cycles-local-key"]`). */
  apiKeys?: string[];
  /** Start CLOSED: persisting operations get 409 TENANT_CLOSED (default false). */
  closed?: boolean;
}

/** A budget of a {@link LocalServer} for one (scope, unit). */
export interface LocalServerBudget {
  /** Canonical scope, e.g. `tenant:acme` or `tenant:acme/workspace:prod`. */
  scope: string;
  /** `USD_MICROCENTS`, `TOKENS`, `CREDITS` or `RISK_POINTS`. */
  unit: string;
  /** The allocated amount (an int64: a `bigint` beyond 2^53 − 1). */
  allocated: Int64;
  /** The most debt ALLOW_WITH_OVERDRAFT may accrue (default 0). */
  overdraftLimit?: Int64;
  /** Operator status (default `ACTIVE`; `FROZEN` and `CLOSED` refuse reservations with 409). */
  status?: "ACTIVE" | "FROZEN" | "CLOSED";
  /**
   * Caps granted on this budget's reservations (`ALLOW_WITH_CAPS`; the innermost scope's
   * win), camelCase as every result of this package: `{ maxTokens: 64 }`. Default none: `ALLOW`.
   */
  caps?: Caps;
}

/** How an extension turns `extend_by_ms` into a new expiry. */
export type LocalServerExtendClamp =
  /** new expiry = expiry + extend_by_ms (default). */
  | { kind: "additive" }
  /** new expiry = expiry + min(extend_by_ms, maxGrantMs). */
  | { kind: "grant_cap"; maxGrantMs: number }
  /** new expiry = min(expiry + extend_by_ms, now + maxLeadMs), never earlier than the expiry. */
  | { kind: "max_lead"; maxLeadMs: number };

/** The TTL and extension behaviour of a {@link LocalServer} (the server regimes of the heartbeat spec). */
export interface LocalServerRegime {
  /** Send `remaining_ttl_ms` on live create and extend successes (default true). */
  emitRemainingTtl?: boolean;
  /** The extension clamp (default additive). */
  extend?: LocalServerExtendClamp;
  /** Cap on the TTL granted at create (default none). */
  initialTtlCapMs?: number | null;
  /** Extensions allowed per reservation (default 10; null: unlimited). */
  maxExtensions?: number | null;
}

/**
 * Settings of a {@link LocalServer} (`cycles-local-server`'s `ServerConfig`, camelCase);
 * every member is optional and an omitted one takes the server's default. A key that is not
 * one of these (at any depth) throws {@link InvalidArgumentError} naming it, so a misspelt
 * setting never starts a server that silently ignores it.
 */
export interface LocalServerConfig {
  /** Address to bind (default `127.0.0.1:0`: a free loopback port). */
  bind?: string;
  /** Tenants and their keys (default: tenant `acme` with key `cycles-local-key`). */
  tenants?: LocalServerTenant[];
  /** Key accepted in `X-Admin-API-Key` on list/get/release (default `cycles-local-admin`; null disables admin auth). */
  adminApiKey?: string | null;
  /** Budgets per (scope, unit) (default: `tenant:acme`, 10^10 USD_MICROCENTS). Replaces the default when given. */
  budgets?: LocalServerBudget[];
  /** TTL and extension regime. */
  regime?: LocalServerRegime;
  /** How a same-key request's payload is compared: `exact` JSON as sent (default, like the reference server) or `canonical` (sorted keys). */
  idempotencyCompare?: "exact" | "canonical";
  /** Emit `cycles_evidence` references and serve signed envelopes and the JWKS (default true). */
  evidence?: boolean;
  /** Wire dialect: `spec` (default) or `reference` (serialises like the reference Cycles server). */
  mode?: "spec" | "reference";
}

type Check = (v: unknown, path: string) => unknown;

const snake = (k: string): string => k.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);

function describe(v: unknown): string {
  if (typeof v === "string") return JSON.stringify(v);
  if (typeof v === "number" || typeof v === "bigint" || typeof v === "boolean" || v === null || v === undefined) return String(v);
  return Array.isArray(v) ? "an array" : `a value of type ${typeof v}`;
}

function bad(path: string, what: string, v: unknown): never {
  throw new InvalidArgumentError(`LocalServer config${path === "" ? "" : ` ${path}`} must be ${what}, not ${describe(v)}`);
}

const str: Check = (v, p) => (typeof v === "string" ? v : bad(p, "a string", v));
const bool: Check = (v, p) => (typeof v === "boolean" ? v : bad(p, "a boolean", v));
const nullable =
  (c: Check): Check =>
  (v, p) =>
    v === null ? null : c(v, p);
const oneOf =
  (...values: string[]): Check =>
  (v, p) =>
    typeof v === "string" && values.includes(v) ? v : bad(p, values.map((x) => JSON.stringify(x)).join(" or "), v);
const INT64_MIN = -(1n << 63n);
const INT64_MAX = (1n << 63n) - 1n;
const int64: Check = (v, p) =>
  (typeof v === "number" && Number.isSafeInteger(v)) || (typeof v === "bigint" && v >= INT64_MIN && v <= INT64_MAX)
    ? v
    : bad(p, "a safe integer or a bigint within 64 bits", v);
const count =
  (max: number): Check =>
  (v, p) =>
    typeof v === "number" && Number.isSafeInteger(v) && v >= 0 && v <= max ? v : bad(p, `an integer from 0 to ${max}`, v);
const list =
  (c: Check): Check =>
  (v, p) =>
    Array.isArray(v) ? v.map((x, i) => c(x, `${p}[${i}]`)) : bad(p, "an array", v);

/**
 * An object of known members, each checked and renamed to the server's snake_case; an
 * unknown member is an InvalidArgumentError naming its path (and the camelCase spelling
 * when it is a snake_case one).
 */
function shape(members: Record<string, Check>, required: string[] = []): Check {
  return (v, p) => {
    if (v === null || typeof v !== "object" || Array.isArray(v)) bad(p, "an object", v);
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v as Record<string, unknown>)) {
      const at = p === "" ? k : `${p}.${k}`;
      const c = members[k];
      if (c === undefined) {
        const camel = Object.keys(members).find((m) => snake(m) === k);
        throw new InvalidArgumentError(`unknown LocalServer config key ${at}${camel ? ` (did you mean ${camel}?)` : ""}`);
      }
      if (x !== undefined) out[snake(k)] = c(x, at);
    }
    for (const k of required) {
      if ((v as Record<string, unknown>)[k] === undefined) throw new InvalidArgumentError(`LocalServer config ${p === "" ? k : `${p}.${k}`} is required`);
    }
    return out;
  };
}

const U32_MAX = 0xffff_ffff;
const MS_MAX = Number.MAX_SAFE_INTEGER;

const extendClamp: Check = (v, p) => {
  const kind = v !== null && typeof v === "object" ? (v as { kind?: unknown }).kind : undefined;
  switch (kind) {
    case "additive":
      return shape({ kind: str })(v, p);
    case "grant_cap":
      return shape({ kind: str, maxGrantMs: count(MS_MAX) }, ["maxGrantMs"])(v, p);
    case "max_lead":
      return shape({ kind: str, maxLeadMs: count(MS_MAX) }, ["maxLeadMs"])(v, p);
    default:
      return bad(`${p}.kind`, '"additive", "grant_cap" or "max_lead"', kind);
  }
};

const CONFIG = shape({
  bind: str,
  tenants: list(shape({ id: str, apiKeys: list(str), closed: bool }, ["id"])),
  adminApiKey: nullable(str),
  budgets: list(
    shape(
      {
        scope: str,
        unit: str,
        allocated: int64,
        overdraftLimit: int64,
        status: oneOf("ACTIVE", "FROZEN", "CLOSED"),
        caps: shape({ maxTokens: int64, maxStepsRemaining: int64, toolAllowlist: list(str), toolDenylist: list(str), cooldownMs: int64 }),
      },
      ["scope", "unit", "allocated"],
    ),
  ),
  regime: shape({
    emitRemainingTtl: bool,
    extend: extendClamp,
    initialTtlCapMs: nullable(count(MS_MAX)),
    maxExtensions: nullable(count(U32_MAX)),
  }),
  idempotencyCompare: oneOf("exact", "canonical"),
  evidence: bool,
  mode: oneOf("spec", "reference"),
});

/** What the server applied (its ledger), wire keys. */
export type LedgerEntry = Record<string, unknown>;
/** One request the server received, wire keys. */
export type RequestRecord = Record<string, unknown>;

/** A local Cycles server; stop it with {@link stop} (or `using`). */
export class LocalServer implements Disposable {
  private readonly native: NativeLocalServer;
  private readonly config: LocalServerConfig;

  /**
   * Starts a server (omitted settings take the local server's defaults). A config member
   * that is unknown or of the wrong type throws {@link InvalidArgumentError} naming it,
   * before anything starts.
   */
  constructor(config: LocalServerConfig = {}) {
    const wire = CONFIG(config, "");
    this.config = config;
    this.native = call(() => new native.NativeLocalServer(stringifyJson(wire)));
  }

  /** Base URL. */
  get url(): string {
    return this.native.url;
  }
  /** The first API key of the first configured tenant (the server's own answer). */
  get apiKey(): string {
    return this.native.apiKey;
  }
  /** The first configured tenant (the server's own answer). */
  get tenant(): string {
    return this.native.tenant;
  }
  /** `spec` (default) or `reference` (serialises like the reference Cycles server). */
  get mode(): "spec" | "reference" {
    return this.config.mode ?? "spec";
  }
  /** Whether it is running. */
  get running(): boolean {
    return this.native.running;
  }
  /** A client of this server (its key and tenant; `options` override). */
  client(options: Partial<ClientOptions> = {}): Client {
    return new Client({ baseUrl: this.url, apiKey: this.apiKey, tenant: this.tenant, ...options });
  }
  /** Adds a fault rule (a `FaultRule` of `cycles-local-server`, snake_case). */
  addFault(rule: Record<string, unknown>): void {
    call(() => this.native.addFault(stringifyJson(rule)));
  }
  /** Removes every fault rule. */
  clearFaults(): void {
    call(() => this.native.clearFaults());
  }
  /** What the server applied (amounts exact: a `bigint` beyond 2^53 − 1). */
  ledger(): LedgerEntry[] {
    return parseJson(call(() => this.native.ledger())) as LedgerEntry[];
  }
  /** What the server received. */
  requests(): RequestRecord[] {
    return parseJson(call(() => this.native.requests())) as RequestRecord[];
  }
  /** Moves the server's clock forward. */
  advanceClock(ms: number): void {
    const by = requiredMs(ms, "ms");
    call(() => this.native.advanceClock(by));
  }
  /** The server's clock in epoch milliseconds. */
  nowMs(): number {
    return call(() => this.native.nowMs());
  }
  /** Closes (or reopens) a tenant. */
  setTenantClosed(tenant: string, closed = true): void {
    call(() => this.native.setTenantClosed(tenant, closed));
  }
  /** Stops the server. Idempotent. */
  stop(): void {
    call(() => this.native.stop());
  }
  /** `using server = new LocalServer()`: {@link stop}. */
  [Symbol.dispose](): void {
    this.stop();
  }
}

// --- The fake model provider -------------------------------------------------------------

/** One scripted fault of a {@link FakeProvider}. */
export type FakeFault =
  /** An error response in the provider's shape (HTTP 500 unless `status` is given). */
  | { kind: "server_error"; status?: number }
  /** HTTP 429 in the provider's shape; `retryAfter` is the raw `Retry-After` value (default `"1"`; null sends none). */
  | { kind: "rate_limited"; retryAfter?: string | null }
  /** Headers and `afterChunks` SSE events (none of a whole body), then the connection closes mid-body: no final usage. */
  | { kind: "cut_stream"; afterChunks: number }
  /** `afterChunks` SSE events, then the provider's in-stream error event and a clean end (no final usage); a whole response is a 500 instead. */
  | { kind: "stream_error"; afterChunks: number }
  /** Waits `ms` milliseconds before sending anything, then answers normally. */
  | { kind: "slow_first_byte"; ms: number }
  /** Answers normally, but waits `ms` milliseconds before each SSE event (before the body of a whole response): a stream that stays in flight. */
  | { kind: "slow_chunks"; ms: number };

/**
 * When a {@link FakeProvider} injects a fault: every given filter must match (`endpoint`,
 * `model`: the body's model, `call`: the 0-based index among provider calls); of the
 * matching requests `skip` pass, then `times` are faulted (default 1; 0: every later one).
 */
export interface FakeFaultRule {
  endpoint?: "chat_completions" | "responses" | "messages";
  model?: string;
  call?: number;
  skip?: number;
  times?: number;
  fault: FakeFault;
}

/**
 * Settings of a {@link FakeProvider} (`cycles-fake-provider`'s `FakeConfig`, camelCase);
 * every member is optional. An unknown member (at any depth) throws
 * {@link InvalidArgumentError} naming it.
 */
export interface FakeProviderConfig {
  /** Address to bind (default `127.0.0.1:0`: a free loopback port). */
  bind?: string;
  /** The reply text of every model without its own entry in `replies`. */
  reply?: string;
  /** Reply text per model name. */
  replies?: Record<string, string>;
  /** Fault rules, matched in order. */
  faults?: FakeFaultRule[];
}

/** One request a {@link FakeProvider} received, in arrival order. */
export interface ProviderRequest {
  /** 0-based position in the log (since the last reset). */
  seq: number;
  /** 0-based index among provider calls (the index a rule's `call` matches); null for an unknown route. */
  call: number | null;
  method: string;
  path: string;
  endpoint: "chat_completions" | "responses" | "messages" | null;
  /** Every request header, names in lower case. */
  headers: Record<string, string>;
  /** The body parsed as JSON (null when empty or not JSON; then see `bodyText`). */
  body: unknown;
  bodyText: string | null;
  model: string | null;
  stream: boolean;
  /** The output bound the provider saw (`max_tokens`, `max_completion_tokens`, the smaller of the two when both, or `max_output_tokens`). */
  outputBound: number | null;
  status: number;
  /** The kind of the fault injected, if one was. */
  fault: string | null;
  promptTokens: number | null;
  completionTokens: number | null;
}

const FAULT_MEMBERS: Record<string, string[]> = {
  server_error: ["kind", "status"],
  rate_limited: ["kind", "retryAfter"],
  cut_stream: ["kind", "afterChunks"],
  stream_error: ["kind", "afterChunks"],
  slow_first_byte: ["kind", "ms"],
  slow_chunks: ["kind", "ms"],
};

/** `v` as an object of only the `known` members, renamed to snake_case; the path names an unknown one. */
function fakeShape(v: unknown, known: string[], at: string): Record<string, unknown> {
  if (v === null || typeof v !== "object" || Array.isArray(v)) {
    throw new InvalidArgumentError(`FakeProvider config${at === "" ? "" : ` ${at}`} must be an object, not ${describe(v)}`);
  }
  const out: Record<string, unknown> = {};
  for (const [k, x] of Object.entries(v as Record<string, unknown>)) {
    if (!known.includes(k)) {
      const path = at === "" ? k : `${at}.${k}`;
      throw new InvalidArgumentError(`unknown FakeProvider config key ${path} (known: ${known.join(", ")})`);
    }
    if (x !== undefined) out[snake(k)] = x;
  }
  return out;
}

function fakeRule(rule: unknown, at: string): Record<string, unknown> {
  const out = fakeShape(rule, ["endpoint", "model", "call", "skip", "times", "fault"], at);
  const fault = out.fault;
  const kind = fault !== null && typeof fault === "object" ? (fault as { kind?: unknown }).kind : undefined;
  const members = typeof kind === "string" ? FAULT_MEMBERS[kind] : undefined;
  // An unknown kind goes through as written: the provider's own error lists the kinds.
  if (members !== undefined) out.fault = fakeShape(fault, members, `${at}.fault`);
  return out;
}

function fakeConfig(config: FakeProviderConfig): Record<string, unknown> {
  const out = fakeShape(config, ["bind", "reply", "replies", "faults"], "");
  if (out.faults !== undefined) {
    if (!Array.isArray(out.faults)) throw new InvalidArgumentError(`FakeProvider config faults must be an array, not ${describe(out.faults)}`);
    out.faults = out.faults.map((r, i) => fakeRule(r, `faults[${i}]`));
  }
  return out;
}

function providerRequest(r: Record<string, unknown>): ProviderRequest {
  return {
    seq: r.seq as number,
    call: r.call as number | null,
    method: r.method as string,
    path: r.path as string,
    endpoint: r.endpoint as ProviderRequest["endpoint"],
    headers: r.headers as Record<string, string>,
    body: r.body,
    bodyText: r.body_text as string | null,
    model: r.model as string | null,
    stream: r.stream as boolean,
    outputBound: r.output_bound as number | null,
    status: r.status as number,
    fault: r.fault as string | null,
    promptTokens: r.prompt_tokens as number | null,
    completionTokens: r.completion_tokens as number | null,
  };
}

/**
 * A fake model provider in this process (`cycles-fake-provider`) on an ephemeral loopback
 * port: OpenAI Chat Completions and Responses, Anthropic Messages, whole and streamed, with
 * deterministic token counts (one token per whitespace-separated word), scripted faults and
 * a request recorder. Any API key is accepted. Stop it with {@link stop}, `using` or
 * `await using`:
 *
 * ```ts
 * await using provider = new FakeProvider({ reply: "Hello there" });
 * const openai = new OpenAI({ baseURL: provider.openaiBaseUrl, apiKey: "k", maxRetries: 0 });
 * ```
 */
export class FakeProvider implements Disposable, AsyncDisposable {
  private readonly native: NativeFakeProvider;

  /** Starts a provider; an unknown or mistyped setting throws {@link InvalidArgumentError} before anything starts. */
  constructor(config: FakeProviderConfig = {}) {
    const wire = fakeConfig(config);
    this.native = call(() => new native.NativeFakeProvider(Object.keys(wire).length === 0 ? undefined : stringifyJson(wire)));
  }

  /** `http://127.0.0.1:PORT` (no trailing slash): the Anthropic clients' base URL (the OpenAI clients' works too). */
  get baseUrl(): string {
    return this.native.url;
  }
  /** `baseUrl + "/v1"`, the OpenAI clients' usual base URL. */
  get openaiBaseUrl(): string {
    return `${this.native.url}/v1`;
  }
  /** Whether it is running. */
  get running(): boolean {
    return this.native.running;
  }
  /** Every request received since the start or the last {@link reset}. */
  requests(): ProviderRequest[] {
    return (parseJson(call(() => this.native.requests())) as Record<string, unknown>[]).map(providerRequest);
  }
  /** Empties the request log, restarts call numbering at 0 and keeps only the configured fault rules (their counts at zero). */
  reset(): void {
    call(() => this.native.reset());
  }
  /** Adds a fault rule after the existing ones. */
  addFault(rule: FakeFaultRule): void {
    const wire = fakeRule(rule, "rule");
    call(() => this.native.addFault(stringifyJson(wire)));
  }
  /** Removes every fault rule (the configured ones too, until {@link reset}). */
  clearFaults(): void {
    call(() => this.native.clearFaults());
  }
  /** Stops the provider. Idempotent. */
  stop(): void {
    call(() => this.native.stop());
  }
  /** `using provider = new FakeProvider()`: {@link stop}. */
  [Symbol.dispose](): void {
    this.stop();
  }
  /** `await using provider = new FakeProvider()`: {@link stop}. */
  async [Symbol.asyncDispose](): Promise<void> {
    this.stop();
  }
}
