"""Prints the size of every artifact under OUT (scripts/verify-platforms.sh OUT), and of the
libraries inside the C tarballs and the jar: the numbers docs/packaging.md lists."""

import os
import sys
import tarfile
import zipfile

out = sys.argv[1]


def mb(n: int) -> str:
    """A size the way the docs write it."""
    return f"{n / 1e6:.1f} MB" if n >= 100_000 else f"{n / 1e3:.0f} KB"


for lang in ("c", "cli", "java", "python", "node", "kotlin"):
    d = os.path.join(out, lang)
    if not os.path.isdir(d):
        continue
    for root, _, files in sorted(os.walk(d)):
        if root != d and lang == "c":
            continue  # the host install tree
        for f in sorted(files):
            if f in ("LICENSE", "README.md"):
                continue
            path = os.path.join(root, f)
            inner = ""
            if f.endswith(".tar.gz") and not f.endswith(".debug.tar.gz"):
                with tarfile.open(path) as t:
                    inner = ", ".join(
                        f"{m.name.split('/')[-1]} {mb(m.size)}"
                        for m in t.getmembers()
                        if m.isfile() and m.name.split("/")[-1].startswith("libcycles")
                    )
            elif f.endswith(".jar") and f[:-4].split("-")[-1][:1].isdigit():
                with zipfile.ZipFile(path) as z:
                    inner = ", ".join(
                        f"{i.filename.split('/')[-2]} {mb(i.file_size)}"
                        for i in z.infolist()
                        # The JVM jar's native/FOLDER/LIB, the Kotlin jar's PREFIX/LIB (JNA's).
                        if not i.is_dir()
                        and (
                            i.filename.startswith("native/")
                            or i.filename.endswith("/libcycles_uniffi.so")
                        )
                    )
            print(
                f"size: {os.path.relpath(path, out)}: {mb(os.path.getsize(path))}"
                + (f" ({inner})" if inner else "")
            )
