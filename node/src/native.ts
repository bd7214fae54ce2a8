/**
 * The native addon (napi-rs, `bindings/node`), loaded once through the generated loader.
 * Everything user-facing wraps it; nothing outside this package should import it.
 * @internal
 */
// eslint-disable-next-line @typescript-eslint/no-require-imports
import type * as Native from "../native/native";

// The generated CommonJS loader picks `cycles.<platform>.node` next to it.
// eslint-disable-next-line @typescript-eslint/no-require-imports
export const native: typeof Native = require("../native/native.js");
export type { NativeActive, NativeClient, NativeFakeProvider, NativeFallbackPlanner, NativeLifecycle, NativeLocalServer, NativePrimaryPlanner } from "../native/native";
