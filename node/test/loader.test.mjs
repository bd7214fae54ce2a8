// The addon loader's rule (src/loader.ts) with spoofed hosts: the platform key, the order
// (CYCLES_NODE_ADDON, the local build, the platform package), and the errors on a platform
// without an addon and on a supported one whose package is missing.
import assert from "node:assert/strict";
import { copyFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { test } from "node:test";
import { tempDir } from "./support.mjs";

const require = createRequire(import.meta.url);
const { loadAddon, platformKey, runningLibc, SUPPORTED_PLATFORMS, UnsupportedPlatformError } = require("../dist/loader.js");
const builtAddon = join(import.meta.dirname ?? new URL(".", import.meta.url).pathname, "..", "native", "cycles.linux-x64-gnu.node");

function host(overrides) {
  return { platform: "linux", arch: "x64", libc: "gnu", env: {}, nativeDir: tempDir("cycles-loader-"), load: require, ...overrides };
}

test("the platform key is linux-<arch>-<libc> on Linux, <platform>-<arch> elsewhere; this host is glibc", () => {
  assert.equal(platformKey({ platform: "linux", arch: "arm64", libc: "musl" }), "linux-arm64-musl");
  assert.equal(platformKey({ platform: "darwin", arch: "arm64" }), "darwin-arm64");
  assert.deepEqual([...SUPPORTED_PLATFORMS], ["linux-x64-gnu", "linux-arm64-gnu", "linux-x64-musl", "linux-arm64-musl"]);
  assert.equal(runningLibc(), "gnu");
});

test("an unsupported platform gets an error naming the supported ones and the build from source", () => {
  for (const [spoof, key] of [
    [{ platform: "darwin", arch: "arm64", libc: undefined }, "darwin-arm64"],
    [{ platform: "win32", arch: "x64", libc: undefined }, "win32-x64"],
    [{ platform: "linux", arch: "riscv64", libc: "gnu" }, "linux-riscv64-gnu"],
  ]) {
    const loads = [];
    assert.throws(
      () => loadAddon(host({ ...spoof, load: (id) => loads.push(id) })),
      (e) => {
        assert.ok(e instanceof UnsupportedPlatformError);
        assert.equal(e.platformKey, key);
        assert.match(e.message, new RegExp(`no native addon for ${key} \\(process.platform ${spoof.platform}, process.arch ${spoof.arch}`));
        assert.match(e.message, /linux-x64-gnu, linux-arm64-gnu, linux-x64-musl, linux-arm64-musl/);
        assert.match(e.message, /node\/scripts\/build\.sh/);
        return true;
      },
    );
    assert.deepEqual(loads, [], "nothing is loaded on an unsupported platform");
  }
});

test("a supported platform without its package names the package to install", () => {
  assert.throws(
    () => loadAddon(host({ libc: "musl" })),
    (e) => {
      assert.ok(e instanceof UnsupportedPlatformError);
      assert.equal(e.platformKey, "linux-x64-musl");
      assert.match(e.message, /needs the package @cycles-sdk\/linux-x64-musl .* not installed/);
      assert.match(e.message, /npm install @cycles-sdk\/linux-x64-musl/);
      assert.equal(e.cause.code, "MODULE_NOT_FOUND");
      return true;
    },
  );
});

test("the order: CYCLES_NODE_ADDON, then native/cycles.<key>.node, then @cycles-sdk/<key>", () => {
  const loads = [];
  const load = (id) => (loads.push(id), { id });
  const h = host({ load });
  assert.deepEqual(loadAddon({ ...h, env: { CYCLES_NODE_ADDON: "/x/custom.node" } }), { id: "/x/custom.node" });
  assert.deepEqual(loadAddon(h), { id: "@cycles-sdk/linux-x64-gnu" });
  copyFileSync(builtAddon, join(h.nativeDir, "cycles.linux-x64-gnu.node"));
  assert.deepEqual(loadAddon(h), { id: join(h.nativeDir, "cycles.linux-x64-gnu.node") });
  assert.deepEqual(loads, ["/x/custom.node", "@cycles-sdk/linux-x64-gnu", join(h.nativeDir, "cycles.linux-x64-gnu.node")]);
});

test("a platform package that fails to load for another reason is not reported as missing", () => {
  const broken = new Error("libc.musl-x86_64.so.1: cannot open shared object file");
  assert.throws(() => loadAddon(host({ load: () => { throw broken; } })), (e) => e === broken);
});
