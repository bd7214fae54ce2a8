/**
 * `cycles-sdk`: the Cycles budget protocol client for Node, on one Rust core.
 *
 * Reserve before the work, keep the lease alive while it runs, commit what it cost:
 * {@link Client.guarded}, {@link Client.wrap} or `await using r = await client.reserve(...)`.
 * @module
 */
export * from "./client";
export * from "./errors";
export * from "./lifecycle";
export * from "./models";
export { fromWire, toWire } from "./wire";
export { decodeResponse, nativeVersion } from "./decode";
