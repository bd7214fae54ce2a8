"""Every step of conformance/vectors/operations.json through the typed methods of Client and
AsyncClient (the ``api`` fixture runs it with each): the shared per-operation test, so a new
operation adds a step to that file rather than a test here. Operation-specific behaviour
(replays, errors, idioms) stays in test_operations.py."""

from __future__ import annotations

import json
from typing import Any

import pytest
from conftest import SERVER_MODE, vectors_path

from cycles.models import RESULT_TYPES

DOC = json.loads((vectors_path().parent / "operations.json").read_text())
assert DOC["format"] == "cycles-operation-vectors"
assert DOC["version"] == 1
STEPS: list[dict[str, Any]] = DOC["steps"]

# The operations whose method is the operationId in snake_case (core's Operation::method_name).
METHODS = {op: "".join("_" + c.lower() if c.isupper() else c for c in op) for op in RESULT_TYPES}


def test_every_operation_has_a_step() -> None:
    assert {s["operation"] for s in STEPS} == set(RESULT_TYPES)


def resolve(v: Any, saved: dict[str, Any]) -> Any:
    if isinstance(v, str) and v.startswith("$"):
        return saved[v[1:]]
    if isinstance(v, dict):
        return {k: resolve(x, saved) for k, x in v.items()}
    if isinstance(v, list):
        return [resolve(x, saved) for x in v]
    return v


def member(obj: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        obj = obj[part]
    return obj


@pytest.mark.skipif(SERVER_MODE != "spec", reason="the vectors' statuses are the spec mode's")
def test_every_step_through_the_typed_method(api) -> None:
    saved: dict[str, Any] = {}
    for step in STEPS:
        op = step["operation"]
        method = getattr(api, METHODS[op])
        path = resolve(step.get("path", []), saved)
        # A wire member named like a Python keyword is spelled with a trailing underscore.
        args = {
            (k + "_" if k in ("from",) else k): v
            for k, v in resolve(step.get("args", {}), saved).items()
        }
        result: Any = method(*path, **args)
        assert result.meta is not None and result.meta.status == step["expect"]["status"], op
        wire = result.to_json()
        assert type(result) is RESULT_TYPES[op], op
        for k, v in resolve(step["expect"].get("members", {}), saved).items():
            assert wire[k] == v, f"{op}: {k}"
        for name, dotted in step.get("save", {}).items():
            saved[name] = member(wire, dotted)
