"""The settlement journal's naming, identity partition and record format, as plain functions.

Every answer comes from the Rust core (``cycles_core::journal``); nothing is re-implemented
here, so Python tools see exactly what the SDKs of every language read and write.

- :func:`identity_fingerprint`: the partition (``fp16``) a client's records live in.
- :func:`file_name` / :func:`legacy_file_name`: a reservation's record file names.
- :func:`parse_record`: a record file's contents as a :class:`JournalRecord`.
- :func:`list_pending`: the pending settlements in a journal directory.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from . import _native

__all__ = [
    "JournalRecord",
    "PendingRecord",
    "file_name",
    "identity_fingerprint",
    "legacy_file_name",
    "list_pending",
    "parse_record",
]


@dataclass(frozen=True)
class JournalRecord:
    """A parsed journal record. ``commit_body`` / ``event_fallback_body`` are the bodies'
    exact JSON text as stored (``None`` when absent); ``extra_keys`` are the unknown
    top-level keys the record keeps."""

    version: int
    reservation_id: str
    base_url: str | None
    mode: str
    idempotency_key: str | None
    recorded_at_ms: int | None
    not_before_ms: int | None
    commit_body: str | None
    event_fallback_body: str | None
    extra_keys: tuple[str, ...]


@dataclass(frozen=True)
class PendingRecord:
    """A pending settlement found in a journal directory: ``file`` is its name inside the
    ``partition`` sub-directory; ``legacy`` is true for a pre-v2 file name."""

    reservation_id: str
    mode: str
    recorded_at_ms: int | None
    not_before_ms: int | None
    file: str
    partition: str
    legacy: bool


def identity_fingerprint(base_url: str, api_key: str, tenant: str | None = None) -> str:
    """The identity partition (``fp16``, 16 lowercase hex characters) of a base URL, API key
    and optional tenant: the journal sub-directory of that client's records. The tenant,
    when set and not blank, replaces the API key; the base URL is used verbatim. Computed
    once per identity per process (PBKDF2), cached afterwards."""
    return _native.journal_fingerprint(base_url, api_key, tenant)


def file_name(reservation_id: str) -> str:
    """The standard (v2) record file name of a reservation."""
    return _native.journal_file_name(reservation_id)


def legacy_file_name(reservation_id: str) -> str:
    """The legacy (pre-v2) record file name of a reservation (still read and migrated)."""
    return _native.journal_legacy_file_name(reservation_id)


def parse_record(data: bytes) -> JournalRecord:
    """Parses a record file's bytes.

    Raises :class:`~cycles.errors.InvalidArgumentError` when they are not a usable record;
    its ``details["journal_error"]`` is ``"corrupt"`` (malformed) or ``"unsupported"`` (a
    version other than 1)."""
    d: dict[str, Any] = _native.journal_parse_record(bytes(data))
    return JournalRecord(
        version=d["version"],
        reservation_id=d["reservation_id"],
        base_url=d["base_url"],
        mode=d["mode"],
        idempotency_key=d["idempotency_key"],
        recorded_at_ms=d["recorded_at_ms"],
        not_before_ms=d["not_before_ms"],
        commit_body=d["commit_body"],
        event_fallback_body=d["event_fallback_body"],
        extra_keys=tuple(d["extra_keys"]),
    )


def list_pending(
    journal_dir: str | os.PathLike[str],
    base_url: str | None = None,
    api_key: str | None = None,
    tenant: str | None = None,
) -> list[PendingRecord]:
    """The pending settlements (valid records) in ``journal_dir``, a directory or a
    ``redis://`` URL as ``journal_url=`` takes it: of one identity's partition when
    ``base_url`` and ``api_key`` are given, else of every partition. Invalid and quarantined
    records are not listed; a missing directory lists nothing; a Redis that cannot be read
    raises :class:`~cycles.InvalidArgumentError` saying why."""
    rows = _native.journal_pending(os.fspath(journal_dir), base_url, api_key, tenant)
    return [PendingRecord(**row) for row in rows]
