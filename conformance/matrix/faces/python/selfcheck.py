"""Self-check of a matrix face without the orchestrator: every case of the shared vectors
(conformance/vectors/heartbeat.json and journal.json) and, when given, every exchange of the
reference-server corpus, sent through a face's run.sh as protocol requests (PROTOCOL.md) and
checked against the vectors' expectations (the corpus: 2xx gives ``result``, else ``error``).

    python3 selfcheck.py conformance/matrix/faces/python/run.sh [exchanges.jsonl]
    python3 selfcheck.py --names conformance/matrix/faces/runcycles/run.sh   # names only

Exits non-zero on any difference, naming the case. Standard library only.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[4]
VECTORS = ROOT / "conformance" / "vectors"


def requests() -> list[tuple[str, dict[str, Any], Any]]:
    """(case name, request without id, expectation: a value, or a checker)."""
    hb = json.loads((VECTORS / "heartbeat.json").read_text())
    out: list[tuple[str, dict[str, Any], Any]] = []

    def timing(name: str, fn: str, args: dict[str, Any], want: Any) -> None:
        out.append((name, {"op": "timing", "fn": fn, "args": args}, want))

    for c in hb["schedule"]:
        i, e = c["input"], c["expect"]
        timing(c["name"], "schedule", i, e)
        timing(c["name"] + "/lead_floor", "lead_floor", i, e["lead_floor_ms"])
        timing(c["name"] + "/attempt_budget", "attempt_budget", i, e["attempt_budget_ms"])
        timing(c["name"] + "/safety_margin", "safety_margin", i, e["safety_margin_ms"])
    for c in hb["retry_after"]:
        want = {"kind": c["kind"], "ms": c["ms"]}
        timing(f"retry_after {c['raw']!r}", "parse_retry_after", {"raw": c["raw"]}, want)
    for c in hb["retry"]:
        i, e = c["input"], c["expect"]
        timing(c["name"] + "/estimate", "current_lead_estimate", i, e["current_lead_estimate_ms"])
        args = dict(i, current_lead_estimate_ms=e["current_lead_estimate_ms"])
        timing(c["name"] + "/window", "retry_window", args, e["retry_window_ms"])
        if e["transient_retry_delay_ms"] is not None:
            args = dict(args, retry_window_ms=e["retry_window_ms"])
            timing(
                c["name"] + "/delay", "transient_retry_delay", args, e["transient_retry_delay_ms"]
            )
    for c in hb["extend_timeout"]:
        timing(c["name"], "extend_timeout", c["input"], c["expect"])
    for c in hb["planner"]:
        req = {"op": "primary", "request_timeout_ms": c["request_timeout_ms"], "derive": False}
        out.append((c["name"], dict(req, steps=c["steps"]), [{"decision": d} for d in c["expect"]]))
    for c in hb["planner_derived"]:
        req = {"op": "primary", "request_timeout_ms": c["configured_timeout_ms"], "derive": True}
        steps = [
            {"decision": {k: v for k, v in d.items() if k != "attempt_timeout_ms"},
             "attempt_timeout_ms": d["attempt_timeout_ms"]}
            for d in c["expect"]
        ]  # fmt: skip
        out.append((c["name"], dict(req, steps=c["steps"]), steps))
    for c in hb["fallback"]:
        e = c["expect"]
        req = {"op": "fallback", "requested_ttl_ms": c["requested_ttl_ms"], "create": c["create"],
               "prime": c["prime"], "steps": c["steps"]}  # fmt: skip
        regimes = e.get("regimes", [])
        steps = [
            dict({"decision": d}, **({"regime": regimes[n]} if n < len(regimes) else {}))
            for n, d in enumerate(e["decisions"])
        ]
        out.append((c["name"], req, {"first": e["first_beat"], "steps": steps}))

    jv = json.loads((VECTORS / "journal.json").read_text())
    for c in jv["partition"]:
        req = {"op": "fingerprint", "base_url": c["base_url"], "api_key": c["api_key"],
               "tenant": c["tenant"]}  # fmt: skip
        out.append((f"partition {c['fp16']}", req, c["fp16"]))
    for c in jv["file_names"]:
        req = {"op": "journal_names", "reservation_id": c["reservation_id"]}
        want = {"standard": c["standard"], "legacy": c["legacy"]}
        out.append((f"file_names {c['reservation_id']!r}", req, want))
    for c in jv["records"]:
        e = {
            k: v for k, v in c["expect"].items() if k not in ("commit_body", "event_fallback_body")
        }
        if "extra_keys" in e:
            e["extra_keys"] = sorted(e["extra_keys"])
        out.append((c["name"], {"op": "parse_record", "text": c["text"]}, e))
    return out


def corpus(path: Path) -> list[tuple[str, dict[str, Any], Any]]:
    out: list[tuple[str, dict[str, Any], Any]] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            x = json.loads(line)
            out.append((x["name"], {"op": "decode", "exchange": x}, x))
    return out


def without_nulls(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: without_nulls(x) for k, x in v.items() if x is not None}
    if isinstance(v, list):
        return [without_nulls(x) for x in v]
    return v


def matches(got: Any, want: Any) -> bool:
    """``want``'s members (recursively, for objects) equal in ``got``; lists entry by entry."""
    if isinstance(want, dict) and isinstance(got, dict):
        return all(k in got and matches(got[k], v) for k, v in want.items())
    if isinstance(want, list) and isinstance(got, list):
        return len(want) == len(got) and all(matches(g, w) for g, w in zip(got, want, strict=True))
    return type(got) is type(want) and got == want


def check_decode(ans: dict[str, Any], x: dict[str, Any]) -> bool:
    r = x["response"]
    ok = ans.get("ok")
    if not isinstance(ok, dict):
        return False
    if 200 <= r["status"] < 300:
        return "result" in ok and ok["result"] == without_nulls(json.loads(r["body"]))
    err = ok.get("error")
    return isinstance(err, dict) and err.get("status") == r["status"]


def main() -> int:
    args = sys.argv[1:]
    names_only = args[:1] == ["--names"]
    if names_only:
        args = args[1:]
    run = args[0]
    cases = requests()
    if names_only:
        cases = [c for c in cases if c[1]["op"] in ("fingerprint", "journal_names")]
    if len(args) > 1:
        cases += corpus(Path(args[1]))
    lines = "".join(json.dumps(dict(req, id=n)) + "\n" for n, (_, req, _) in enumerate(cases))
    proc = subprocess.run(["bash", run], input=lines, capture_output=True, text=True, check=False)
    answers = [json.loads(a) for a in proc.stdout.splitlines()]
    failed = 0
    if proc.returncode != 0 or len(answers) != len(cases):
        print(f"face exited {proc.returncode} after {len(answers)}/{len(cases)} answers:\n"
              f"{proc.stderr}")  # fmt: skip
        return 1
    for n, ((name, req, want), ans) in enumerate(zip(cases, answers, strict=True)):
        if ans.get("id") != n:
            ok = False
        elif req["op"] == "decode":
            ok = check_decode(ans, want)
        else:
            ok = "ok" in ans and matches(ans["ok"], want)
        if not ok:
            failed += 1
            print(f"DIFF {name}: got {json.dumps(ans)[:400]}\n  want {json.dumps(want)[:400]}")
    print(f"{len(cases) - failed} passed, {failed} failed ({run})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
