"""Helpers of the integration tests (test_integration_*.py): a local Cycles server with a
TOKENS budget, the fake provider, and readers of the server's ledger and requests.

The fake provider's tokens are words: the prompt "say hello to me" is 4 input tokens, its
reply (``REPLY``) 9 output tokens. Core's estimate of the same prompt as one message is
4 + ceil(15 / 4) = 8, so a call with ``max_tokens=50`` reserves 58 and commits 13."""

from __future__ import annotations

import json
import threading
from typing import Any

import openai

import cycles
from cycles.models import Caps
from cycles.testing import Budget, FakeProvider, LocalServer

REPLY_TOKENS = 9
PROMPT = "say hello to me"
PROVIDER_INPUT = 4
#: Core's estimate of PROMPT as one message: 4 of framing + ceil(15 / 4).
ESTIMATED_PROMPT = 8


def server(allocated: int = 100_000, caps: Caps | None = None) -> LocalServer:
    return LocalServer(budgets=[Budget("tenant:acme", "TOKENS", allocated, caps=caps)])


def oai(p: FakeProvider) -> openai.OpenAI:
    """An ``openai`` client of the fake provider (no retries: a scripted fault stays one)."""
    return openai.OpenAI(base_url=p.openai_base_url, api_key="sk-fake", max_retries=0)


def aoai(p: FakeProvider) -> openai.AsyncOpenAI:
    """The async twin of :func:`oai`."""
    return openai.AsyncOpenAI(base_url=p.openai_base_url, api_key="sk-fake", max_retries=0)


def ledger(s: LocalServer) -> list[tuple[str, int | None]]:
    """(kind, amount) of every applied mutation but heartbeat extensions."""
    return [(e.kind, e.amount) for e in s.ledger() if e.kind != "extend"]


def settled_once(s: LocalServer) -> dict[str, str]:
    """Every reservation's one settlement (``commit`` or ``release``); fails on two."""
    seen: dict[str, str] = {}
    for e in s.ledger():
        if e.kind in ("commit", "release"):
            assert e.reservation_id is not None
            assert e.reservation_id not in seen, f"{e.reservation_id} settled twice"
            seen[e.reservation_id] = e.kind
    reserved = {e.reservation_id for e in s.ledger() if e.kind == "reserve"}
    assert reserved == set(seen), "every reservation settled"
    return seen


def reserve_bodies(s: LocalServer) -> list[dict[str, Any]]:
    return [
        json.loads(q.body or "{}")
        for q in s.requests()
        if q.operation == "createReservation" and q.status == 200
    ]


class Events:
    """An ``on_event`` collecting core's events; ``wait(kind)`` blocks until one came."""

    def __init__(self) -> None:
        self.seen: list[cycles.LifecycleEvent] = []
        self._cond = threading.Condition()

    def __call__(self, ev: cycles.LifecycleEvent) -> None:
        with self._cond:
            self.seen.append(ev)
            self._cond.notify_all()

    def wait(self, kind: str, count: int = 1, timeout: float = 5.0) -> list[cycles.LifecycleEvent]:
        with self._cond:
            self._cond.wait_for(lambda: len(self.of(kind)) >= count, timeout)
            got = self.of(kind)
        assert len(got) >= count, f"{kind}: {[e.kind for e in self.seen]}"
        return got

    def of(self, kind: str) -> list[cycles.LifecycleEvent]:
        return [e for e in self.seen if e.kind == kind]
