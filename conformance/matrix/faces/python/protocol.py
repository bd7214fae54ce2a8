"""The protocol loop shared by the Python-based faces (ours and runcycles'; PROTOCOL.md).

Both SDKs take metadata as Python values and write it with ``json``, so a number literal that
does not round-trip through ``int``/``float`` (``1.50``, ``1e2``, ``-0``) would be re-spelled.
Requests are parsed keeping such literals as :class:`Literal`, and :func:`unfaithful` names
the first one, so a face refuses instead of rounding (PROTOCOL.md ``write``)."""

from __future__ import annotations

import json
import sys
from typing import Any, Callable

Op = Callable[[dict[str, Any]], Any]


class Refused(Exception):
    """Something the face's API cannot do as asked (answered as ``fail``, with this message)."""


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


def answer(
    face: str,
    ops: dict[str, Op],
    error_name: Callable[[Exception], str | None],
    line: str,
) -> dict[str, Any]:
    """One response: ``ok``, ``error`` (an SDK error ``error_name`` names) or ``fail``."""
    try:
        req = loads(line)
    except ValueError as e:
        return {"id": None, "fail": f"{face} face: unreadable request: {e}"}
    if not isinstance(req, dict):
        return {"id": None, "fail": f"{face} face: a request is a JSON object"}
    rid = req.get("id")
    op = ops.get(req.get("op"))  # type: ignore[arg-type]
    if op is None:
        return {"id": rid, "fail": f"{face} face: op {req.get('op')!r} not supported"}
    try:
        return {"id": rid, "ok": op(req)}
    except Refused as e:
        return {"id": rid, "fail": str(e)}
    except Exception as e:  # the SDK raised: its error name, or say what and go on
        name = error_name(e)
        if name is not None:
            return {"id": rid, "error": name}
        return {"id": rid, "fail": f"{face} face: {type(e).__name__}: {e}"}


def serve(face: str, ops: dict[str, Op], error_name: Callable[[Exception], str | None]) -> None:
    """Answers stdin's requests on stdout, one line each, until stdin closes. Bytes in, ASCII
    out: no dependence on the locale's encoding; a lone surrogate in a request string survives
    as a \\uXXXX escape in the answer."""
    for raw in sys.stdin.buffer:
        line = raw.decode("utf-8", "surrogateescape")
        if not line.strip():
            continue
        sys.stdout.write(json.dumps(answer(face, ops, error_name, line)) + "\n")
        sys.stdout.flush()
