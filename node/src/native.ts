/**
 * The native addon (napi-rs, `bindings/node`), loaded once by the rule of `./loader`.
 * Everything user-facing wraps it; nothing outside this package should import it.
 * @internal
 */
import { join } from "node:path";
import type * as Native from "../native/native";
import { loadAddon, runningLibc } from "./loader";

export const native = loadAddon({
  platform: process.platform,
  arch: process.arch,
  libc: process.platform === "linux" ? runningLibc() : undefined,
  env: process.env,
  nativeDir: join(__dirname, "..", "native"),
  load: require,
}) as typeof Native;
export type { NativeActive, NativeClient, NativeFakeProvider, NativeFallbackPlanner, NativeLifecycle, NativeLocalServer, NativePrimaryPlanner } from "../native/native";
