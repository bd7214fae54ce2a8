"""One process of a recovery test (spawned by recovery_support.Child; not a test module).

argv[1] is a JSON spec; the process builds a FRESH client from it (nothing but the journal, in
its directory or its Redis, crosses from an earlier process), does one thing through the
public API, closes the client without draining (so what is left stays journaled), and writes
its result JSON atomically to ``spec["result"]``. A process the test kills with SIGKILL writes
nothing.

Modes:
  settle  reserve (no heartbeat), set the actual, leave the block: the SDK journals, then
          commits; result: the Settlement.
  flush   ``client.flush()``: replay every pending record once.
  drain   ``client.drain(timeout)``: replay until the journal is empty.
The result also carries every lifecycle event the client delivered (``on_event``).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import cycles


def settlement_json(s: cycles.Settlement | None) -> dict[str, Any] | None:
    if s is None:
        return None
    return {"status": s.status, "reservation_id": s.reservation_id,
            "not_before_ms": s.not_before_ms, "error_kind": s.error_kind}  # fmt: skip


def report_json(r: cycles.DrainReport) -> dict[str, Any]:
    return {
        "settled": r.settled,
        "outcomes": [[o.reservation_id, o.status] for o in r.outcomes],
        "remaining": [p.reservation_id for p in r.remaining],
        "quarantined": list(r.quarantined),
    }


def main(spec: dict[str, Any]) -> dict[str, Any]:
    events: list[cycles.LifecycleEvent] = []
    client = cycles.Client(
        spec["url"],
        spec["api_key"],
        tenant=spec.get("tenant"),
        journal_dir=spec["dir"],
        # Set on a Redis run (tests/journal_store.py): the journal is there, the dir unused.
        journal_url=spec.get("journal_url"),
        on_event=events.append,
        settle_max_attempts=spec.get("max_attempts", 5),
        # The background replay's first pass runs when the lifecycle starts; later passes
        # would only add noise to what the test observes.
        replay_interval=3600,
    )
    go = spec.get("go")
    if go:
        # Independent workers are made ready first (the identity's PBKDF2 is computed once per
        # process and cached), say so, then wait to be released together.
        cycles.journal.identity_fingerprint(spec["url"], spec["api_key"], spec.get("tenant"))
        Path(spec["result"] + ".ready").touch()
        while not os.path.exists(go):
            time.sleep(0.001)
    out: dict[str, Any] = {"pid": os.getpid()}
    mode = spec["mode"]
    if mode == "settle":
        with client.reserve(
            spec.get("estimate", 1_000),
            action=spec.get("action", {"kind": "llm.completion", "name": "test-model"}),
            idempotency_key=spec["key"],
            heartbeat=False,
        ) as r:
            r.set_actual(spec["amount"])
        out["settlement"] = settlement_json(r.settlement)
    elif mode == "flush":
        out["report"] = report_json(client.flush())
    elif mode == "drain":
        out["report"] = report_json(client.drain(spec.get("timeout", 20.0)))
    else:
        raise SystemExit(f"unknown mode {mode!r}")
    # timeout=0: no drain at close; close() still delivers every pending event.
    client.close(timeout=0)
    out["events"] = [
        {"kind": e.kind, "reservation_id": e.reservation_id, "disposition": e.disposition,
         "error_kind": e.error_kind, "fields": e.fields}
        for e in events
    ]  # fmt: skip
    return out


if __name__ == "__main__":
    spec = json.loads(sys.argv[1])
    result = main(spec)
    path = Path(spec["result"])
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(result))
    os.replace(tmp, path)
