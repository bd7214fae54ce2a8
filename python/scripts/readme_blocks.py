"""Writes the READMEs' guarded-lifecycle examples out as modules for ``mypy --strict``
(python/scripts/test.sh): every ```python block that imports ``cycles`` and uses
``client.guarded`` or ``client.reserve(``, i.e. the quick starts that users copy whole, and
every block of the integration docs (docs/integrations.md) that imports an integration
(``from cycles.integrations.X import guard``). Each module is padded with blank lines so that
mypy's line numbers are the document's.

    python readme_blocks.py OUT_DIR REPOSITORY_README PACKAGE_README [INTEGRATIONS_DOC]

Prints the written paths; fails when a README has no such block (the check would pass
vacuously) or when the repository README has other than its one Python quick start."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Callable

BLOCK = re.compile(r"^```python\n(.*?)^```", flags=re.S | re.M)


def lifecycle_example(body: str) -> bool:
    return "import cycles" in body and ("client.guarded" in body or "client.reserve(" in body)


def integration_example(body: str) -> bool:
    return re.search(r"^from cycles\.integrations\.\w+ import guard$", body, flags=re.M) is not None


def blocks(
    readme: Path, wanted: Callable[[str], bool] = lifecycle_example
) -> list[tuple[int, str]]:
    """(first line number, text) of each complete example ``wanted`` picks."""
    text = readme.read_text()
    found = []
    for m in BLOCK.finditer(text):
        body = m.group(1)
        if wanted(body):
            found.append((text.count("\n", 0, m.start(1)) + 1, body))
    return found


def main(
    out: Path, root_readme: Path, package_readme: Path, integrations: Path | None = None
) -> int:
    out.mkdir(parents=True, exist_ok=True)
    docs: list[tuple[str, Path, Callable[[str], bool]]] = [
        ("root", root_readme, lifecycle_example),
        ("package", package_readme, lifecycle_example),
    ]
    if integrations is not None:
        docs.append(("integrations", integrations, integration_example))
    for name, readme, wanted in docs:
        found = blocks(readme, wanted)
        if not found:
            print(f"{readme}: no python block to check ({wanted.__name__})")
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
    if len(sys.argv) not in (4, 5):
        sys.exit(__doc__)
    extra = Path(sys.argv[4]) if len(sys.argv) == 5 else None
    sys.exit(main(Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]), extra))
