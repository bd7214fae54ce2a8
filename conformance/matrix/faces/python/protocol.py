"""Request parsing for the Python-based faces (ours and runcycles'): both SDKs take metadata as
Python values and write it with ``json``, so a number literal that does not round-trip through
``int``/``float`` (``1.50``, ``1e2``, ``-0``) would be re-spelled. Such literals are parsed as
:class:`Literal` and :func:`unfaithful` names the first one, so a face refuses instead of
rounding (PROTOCOL.md ``write``)."""

from __future__ import annotations

import json
from typing import Any


class Literal(float):
    """A number literal of the request that Python's json would not write back the same."""

    literal: str


def _literal(text: str, value: float) -> Any:
    if repr(value) == text:
        return value
    lit = Literal(value)
    lit.literal = text
    return lit


def loads(line: str) -> Any:
    """``json.loads`` that keeps number literals Python would re-spell as :class:`Literal`."""
    return json.loads(
        line,
        parse_float=lambda t: _literal(t, float(t)),
        parse_int=lambda t: int(t) if str(int(t)) == t else _literal(t, float(int(t))),
    )


def unfaithful(v: Any, where: str) -> str | None:
    """Where in ``v`` the first :class:`Literal` is, and how Python would write it; else None."""
    if isinstance(v, Literal):
        spelled = json.dumps(v)
        return f"{where} holds the number {v.literal!r}, which Python's json writes as {spelled!r}"
    items = v.items() if isinstance(v, dict) else enumerate(v) if isinstance(v, list) else ()
    for k, x in items:
        found = unfaithful(x, f"{where}.{k}" if isinstance(v, dict) else f"{where}[{k}]")
        if found:
            return found
    return None
