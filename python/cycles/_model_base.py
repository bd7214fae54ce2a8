"""The base of the generated models (:mod:`cycles.models`): decoding from core's JSON,
encoding of request parts, and :class:`ResponseMeta`, the transport facts every result carries.
Written by hand: the models themselves are generated from core's types.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar, Mapping, TypeVar

M = TypeVar("M", bound="_Model")


def _convert(spec: Any, value: Any) -> Any:
    if value is None:
        return None
    if isinstance(spec, list):
        return [_convert(spec[0], v) for v in value]
    return spec._from_json(value)


class _Model:
    """Decoding from the core's JSON and encoding of request parts."""

    _nested: ClassVar[dict[str, Any]] = {}

    @classmethod
    def _from_json(cls: type[M], data: Mapping[str, Any], meta: ResponseMeta | None = None) -> M:
        names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
        kwargs: dict[str, Any] = {}
        for key, value in data.items():
            if key in names and key not in ("extra", "meta"):
                spec = cls._nested.get(key)
                kwargs[key] = _convert(spec, value) if spec is not None else value
        if "extra" in names:
            kwargs["extra"] = {k: v for k, v in data.items() if k not in names}
        if "meta" in names:
            kwargs["meta"] = meta
        return cls(**kwargs)

    def to_json(self) -> dict[str, Any]:
        """The wire object (``None`` fields omitted)."""
        out: dict[str, Any] = {}
        for name in _field_names(type(self)):
            value = getattr(self, name)
            if value is None:
                continue
            out[name] = _encode(value)
        return out


# Field names per model class: ``dataclasses.fields`` rebuilds its tuple on every call, and
# request parts are encoded on every guarded call.
_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


_SCALARS = (str, int, float, bool)


def _field_names(cls: type) -> tuple[str, ...]:
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = tuple(f.name for f in dataclasses.fields(cls) if f.name != "meta")
        _FIELD_NAMES[cls] = names
    return names


def _encode(value: Any) -> Any:
    if type(value) in _SCALARS:  # the common case, before the slower isinstance checks
        return value
    if isinstance(value, _Model):
        return value.to_json()
    if isinstance(value, (list, tuple)):
        return [_encode(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _encode(v) for k, v in value.items()}
    return value


@dataclass(frozen=True)
class ResponseMeta:
    """Transport facts of the attempt that produced a result."""

    status: int
    request_id: str | None
    trace_id: str | None
    rtt_us: int
    """Round-trip time of the attempt in microseconds (monotonic, sent to body received).
    Feed it to :mod:`cycles.timing` as ``timing.from_micros_ceil(meta.rtt_us)``."""

    @property
    def rtt_ms(self) -> float:
        """Round-trip time in (fractional) milliseconds, for display."""
        return self.rtt_us / 1000.0
