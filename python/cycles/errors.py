"""One exception hierarchy for every failure, rooted at :class:`CyclesError`.

The class of an exception is chosen from the core's stable error kind (``code`` and
``name``, the table in ``core/src/error.rs``); every exception carries the same attributes
whatever its class:

========================  ==============================================================
``code``                  stable numeric code of the kind (``0`` = internal error)
``name``                  stable name of the kind (``"TRANSPORT_TIMEOUT"``, ``"BUDGET_EXCEEDED"``)
``message``               human-readable message (never contains the API key: a server
                          that echoes it gets it replaced by ``[REDACTED]`` here and in
                          ``error_code``, ``details`` and the ids)
``http_status``           HTTP status when a response was received, else ``None``
``error_code``            the server's ``error`` code string verbatim, when it sent one
``request_id``            ``X-Request-Id`` (or the body's ``request_id``)
``trace_id``              ``X-Cycles-Trace-Id`` (or the body's ``trace_id``)
``retryable``             whether a retry with the SAME idempotency key may succeed
``retry_after``           valid ``Retry-After`` delta-seconds (``int``), else ``None``
``retry_after_raw``       the ``Retry-After`` header verbatim, when one came
``details``               the error body's ``details`` object, when present
``cycles_evidence``       the error body's :class:`~cycles.models.EvidenceRef`, when the
                          server sent one (e.g. a live reservation's 409 denial: fetch
                          the signed envelope with ``get_evidence(ref.evidence_id)``)
========================  ==============================================================

Catch what you can act on::

    try:
        client.commit_reservation(...)
    except cycles.RateLimitedError as e:      # 429: wait e.retry_after seconds
        ...
    except cycles.TransportError as e:        # connect / timeout / reset: retry, same key
        ...
    except cycles.ReservationExpiredError:    # settle through create_event instead
        ...
    except cycles.CyclesError as e:           # everything else
        ...
"""

from __future__ import annotations

import json
from typing import Any

from . import _native
from .models import EvidenceRef

__all__ = [
    "CyclesError",
    "InternalError",
    "ConfigError",
    "InvalidArgumentError",
    "CyclesRuntimeError",
    "ClientClosedError",
    "TransportError",
    "TransportConnectError",
    "TransportTimeoutError",
    "TransportResetError",
    "TransportOtherError",
    "HttpError",
    "RateLimitedError",
    "ServerError",
    "AmbiguousSuccessError",
    "UnexpectedStatusError",
    "InvalidResponseError",
    "ApiError",
    "InvalidRequestError",
    "UnauthorizedError",
    "ForbiddenError",
    "NotFoundError",
    "BudgetExceededError",
    "BudgetFrozenError",
    "BudgetClosedError",
    "ReservationExpiredError",
    "ReservationFinalizedError",
    "IdempotencyMismatchError",
    "UnitMismatchError",
    "OverdraftLimitExceededError",
    "DebtOutstandingError",
    "MaxExtensionsExceededError",
    "LimitExceededError",
    "TenantClosedError",
    "ServerInternalError",
    "UnknownErrorCodeError",
    "error_class",
]


class CyclesError(Exception):
    """Base of every error raised by the ``cycles`` package."""

    code: int
    name: str
    message: str
    http_status: int | None
    error_code: str | None
    request_id: str | None
    trace_id: str | None
    retryable: bool
    retry_after: int | None
    retry_after_raw: str | None
    details: dict[str, Any] | None
    cycles_evidence: EvidenceRef | None
    _default_code: int = 4
    _default_name: str = "INTERNAL"

    def __init__(
        self,
        message: str,
        *,
        code: int | None = None,
        name: str | None = None,
        http_status: int | None = None,
        error_code: str | None = None,
        request_id: str | None = None,
        trace_id: str | None = None,
        retryable: bool = False,
        retry_after: int | None = None,
        retry_after_raw: str | None = None,
        details: dict[str, Any] | None = None,
        cycles_evidence: EvidenceRef | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = type(self)._default_code if code is None else code
        self.name = type(self)._default_name if name is None else name
        self.http_status = http_status
        self.error_code = error_code
        self.request_id = request_id
        self.trace_id = trace_id
        self.retryable = retryable
        self.retry_after = retry_after
        self.retry_after_raw = retry_after_raw
        self.details = details
        self.cycles_evidence = cycles_evidence

    def __str__(self) -> str:
        text = f"[{self.name}] "
        if self.http_status is not None:
            text += f"HTTP {self.http_status}: "
        text += self.message
        if self.error_code is not None and self.error_code != self.name:
            text += f" (server code {self.error_code})"
        if self.request_id is not None:
            text += f" (request_id {self.request_id})"
        return text

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(code={self.code}, name={self.name!r}, "
            f"http_status={self.http_status!r}, error_code={self.error_code!r}, "
            f"request_id={self.request_id!r}, retryable={self.retryable!r}, "
            f"message={self.message!r})"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (type(self), self.message, self._attrs()))

    def _attrs(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "name": self.name,
            "http_status": self.http_status,
            "error_code": self.error_code,
            "request_id": self.request_id,
            "trace_id": self.trace_id,
            "retryable": self.retryable,
            "retry_after": self.retry_after,
            "retry_after_raw": self.retry_after_raw,
            "details": self.details,
            "cycles_evidence": self.cycles_evidence,
        }


def _rebuild(cls: type[CyclesError], message: str, attrs: dict[str, Any]) -> CyclesError:
    return cls(message, **attrs)


class InternalError(CyclesError):
    """A bug in the SDK (a panic caught at the native boundary). Code ``4``, ``INTERNAL``."""


class ConfigError(CyclesError):
    """Invalid or missing configuration (``CONFIG``, 1)."""


class InvalidArgumentError(CyclesError, ValueError):
    """A caller-supplied argument is unusable (``INVALID_ARGUMENT``, 2)."""


class CyclesRuntimeError(CyclesError):
    """The process runtime is unusable (``RUNTIME``, 3), e.g. the client is used in a
    child process after ``os.fork()``: create clients in the child instead, or use the
    ``spawn`` start method."""


class ClientClosedError(CyclesRuntimeError):
    """The client was closed (``close()`` or the end of its ``with`` block)."""


class TransportError(CyclesError):
    """No complete HTTP response was received. Retry with the same idempotency key."""


class TransportConnectError(TransportError):
    """The connection could not be established; the request was NOT sent
    (``TRANSPORT_CONNECT``, 10)."""


class TransportTimeoutError(TransportError):
    """The per-attempt timeout elapsed; the outcome is unknown (``TRANSPORT_TIMEOUT``, 11)."""


class TransportResetError(TransportError):
    """The connection was reset or closed without a complete response; the outcome is
    unknown (``TRANSPORT_RESET``, 12)."""


class TransportOtherError(TransportError):
    """Any other transport failure (``TRANSPORT_OTHER``, 13)."""


class HttpError(CyclesError):
    """An HTTP response that is not the operation's success (``http_status`` is set)."""


class RateLimitedError(HttpError):
    """HTTP 429 (``RATE_LIMITED``, 20). ``retry_after`` holds valid delta-seconds, or None
    when the header was absent or not delta-seconds (an HTTP-date is invalid here)."""


class ServerError(HttpError):
    """HTTP 5xx (``SERVER_ERROR``, 21); retry with the same idempotency key."""


class AmbiguousSuccessError(HttpError):
    """A WRITE's 2xx that is not its schema-valid success (``AMBIGUOUS_SUCCESS``, 22):
    the server may have applied the request; retry with the same idempotency key."""


class UnexpectedStatusError(HttpError):
    """A non-2xx status with no usable error code (``UNEXPECTED_STATUS``, 23)."""


class InvalidResponseError(HttpError):
    """A READ's 2xx that is not its schema-valid success (``INVALID_RESPONSE``, 24): a read
    (get/list reservations, balances, evidence, JWKS, decide) has no side effect to be
    ambiguous about and the same server would most likely answer the same again, so it is
    NOT retryable (a write's invalid 2xx is :class:`AmbiguousSuccessError` instead)."""


class ApiError(HttpError):
    """The server rejected the request with an error code (codes 100-199)."""


class InvalidRequestError(ApiError):
    """``INVALID_REQUEST`` (100), or a bare 400."""


class UnauthorizedError(ApiError):
    """``UNAUTHORIZED`` (101), or a bare 401."""


class ForbiddenError(ApiError):
    """``FORBIDDEN`` (102), or a bare 403."""


class NotFoundError(ApiError):
    """``NOT_FOUND`` (103), or a bare 404."""


class BudgetExceededError(ApiError):
    """``BUDGET_EXCEEDED`` (104)."""


class BudgetFrozenError(ApiError):
    """``BUDGET_FROZEN`` (105)."""


class BudgetClosedError(ApiError):
    """``BUDGET_CLOSED`` (106)."""


class ReservationExpiredError(ApiError):
    """``RESERVATION_EXPIRED`` (107), or a bare 410."""


class ReservationFinalizedError(ApiError):
    """``RESERVATION_FINALIZED`` (108)."""


class IdempotencyMismatchError(ApiError):
    """``IDEMPOTENCY_MISMATCH`` (109): the key was used with a different request."""


class UnitMismatchError(ApiError):
    """``UNIT_MISMATCH`` (110)."""


class OverdraftLimitExceededError(ApiError):
    """``OVERDRAFT_LIMIT_EXCEEDED`` (111)."""


class DebtOutstandingError(ApiError):
    """``DEBT_OUTSTANDING`` (112)."""


class MaxExtensionsExceededError(ApiError):
    """``MAX_EXTENSIONS_EXCEEDED`` (113)."""


class LimitExceededError(ApiError):
    """``LIMIT_EXCEEDED`` with a status other than 429 (114); retryable."""


class TenantClosedError(ApiError):
    """``TENANT_CLOSED`` (115)."""


class ServerInternalError(ApiError):
    """``INTERNAL_ERROR`` with a status other than 5xx (116); retryable."""


class UnknownErrorCodeError(ApiError):
    """A server error code this SDK version does not know (``UNKNOWN_ERROR_CODE``, 199);
    the code is in ``error_code`` verbatim."""


_BY_NAME: dict[str, type[CyclesError]] = {
    "INTERNAL": InternalError,
    "CONFIG": ConfigError,
    "INVALID_ARGUMENT": InvalidArgumentError,
    "RUNTIME": CyclesRuntimeError,
    "TRANSPORT_CONNECT": TransportConnectError,
    "TRANSPORT_TIMEOUT": TransportTimeoutError,
    "TRANSPORT_RESET": TransportResetError,
    "TRANSPORT_OTHER": TransportOtherError,
    "RATE_LIMITED": RateLimitedError,
    "SERVER_ERROR": ServerError,
    "AMBIGUOUS_SUCCESS": AmbiguousSuccessError,
    "UNEXPECTED_STATUS": UnexpectedStatusError,
    "INVALID_RESPONSE": InvalidResponseError,
    "INVALID_REQUEST": InvalidRequestError,
    "UNAUTHORIZED": UnauthorizedError,
    "FORBIDDEN": ForbiddenError,
    "NOT_FOUND": NotFoundError,
    "BUDGET_EXCEEDED": BudgetExceededError,
    "BUDGET_FROZEN": BudgetFrozenError,
    "BUDGET_CLOSED": BudgetClosedError,
    "RESERVATION_EXPIRED": ReservationExpiredError,
    "RESERVATION_FINALIZED": ReservationFinalizedError,
    "IDEMPOTENCY_MISMATCH": IdempotencyMismatchError,
    "UNIT_MISMATCH": UnitMismatchError,
    "OVERDRAFT_LIMIT_EXCEEDED": OverdraftLimitExceededError,
    "DEBT_OUTSTANDING": DebtOutstandingError,
    "MAX_EXTENSIONS_EXCEEDED": MaxExtensionsExceededError,
    "LIMIT_EXCEEDED": LimitExceededError,
    "TENANT_CLOSED": TenantClosedError,
    "INTERNAL_ERROR": ServerInternalError,
    "UNKNOWN_ERROR_CODE": UnknownErrorCodeError,
}


_CODES: dict[str, int] = dict(_native.ERROR_CODES)
"""The core's stable (name, code) pairs, from ``ErrorKind::all()`` (never copied here)."""

for _name, _cls in _BY_NAME.items():
    _cls._default_name = _name
    _cls._default_code = _CODES[_name]

_VARIANTS: dict[str, tuple[str, int]] = {v: (k, c) for v, k, c in _native.ERROR_VARIANTS}
"""The bridge's binding-level refinements of a kind, ``variant -> (kind name, code)``
(``error_variants()``): each has a subclass of its kind's class, named after it."""

_BY_VARIANT: dict[str, type[CyclesError]] = {}


def _variant(name: str, cls: type[CyclesError]) -> None:
    """Makes ``cls`` the class of variant ``name``, with its kind's name and code."""
    kind, code = _VARIANTS[name]
    cls._default_name = kind
    cls._default_code = code
    _BY_VARIANT[name] = cls


_variant("closed", ClientClosedError)


def error_class(name: str) -> type[CyclesError]:
    """The exception class of a stable kind name (``CyclesError`` for a name this version
    does not know, so a newer core never breaks ``except CyclesError``)."""
    return _BY_NAME.get(name, CyclesError)


def _from_native(
    *,
    code: int,
    name: str,
    message: str,
    http_status: int | None,
    error_code: str | None,
    request_id: str | None,
    trace_id: str | None,
    retryable: bool,
    retry_after_raw: str | None,
    retry_after_seconds: int | None,
    details_json: str | None,
    cycles_evidence: dict[str, Any] | None,
    variant: str | None,
) -> CyclesError:
    """Builds the exception for a native error (called by ``cycles._native`` only)."""
    cls = _BY_VARIANT.get(variant or "") or error_class(name)
    details = None
    if details_json is not None:
        try:
            details = json.loads(details_json)
        except ValueError:
            details = None
    return cls(
        message,
        code=code,
        name=name,
        http_status=http_status,
        error_code=error_code,
        request_id=request_id,
        trace_id=trace_id,
        retryable=retryable,
        retry_after=retry_after_seconds,
        retry_after_raw=retry_after_raw,
        details=details,
        cycles_evidence=(
            None if cycles_evidence is None else EvidenceRef._from_json(cycles_evidence)
        ),
    )
