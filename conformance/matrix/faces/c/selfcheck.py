"""Self-check of the C face before the matrix orchestrator drives it: every shared vector
case and every reference-server exchange as protocol requests through run.sh, compared with
the vectors' expectations; then a journal round trip (write with the commit failed, drain)
against a local server started through libcycles (ctypes) in this process.

usage: python3 selfcheck.py [--wrap "valgrind ..."]   (after prepare.sh; stdlib only)
Prints the counts and exits 1 on the first difference.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[3]
VECTORS = ROOT / "conformance" / "vectors"
CORPUS = Path(
    os.environ.get(
        "CYCLES_REFERENCE_CORPUS",
        ROOT.parent / "shared" / "fixtures" / "reference-server" / "exchanges.jsonl",
    )
)
TARGET = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))


class Face:
    """The driver process: one request line in, one response line out."""

    def __init__(self, wrap: list[str]) -> None:
        self.proc = subprocess.Popen(
            [*wrap, str(HERE / "run.sh")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            encoding="utf-8",
        )
        self.next_id = 0
        self.count = 0

    def ask(self, op: str, **fields: Any) -> dict[str, Any]:
        self.next_id += 1
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(json.dumps({"id": self.next_id, "op": op, **fields}) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        reply: dict[str, Any] = json.loads(line)
        assert reply["id"] == self.next_id, reply
        self.count += 1
        return reply

    def ok(self, op: str, **fields: Any) -> Any:
        reply = self.ask(op, **fields)
        if "ok" not in reply:
            fail(f"{op} {fields}: {reply}")
        return reply["ok"]

    def close(self) -> int:
        assert self.proc.stdin
        self.proc.stdin.close()
        return self.proc.wait(timeout=60)


def fail(msg: str) -> None:
    print(f"selfcheck: {msg}", file=sys.stderr)
    sys.exit(1)


def same(what: str, want: Any, got: Any) -> None:
    if want != got:
        fail(f"{what}: want {want!r}, got {got!r}")


def decision(what: str, want: dict[str, Any], got: dict[str, Any]) -> None:
    if "extend" in want:
        same(what, want["extend"], got.get("extend"))
    else:
        for k in ("stop", "code", "status"):
            if k in want:
                same(f"{what} {k}", want[k], got.get(k))


def heartbeat(face: Face) -> int:
    doc = json.loads((VECTORS / "heartbeat.json").read_text())
    n = 0
    for c in doc["schedule"]:
        got = face.ok("timing", fn="schedule", args=c["input"])
        same(c["name"], c["expect"], {k: got[k] for k in c["expect"]})
        n += 1
    for c in doc["retry_after"]:
        got = face.ok("timing", fn="parse_retry_after", args={"raw": c["raw"]})
        same(repr(c["raw"]), (c["kind"], c["ms"]), (got["kind"], got["ms"]))
        n += 1
    for c in doc["retry"]:
        i, e = c["input"], c["expect"]
        est = face.ok(
            "timing",
            fn="current_lead_estimate",
            args={k: i[k] for k in ("last_lead_floor_ms", "elapsed_ms")},
        )
        same(c["name"], e["current_lead_estimate_ms"], est)
        args = {
            "current_lead_estimate_ms": est,
            "attempt_budget_ms": i["attempt_budget_ms"],
            "safety_margin_ms": i["safety_margin_ms"],
        }
        win = face.ok("timing", fn="retry_window", args=args)
        same(c["name"], e["retry_window_ms"], win)
        if e["transient_retry_delay_ms"] is not None:
            args = {"current_lead_estimate_ms": est, "retry_window_ms": win}
            same(
                c["name"],
                e["transient_retry_delay_ms"],
                face.ok("timing", fn="transient_retry_delay", args=args),
            )
        n += 1
    for section, derive, timeout in (
        ("planner", False, "request_timeout_ms"),
        ("planner_derived", True, "configured_timeout_ms"),
    ):
        for c in doc[section]:
            got = face.ok("primary", request_timeout_ms=c[timeout], derive=derive, steps=c["steps"])
            same(f"{c['name']} steps", len(c["expect"]), len(got))
            for want, g in zip(c["expect"], got, strict=True):
                decision(c["name"], want, g["decision"])
                if derive:
                    same(
                        f"{c['name']} attempt_timeout_ms",
                        want["attempt_timeout_ms"],
                        g["attempt_timeout_ms"],
                    )
            n += 1
    for c in doc["fallback"]:
        got = face.ok(
            "fallback",
            requested_ttl_ms=c["requested_ttl_ms"],
            create=c["create"],
            prime=c["prime"],
            steps=c["steps"],
        )
        e = c["expect"]
        decision(c["name"], e["first_beat"], got["first"])
        for k, want in enumerate(e["decisions"]):
            decision(f"{c['name']} #{k}", want, got["steps"][k]["decision"])
        for k, regime in enumerate(e.get("regimes", [])):
            same(f"{c['name']} regime #{k}", regime, got["steps"][k]["regime"])
        n += 1
    for c in doc["extend_timeout"]:
        got = face.ok("timing", fn="extend_timeout", args=c["input"])
        same(c["name"], c["expect"], {k: got[k] for k in c["expect"]})
        n += 1
    return n


def journal(face: Face) -> int:
    doc = json.loads((VECTORS / "journal.json").read_text())
    n = 0
    for c in doc["partition"]:
        same(
            c["note"],
            c["fp16"],
            face.ok(
                "fingerprint", base_url=c["base_url"], api_key=c["api_key"], tenant=c["tenant"]
            ),
        )
        n += 1
    for c in doc["file_names"]:
        same(
            c["reservation_id"],
            {"standard": c["standard"], "legacy": c["legacy"]},
            face.ok("journal_names", reservation_id=c["reservation_id"]),
        )
        n += 1
    keys = (
        "ok",
        "error",
        "reservation_id",
        "base_url",
        "mode",
        "idempotency_key",
        "recorded_at_ms",
        "not_before_ms",
        "commit_body_wire",
        "event_fallback_body_wire",
        "extra_keys",
    )
    for c in doc["records"]:
        got = face.ok("parse_record", text=c["text"])
        same(c["name"], {k: v for k, v in c["expect"].items() if k in keys}, got)
        n += 1
    return n


def without_nulls(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: without_nulls(x) for k, x in v.items() if x is not None}
    if isinstance(v, list):
        return [without_nulls(x) for x in v]
    return v


def corpus(face: Face) -> int:
    lines = [line for line in CORPUS.read_text().splitlines() if line.strip()]
    for line in lines:
        x = json.loads(line)
        resp = x["response"]
        got = face.ok("decode", exchange=x)
        if 200 <= resp["status"] < 300:
            same(x["name"], without_nulls(json.loads(resp["body"])), got.get("result"))
            continue
        err = got["error"]
        same(f"{x['name']} status", resp["status"], err["status"])
        same(
            f"{x['name']} retryable",
            resp["status"] == 429 or resp["status"] >= 500,
            err["retryable"],
        )
        headers = {k.lower(): v for k, v in resp["headers"].items()}
        same(f"{x['name']} request_id", headers.get("x-request-id"), err["request_id"])
        ra = headers.get("retry-after")
        same(
            f"{x['name']} retry_after_ms",
            int(ra) * 1000 if ra and ra.isdigit() else None,
            err["retry_after_ms"],
        )
    return len(lines)


class Server:
    """A local Cycles server through libcycles' C API (ctypes)."""

    def __init__(self) -> None:
        pc = TARGET / "matrix-c" / "prefix" / "c" / "lib"
        kept = TARGET / "cycles-c-tests" / "prefix" / "c" / "lib"
        lib = ctypes.CDLL(str((kept if (kept / "libcycles.so").exists() else pc) / "libcycles.so"))
        lib.cycles_local_server_url.restype = ctypes.c_char_p
        lib.cycles_local_server_api_key.restype = ctypes.c_char_p
        lib.cycles_local_server_tenant.restype = ctypes.c_char_p
        self.lib, self.s = lib, ctypes.c_void_p()
        assert lib.cycles_local_server_start(None, ctypes.byref(self.s), None) == 0
        self.url = lib.cycles_local_server_url(self.s).decode()
        self.key = lib.cycles_local_server_api_key(self.s).decode()
        self.tenant = lib.cycles_local_server_tenant(self.s).decode()

    def fault(self, rule: dict[str, Any]) -> None:
        assert self.lib.cycles_local_server_add_fault(self.s, json.dumps(rule).encode(), None) == 0

    def stop(self) -> None:
        self.lib.cycles_local_server_free(self.s)


def roundtrip(face: Face) -> int:
    server = Server()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            ident = {
                "url": server.url,
                "api_key": server.key,
                "tenant": server.tenant,
                "journal_dir": tmp,
            }
            case = {
                "name": "selfcheck",
                "subject": {"tenant": server.tenant},
                "action": {"kind": "llm.completion", "name": "m"},
                "estimate": {"unit": "USD_MICROCENTS", "amount": 1000},
                "actual": 400,
                "metrics": {"tokens_input": 5},
                "metadata": {"note": "caf\u00e9 \u2603", "big": 123456789012345678901234567890},
            }
            server.fault(
                {
                    "operation": "commitReservation",
                    "fault": {"kind": "server_error", "status": 500},
                    "times": 1,
                }
            )
            wrote = face.ok("write", case=case, **ident)
            same("write outcome", "pending", wrote["outcome"])
            files = list(Path(tmp).rglob("v2-*.json"))
            same("one record", 1, len(files))
            record = face.ok("parse_record", text=files[0].read_text())
            same("record", wrote["reservation_id"], record["reservation_id"])
            if (
                "123456789012345678901234567890" not in record["commit_body_wire"]
                or "caf\u00e9" not in json.loads(record["commit_body_wire"])["metadata"]["note"]
            ):
                fail(f"metadata not kept exactly: {record['commit_body_wire']}")
            same(
                "drain",
                {"settled": 1, "pending": 0, "quarantined": 0},
                face.ok("drain", timeout_ms=10000, **ident),
            )
            same("journal empty", [], list(Path(tmp).rglob("*.json")))
            # Bad input: a typed error, an unknown op: fail; the driver goes on.
            same(
                "bad args",
                "INVALID_ARGUMENT",
                face.ask("timing", fn="lead_floor", args={"remaining_ttl_ms": -1}).get("error"),
            )
            if "fail" not in face.ask("nope"):
                fail("an unknown op must fail")
            if "fail" not in face.ask(
                "write", case={**case, "actual": "18446744073709551615"}, **ident
            ):
                fail("an actual beyond int64 must fail")
    finally:
        server.stop()
    return 4


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--wrap", default="", help="a command the driver runs under (valgrind ...)")
    ap.add_argument("--only", choices=["vectors", "corpus", "journal"], help="one part")
    a = ap.parse_args()
    face = Face(shlex.split(a.wrap))
    if a.only in (None, "vectors"):
        print(f"heartbeat vectors: {heartbeat(face)} cases; journal vectors: {journal(face)} cases")
    if a.only in (None, "corpus"):
        print(f"corpus: {corpus(face)} exchanges")
    if a.only in (None, "journal"):
        print(f"journal round trip: {roundtrip(face)} checks")
    rc = face.close()
    same("driver exit status", 0, rc)
    print(f"selfcheck: {face.count} requests: ok")


if __name__ == "__main__":
    main()
