#!/usr/bin/env bash
# Makes (once) a Debian bookworm arm64 root for running aarch64 artifacts under qemu-user:
#
#   scripts/verify/arm64-root.sh [DIR]     # prints DIR; default $HOME/.cache/cycles-verify/arm64-root
#
# The root has its own python3 (with venv), OpenJDK 17, gcc and Node.js from Debian. Commands run
# inside it with `chroot DIR ...`; the kernel hands aarch64 binaries to qemu-aarch64-static
# through binfmt_misc (registered here from qemu-user-static's binfmt.d entry). Needs root.
set -euo pipefail
DIR="${1:-${CYCLES_ARM64_ROOT:-$HOME/.cache/cycles-verify/arm64-root}}"
PACKAGES="python3,python3-venv,python3-pip,openjdk-17-jre-headless,gcc,libc6-dev,nodejs,ca-certificates"
STAMP="bookworm arm64 $PACKAGES"
log() { printf '== arm64-root: %s\n' "$*" >&2; }

need=()
command -v debootstrap >/dev/null || need+=(debootstrap)
[[ -x /usr/bin/qemu-aarch64-static ]] || need+=(qemu-user-static)
if [[ ${#need[@]} -gt 0 ]]; then
    log "installing ${need[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q "${need[@]}" >&2
fi
if [[ ! -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ]]; then
    mountpoint -q /proc/sys/fs/binfmt_misc || mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc
    # Register straight from the package's binfmt.d entry: no systemd-binfmt or binfmt-support
    # (update-binfmts) runs in a container, and neither is needed for one write.
    conf=/usr/lib/binfmt.d/qemu-aarch64.conf
    if [[ -r $conf ]]; then
        cat "$conf" >/proc/sys/fs/binfmt_misc/register || true
    elif command -v update-binfmts >/dev/null; then
        update-binfmts --enable qemu-aarch64 >&2 || true
    fi
fi
[[ -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ]] ||
    { echo "binfmt_misc has no qemu-aarch64 entry: aarch64 binaries cannot run here" >&2; exit 1; }

if [[ "$(cat "$DIR/.cycles-stamp" 2>/dev/null)" != "$STAMP" ]]; then
    log "debootstrap bookworm arm64 into $DIR (a few minutes, once)"
    rm -rf "$DIR"
    mkdir -p "$(dirname "$DIR")"
    debootstrap --arch=arm64 --variant=minbase --include="$PACKAGES" bookworm "$DIR" \
        http://deb.debian.org/debian >"$DIR.log" 2>&1 || { tail -30 "$DIR.log" >&2; exit 1; }
    echo "$STAMP" >"$DIR/.cycles-stamp"
fi
# Name resolution for loopback inside the root.
[[ -s "$DIR/etc/hosts" ]] || printf '127.0.0.1 localhost\n::1 localhost\n' >"$DIR/etc/hosts"
echo "$DIR"
