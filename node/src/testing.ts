/**
 * `cycles-sdk/testing`: {@link LocalServer}, the in-memory Cycles server of this project
 * (`cycles-local-server`) in-process, for users' own tests. It binds 127.0.0.1 on an
 * ephemeral port and serves the whole runtime plane.
 * @module
 */
import { Client, type ClientOptions } from "./client";
import { call } from "./errors";
import { native, type NativeLocalServer } from "./native";
import { requiredMs } from "./options";

/** The tenant the default server knows. */
export const DEFAULT_TENANT = "acme";
/** The API key the default server accepts. */
export const DEFAULT_API_KEY = "cycles-local-key";

/** Settings of a {@link LocalServer}: a `ServerConfig` of `cycles-local-server` (snake_case, as its JSON). */
export type LocalServerConfig = Record<string, unknown>;

/** What the server applied (its ledger), wire keys. */
export type LedgerEntry = Record<string, unknown>;
/** One request the server received, wire keys. */
export type RequestRecord = Record<string, unknown>;

/** A local Cycles server; stop it with {@link stop} (or `using`). */
export class LocalServer implements Disposable {
  private readonly native: NativeLocalServer;
  private readonly config: LocalServerConfig;

  /** Starts a server (omitted settings take the local server's defaults). */
  constructor(config: LocalServerConfig = {}) {
    this.config = config;
    this.native = call(() => new native.NativeLocalServer(JSON.stringify(config)));
  }

  /** Base URL. */
  get url(): string {
    return this.native.url;
  }
  /** The first API key of the first configured tenant. */
  get apiKey(): string {
    const t = this.config.tenants as { api_keys?: string[] }[] | undefined;
    return t?.[0]?.api_keys?.[0] ?? DEFAULT_API_KEY;
  }
  /** The first configured tenant. */
  get tenant(): string {
    const t = this.config.tenants as { id?: string }[] | undefined;
    return t?.[0]?.id ?? DEFAULT_TENANT;
  }
  /** `spec` (default) or `reference` (serialises like the reference Cycles server). */
  get mode(): string {
    return (this.config.mode as string | undefined) ?? "spec";
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
    call(() => this.native.addFault(JSON.stringify(rule)));
  }
  /** Removes every fault rule. */
  clearFaults(): void {
    call(() => this.native.clearFaults());
  }
  /** What the server applied. */
  ledger(): LedgerEntry[] {
    return JSON.parse(call(() => this.native.ledger())) as LedgerEntry[];
  }
  /** What the server received. */
  requests(): RequestRecord[] {
    return JSON.parse(call(() => this.native.requests())) as RequestRecord[];
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
