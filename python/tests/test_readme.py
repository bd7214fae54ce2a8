"""The README's quickstart runs as written (against the in-process local server)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest


def readme() -> Path:
    env = os.environ.get("CYCLES_README")
    return Path(env) if env else Path(__file__).resolve().parents[1] / "README.md"


def root_readme() -> Path:
    env = os.environ.get("CYCLES_ROOT_README")
    return Path(env) if env else Path(__file__).resolve().parents[2] / "README.md"


def existing(path: Path) -> Path:
    # A missing README is a failure, never a skip: these tests are the README's proof.
    assert path.is_file(), f"{path} not found (set CYCLES_README / CYCLES_ROOT_README)"
    return path


def python_blocks(path: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", path.read_text(), flags=re.S)


def test_lifecycle_quickstart_runs(capsys: pytest.CaptureFixture[str]) -> None:
    path = existing(readme())
    blocks = [b for b in python_blocks(path) if "client.guarded" in b]
    assert blocks, "the README has a lifecycle quick start"
    exec(compile(blocks[0], str(path), "exec"), {"__name__": "quickstart"})
    out = capsys.readouterr().out
    assert "answer 42" in out
    assert "settlement committed 150000" in out
    assert "pending after close 0" in out


def test_root_readme_python_quickstart_runs(capsys: pytest.CaptureFixture[str]) -> None:
    path = existing(root_readme())
    blocks = [b for b in python_blocks(path) if "client.guarded" in b]
    assert len(blocks) == 1, "the repository README has one Python quick start"
    block = blocks[0]
    assert "with client.reserve(" in block, "it shows the context manager too"
    exec(compile(block, str(path), "exec"), {"__name__": "quickstart"})
    out = capsys.readouterr().out
    assert "answer 42" in out
    assert "settlement committed 150000" in out


def test_quickstart_runs(capsys: pytest.CaptureFixture[str]) -> None:
    path = existing(readme())
    blocks = [b for b in python_blocks(path) if "create_reservation" in b]
    assert blocks, "the README has a python quickstart"
    exec(compile(blocks[0], str(path), "exec"), {"__name__": "quickstart"})
    out = capsys.readouterr().out
    assert "next extension in" in out
    assert "charged 420000 USD_MICROCENTS" in out
    assert "spent 420000" in out


def test_guarded_arguments_with_a_small_budget_runs(capsys: pytest.CaptureFixture[str]) -> None:
    path = existing(readme())
    blocks = [b for b in python_blocks(path) if "client.guarded" in b and "budgets=" in b]
    assert len(blocks) == 1, "the README shows guarded() against a LocalServer with a budget"
    exec(compile(blocks[0], str(path), "exec"), {"__name__": "quickstart"})
    out = capsys.readouterr().out
    # 600 tokens reserved (600_000), 300 used; 800_000 more exceeds the 700_000 left.
    assert "tokens 300" in out
    assert "denied BUDGET_EXCEEDED" in out
    assert "remaining 700000" in out


def test_decision_caps_release_block_runs(capsys: pytest.CaptureFixture[str]) -> None:
    path = readme()
    blocks = [b for b in python_blocks(path) if "r.release(" in b]
    assert len(blocks) == 1, "the README shows decision, caps and release()"
    exec(compile(blocks[0], str(path), "exec"), {"__name__": "quickstart"})
    out = capsys.readouterr().out
    assert "decision ALLOW_WITH_CAPS" in out
    assert "released True" in out
    assert "ledger ['reserve', 'release']" in out


def test_package_readme_links_are_absolute() -> None:
    # The package README is PyPI's page: a relative link would point off the repository.
    text = existing(readme()).read_text()
    links = re.findall(r"\]\(([^)]+)\)", text)
    assert links, "the README links to the docs"
    relative = [link for link in links if not link.startswith(("https://", "#"))]
    assert not relative, f"relative links in the package README: {relative}"
