"""Self-check of the journal ops (``write`` / ``drain``) of matrix faces without the
orchestrator: for every writer and reader face given, and each way of failing a settlement
(an outage, a 429 with a floor, an expired reservation whose event fallback fails), one face
writes a pending record against a LocalServer, then the other drains it; the settlement must
be applied exactly once, carrying the journaled body byte for byte.

Run with the Python test venv (it needs ``cycles.testing.LocalServer``):

    $CYCLES_PY_CACHE/test-venv/bin/python journalcheck.py FACE_RUN_SH [FACE_RUN_SH...]
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from cycles import journal
from cycles.testing import LocalServer

METADATA = {"big": 98765432109876543210987654321, "note": "caf\u00e9 \u2603", "f": -0.0}
CASE = {
    "subject": {"tenant": "acme", "workspace": "matrix"},
    "action": {"kind": "llm.completion", "name": "matrix-model"},
    "estimate": {"unit": "USD_MICROCENTS", "amount": 1000},
    "actual": 640,
    "metrics": {"tokens_input": 5, "tokens_output": 7},
    "metadata": METADATA,
}
OUTAGE = [("commitReservation", {"kind": "server_error", "status": 503})]
SCENARIOS: dict[str, list[tuple[str, dict[str, Any]]]] = {
    "outage": OUTAGE,
    # runcycles cannot send this (httpx encodes request JSON as strict UTF-8).
    "lone_surrogate": OUTAGE,
    "rate_limited": [("commitReservation", {"kind": "rate_limited", "retry_after": "1"})],
    "expired": [
        ("commitReservation", {"kind": "error", "status": 410, "code": "RESERVATION_EXPIRED"}),
        ("createEvent", {"kind": "server_error", "status": 503}),
    ],
}


class Face:
    def __init__(self, run: str) -> None:
        self.name = Path(run).parent.name
        self.proc = subprocess.Popen(
            ["bash", run], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        self.n = 0

    def ask(self, req: dict[str, Any]) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.n += 1
        self.proc.stdin.write(json.dumps(dict(req, id=self.n)) + "\n")
        self.proc.stdin.flush()
        ans: dict[str, Any] = json.loads(self.proc.stdout.readline())
        assert ans.get("id") == self.n, ans
        return ans

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        assert self.proc.wait(30) == 0


def one(writer: Face, reader: Face, scenario: str) -> str | None:
    """None when it passed, "" when it passed with the body re-encoded (the same JSON, other
    bytes), else what went wrong."""
    with LocalServer() as server, tempfile.TemporaryDirectory() as jd:
        ident = {"url": server.url, "api_key": server.api_key, "tenant": server.tenant,
                 "journal_dir": jd}  # fmt: skip
        for op, fault in SCENARIOS[scenario]:
            server.add_fault(op, fault, times=0)
        case = dict(CASE, name=scenario)
        if scenario == "lone_surrogate":
            case["metadata"] = dict(METADATA, note="\ud800 unpaired")
        w = writer.ask(dict(ident, op="write", case=case))
        if "ok" not in w or w["ok"]["outcome"] != "pending":
            return f"write: {w}"
        rid = w["ok"]["reservation_id"]
        [rec] = journal.list_pending(jd)
        if rec.reservation_id != rid:
            return f"pending record is {rec.reservation_id!r}, wrote {rid!r}"
        part = Path(jd) / rec.partition
        body = journal.parse_record((part / rec.file).read_bytes())
        wire = body.event_fallback_body if rec.mode == "event" else body.commit_body
        server.clear_faults()
        d = reader.ask(dict(ident, op="drain", timeout_ms=10_000))
        if d.get("ok") != {"settled": 1, "pending": 0, "quarantined": 0}:
            return f"drain: {d}"
        kind = "event" if rec.mode == "event" else "commit"
        applied = [e for e in server.ledger() if e.kind == kind]
        if len(applied) != 1 or applied[0].amount != 640:
            return f"applied {applied}"
        op = "createEvent" if kind == "event" else "commitReservation"
        sent = [r.body for r in server.requests() if r.operation == op and r.status in (200, 201)]
        if scenario == "rate_limited" and rec.not_before_ms is None:
            return "no not_before_ms floor journaled"
        if sent != [wire]:
            if len(sent) == 1 and sent[0] is not None and wire is not None:
                if json.loads(sent[0]) == json.loads(wire):
                    return ""  # the same JSON, re-encoded
            return f"sent {sent} != journaled {wire}"
    return None


def main() -> int:
    faces = [Face(run) for run in sys.argv[1:]]
    failed = 0
    total = 0
    for writer in faces:
        for reader in faces:
            for scenario in SCENARIOS:
                total += 1
                why = one(writer, reader, scenario)
                if why is None:
                    verdict = "ok"
                elif why == "":
                    verdict = "ok, body re-encoded (same JSON, not byte-identical)"
                else:
                    verdict = f"FAILED: {why}"
                print(f"{writer.name} -> {reader.name} {scenario}: {verdict}", flush=True)
                failed += bool(why)
    for f in faces:
        f.close()
    print(f"{total - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
