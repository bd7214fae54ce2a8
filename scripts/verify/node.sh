#!/usr/bin/env bash
# The npm packages of a scripts/package.sh OUT, installed and run on their platforms:
#
#   scripts/verify/node.sh OUT ARM64_ROOT [--ci]
#
# - every platform tarball in OUT/node (cycles-sdk-<platform>-X.Y.Z.tgz): its package.json
#   (name, os, cpu, libc, main) and its addon's ELF machine, NEEDED libraries and glibc symbol
#   versions (scripts/package/node.sh check_node_addon);
# - the main tarball: optionalDependencies on all four platform packages at its version, the
#   bin, a README, no addon; its loader with spoofed hosts (darwin-arm64, linux-riscv64-gnu)
#   throws UnsupportedPlatformError naming the supported platforms;
# - linux-x64-gnu: node/scripts/install-check.sh on these tarballs (installed offline into an
#   empty folder: ESM, CJS, TypeScript strict, the README quick start run, npx cycles-sdk);
# - linux-arm64-gnu: in the arm64 root (qemu-aarch64 through binfmt_misc), whose Node is
#   Debian bookworm's 18.x, below the package's engines (>= 20.17) but with N-API 9 (the addon
#   needs 4): the two tarballs laid out as npm would install them, the addon loaded by the
#   package's own loader, the README quick start and the bin's `demo`, run with that Node;
# - the musl tarballs: checked only (no musl Node here).
# Under --ci nothing is required beyond what OUT holds: each tarball found is checked and run
# where it can be. Needs root for the arm64 part (chroot, a private mount namespace).
set -euo pipefail
REPO="$(cd "$(dirname "$0")/../.." && pwd)"
ROOT="$REPO"  # what scripts/package/*.sh call the repository
[[ $# -ge 2 ]] || { echo "usage: scripts/verify/node.sh OUT ARM64_ROOT [--ci]" >&2; exit 2; }
OUT="$(cd "$1" && pwd)"
ARM64_ROOT="$2"
CI=0
[[ "${3:-}" == --ci ]] && CI=1
log() { printf '== verify node: %s\n' "$*" >&2; }
# shellcheck source=../package/common.sh
source "$REPO/scripts/package/common.sh"
# shellcheck source=../package/node.sh
source "$REPO/scripts/package/node.sh"
VERSION="$(node_version)"

WORK="$(mktemp -d "${TMPDIR:-/tmp}/cycles-verify-node.XXXXXX")"
INROOT=""
cleanup() {
    rm -rf "$WORK"
    [[ -n "$INROOT" ]] && rm -rf "${ARM64_ROOT:?}$INROOT"
    return 0
}
trap cleanup EXIT

MAIN="$OUT/node/cycles-sdk-$VERSION.tgz"
[[ -f "$MAIN" ]] || { echo "no $MAIN (scripts/package.sh OUT node)" >&2; exit 1; }
mkdir -p "$WORK/main"
tar -xzf "$MAIN" -C "$WORK/main"
node - "$WORK/main/package/package.json" "$VERSION" "$NODE_SCOPE" "${ALL_PLATFORMS[@]}" <<'JS'
const fs = require("fs");
const [file, version, scope, ...platforms] = process.argv.slice(2);
const pkg = JSON.parse(fs.readFileSync(file, "utf8"));
const want = Object.fromEntries(platforms.map((p) => [`${scope}/${p}`, version]));
if (JSON.stringify(pkg.optionalDependencies) !== JSON.stringify(want)) throw new Error(`optionalDependencies ${JSON.stringify(pkg.optionalDependencies)}, want ${JSON.stringify(want)}`);
if (pkg.bin?.["cycles-sdk"] !== "./dist/cli.js") throw new Error("no cycles-sdk bin");
if (pkg.devDependencies) throw new Error("devDependencies in the published package.json");
JS
[[ -f "$WORK/main/package/README.md" ]] || { echo "$MAIN: no README.md" >&2; exit 1; }
[[ -f "$WORK/main/package/LICENSE" ]] || { echo "$MAIN: no LICENSE" >&2; exit 1; }
[[ -z "$(find "$WORK/main" -name '*.node')" ]] || { echo "$MAIN carries an addon" >&2; exit 1; }
# The loader of the packed package, on hosts it has no addon for.
node - "$WORK/main/package/dist/loader.js" <<'JS'
const { loadAddon, UnsupportedPlatformError } = require(process.argv[2]);
for (const spoof of [{ platform: "darwin", arch: "arm64" }, { platform: "linux", arch: "riscv64", libc: "gnu" }]) {
  try {
    loadAddon({ ...spoof, env: {}, nativeDir: "/nonexistent", load: require });
    throw new Error(`loaded an addon for ${JSON.stringify(spoof)}`);
  } catch (e) {
    if (!(e instanceof UnsupportedPlatformError) || !/linux-x64-gnu, linux-arm64-gnu, linux-x64-musl, linux-arm64-musl/.test(e.message)) throw e;
    console.error(`== verify node: spoofed ${e.platformKey}: ${e.message.slice(0, 100)}...`);
  }
}
JS
log "$(basename "$MAIN"): optionalDependencies, bin, README, no addon, the unsupported-platform error: ok"

declare -A TARBALL
missing=()
for platform in "${ALL_PLATFORMS[@]}"; do
    tgz="$OUT/node/cycles-sdk-$platform-$VERSION.tgz"
    [[ -f "$tgz" ]] || { missing+=("$platform"); continue; }
    TARBALL[$platform]="$tgz"
    mkdir -p "$WORK/$platform"
    tar -xzf "$tgz" -C "$WORK/$platform"
    node - "$WORK/$platform/package/package.json" "$NODE_SCOPE" "$platform" "${NODE_CPU[$platform]}" "${NODE_LIBC[$platform]}" <<'JS'
const [file, scope, platform, cpu, libc] = process.argv.slice(2);
const pkg = JSON.parse(require("fs").readFileSync(file, "utf8"));
const ok = pkg.name === `${scope}/${platform}` && pkg.os?.join() === "linux" && pkg.cpu?.join() === cpu &&
  pkg.libc?.join() === libc && pkg.main === `cycles.${platform}.node`;
if (!ok) throw new Error(`${file}: ${JSON.stringify(pkg)}`);
JS
    check_node_addon "$WORK/$platform/package/cycles.$platform.node" "$platform"
done

if [[ -n "${TARBALL[linux-x64-gnu]:-}" ]]; then
    log "linux-x64-gnu: node/scripts/install-check.sh on $OUT/node ($(node --version))"
    CYCLES_NODE_TARBALLS="$OUT/node" bash "$REPO/node/scripts/install-check.sh" >&2
fi

if [[ -n "${TARBALL[linux-arm64-gnu]:-}" ]]; then
    [[ -x "$ARM64_ROOT/usr/bin/node" ]] || { echo "no node in the arm64 root $ARM64_ROOT (scripts/verify/arm64-root.sh)" >&2; exit 1; }
    INROOT="/tmp/cycles-verify-node.$$"
    app="$ARM64_ROOT$INROOT/app"
    # npm's layout of `npm install cycles-sdk` on linux-arm64-gnu (the root has no npm).
    mkdir -p "$app/node_modules/@cycles-sdk"
    cp -r "$WORK/main/package" "$app/node_modules/cycles-sdk"
    cp -r "$WORK/linux-arm64-gnu/package" "$app/node_modules/@cycles-sdk/linux-arm64-gnu"
    node -e '
        const fs = require("fs");
        const first = [...fs.readFileSync(process.argv[1], "utf8").matchAll(/```js\n([\s\S]*?)```/g)][0][1];
        fs.writeFileSync(process.argv[2], first);
    ' "$WORK/main/package/README.md" "$app/quickstart.mjs"
    cat >"$app/node.cjs" <<'JS'
console.log(process.version, process.versions.napi, process.report.getReport().header.glibcVersionRuntime);
JS
    cat >"$app/addon.cjs" <<'JS'
const addon = require("@cycles-sdk/linux-arm64-gnu");
console.log("addon", addon.version(), "package", require("cycles-sdk/package.json").version);
JS
    log "linux-arm64-gnu: the packages in the arm64 root, run with its Node (qemu-aarch64)"
    unshare --mount --fork bash -euc '
        root="$1" app="$2"
        mount -t proc proc "$root/proc"
        run() { HOME="$app" TMPDIR="$app" timeout 600 chroot "$root" /bin/sh -c "cd $app && $1"; }
        run "node node.cjs" >"$root$app/node.out"
        run "node addon.cjs" >"$root$app/addon.out"
        run "node quickstart.mjs" >"$root$app/quickstart.out"
        run "node node_modules/cycles-sdk/dist/cli.js demo --timeout-ms 60000" >"$root$app/demo.out"
    ' _ "$ARM64_ROOT" "$INROOT/app"
    read -r node_version napi glibc <"$app/node.out" || true
    grep -qx "addon $VERSION package $VERSION" "$app/addon.out" || { cat "$app/addon.out" >&2; exit 1; }
    grep -qx "answer 42" "$app/quickstart.out" && grep -qx "settlement committed 150000" "$app/quickstart.out" ||
        { cat "$app/quickstart.out" >&2; echo "the quick start printed something else" >&2; exit 1; }
    grep -q '^Done. Next:' "$app/demo.out" || { cat "$app/demo.out" >&2; echo "demo did not finish" >&2; exit 1; }
    log "linux-arm64-gnu: Node $node_version (N-API $napi, glibc $glibc): the addon loaded, the README quick start and cycles-sdk demo: ok"
fi

for platform in linux-x64-musl linux-arm64-musl; do
    if [[ -n "${TARBALL[$platform]:-}" ]]; then
        log "$platform: package.json and the addon's ELF checked, not run (no musl Node here)"
    fi
done
[[ ${#missing[@]} -eq 0 ]] || log "not in $OUT/node, not verified: ${missing[*]}"
if [[ $CI == 1 ]]; then log "(--ci: what OUT holds, nothing more required)"; fi
log "ok"
