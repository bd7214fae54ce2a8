"""The Python face of the cross-language matrix (conformance/matrix/PROTOCOL.md).

One JSON request per stdin line, one JSON response per stdout line. Every answer comes from
the installed ``cycles`` wheel's public API (``cycles.timing``, ``cycles.journal``,
``cycles.pricing``, ``cycles.decode_response``, ``cycles.Client``); this file only converts
between the protocol's encoding and Python values.

``CYCLES_MATRIX_PERTURB`` (test-only, see PROTOCOL.md) breaks this face on purpose so the
matrix can prove it notices: ``timing:<fn>`` adds 1 to every finite integer result of that
timing function, ``journal:standard`` appends ``x`` to standard file names.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import math
import os
from typing import Any, Callable

import cycles
from cycles import journal, pricing, timing
from cycles._model_base import _Model
from cycles.models import Amount
from protocol import Op, Refused, serve, unfaithful
from work import op_work

MAX_EXACT = 2**53 - 1
PERTURB = os.environ.get("CYCLES_MATRIX_PERTURB", "")


# -- number encoding (PROTOCOL.md "Number encoding") -----------------------------------------


def num_in(v: Any) -> Any:
    """A protocol number as the Python API takes it: int, ``math.inf`` or ``-math.inf``."""
    if v == "infinite":
        return math.inf
    if v == "-infinite":
        return -math.inf
    if isinstance(v, str):
        return int(v)
    return v


def num_out(v: Any) -> Any:
    """A Python result in the protocol encoding, recursively (bools and strings unchanged)."""
    if isinstance(v, bool) or v is None or isinstance(v, str):
        return v
    if isinstance(v, float):
        if v == math.inf:
            return "infinite"
        if v == -math.inf:
            return "-infinite"
        raise ValueError(f"unexpected float {v!r}")
    if isinstance(v, int):
        return v if abs(v) <= MAX_EXACT else str(v)
    if isinstance(v, dict):
        return {k: num_out(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [num_out(x) for x in v]
    raise ValueError(f"unexpected value {v!r}")


def bump(v: Any) -> Any:
    """The perturbation: every finite integer (not bool) plus one, recursively."""
    if isinstance(v, bool):
        return v
    if isinstance(v, int):
        return v + 1
    if isinstance(v, dict):
        return {k: bump(x) for k, x in v.items()}
    return v


# -- timing -----------------------------------------------------------------------------------


def _opt(a: dict[str, Any], name: str) -> Any:
    return num_in(a.get(name))


def _req(a: dict[str, Any], name: str) -> Any:
    if a.get(name) is None:
        raise cycles.InvalidArgumentError(f"missing {name}")
    return num_in(a[name])


def _fields(obj: Any) -> dict[str, Any]:
    return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}


TIMING: dict[str, Callable[[dict[str, Any]], Any]] = {
    "schedule": lambda a: _fields(
        timing.schedule(
            _req(a, "remaining_ttl_ms"),
            _opt(a, "rtt_ms"),
            _opt(a, "max_rtt_ms"),
            _req(a, "request_timeout_ms"),
        )
    ),
    "lead_floor": lambda a: timing.lead_floor(_req(a, "remaining_ttl_ms"), _opt(a, "rtt_ms")),
    "attempt_budget": lambda a: timing.attempt_budget(
        _req(a, "request_timeout_ms"), _opt(a, "max_rtt_ms")
    ),
    "safety_margin": lambda a: timing.safety_margin(_opt(a, "max_rtt_ms")),
    "retry_reserve": lambda a: timing.retry_reserve(
        _req(a, "attempt_budget_ms"), _req(a, "safety_margin_ms")
    ),
    "next_delay": lambda a: timing.next_delay(
        _req(a, "lead_floor_ms"), _req(a, "retry_reserve_ms")
    ),
    "current_lead_estimate": lambda a: timing.current_lead_estimate(
        _req(a, "last_lead_floor_ms"), _req(a, "elapsed_ms")
    ),
    "retry_window": lambda a: timing.retry_window(
        _req(a, "current_lead_estimate_ms"),
        _req(a, "attempt_budget_ms"),
        _req(a, "safety_margin_ms"),
    ),
    "transient_retry_delay": lambda a: timing.transient_retry_delay(
        _req(a, "current_lead_estimate_ms"), _req(a, "retry_window_ms")
    ),
    "parse_retry_after": lambda a: _fields(timing.parse_retry_after(a.get("raw"))),
    "extend_timeout": lambda a: _fields(
        timing.extend_timeout(
            _req(a, "lead_floor_ms"), _opt(a, "max_rtt_ms"), _req(a, "configured_timeout_ms")
        )
    ),
    "min_lead_floor": lambda a: timing.min_lead_floor(_req(a, "timeout_ms"), _opt(a, "max_rtt_ms")),
    "attempt_cutoff": lambda a: timing.attempt_cutoff(_req(a, "timeout_ms")),
    "classify_grant": lambda a: timing.classify_grant(
        _req(a, "grant_ms"), _req(a, "elapsed_ms"), _req(a, "requested_ttl_ms")
    ),
    "cadence": lambda a: timing.cadence(
        a["regime"], _req(a, "last_grant_ms"), _req(a, "requested_ttl_ms")
    ),
    "delay_with_skips": lambda a: timing.delay_with_skips(
        _req(a, "lead_min_now_ms"), _req(a, "last_grant_ms"), _req(a, "cadence_ms")
    ),
    "is_permanent_stop_code": lambda a: timing.is_permanent_stop_code(a["code"]),
}


def op_timing(req: dict[str, Any]) -> Any:
    fn = req["fn"]
    if fn not in TIMING:
        raise cycles.InvalidArgumentError(f"unknown timing function {fn!r}")
    out = num_out(TIMING[fn](req.get("args") or {}))
    return bump(out) if PERTURB == f"timing:{fn}" else out


# -- pricing (PROTOCOL.md "pricing"): the vectors' JSON as cycles.pricing's typed arguments --

# Every function cycles.pricing exports (the bridge's table, by the same names).
PRICING: dict[str, Callable[..., Any]] = {
    n: getattr(pricing, n) for n in pricing.__all__ if n[0].islower()
}
# Arguments that are token counts (a decimal string beyond 2^53 - 1 becomes an int).
COUNTS = frozenset(
    "input_tokens output_tokens prompt_tokens output_bound bound default "
    "default_output_bound".split()
)


def amount_in(v: Any) -> Any:
    """An ``{"unit", "amount"}`` object as an Amount; anything else as given (core refuses it)."""
    if isinstance(v, dict) and set(v) == {"unit", "amount"} and isinstance(v["unit"], str):
        n = num_in(v["amount"]) if isinstance(v["amount"], (int, str)) else v["amount"]
        if isinstance(n, int) and not isinstance(n, bool):
            return Amount(v["unit"], n)
    return v


def pricing_out(v: Any) -> Any:
    """A cycles.pricing result in the protocol encoding."""
    if isinstance(v, pricing.SettlementPlan):
        out: dict[str, Any] = {"action": v.action}
        if v.amount is not None:
            out["amount"] = pricing_out(v.amount)
        return out
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return {f.name: pricing_out(getattr(v, f.name)) for f in dataclasses.fields(v)}
    if isinstance(v, dict):
        return {k: pricing_out(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [pricing_out(x) for x in v]
    return num_out(v)


def op_pricing(req: dict[str, Any]) -> Any:
    fn = req["fn"]
    if fn not in PRICING:
        raise cycles.InvalidArgumentError(f"unknown pricing function {fn!r}")
    args: dict[str, Any] = {}
    for k, v in (req.get("args") or {}).items():
        if k in COUNTS and isinstance(v, str) and v.isdigit():
            v = int(v)
        elif k == "usage" and isinstance(v, dict):
            v = {n: int(x) if isinstance(x, str) and x.isdigit() else x for n, x in v.items()}
        elif k in ("actual", "estimate") and fn == "settlement":
            v = amount_in(v)
        args[k] = v
    if fn == "lower_bound":
        args.setdefault("bound", None)
    out = PRICING[fn](**args)
    return {"set": out} if fn == "stream_request" else pricing_out(out)


# The detail each stop reason carries (core's StopReason; the bridge's decision_json).
STOP_DETAIL = {
    "no_safe_retry_window": ("retry_window_ms",),
    "rate_limit_beyond_window": ("retry_after_kind", "retry_after_seconds", "retry_window_ms"),
    "permanent": ("code",),
    "rejected": ("status", "code"),
}


def decision(d: timing.Decision) -> dict[str, Any]:
    if isinstance(d, timing.Extend):
        return {"extend": {"delay_ms": num_out(d.delay_ms), "key": d.key}}
    out: dict[str, Any] = {"stop": d.reason}
    for key in STOP_DETAIL.get(d.reason, ()):
        out[key] = num_out(getattr(d, key))
    return out


def failure(f: dict[str, Any]) -> timing.Failure:
    return timing.Failure(f["kind"], f.get("retry_after"), num_in(f.get("status")), f.get("code"))


def op_primary(req: dict[str, Any]) -> Any:
    p = timing.PrimaryPlanner(num_in(req["request_timeout_ms"]), derive_timeout=bool(req["derive"]))
    out = []
    for s in req["steps"]:
        if s["event"] == "success":
            at, ttl = num_in(s["at_us"]), num_in(s["remaining_ttl_ms"])
            d = p.on_success(at, ttl, num_in(s.get("rtt_ms")))
        elif s["event"] == "failure":
            d = p.on_failure(num_in(s["at_us"]), failure(s["failure"]))
        else:
            raise cycles.InvalidArgumentError(f"unknown event {s['event']!r}")
        out.append({"decision": decision(d), "attempt_timeout_ms": num_out(p.attempt_timeout_ms)})
    return out


def op_fallback(req: dict[str, Any]) -> Any:
    c = req["create"]
    p = timing.FallbackPlanner(
        num_in(req["requested_ttl_ms"]), num_in(c["at_us"]), num_in(c["expires_at_ms"])
    )
    first = decision(p.first_beat(bool(req["prime"])))
    steps = []
    for s in req["steps"]:
        if s["event"] == "success":
            d = p.on_success(num_in(s["at_us"]), num_in(s["expires_at_ms"]))
        elif s["event"] == "failure":
            d = p.on_failure(num_in(s["at_us"]), failure(s["failure"]))
        else:
            raise cycles.InvalidArgumentError(f"unknown event {s['event']!r}")
        steps.append({"decision": decision(d), "regime": p.regime})
    return {"first": first, "steps": steps}


# -- journal ----------------------------------------------------------------------------------


def op_journal_names(req: dict[str, Any]) -> Any:
    rid = req["reservation_id"]
    standard = journal.file_name(rid)
    if PERTURB == "journal:standard":
        standard += "x"
    return {"standard": standard, "legacy": journal.legacy_file_name(rid)}


def op_fingerprint(req: dict[str, Any]) -> Any:
    return journal.identity_fingerprint(req["base_url"], req["api_key"], req.get("tenant"))


def op_parse_record(req: dict[str, Any]) -> Any:
    try:
        r = journal.parse_record(req["text"].encode("utf-8", "surrogatepass"))
    except cycles.InvalidArgumentError as e:
        kind = (e.details or {}).get("journal_error")
        if kind is None:
            raise
        return {"ok": False, "error": kind}
    return {
        "ok": True,
        "reservation_id": r.reservation_id,
        "base_url": r.base_url,
        "mode": r.mode,
        "idempotency_key": r.idempotency_key,
        "recorded_at_ms": num_out(r.recorded_at_ms),
        "not_before_ms": num_out(r.not_before_ms),
        "commit_body_wire": r.commit_body,
        "event_fallback_body_wire": r.event_fallback_body,
        "extra_keys": list(r.extra_keys),
    }


# -- decode -----------------------------------------------------------------------------------


def to_wire(v: Any) -> Any:
    """A decoded result back to wire JSON: ``None`` omitted, ``meta`` dropped, the unknown
    members a model keeps in ``extra`` flattened back in."""
    if isinstance(v, _Model):
        out: dict[str, Any] = {}
        for f in dataclasses.fields(v):  # type: ignore[arg-type]
            value = getattr(v, f.name)
            if f.name == "meta" or value is None:
                continue
            if f.name == "extra":
                out.update(to_wire(value))
            else:
                out[f.name] = to_wire(value)
        return out
    if isinstance(v, (list, tuple)):
        return [to_wire(x) for x in v]
    if isinstance(v, dict):
        return {k: to_wire(x) for k, x in v.items() if x is not None}
    return v


def op_decode(req: dict[str, Any]) -> Any:
    x = req["exchange"]
    r = x["response"]
    try:
        result = cycles.decode_response(
            x["operation"], r["status"], r["headers"], r["body"].encode("utf-8", "surrogatepass")
        )
    except cycles.CyclesError as e:
        ra = e.retry_after_raw
        return {
            "error": {
                "kind": e.name,
                "status": e.http_status,
                "error_code": e.error_code,
                "request_id": e.request_id,
                "retryable": e.retryable,
                # core's delay of the raw header (None: absent, invalid or overflowing)
                "retry_after_ms": None if ra is None else num_out(timing.retry_after_ms(ra)),
            }
        }
    return {"result": to_wire(result)}


# -- write / drain against a server -----------------------------------------------------------


def check_faithful(v: Any, where: str) -> None:
    found = unfaithful(v, where)
    if found:
        raise Refused(f"python face: {found} (metadata passes through Python's json)")


def _client(req: dict[str, Any], **kw: Any) -> cycles.Client:
    return cycles.Client(
        req["url"],
        req["api_key"],
        tenant=req.get("tenant"),
        journal_dir=req["journal_dir"],
        journal_url=req.get("journal_url"),
        **kw,
    )


def op_write(req: dict[str, Any]) -> Any:
    case = req["case"]
    check_faithful(case.get("metadata"), "metadata")
    check_faithful(case.get("metrics"), "metrics")
    # One settlement attempt (the fewest the configuration allows), no periodic replay: the
    # record must stay pending for another face to drain.
    client = _client(req, settle_max_attempts=1, replay_interval=3600.0)
    try:
        est = case["estimate"]
        with client.reserve(
            cycles.Amount(est["unit"], est["amount"]),
            action=cycles.Action(case["action"]["kind"], case["action"]["name"]),
            subject=case["subject"],
        ) as r:
            r.set_actual(case["actual"])
            if case.get("metrics") is not None:
                r.set_metrics(case["metrics"])
            if case.get("metadata") is not None:
                r.set_metadata(case["metadata"])
    finally:
        client.close(0)
    outcome = r.settlement.status if r.settlement is not None else r.outcome
    return {"reservation_id": r.reservation_id, "outcome": outcome}


def op_drain(req: dict[str, Any]) -> Any:
    # The client's background replay starts with its lifecycle and may settle a record
    # before drain() gets to it; such a record is not in the drain's report, but its
    # settlement events are. Count both, each reservation once.
    settled: set[str] = set()
    quarantined: set[str] = set()

    def on_event(ev: cycles.LifecycleEvent) -> None:
        if ev.kind == "settlement_settled" and ev.reservation_id is not None:
            settled.add(ev.reservation_id)
        elif ev.kind == "journal_quarantined":
            quarantined.add(str(ev.fields.get("file")))

    client = _client(req, on_event=on_event)
    try:
        report = client.drain(req["timeout_ms"] / 1000.0)
    finally:
        client.close(0)  # delivers the last events
    settled.update(o.reservation_id for o in report.outcomes if o.settled)
    quarantined.update(report.quarantined)
    return {
        "settled": len(settled),
        "pending": len(report.remaining),
        "quarantined": len(quarantined),
    }


class _WorkFailed(Exception):
    """The face's own failure of the guarded work (a ``fail`` step): it must come out of the
    guard unchanged."""


def op_guard(req: dict[str, Any]) -> Any:
    """One guarded action of the lifecycle contract (PROTOCOL.md, ``guard``) through the
    public API: the client's tenant and default unit, a bare estimate, and the subject and
    idempotency key only when the case gives them (else the client's defaults)."""
    case = req["case"]
    out: dict[str, Any] = {
        "decision": None,
        "caps": None,
        "steps": [],
        "outcome": None,
        "released": None,
        "charged": None,
        "error": None,
    }
    kw: dict[str, Any] = {}
    if case.get("idempotency_key") is not None:
        kw["idempotency_key"] = case["idempotency_key"]
    if case.get("subject") is not None:
        kw["subject"] = case["subject"]
    client = cycles.Client(
        req["url"],
        req["api_key"],
        tenant=req["tenant"],
        default_unit=req["default_unit"],
        journal_dir=req["journal_dir"],
    )
    results: list[str | None] = []
    handle: cycles.GuardedReservation | None = None
    try:
        with client.reserve(
            num_in(case["estimate"]), action=cycles.Action("llm.completion", "matrix"), **kw
        ) as r:
            handle = r
            out["decision"] = r.decision
            out["caps"] = None if r.caps is None else r.caps.to_json()
            for step in case["steps"]:
                do = step["do"]
                if do == "end":
                    results.append(None)
                    break
                if do == "fail":
                    results.append(None)
                    raise _WorkFailed("the work failed")
                try:
                    if do == "add":
                        r.add(num_in(step["amount"]))
                    elif do == "set_actual":
                        r.set_actual(num_in(step["amount"]))
                    elif do == "release":
                        r.release(step.get("reason"))
                        results.append(None)
                        break  # a successful release ends the action
                    else:
                        raise Refused(f"python face: unknown guard step {do!r}")
                except cycles.CyclesError as e:
                    results.append(e.name)
                    continue
                results.append(None)
    except _WorkFailed:
        out["error"] = "work"
    except cycles.CyclesError as e:
        out["error"] = e.name
    finally:
        client.close(0)
    out["steps"] = results
    if handle is not None:
        out["outcome"] = handle.outcome
        # Settled (and a lapsed heartbeat, settled too) has no `released`.
        if handle.outcome not in ("settled", "heartbeat_lapsed"):
            out["released"] = handle.released
        s = handle.settlement_or_none
        if s is not None and s.charged_or_none is not None:
            out["charged"] = num_out(s.charged_or_none.amount)
    return out


def op_load(req: dict[str, Any]) -> Any:
    """The load run (PROTOCOL.md, ``load``): ``count`` guarded actions at once on one
    ``AsyncClient``, each an asyncio task under its own key, counted by outcome; pending
    settlements stay journaled (closed without a drain) for the orchestrator's drain."""
    return asyncio.run(_load(req))


async def _load(req: dict[str, Any]) -> dict[str, Any]:
    client = cycles.AsyncClient(
        req["url"],
        req["api_key"],
        tenant=req["tenant"],
        default_unit=req["default_unit"],
        journal_dir=req["journal_dir"],
    )
    action = cycles.Action("llm.completion", "load")

    async def one(i: int) -> str:
        try:
            async with client.reserve(
                5, action=action, idempotency_key=f"{req['key_prefix']}-{i}"
            ) as r:
                r.set_actual(3)
        except cycles.CyclesError as e:
            return f"error:{e.name}"
        return str(r.settlement.status)

    try:
        names = await asyncio.gather(*(one(i) for i in range(req["count"])))
    finally:
        await client.aclose(0)
    return {"outcomes": dict(collections.Counter(names))}


# Python's names of the canonical options, and which are durations (ms there, seconds here).
_PY_OPTIONS = {
    "tenant": ("tenant", False),
    "default_unit": ("default_unit", False),
    "request_timeout_ms": ("request_timeout", True),
    "connect_timeout_ms": ("connect_timeout", True),
    "max_concurrent_requests": ("max_concurrent_requests", False),
    "settle_max_attempts": ("settle_max_attempts", False),
    "replay_interval_ms": ("replay_interval", True),
    "journal_enabled": ("journal_enabled", False),
}


def op_client(req: dict[str, Any]) -> Any:
    """The options table of the lifecycle contract (PROTOCOL.md, ``client``): a client of the
    options through ``cycles.Client``'s keywords (seconds for durations), then one guarded
    action (bare 5, actual 3) under the case's key; the error name raised, else null."""
    kw: dict[str, Any] = {}
    for name, value in req["options"].items():
        py, seconds = _PY_OPTIONS[name]
        kw[py] = value / 1000 if seconds else value
    try:
        client = cycles.Client(req["url"], req["api_key"], journal_dir=req["journal_dir"], **kw)
    except cycles.CyclesError as e:
        return {"error": e.name}
    try:
        with client.reserve(
            5, action=cycles.Action("llm.completion", "matrix"), idempotency_key=req["key"]
        ) as r:
            r.set_actual(3)
    except cycles.CyclesError as e:
        return {"error": e.name}
    finally:
        client.close(0)
    return {"error": None}


# The events a journal failure must show, as the orchestrator compares them.
_DISK_EVENTS = ("journal_io_failed", "settlement_pending", "settlement_settled")


def op_journal_fail(req: dict[str, Any]) -> Any:
    """A journal that cannot be written (PROTOCOL.md, ``journal_fail``): one guarded action
    (bare 5, actual 3, the case's key) whose first commit fails, then ``flush()``; the
    settlement's typed fields, the flush's unjournaled count and this reservation's events."""
    seen: list[cycles.LifecycleEvent] = []
    client = cycles.Client(
        req["url"],
        req["api_key"],
        tenant=req["tenant"],
        default_unit=req["default_unit"],
        journal_dir=req["journal_dir"],
        settle_max_attempts=1,
        replay_interval=3600.0,
        on_event=seen.append,
    )
    try:
        with client.reserve(
            5, action=cycles.Action("llm.completion", "matrix"), idempotency_key=req["key"]
        ) as r:
            r.set_actual(3)
        report = client.flush()
    finally:
        client.close(0)  # delivers the last events
    s = r.settlement
    events = [
        {
            "kind": e.kind,
            "level": e.level,
            "operation": e.fields.get("operation"),
            "journaled": e.fields.get("journaled"),
        }
        for e in seen
        if e.reservation_id == r.reservation_id and e.kind in _DISK_EVENTS
    ]
    return {
        "status": s.status,
        "journaled": s.journaled,
        "journal_error": s.journal_error,
        "flush_unjournaled": len(report.unjournaled),
        "events": events,
    }


# -- transport --------------------------------------------------------------------------------

OPS: dict[str, Op] = {
    "timing": op_timing,
    "pricing": op_pricing,
    "primary": op_primary,
    "fallback": op_fallback,
    "journal_names": op_journal_names,
    "fingerprint": op_fingerprint,
    "parse_record": op_parse_record,
    "decode": op_decode,
    "write": op_write,
    "drain": op_drain,
    "guard": op_guard,
    "client": op_client,
    "work": op_work,
    "journal_fail": op_journal_fail,
    "load": op_load,
}


def main() -> None:
    serve("python", OPS, lambda e: e.name if isinstance(e, cycles.CyclesError) else None)


if __name__ == "__main__":
    main()
