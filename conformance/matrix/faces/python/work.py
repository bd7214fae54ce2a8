"""The Python face's ``work`` op (conformance/matrix/PROTOCOL.md): guarded actions in a loop,
for the crash loop (``cycles-matrix crashloop``), which SIGKILLs the face mid-way. Its own
module so another op added to the face touches only the dispatch table."""

from __future__ import annotations

import time
from typing import Any

import cycles


def op_work(req: dict[str, Any]) -> Any:
    """Every action in order through one client of the tenant, default unit and journal: a
    guarded action under its key, bare estimate and TTL (the client's default when null),
    whose work sleeps ``sleep_ms``, sets the actual and returns. Answers each outcome."""
    client = cycles.Client(
        req["url"],
        req["api_key"],
        tenant=req["tenant"],
        default_unit=req["default_unit"],
        journal_dir=req["journal_dir"],
        journal_url=req.get("journal_url"),
    )
    outcomes: list[str] = []
    try:
        for a in req["actions"]:
            with client.reserve(
                a["estimate"],
                action=cycles.Action("llm.completion", "crashloop"),
                idempotency_key=a["key"],
                ttl_ms=a.get("ttl_ms"),
            ) as r:
                time.sleep(a["sleep_ms"] / 1000)
                r.set_actual(a["actual"])
            outcomes.append(r.settlement.status if r.settlement is not None else r.outcome)
    finally:
        client.close(0)
    return {"outcomes": outcomes}
