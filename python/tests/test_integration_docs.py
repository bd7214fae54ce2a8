"""The Python quick starts of docs/integrations.md run as written, each in a fresh process
that must exit by itself (no thread, heartbeat or listener keeps it alive), and print what
their comments say. python/scripts/test.sh also type-checks them under ``mypy --strict``."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest


def integrations_doc() -> Path:
    env = os.environ.get("CYCLES_INTEGRATIONS_DOC")
    path = Path(env) if env else Path(__file__).resolve().parents[2] / "docs/integrations.md"
    assert path.is_file(), f"{path} not found (set CYCLES_INTEGRATIONS_DOC)"
    return path


def quick_starts() -> dict[str, str]:
    """The ```python blocks of the "## Python" section that use an integration, by module."""
    text = integrations_doc().read_text()
    section = text.split("\n## Python\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"^```python\n(.*?)^```", section, flags=re.S | re.M)
    found: dict[str, str] = {}
    for b in blocks:
        m = re.search(r"^from cycles\.integrations\.(\w+) import guard$", b, flags=re.M)
        if m:
            assert m.group(1) not in found, f"two quick starts for {m.group(1)}"
            found[m.group(1)] = b
    return found


def run(block: str) -> str:
    # A fresh interpreter: the block must finish AND the process must exit by itself.
    out = subprocess.run(
        [sys.executable, "-c", block], capture_output=True, text=True, timeout=120, cwd="/"
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_every_integration_has_a_quick_start() -> None:
    assert sorted(quick_starts()) == ["anthropic", "openai", "openai_agents"]


@pytest.mark.parametrize("name", ["openai", "anthropic", "openai_agents"])
def test_quick_start_runs(name: str) -> None:
    out = run(quick_starts()[name])
    if name == "openai":
        assert "reply Hello there, friend" in out
        assert "streamed Hello there, friend" in out
        assert "denied BUDGET_EXCEEDED provider calls 2" in out
        assert "ledger [('reserve', 15465), ('commit', 210), ('reserve', 15465), " in out
        assert "('commit', 210)]" in out
    elif name == "openai_agents":
        assert "reply Hello there, friend" in out
        assert "streamed Hello there, friend" in out
        assert "denied BUDGET_EXCEEDED provider calls 2" in out
        assert "ledger [('reserve', 78), ('commit', 7), ('reserve', 78), ('commit', 7)]" in out
    else:
        assert "streamed Hello there, | the provider saw max_tokens 2" in out
        assert "usage 2 2" in out
        assert "ledger [('reserve', 71), ('commit', 4), ('reserve', 71), ('commit', 4)]" in out
