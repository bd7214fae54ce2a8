"""Arguments of the runtime operations as the bridge takes them: each request built into its
JSON text, checked on the way (a typed :class:`~cycles.errors.InvalidArgumentError` naming
the argument), and the reply decoded into its result class. Shared by both clients.
"""

from __future__ import annotations

import inspect
import json
import math
import os
from typing import Any, Mapping, Sequence, TypeVar

from . import _native
from ._model_base import _encode, _Model
from .errors import InvalidArgumentError
from .lifecycle import HEARTBEAT_POLICIES, _int64
from .models import (
    Amount,
    ResponseMeta,
    Subject,
    SubjectLike,
)

R = TypeVar("R", bound=_Model)


# Call arguments in seconds (drain and close bounds) cross as unsigned 64-bit milliseconds:
# anything beyond is refused here with a typed error (pyo3 would raise OverflowError). The
# client options are the bridge's to check (_options_json).
_U64_MAX = 2**64 - 1


def _seconds(seconds: float, name: str, *, zero_ok: bool) -> float:
    """A finite number of seconds whose milliseconds the native layer can hold."""
    if (
        isinstance(seconds, bool)
        or not isinstance(seconds, (int, float))
        or not math.isfinite(seconds)
        or seconds < 0
        or (seconds == 0 and not zero_ok)
    ):
        what = (
            "a finite number of seconds, 0 or more"
            if zero_ok
            else "a positive, finite number of seconds"
        )
        raise InvalidArgumentError(f"{name} must be {what}")
    if round(seconds * 1000) > _U64_MAX:
        raise InvalidArgumentError(f"{name} is too large ({seconds} s)")
    return seconds


def _options_json(options: Mapping[str, Any]) -> str:
    """The client options as the bridge's JSON (Python's names, seconds): the bridge checks
    every one against its single table and names a bad one as written here
    (``request_timeout must be a finite number of seconds above 0, not -1``). ``None`` is
    left out (the default); a path goes as its text; a float JSON cannot carry (``inf``,
    ``nan``) as its text, so it is refused by name rather than lost."""
    out: dict[str, Any] = {}
    for name, value in options.items():
        if value is None:
            continue
        if isinstance(value, os.PathLike):
            value = os.fspath(value)
        elif isinstance(value, float) and not math.isfinite(value):
            value = str(value)
        out[name] = value
    try:
        return json.dumps(out, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise InvalidArgumentError(f"the client options are not JSON: {e}") from None


def _ms(seconds: float | None, name: str) -> int | None:
    if seconds is None:
        return None
    return max(1, round(_seconds(seconds, name, zero_ok=False) * 1000))


def _close_seconds(seconds: float, name: str) -> float:
    """A close's drain bound: 0 for no drain."""
    return float(_seconds(seconds, name, zero_ok=True))


def _part(value: Any, cls: type, what: str) -> Any:
    if isinstance(value, cls):
        return value.to_json()  # type: ignore[attr-defined]
    if isinstance(value, Mapping):
        return _encode(dict(value))
    article = "an" if cls.__name__[0] in "AEIOU" else "a"
    raise InvalidArgumentError(f"{what} must be {article} {cls.__name__} or a mapping")


def _opt_part(value: Any, cls: type, what: str) -> Any:
    """An optional request part: None stays None (and is left out)."""
    return None if value is None else _part(value, cls, what)


def _opt_dict(value: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A free-form member (metadata): the caller's own keys, copied as they are."""
    return None if value is None else dict(value)


def _strs(value: str | Sequence[str] | None) -> list[str] | None:
    """A list of strings; one string is a list of one."""
    if value is None:
        return None
    return [value] if isinstance(value, str) else list(value)


def _clean(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


def _check_policy(heartbeat_policy: str) -> None:
    if heartbeat_policy not in HEARTBEAT_POLICIES:
        raise InvalidArgumentError(f"heartbeat_policy must be one of {HEARTBEAT_POLICIES}")


def _estimate(estimate: Any) -> int | dict[str, Any]:
    """A guard spec's estimate: an Amount (or a mapping of one) as its wire object, or a bare
    int as is. The bridge gives a bare int its unit (the spec's ``unit``, else the client's
    default unit, else USD_MICROCENTS) and checks ``unit`` against an Amount's: one rule for
    every language, so nothing of it is repeated here."""
    if isinstance(estimate, bool) or not isinstance(estimate, (int, Amount, Mapping)):
        raise InvalidArgumentError("estimate must be an Amount, a mapping or an int")
    if isinstance(estimate, int):
        return _int64(estimate, "estimate")
    est: dict[str, Any] = _part(estimate, Amount, "estimate")
    return est


def _per_call(value: Any, name: str, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    """``value``, or what it returns for the call's arguments when it is a function."""
    if not callable(value):
        return value
    out = value(*args, **kw)
    if inspect.isawaitable(out):
        if inspect.iscoroutine(out):
            out.close()  # never awaited: close it instead of leaving a warning behind
        raise InvalidArgumentError(
            f"the {name} function of guarded() returned an awaitable: it must return the "
            f"{name} itself (it runs before the reservation is made, synchronously)"
        )
    return out


# One encoder for every request: ``json.dumps`` with options builds a new one per call.
_ENCODER = json.JSONEncoder(allow_nan=False, separators=(",", ":"))


def _dumps(args: Mapping[str, Any]) -> str:
    try:
        return _ENCODER.encode(args)
    except (TypeError, ValueError) as e:
        raise InvalidArgumentError(f"arguments are not JSON-serialisable: {e}") from None


def _result(cls: type[R], out: tuple[int, str | None, str | None, int, str]) -> R:
    status, request_id, trace_id, rtt_us, body = out
    meta = ResponseMeta(status, request_id, trace_id, rtt_us)
    return cls._from_json(json.loads(body), meta)


def _row_list(cls: type[R], out: tuple[int, str | None, str | None, int, str]) -> list[R]:
    """The rows of a walk over every page (the bridge's ``*_all`` operations: a JSON list)."""
    return [cls._from_json(r) for r in json.loads(out[4])]


class _Requests:
    """Builds the (operation, JSON arguments) pairs shared by both clients."""

    _native: _native.NativeClient

    def _subject(self, subject: SubjectLike | None) -> Any:
        # None: left out, and the bridge makes it the client's tenant (the same rule and
        # error text in every language, raw operations and guarded ones alike).
        return None if subject is None else _part(subject, Subject, "subject")
