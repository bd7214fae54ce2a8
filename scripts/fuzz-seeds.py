#!/usr/bin/env python3
"""Writes the fuzz targets' seed corpora (fuzz/README.md) from the shared vectors
(conformance/vectors/*.json) and the reference-server corpus (exchanges.jsonl), in the input
formats of fuzz/src/lib.rs. Seeds are generated, never committed: the sources are the truth.

Usage: scripts/fuzz-seeds.py OUT_DIR EXCHANGES_JSONL
Writes OUT_DIR/<target>/<sha1 of the seed> and prints the count per target.
"""

import hashlib
import json
import os
import re
import sys
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VECTORS = os.path.join(ROOT, "conformance", "vectors")

seeds: dict[str, set[bytes]] = {}


def add(target: str, data: "str | bytes") -> None:
    seeds.setdefault(target, set()).add(data.encode() if isinstance(data, str) else data)


def compact(v: object) -> str:
    return json.dumps(v, separators=(",", ":"))


def vectors() -> None:
    with open(os.path.join(VECTORS, "journal.json"), encoding="utf-8") as f:
        journal = json.load(f)
    for r in journal["records"]:
        add("journal_record", r["text"])
        add("rawjson", r["text"])
        try:
            rec = json.loads(r["text"])
        except ValueError:
            continue
        if isinstance(rec, dict):
            for body in ("commit_body", "event_fallback_body"):
                if isinstance(rec.get(body), dict):
                    add("rawjson", compact(rec[body]))
                    add("event_json", compact(rec[body]))
            if isinstance(rec.get("reservation_id"), str):
                add("path_encoding", rec["reservation_id"])
    for n in journal["file_names"]:
        add("path_encoding", n["reservation_id"])
    for p in journal["partition"]:
        add("path_encoding", p["base_url"] + "\nrsv_1")

    with open(os.path.join(VECTORS, "heartbeat.json"), encoding="utf-8") as f:
        hb = json.load(f)
    for c in hb["schedule"]:
        add("bridge_timing_json", "schedule\n" + compact(c["input"]))
        for fn in ("lead_floor", "attempt_budget", "safety_margin"):
            add("bridge_timing_json", fn + "\n" + compact(c["input"]))
    for c in hb["retry_after"]:
        add("bridge_timing_json", "parse_retry_after\n" + compact({"raw": c["raw"]}))
        if c["raw"] is not None:
            add("retry_after", c["raw"])
    for c in hb["retry"]:
        i, e = c["input"], c["expect"]
        add("bridge_timing_json", "current_lead_estimate\n" + compact(i))
        add(
            "bridge_timing_json",
            "retry_window\n"
            + compact({"current_lead_estimate_ms": e["current_lead_estimate_ms"], **i}),
        )
        add(
            "bridge_timing_json",
            "transient_retry_delay\n"
            + compact(
                {
                    "current_lead_estimate_ms": e["current_lead_estimate_ms"],
                    "retry_window_ms": e["retry_window_ms"],
                }
            ),
        )
    for c in hb["extend_timeout"]:
        add("bridge_timing_json", "extend_timeout\n" + compact(c["input"]))
        add(
            "bridge_timing_json",
            "min_lead_floor\n"
            + compact(
                {
                    "timeout_ms": c["input"]["configured_timeout_ms"],
                    "max_rtt_ms": c["input"].get("max_rtt_ms"),
                }
            ),
        )
        add(
            "bridge_timing_json",
            "attempt_cutoff\n" + compact({"timeout_ms": c["input"]["configured_timeout_ms"]}),
        )
    for kind, key in (
        ("planner", "request_timeout_ms"),
        ("planner_derived", "configured_timeout_ms"),
    ):
        mode = "primary" if kind == "planner" else "primary_derived"
        for c in hb[kind]:
            lines = [mode, compact(c[key])] + [compact(s) for s in c["steps"]]
            add("bridge_timing_json", "\n".join(lines))
            # A round trip observed before the steps (the target's `rtt` line).
            add("bridge_timing_json", "\n".join([*lines[:2], "rtt 250", *lines[2:]]))
    for c in hb["fallback"]:
        head = f"{c['requested_ttl_ms']} {c['create']['at_us']} {c['create']['expires_at_ms']}"
        add("bridge_timing_json", "\n".join(["fallback", head] + [compact(s) for s in c["steps"]]))
    for fn, args in (
        ("classify_grant", {"grant_ms": 30000, "elapsed_ms": 30000, "requested_ttl_ms": 60000}),
        ("cadence", {"regime": "normal", "last_grant_ms": 60000, "requested_ttl_ms": 60000}),
        (
            "delay_with_skips",
            {"lead_min_now_ms": 170000, "last_grant_ms": 60000, "cadence_ms": 30000},
        ),
        ("is_permanent_stop_code", {"code": "RESERVATION_EXPIRED"}),
        ("permanent_stop_codes", {}),
        ("from_micros_ceil", {"micros": "340282366920938463463374607431768211455"}),
        ("from_micros_floor", {"micros": 1999}),
    ):
        add("bridge_timing_json", fn + "\n" + compact(args))

    with open(os.path.join(VECTORS, "pricing.json"), encoding="utf-8") as f:
        pricing = json.load(f)
    for fn, cases in pricing["functions"].items():
        for c in cases:
            add("bridge_pricing_json", fn + "\n" + compact(c["input"]))
            if isinstance(c["input"].get("body"), dict):
                add("usage_reading", compact(c["input"]["body"]))
    # `estimate` failing: the vectors' cases all succeed, and fuzz-growth.sh showed that no
    # input in the corpus had made it fail. A model the table does not price; a cost past int64.
    est = pricing["functions"]["estimate"][0]["input"]
    for wrong in ({"model": "unpriced-model"}, {"prompt_tokens": 18446744073709551615}):
        add("bridge_pricing_json", "estimate\n" + compact({**est, **wrong}))


def exchanges(path: str) -> None:
    with open(path, encoding="utf-8") as f:
        for line in f:
            x = json.loads(line)
            req, resp = x["request"], x["response"]
            op = x.get("operation") or "-"
            head = [f"{op} {resp['status']}"] + [f"{k}: {v}" for k, v in resp["headers"].items()]
            body = resp.get("body") or ""
            add("decode_response", "\n".join(head) + "\n\n" + body)
            for b in (body, req.get("body") or ""):
                if b:
                    add("rawjson", b)
            if op == "createEvent" and req.get("body"):
                add("event_json", req["body"])
            ra = resp["headers"].get("Retry-After")
            if ra is not None:
                add("retry_after", ra)
            parts = req["path"].split("?")[0].split("/")
            if len(parts) > 3 and parts[2] in ("reservations", "evidence"):
                add("path_encoding", parts[3])
            if op == "commitReservation" and req.get("body"):
                rid = parts[3] if len(parts) > 3 else "rsv"
                add(
                    "journal_record",
                    compact(
                        {
                            "version": 1,
                            "reservation_id": rid,
                            "base_url": "http://localhost",
                            "mode": "commit",
                            "commit_body": json.loads(req["body"]),
                            "event_fallback_body": None,
                            "recorded_at_ms": 1,
                            "not_before_ms": None,
                        }
                    ),
                )


def handmade() -> None:
    # The corners the issue names: lone surrogates, big integers, and the ids URL parsing bends.
    for t in (
        '{"a":"\\ud800","n":123456789012345678901234567890}',
        '"\\udc00x"',
        '[1e400,-0.0,{"k":1,"k":2}]',
        '{"\\u006b":1,"k":2}',
    ):
        add("rawjson", t)
    add(
        "journal_record",
        '{"version":1,"reservation_id":"r","mode":"event","commit_body":null,'
        '"event_fallback_body":{"idempotency_key":"k\\ud800","actual":{"unit":"TOKENS",'
        '"amount":99999999999999999999999}},"not_before_ms":1.5}',
    )
    for i in ("..", ".", "a/b?c#d%e", "é…", "%2e%2E", "", " "):
        add("path_encoding", i)
    add("path_encoding", "http://h:1/a/b//\nrsv")
    for r in ("18446744073709552", "\t7 ", "1e3", "Wed, 21 Oct 2015 07:28:00 GMT"):
        add("retry_after", r)
    # Successes of the two evidence reads, which the reference corpus has not (getEvidence) or
    # has without the optional members (getEvidenceJwks): a decoder's whole success path is
    # seeded, not left for the fuzzer to spell member by member.
    envelope = {
        "schema_version": "1",
        "artifact_type": "reservation.commit",
        "server_id": "s",
        "signer_did": "did:key:z",
        "evidence_id": "ab" * 32,
        "signature": "sig",
        "issued_at_ms": 1767225600000,
        "payload": {"k": 1},
        "trace_id": "t",
    }
    key = {"kty": "OKP", "crv": "Ed25519", "x": "x", "kid": "k", "cycles_nbf_ms": 1}
    for op, body in (
        ("getEvidence", envelope),
        ("getEvidenceJwks", {"keys": [{**key, "alg": "EdDSA", "cycles_exp_ms": 2}]}),
        ("getEvidenceJwks", {"keys": [{**key, "cycles_exp_ms": None}]}),
    ):
        add("decode_response", f"{op} 200\nContent-Type: application/json\n\n" + compact(body))
    conn = '"base_url":"http://127.0.0.1:1","api_key":"k"'
    for sel, opts in (
        ("0", '{"request_timeout_ms":1000,"journal_enabled":false}'),
        ("1", "{" + conn + ',"tenant":"t","settle_max_attempts":3}'),
        ("2", '{"baseUrl":"http://127.0.0.1:1","apiKey":"k","requestTimeoutMs":5}'),
        ("3", "{" + conn + ',"request_timeout":1.5}'),
        (
            "4",
            (
                '{"action":{"kind":"llm","name":"m"},"estimate":5,"unit":"TOKENS",'
                '"subject":{"tenant":"t"},"metadata":{"x":"\\ud800"}}'
            ),
        ),
    ):
        add("bridge_options", sel + opts)


BRIDGE = os.path.join(ROOT, "bindings", "bridge", "src")


def read_bridge(name: str) -> str:
    with open(os.path.join(BRIDGE, name), encoding="utf-8") as f:
        return f.read()


def bridge_table(name: str, what: str, pattern: str, least: int, within: str = "") -> list[Any]:
    """The matches of `pattern` (`^` at any line) in the bridge source `name`, inside the first
    group of `within`'s match if given. Exits when fewer than `least` are found: a table the
    seeds are read from must not shrink to nothing in silence when its source changes shape."""
    text = read_bridge(name)
    if within:
        block = re.search(within, text, re.DOTALL)
        text = block[1] if block else ""
    rows = re.findall(pattern, text, re.MULTILINE)
    if len(rows) < least:
        sys.exit(f"fuzz-seeds: {name}'s {what} has {len(rows)} rows read")
    return rows


# A valid value for a timing argument that is not a duration, by its name.
TIMING_VALUES: dict[str, object] = {
    "regime": "normal",
    "code": "RESERVATION_EXPIRED",
    "raw": "5",
    "micros": 1500,
}


def timing_table() -> None:
    # Every function `timing_json::call` documents, with each of its arguments given: the
    # fuzzer cannot find a name it must spell whole on the first line (the match compares
    # whole strings, which libFuzzer does not trace without a sanitizer), so a function no
    # vector calls by name would otherwise never run (retry_reserve and next_delay did not).
    rows = bridge_table("timing_json.rs", "function table", r"^/// \| `(\w+)` \| (.*?) \|", 10)
    for name, args in rows:
        keys = re.findall(r"`(\w+)`", args)
        add(
            "bridge_timing_json",
            name + "\n" + compact({k: TIMING_VALUES.get(k, 1000) for k in keys}),
        )
    # The argument values that are words: every regime name, and the infinite durations.
    for regime in ("unknown", "normal", "grant_clamped", "max_lead_clamped"):
        add(
            "bridge_timing_json",
            "cadence\n"
            + compact({"regime": regime, "last_grant_ms": 1000, "requested_ttl_ms": 60000}),
        )
    for window in ("infinite", "-infinite"):
        add(
            "bridge_timing_json",
            "transient_retry_delay\n"
            + compact({"current_lead_estimate_ms": 1000, "retry_window_ms": window}),
        )
    for lead, budget in (("infinite", 1000), (1000, "infinite")):
        add(
            "bridge_timing_json",
            "retry_window\n"
            + compact(
                {
                    "current_lead_estimate_ms": lead,
                    "attempt_budget_ms": budget,
                    "safety_margin_ms": 1000,
                }
            ),
        )


def option_table() -> None:
    # Every client option with a valid value, in each host's spelling (the target's selector
    # byte picks the host: 0 C with the endpoint given, 1 the JVM, 2 Node, 3 Python).
    option = r'opt\(\s*"(\w+)",\s*"(\w+)",\s*"(\w+)",\s*(?:Kind::)?(\w+)'
    table = r"CLIENT_OPTION_TABLE[^=]*= &\[(.*?)\n\];"
    found = bridge_table("options.rs", "CLIENT_OPTION_TABLE", option, 10, within=table)
    value: dict[str, object] = {"Text": "x", "Flag": True, "MS0": 1500, "COUNT0": 3}
    conn = {"base_url": "http://127.0.0.1:1", "api_key": "k"}
    camel_conn = {"baseUrl": conn["base_url"], "apiKey": conn["api_key"]}

    def each_host(key: str, camel: str, seconds: str, v: object, py: object) -> None:
        add("bridge_options", "0" + compact({key: v}))
        add("bridge_options", "1" + compact({**conn, key: v}))
        add("bridge_options", "2" + compact({**camel_conn, camel: v}))
        add("bridge_options", "3" + compact({**conn, seconds: py}))

    for key, camel, seconds, kind in found:
        if key in conn:
            continue
        if kind not in value:
            sys.exit(f"fuzz-seeds: no seed value for option {key}'s kind {kind}")
        v = value[kind]
        if key.startswith("journal_"):
            v = {"journal_dir": "/nonexistent/j", "journal_url": "redis://127.0.0.1:1"}.get(key, v)
        each_host(key, camel, seconds, v, 1.5 if kind == "MS0" else v)  # Python: seconds
    # `journal_url` is parsed where the client is built (core's Redis journal URL): every
    # parameter it takes, for each host.
    for url in (
        "redis://u:p@127.0.0.1:1/2?durability=replicas:1&wait_timeout_ms=5&lease_ms=100",
        "redis://127.0.0.1:1?durability=none&protocol=resp3&db=1&user=u&pass=p",
    ):
        each_host("journal_url", "journalUrl", "journal_url", url, url)
    # A member given as null (the option's default, as if not given) and, in seconds, a
    # duration past the longest: paths fuzz-growth.sh showed no input had taken.
    each_host("request_timeout_ms", "requestTimeoutMs", "request_timeout", None, None)
    add("bridge_options", "3" + compact({**conn, "request_timeout": 1e7}))


# A valid value for each guard spec member (guard.rs's SPEC_MEMBERS).
SPEC_VALUES: dict[str, object] = {
    "idempotency_key": "k-1",
    "subject": {"tenant": "t"},
    "action": {"kind": "llm.completion", "name": "m"},
    "estimate": {"unit": "USD_MICROCENTS", "amount": 5},
    "unit": "USD_MICROCENTS",
    "ttl_ms": 60000,
    "grace_period_ms": 5000,
    "overage_policy": "ALLOW_IF_AVAILABLE",
    "metadata": {"x": 1},
    "heartbeat": False,
    "policy": "warn",
}


def guard_specs() -> None:
    # A guard spec (the target's selector 4) with every member guard.rs's SPEC_MEMBERS lists,
    # once a heartbeat policy each, and an estimate whose unit differs from `unit`: until these
    # the corpus had one spec and never reached ttl_ms, grace_period_ms, overage_policy,
    # heartbeat or policy (fuzz-growth.sh's never-reached list).
    listed = r"SPEC_MEMBERS: &\[&str\] = &\[(.*?)\];"
    members = bridge_table("guard.rs", "SPEC_MEMBERS", r'"(\w+)"', 8, within=listed)
    missing = [m for m in members if m not in SPEC_VALUES]
    if missing:
        sys.exit(f"fuzz-seeds: no seed value for guard spec members {missing}")
    spec = {m: SPEC_VALUES[m] for m in members}
    for policy in ("warn", "fail_on_finalize", "cancel"):
        add("bridge_options", "4" + compact({**spec, "policy": policy}))
    add("bridge_options", "4" + compact({**spec, "unit": "TOKENS"}))
    # Each member once as a value of a type none accepts (an array): the member's own decoding
    # error, which the fuzzer found for one member in twenty minutes and for two never.
    for m in members:
        add("bridge_options", "4" + compact({**spec, m: []}))


def main() -> None:
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    out, ex = sys.argv[1], sys.argv[2]
    if not os.path.exists(ex):
        sys.exit(f"fuzz-seeds: no reference-server corpus at {ex} (set CYCLES_REFERENCE_CORPUS)")
    vectors()
    exchanges(ex)
    handmade()
    timing_table()
    option_table()
    guard_specs()
    for target, items in sorted(seeds.items()):
        d = os.path.join(out, target)
        os.makedirs(d, exist_ok=True)
        for s in items:
            with open(os.path.join(d, hashlib.sha1(s).hexdigest()), "wb") as f:
                f.write(s)
        print(f"{target}: {len(items)} seeds")


if __name__ == "__main__":
    main()
