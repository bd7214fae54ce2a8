"""Offline decoding of a captured response, through the core's own response path.

:func:`decode_response` takes what one HTTP exchange returned (status, headers, body) and
gives exactly what :class:`~cycles.Client` would: the typed result of a schema-valid
success, or the :mod:`cycles.errors` exception it would raise (e.g. for replaying captured
server traffic in tests, or checking a proxy's responses).
"""

from __future__ import annotations

import json
from typing import Any, Mapping, Sequence, Union

from . import _native
from ._model_base import ResponseMeta
from .models import RESULT_TYPES

__all__ = ["decode_response", "RESULT_TYPES"]

HeadersLike = Union[Mapping[str, str], Sequence[tuple[str, str]]]


def decode_response(
    operation: str | None,
    status: int,
    headers: HeadersLike,
    body: bytes | str,
) -> Any:
    """The result of one response of ``operation`` (a spec operationId such as
    ``"getReservation"``), or raises the exception the client raises for it.

    ``headers`` are matched case-insensitively (first occurrence wins). ``operation=None``
    stands for a response that matched no operation (e.g. a routing error); only a non-2xx
    status can be decoded that way. ``meta.rtt_us`` is 0: there was no attempt.
    """
    pairs = list(headers.items()) if isinstance(headers, Mapping) else list(headers)
    raw = body.encode() if isinstance(body, str) else bytes(body)
    status_out, request_id, trace_id, rtt_us, body_json = _native.decode_response(
        operation, status, [(str(k), str(v)) for k, v in pairs], raw
    )
    cls = RESULT_TYPES[operation or ""]
    meta = ResponseMeta(status_out, request_id, trace_id, rtt_us)
    return cls._from_json(json.loads(body_json), meta)
