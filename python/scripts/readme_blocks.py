"""Writes the READMEs' guarded-lifecycle examples out as modules for ``mypy --strict``
(python/scripts/test.sh): every ```python block that imports ``cycles`` and uses
``client.guarded`` or ``client.reserve(``, i.e. the quick starts that users copy whole.
Each module is padded with blank lines so that mypy's line numbers are the README's.

    python readme_blocks.py OUT_DIR REPOSITORY_README PACKAGE_README

Prints the written paths; fails when a README has no such block (the check would pass
vacuously) or when the repository README has other than its one Python quick start."""

from __future__ import annotations

import re
import sys
from pathlib import Path

BLOCK = re.compile(r"^```python\n(.*?)^```", flags=re.S | re.M)


def blocks(readme: Path) -> list[tuple[int, str]]:
    """(first line number, text) of each complete guarded-lifecycle example."""
    text = readme.read_text()
    found = []
    for m in BLOCK.finditer(text):
        body = m.group(1)
        if "import cycles" in body and ("client.guarded" in body or "client.reserve(" in body):
            found.append((text.count("\n", 0, m.start(1)) + 1, body))
    return found


def main(out: Path, root_readme: Path, package_readme: Path) -> int:
    out.mkdir(parents=True, exist_ok=True)
    for name, readme in (("root", root_readme), ("package", package_readme)):
        found = blocks(readme)
        if not found:
            print(f"{readme}: no python block with `import cycles` and `client.guarded`")
            return 1
        if name == "root" and len(found) != 1:
            print(f"{readme}: expected one Python quick start, found {len(found)}")
            return 1
        for i, (line, body) in enumerate(found):
            path = out / f"readme_{name}_{i}.py"
            path.write_text("\n" * (line - 1) + body)
            print(f"{path}: {readme}, line {line}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    sys.exit(main(Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])))
