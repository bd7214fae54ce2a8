"""The pinned spec and fixtures beside the clone (docs/authorities.md): a test that needs a
missing one fails naming the file, what it is and where it was expected."""

from __future__ import annotations

import pytest
from conftest import shared_file


def test_a_missing_shared_file_is_named_with_where_it_was_expected(
    monkeypatch: pytest.MonkeyPatch, tmp_path
) -> None:
    monkeypatch.setenv("CYCLES_SHARED", str(tmp_path))
    with pytest.raises(pytest.fail.Exception) as info:
        shared_file("spec/scenarios.yaml", "the SDK recovery scenario catalog")
    message = str(info.value)
    assert message.startswith("missing ../shared/spec/scenarios.yaml (the SDK recovery")
    assert message.endswith(f" at {tmp_path / 'spec' / 'scenarios.yaml'}")
    (tmp_path / "spec").mkdir()
    (tmp_path / "spec" / "scenarios.yaml").write_text("profile: x\n")
    assert shared_file("spec/scenarios.yaml", "x") == tmp_path / "spec" / "scenarios.yaml"
