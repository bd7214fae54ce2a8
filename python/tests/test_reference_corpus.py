"""The captured reference-server corpus (217 exchanges, ``shared/fixtures/reference-server``)
through the installed wheel: :func:`cycles.decode_response` is the client's own response path
(core's ``decode_response``). Every 2xx decodes to what the server meant, every error raises
the right class with all its attributes. A missing corpus FAILS, naming the path."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from conftest import reference_corpus_path

import cycles
from cycles import errors
from cycles.decode import RESULT_TYPES

EXPECTED_EXCHANGES = 217


def load(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        pytest.fail(
            f"the reference-server corpus is missing: {path} does not exist. It lives in the "
            "shared folder next to this repository (shared/fixtures/reference-server/"
            "exchanges.jsonl); set CYCLES_REFERENCE_CORPUS to its path.",
            pytrace=False,
        )
    lines = path.read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


@pytest.fixture(scope="module")
def corpus() -> list[dict[str, Any]]:
    return load(reference_corpus_path())


def without_nulls(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: without_nulls(x) for k, x in v.items() if x is not None}
    if isinstance(v, list):
        return [without_nulls(x) for x in v]
    return v


def to_wire(v: Any) -> Any:
    """A result object back to wire JSON: ``None`` omitted, ``meta`` dropped, ``extra``
    members (kept verbatim by the models that allow them) flattened back in."""
    if isinstance(v, cycles.models._Model):
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
    if isinstance(v, list):
        return [to_wire(x) for x in v]
    if isinstance(v, dict):
        return {k: to_wire(x) for k, x in v.items() if x is not None}
    return v


def header(x: dict[str, Any], name: str) -> str | None:
    for k, v in x["response"]["headers"].items():
        if k.lower() == name.lower():
            return str(v)
    return None


def decode(x: dict[str, Any]) -> Any:
    r = x["response"]
    return cycles.decode_response(
        x["operation"], r["status"], r["headers"], r["body"].encode("utf-8")
    )


def expected_class(x: dict[str, Any], body: dict[str, Any] | None) -> type[cycles.CyclesError]:
    status = x["response"]["status"]
    if status == 429:
        return cycles.RateLimitedError
    if status >= 500:
        return cycles.ServerError
    if body is not None and "error" in body:
        return errors.error_class(body["error"])
    assert status == 400, x["name"]
    return cycles.InvalidRequestError


def check_error(x: dict[str, Any]) -> cycles.CyclesError:
    r = x["response"]
    with pytest.raises(cycles.CyclesError) as info:
        decode(x)
    e = info.value
    try:
        parsed = json.loads(r["body"])
        body = parsed if isinstance(parsed, dict) else None
    except ValueError:
        body = None
    name = x["name"]
    assert type(e) is expected_class(x, body), (name, e)
    assert e.http_status == r["status"], name
    assert e.error_code == (body or {}).get("error"), name
    if body is not None and "message" in body:
        assert e.message == body["message"], name
    else:
        assert "non-JSON" in e.message, name
    assert e.request_id == header(x, "X-Request-Id"), name
    assert e.trace_id == header(x, "X-Cycles-Trace-Id"), name
    if body is not None:
        assert e.request_id == body.get("request_id") and e.trace_id == body.get("trace_id")
    assert e.details == (body or {}).get("details"), name
    ev = (body or {}).get("cycles_evidence")
    want = None if ev is None else cycles.EvidenceRef(ev["evidence_id"], ev["cycles_evidence_url"])
    assert e.cycles_evidence == want, name
    ra = header(x, "Retry-After")
    assert e.retry_after_raw == ra, name
    assert e.retry_after == (int(ra) if ra is not None else None), name
    assert e.retryable is (r["status"] == 429 or r["status"] >= 500), name
    return e


def check_success(x: dict[str, Any]) -> Any:
    r = x["response"]
    result = decode(x)
    name = x["name"]
    assert isinstance(result, RESULT_TYPES[x["operation"]]), name
    meta = getattr(result, "meta", None)
    if meta is not None:
        assert meta.status == r["status"], name
        assert meta.request_id == header(x, "X-Request-Id"), name
        assert meta.trace_id == header(x, "X-Cycles-Trace-Id"), name
    assert to_wire(result) == without_nulls(json.loads(r["body"])), name
    return result


def test_every_exchange_decodes_like_the_client(corpus) -> None:
    assert len(corpus) == EXPECTED_EXCHANGES
    ok: dict[str, Any] = {}
    failed: dict[str, cycles.CyclesError] = {}
    for x in corpus:
        if 200 <= x["response"]["status"] < 300:
            ok[x["name"]] = check_success(x)
        else:
            failed[x["name"]] = check_error(x)
    assert len(ok) + len(failed) == EXPECTED_EXCHANGES, "every exchange visited once"
    assert len(ok) == 109
    assert {x["operation"] for x in corpus} - {None} == set(RESULT_TYPES)
    assert sum(1 for x in corpus if x["operation"] is None) == 6

    # What the server meant, on the cases its README calls out.
    r = ok["get.active_minimal"]
    assert r.subject.tenant == "acme" and r.subject.workspace is None
    assert r.subject.dimensions is None and r.action.tags is None
    r = ok["get.tenantless_subject"]
    assert r.subject.tenant is None and r.subject.workspace == "shared"
    page = ok["list.page_1"]
    assert page.has_more is True and page.next_cursor
    page = ok["list.page_3"]
    assert page.next_cursor is None and page.has_more is False
    row = page.reservations[0]
    assert (row.subject.workspace, row.subject.agent, row.subject.app) == ("paging", "a2", None)
    assert row.reserved.amount == 104
    b = ok["balances.workspace"]
    assert b.next_cursor is None
    assert b.balances[0].remaining.amount == -3010 and b.balances[0].debt.amount == 3010
    assert ok["balances.page_4"].balances[1].is_over_limit is True
    assert ok["create.replay_of_expired"].remaining_ttl_ms == 0
    assert ok["commit.success_under_estimate"].released is not None
    assert ok["evidence_on.jwks"].keys

    for name, reason in [
        ("auth.missing_key_create", "Missing API key"),
        ("auth.wrong_key_create", "KEY_NOT_FOUND"),
        ("tenant_suspended.create", "TENANT_SUSPENDED"),
        ("tenant_closed.decide", "TENANT_CLOSED"),
    ]:
        assert type(failed[name]) is cycles.UnauthorizedError and failed[name].message == reason
    assert failed["evidence_on.rate_limited"].retry_after == 14
    html = failed["get.encoded_slash"]
    assert type(html) is cycles.InvalidRequestError and html.request_id is None
    assert type(failed["routing.unknown_path"]) is cycles.ServerError
    assert type(failed["routing.unknown_path_no_key"]) is cycles.UnauthorizedError
    assert "requested_unit" in (failed["create.unit_mismatch"].details or {})
    assert type(failed["get.expired"]) is cycles.ReservationExpiredError
    denied = failed["evidence_on.create_denied"]
    assert type(denied) is cycles.BudgetExceededError and denied.cycles_evidence is not None


def test_a_missing_corpus_fails_naming_the_path(tmp_path) -> None:
    missing = tmp_path / "nowhere" / "exchanges.jsonl"
    with pytest.raises(pytest.fail.Exception) as info:
        load(missing)
    assert str(missing) in str(info.value) and "CYCLES_REFERENCE_CORPUS" in str(info.value)


def test_decode_response_rejects_what_it_cannot_decode() -> None:
    with pytest.raises(cycles.InvalidArgumentError):
        cycles.decode_response("GetReservation", 200, {}, b"{}")
    with pytest.raises(cycles.InvalidArgumentError):
        cycles.decode_response(None, 200, {}, b"{}")
    with pytest.raises(cycles.InvalidResponseError):
        cycles.decode_response("getReservation", 200, [("X-Request-Id", "r")], b"{}")
    with pytest.raises(cycles.AmbiguousSuccessError):
        cycles.decode_response("commitReservation", 200, [], b"{}")
