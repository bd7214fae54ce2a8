"""Fails unless every artifact under OUT carries the repository's LICENSE and a README for
users whose links all work off the repository (absolute, or anchors):

    python3 scripts/verify/contents.py OUT [LANG...]      # LANG: c cli java python node kotlin

    python  each wheel: .dist-info/licenses/LICENSE, METADATA naming it (License-File) and
            the Apache-2.0 expression, the long description (METADATA's body); the sdist:
            LICENSE, README.md, PKG-INFO the same way
    node    each tarball: package/LICENSE, package/README.md, package.json's license
    java    each jar: META-INF/LICENSE; the main jar META-INF/README.md too;
            natives-debug/LICENSE beside the debug files
    kotlin  the same as java (cycles-kotlin-X.Y.Z.jar)
    c       each tarball (and .debug.tar.gz): FOLDER/LICENSE; the install tarball README.md
    cli     LICENSE beside the binaries

Without LANG, every language folder OUT has. A LANG asked for whose folder is missing, or has
no artifact, is an error. Run by scripts/verify-platforms.sh after packaging.
"""

import email.parser
import json
import os
import re
import sys
import tarfile
import zipfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
with open(os.path.join(REPO, "LICENSE"), "rb") as f:
    LICENSE = f.read()
LANGS = ("c", "cli", "java", "python", "node", "kotlin")

problems: list[str] = []


def problem(artifact: str, what: str) -> None:
    problems.append(f"{artifact}: {what}")


def check_license(artifact: str, data: bytes | None, where: str) -> None:
    if data is None:
        problem(artifact, f"no {where}")
    elif data != LICENSE:
        problem(artifact, f"{where} is not the repository's LICENSE")


def check_readme(artifact: str, text: str | None, where: str) -> None:
    """A README is there, and no link in it is relative (it is read off the repository)."""
    if text is None or not text.strip():
        problem(artifact, f"no {where}")
        return
    links = re.findall(r"\]\(([^)\s]+)", text) + re.findall(r"^\s*\[[^\]]+\]:\s*(\S+)", text, re.M)
    relative = [u for u in links if not re.match(r"(https?://|mailto:|#)", u)]
    if relative:
        problem(artifact, f"relative links in {where}: {relative}")


def tar_member(t: tarfile.TarFile, name: str) -> bytes | None:
    try:
        f = t.extractfile(name)
    except KeyError:
        return None
    return f.read() if f else None


def zip_member(z: zipfile.ZipFile, name: str) -> bytes | None:
    try:
        return z.read(name)
    except KeyError:
        return None


def text(data: bytes | None) -> str | None:
    return None if data is None else data.decode()


def file_bytes(path: str) -> bytes | None:
    if not os.path.isfile(path):
        return None
    with open(path, "rb") as f:
        return f.read()


def check_core_metadata(artifact: str, data: bytes | None, where: str) -> None:
    """METADATA / PKG-INFO: License-File names LICENSE, the SPDX expression, the description."""
    if data is None:
        problem(artifact, f"no {where}")
        return
    msg = email.parser.BytesParser().parsebytes(data)
    if "LICENSE" not in msg.get_all("License-File", []):
        problem(artifact, f"{where} has no License-File: LICENSE")
    if msg.get("License-Expression") != "Apache-2.0":
        problem(artifact, f"{where} License-Expression is {msg.get('License-Expression')!r}")
    body = msg.get_payload()
    check_readme(
        artifact, body if isinstance(body, str) else None, f"the long description ({where})"
    )


def check_python(d: str) -> int:
    n = 0
    for f in sorted(os.listdir(d)):
        path = os.path.join(d, f)
        if f.endswith(".whl"):
            with zipfile.ZipFile(path) as z:
                info = next((n for n in z.namelist() if n.endswith(".dist-info/METADATA")), None)
                if info is None:
                    problem(f, "no .dist-info/METADATA")
                    continue
                dist_info = info.rsplit("/", 1)[0]
                lic = f"{dist_info}/licenses/LICENSE"
                check_license(f, zip_member(z, lic), lic)
                check_core_metadata(f, zip_member(z, info), f"{dist_info}/METADATA")
        elif f.endswith(".tar.gz"):
            with tarfile.open(path) as t:
                top = f[: -len(".tar.gz")]
                check_license(f, tar_member(t, f"{top}/LICENSE"), f"{top}/LICENSE")
                check_readme(f, text(tar_member(t, f"{top}/README.md")), f"{top}/README.md")
                check_core_metadata(f, tar_member(t, f"{top}/PKG-INFO"), f"{top}/PKG-INFO")
        else:
            continue
        n += 1
    return n


def check_node(d: str) -> int:
    n = 0
    for f in sorted(os.listdir(d)):
        if not f.endswith(".tgz"):
            continue
        with tarfile.open(os.path.join(d, f)) as t:
            check_license(f, tar_member(t, "package/LICENSE"), "package/LICENSE")
            check_readme(f, text(tar_member(t, "package/README.md")), "package/README.md")
            pkg = tar_member(t, "package/package.json")
            if pkg is None or json.loads(pkg).get("license") != "Apache-2.0":
                problem(f, "package.json does not declare Apache-2.0")
        n += 1
    return n


def check_java(d: str) -> int:
    n = 0
    for f in sorted(os.listdir(d)):
        if not f.endswith(".jar"):
            continue
        with zipfile.ZipFile(os.path.join(d, f)) as z:
            check_license(f, zip_member(z, "META-INF/LICENSE"), "META-INF/LICENSE")
            # The main jar (cycles-sdk-X.Y.Z.jar), not -sources or -javadoc.
            if f[: -len(".jar")].split("-")[-1][:1].isdigit():
                check_readme(f, text(zip_member(z, "META-INF/README.md")), "META-INF/README.md")
        n += 1
    debug = os.path.join(d, "natives-debug")
    if os.path.isdir(debug):
        check_license("natives-debug/", file_bytes(os.path.join(debug, "LICENSE")), "LICENSE")
    return n


def check_kotlin(d: str) -> int:
    return check_java(d)


def check_c(d: str) -> int:
    n = 0
    for f in sorted(os.listdir(d)):
        if not f.endswith(".tar.gz"):
            continue
        debug = f.endswith(".debug.tar.gz")
        top = f[: -len(".debug.tar.gz" if debug else ".tar.gz")]
        with tarfile.open(os.path.join(d, f)) as t:
            check_license(f, tar_member(t, f"{top}/LICENSE"), f"{top}/LICENSE")
            if not debug:
                check_readme(f, text(tar_member(t, f"{top}/README.md")), f"{top}/README.md")
        n += 1
    return n


def check_cli(d: str) -> int:
    bins = [f for f in os.listdir(d) if f.startswith("cycles-") and not f.endswith(".debug")]
    if bins:
        check_license("cli/", file_bytes(os.path.join(d, "LICENSE")), "LICENSE beside the binaries")
    return len(bins)


def main() -> int:
    if len(sys.argv) < 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    out, asked = sys.argv[1], sys.argv[2:]
    for lang in asked:
        if lang not in LANGS:
            print(f"unknown language {lang!r} ({' '.join(LANGS)})", file=sys.stderr)
            return 2
    langs = asked or [lang for lang in LANGS if os.path.isdir(os.path.join(out, lang))]
    for lang in langs:
        d = os.path.join(out, lang)
        if not os.path.isdir(d):
            problem(f"{lang}/", "missing")
            continue
        n = globals()[f"check_{lang}"](d)
        if n == 0:
            problem(f"{lang}/", "no artifact")
        print(f"== verify contents: {lang}: {n} artifact(s) checked", file=sys.stderr)
    for p in problems:
        print(f"== verify contents: FAIL {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
