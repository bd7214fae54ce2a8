"""The README's quickstart runs as written (against the in-process local server)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest


def readme() -> Path:
    env = os.environ.get("CYCLES_README")
    return Path(env) if env else Path(__file__).resolve().parents[1] / "README.md"


def test_quickstart_runs(capsys: pytest.CaptureFixture[str]) -> None:
    path = readme()
    if not path.exists():
        pytest.skip(f"{path} not found (set CYCLES_README)")
    blocks = re.findall(r"```python\n(.*?)```", path.read_text(), flags=re.S)
    assert blocks, "the README has a python quickstart"
    exec(compile(blocks[0], str(path), "exec"), {"__name__": "quickstart"})
    out = capsys.readouterr().out
    assert "next extension in" in out
    assert "charged 420000 USD_MICROCENTS" in out
    assert "spent 420000" in out
