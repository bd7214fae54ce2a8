# shellcheck shell=bash
# Shared by scripts/verify/*.sh: running commands in the arm64 root, and checking ELF files.

vlog() { printf '== verify %s: %s\n' "${VERIFY_LANG:-?}" "$*" >&2; }

# arm64_run ROOT CMD...: runs CMD (a path inside ROOT) in the arm64 root, under qemu-user via
# binfmt, with /proc mounted in a private mount namespace (gone when the command ends, so
# nothing stays mounted inside the cached root). Killed after $ARM64_TIMEOUT seconds (900).
arm64_run() {
    local root="$1"
    shift
    timeout "${ARM64_TIMEOUT:-900}" unshare --mount --propagation private -- sh -c 'mount -t proc proc "$0/proc" && exec chroot "$0" "$@"' \
        "$root" env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=/root LANG=C.UTF-8 "$@"
}

# A fresh folder inside the arm64 root; prints its path inside the root (/tmp/...).
arm64_tempdir() {
    local d
    d="$(mktemp -d "$1/tmp/cycles-verify.XXXXXX")"
    echo "/tmp/${d##*/}"
}

# elf_machine FILE: readelf's Machine field (X86-64, AArch64).
elf_machine() { readelf -hW "$1" | sed -n 's/^ *Machine: *//p' | sed 's/Advanced Micro Devices //'; }

# elf_needed FILE: the NEEDED entries, space-separated.
elf_needed() { readelf -dW "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ' | sed 's/ $//'; }

# elf_max_glibc FILE: the newest GLIBC_x.y symbol version FILE requires (empty: none).
elf_max_glibc() { readelf -VW "$1" | grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -1; }

# check_elf FILE MACHINE LIBC: the machine, and for gnu no glibc newer than 2.17, for musl none
# at all. Prints one line of facts.
check_elf() {
    local file="$1" machine="$2" libc="$3" got max
    got="$(elf_machine "$file")"
    [[ "$got" == "$machine" ]] || { echo "$file: machine $got, expected $machine" >&2; return 1; }
    max="$(elf_max_glibc "$file")"
    if [[ "$libc" == musl ]]; then
        [[ -z "$max" ]] || { echo "$file: a musl build requires GLIBC_$max" >&2; return 1; }
    else
        [[ -n "$max" ]] || { echo "$file: no glibc symbol versions in a glibc build" >&2; return 1; }
        [[ "$(printf '%s\n2.17\n' "$max" | sort -V | tail -1)" == 2.17 ]] ||
            { echo "$file: requires GLIBC_$max, newer than 2.17" >&2; return 1; }
    fi
    echo "$(basename "$file"): $got, ${max:+glibc $max max, }NEEDED: $(elf_needed "$file")"
}
