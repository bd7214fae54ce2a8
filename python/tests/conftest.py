"""Shared fixtures. These tests run against the INSTALLED wheel (python/scripts/test.sh runs
pytest from a copy of this folder outside the source tree)."""

from __future__ import annotations

import asyncio
import inspect
import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import integration_support
import pytest
from journal_store import TestJournal

import cycles
from cycles.testing import FakeProvider, LocalServer

if os.environ.get("CYCLES_TEST_ALLOW_SOURCE") != "1":
    assert "site-packages" in cycles.__file__, (
        f"tests must import the installed wheel, not {cycles.__file__}"
    )

ACTION = cycles.Action("llm.completion", "openai:gpt-4o-mini")
USD = cycles.Unit.USD_MICROCENTS


def usd(n: int) -> cycles.Amount:
    return cycles.Amount(USD, n)


class Api:
    """Calls a Client or an AsyncClient the same way, so one test covers both."""

    def __init__(self, client: cycles.Client | cycles.AsyncClient) -> None:
        self.client = client
        self.is_async = isinstance(client, cycles.AsyncClient)

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.client, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            result = method(*args, **kwargs)
            if inspect.iscoroutine(result):
                return asyncio.run(result)
            return result

        return call


SERVER_MODE = os.environ.get("CYCLES_TEST_SERVER_MODE") or "spec"
"""The local server's dialect for this run: python/scripts/test.sh runs the client and
lifecycle suites a second time with ``CYCLES_TEST_SERVER_MODE=reference``."""
assert SERVER_MODE in ("spec", "reference"), f"CYCLES_TEST_SERVER_MODE={SERVER_MODE!r}"


@pytest.fixture
def server():
    with LocalServer(mode=SERVER_MODE) as s:  # type: ignore[arg-type]
        yield s


@pytest.fixture
def store(tmp_path: Path) -> Iterator[TestJournal]:
    """The journal under test (tests/journal_store.py): ``tmp_path / "journal"``, or a Redis
    of this test's own when ``CYCLES_TEST_JOURNAL_STORE=redis``."""
    with TestJournal(tmp_path / "journal") as j:
        yield j


@pytest.fixture
def provider() -> Iterator[FakeProvider]:
    """The fake model provider, on loopback for one test."""
    with FakeProvider() as p:
        yield p


@pytest.fixture
def local() -> Iterator[LocalServer]:
    """The integration tests' local server (integration_support.server: a TOKENS budget)."""
    with integration_support.server() as s:
        yield s


@pytest.fixture(params=["sync", "async"])
def api(request, server):
    client = server.client() if request.param == "sync" else server.async_client()
    try:
        yield Api(client)
    finally:
        client.close()


@pytest.fixture
def unused_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return int(port)


def vectors_path() -> Path:
    env = os.environ.get("CYCLES_VECTORS")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[2] / "conformance" / "vectors" / "heartbeat.json"


def shared_file(rel: str, what: str) -> Path:
    """``rel`` inside the pinned Cycles spec and fixtures: ``shared/`` beside the clone, as on
    every developer machine and in CI (docs/authorities.md), or ``$CYCLES_SHARED``. Fails the
    test naming the file, what it is and where it was expected when it is missing."""
    env = os.environ.get("CYCLES_SHARED")
    root = Path(env) if env else Path(__file__).resolve().parents[3] / "shared"
    path = root / rel
    if not path.exists():
        pytest.fail(
            f"missing ../shared/{rel} ({what}; part of the pinned Cycles spec and fixtures "
            f"expected beside the clone, see docs/authorities.md) at {path}",
            pytrace=False,
        )
    return path


def reference_corpus_path() -> Path:
    """The captured reference-server corpus (``shared/fixtures/reference-server/
    exchanges.jsonl`` next to the repository; ``CYCLES_REFERENCE_CORPUS`` overrides it)."""
    env = os.environ.get("CYCLES_REFERENCE_CORPUS")
    if env:
        return Path(env)
    root = Path(__file__).resolve().parents[2]
    return root.parent / "shared" / "fixtures" / "reference-server" / "exchanges.jsonl"
