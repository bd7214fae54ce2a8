/**
 * Which native addon this package loads, and from where (docs/node.md, "Platforms").
 *
 * The rule: on Linux, the platform key is `linux-<process.arch>-<libc>`, where libc is `gnu`
 * when `process.report`'s header has `glibcVersionRuntime` (Node linked against glibc) and
 * `musl` otherwise. The addon is then, first found wins:
 *
 * 1. the file `CYCLES_NODE_ADDON` names (a development build anywhere),
 * 2. `native/cycles.<key>.node` inside this package (what `node/scripts/build.sh` writes in a
 *    checkout),
 * 3. the platform package `@cycles-sdk/<key>` (an optional dependency npm installs for the
 *    matching os, cpu and libc only).
 *
 * Any other platform gets {@link UnsupportedPlatformError} naming the supported ones and how to
 * build from source.
 * @internal
 */
import { existsSync } from "node:fs";
import { join } from "node:path";

/** The platforms a prebuilt addon package exists for. */
export const SUPPORTED_PLATFORMS = ["linux-x64-gnu", "linux-arm64-gnu", "linux-x64-musl", "linux-arm64-musl"] as const;

/** The npm scope of the per-platform packages (`@cycles-sdk/linux-x64-gnu`, ...). */
export const PLATFORM_PACKAGE_SCOPE = "@cycles-sdk";

const BUILD_FROM_SOURCE =
  "To build the addon from source (a Rust toolchain 1.80+ and Node 20.17+), in a checkout of the " +
  "repository run `node/scripts/build.sh`, then set CYCLES_NODE_ADDON to the built " +
  "node/native/cycles.<platform>.node, or install that node/ folder itself (`npm install ./node`).";

/** What the loader looks at; tests pass a spoofed one. */
export interface Host {
  /** `process.platform`. */
  platform: string;
  /** `process.arch`. */
  arch: string;
  /** `gnu` or `musl` on Linux; ignored elsewhere. */
  libc?: "gnu" | "musl";
  /** `process.env` (CYCLES_NODE_ADDON). */
  env: Record<string, string | undefined>;
  /** The folder of this package's `native/` directory. */
  nativeDir: string;
  /** `require`, to load an addon file or a package. */
  load: (id: string) => unknown;
}

/** The running process is on a platform no addon is built for, or its package is missing. */
export class UnsupportedPlatformError extends Error {
  /** The platform key that was looked for, e.g. `darwin-arm64` or `linux-riscv64-gnu`. */
  readonly platformKey: string;
  constructor(message: string, platformKey: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "UnsupportedPlatformError";
    this.platformKey = platformKey;
  }
}

/** `gnu` when this Node runs on glibc (the process report names its glibc), `musl` otherwise. */
export function runningLibc(): "gnu" | "musl" {
  const report = process.report as (NodeJS.ProcessReport & { excludeNetwork?: boolean }) | undefined;
  if (!report || typeof report.getReport !== "function") return "gnu";
  // The report's network section resolves host names: not needed, and slow offline.
  report.excludeNetwork = true;
  const header = (report.getReport() as { header?: { glibcVersionRuntime?: string } }).header;
  return header?.glibcVersionRuntime ? "gnu" : "musl";
}

/** The platform key of a host: `linux-<arch>-<libc>` on Linux, `<platform>-<arch>` elsewhere. */
export function platformKey(host: Pick<Host, "platform" | "arch" | "libc">): string {
  return host.platform === "linux" ? `linux-${host.arch}-${host.libc ?? "gnu"}` : `${host.platform}-${host.arch}`;
}

function isMissing(e: unknown, id: string): boolean {
  const err = e as { code?: string; message?: string };
  return err?.code === "MODULE_NOT_FOUND" && typeof err.message === "string" && err.message.includes(id);
}

/** Loads the addon for `host` by the rule above, or throws {@link UnsupportedPlatformError}. */
export function loadAddon(host: Host): unknown {
  const explicit = host.env.CYCLES_NODE_ADDON;
  if (explicit) return host.load(explicit);
  const key = platformKey(host);
  const local = join(host.nativeDir, `cycles.${key}.node`);
  if (existsSync(local)) return host.load(local);
  const supported = (SUPPORTED_PLATFORMS as readonly string[]).includes(key);
  if (!supported) {
    throw new UnsupportedPlatformError(
      `cycles-sdk has no native addon for ${key} (process.platform ${host.platform}, process.arch ${host.arch}` +
        `${host.platform === "linux" ? `, libc ${host.libc ?? "gnu"}` : ""}). Prebuilt addons exist for ` +
        `${SUPPORTED_PLATFORMS.join(", ")}. ${BUILD_FROM_SOURCE}`,
      key,
    );
  }
  const pkg = `${PLATFORM_PACKAGE_SCOPE}/${key}`;
  try {
    return host.load(pkg);
  } catch (e) {
    if (!isMissing(e, pkg)) throw e;
    throw new UnsupportedPlatformError(
      `cycles-sdk needs the package ${pkg} on this platform (${key}), and it is not installed: ` +
        `npm installs it as an optional dependency of cycles-sdk, unless optional dependencies were ` +
        `omitted (--omit=optional, --no-optional) or the lockfile was made on another platform. ` +
        `Install it with \`npm install ${pkg}\`. ${BUILD_FROM_SOURCE}`,
      key,
      { cause: e },
    );
  }
}
