"""Each error class over real HTTP (or a real closed port), sync and async, with its
attributes: code, name, http_status, error_code, request_id, trace_id, retryable."""

from __future__ import annotations

import json
import logging
import pickle
import time
from pathlib import Path

import pytest
from conftest import ACTION, Api, usd

import cycles
from cycles import errors
from cycles.testing import LocalServer


def reserve(api, key: str = "k", amount: int = 1000, **kw):
    return api.create_reservation(idempotency_key=key, action=ACTION, estimate=usd(amount), **kw)


def assert_http(e: cycles.CyclesError, status: int, *, retryable: bool) -> None:
    assert e.http_status == status
    assert e.request_id and e.trace_id, "correlation ids come with every server error"
    assert e.retryable is retryable
    assert isinstance(e, cycles.HttpError)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_connect_refused(mode, unused_port) -> None:
    url = f"http://127.0.0.1:{unused_port}"
    client = cycles.Client(url, "k") if mode == "sync" else cycles.AsyncClient(url, "k")
    with pytest.raises(cycles.TransportConnectError) as e:
        reserve(Api(client), subject={"tenant": "acme"})
    err = e.value
    assert isinstance(err, cycles.TransportError) and isinstance(err, cycles.CyclesError)
    assert (err.code, err.name, err.retryable) == (10, "TRANSPORT_CONNECT", True)
    assert err.http_status is None and err.request_id is None
    client.close()


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_timeout_via_delay_fault(mode, server) -> None:
    server.add_fault("createReservation", {"kind": "delay", "ms": 1500})
    kw = {"request_timeout": 0.3}
    client = server.client(**kw) if mode == "sync" else server.async_client(**kw)
    with pytest.raises(cycles.TransportTimeoutError) as e:
        reserve(Api(client))
    assert (e.value.code, e.value.name, e.value.retryable) == (11, "TRANSPORT_TIMEOUT", True)
    client.close()


def test_reset(api, server) -> None:
    server.add_fault("createReservation", {"kind": "connection_reset"})
    with pytest.raises(cycles.TransportResetError) as e:
        reserve(api)
    assert (e.value.code, e.value.name, e.value.retryable) == (12, "TRANSPORT_RESET", True)
    # A lost response after apply is a reset too; the same-key retry replays it.
    server.add_fault("createReservation", {"kind": "drop_response_after_apply"})
    with pytest.raises(cycles.TransportResetError):
        reserve(api, "k-lost")
    assert reserve(api, "k-lost").reservation_id
    assert [e.kind for e in server.ledger()] == ["reserve"]


def test_rate_limited_with_retry_after(api, server) -> None:
    server.add_fault("decide", {"kind": "rate_limited", "retry_after": "7"})
    with pytest.raises(cycles.RateLimitedError) as e:
        api.decide(idempotency_key="k", action=ACTION, estimate=usd(1))
    err = e.value
    assert_http(err, 429, retryable=True)
    assert (err.code, err.name, err.error_code) == (20, "RATE_LIMITED", "LIMIT_EXCEEDED")
    assert err.retry_after == 7 and err.retry_after_raw == "7"
    server.add_fault(
        "decide", {"kind": "rate_limited", "retry_after": "Wed, 21 Oct 2015 07:28:00 GMT"}
    )
    with pytest.raises(cycles.RateLimitedError) as e:
        api.decide(idempotency_key="k", action=ACTION, estimate=usd(1))
    assert e.value.retry_after is None
    assert e.value.retry_after_raw == "Wed, 21 Oct 2015 07:28:00 GMT"


def test_server_error(api, server) -> None:
    server.add_fault("createReservation", {"kind": "server_error", "status": 503})
    with pytest.raises(cycles.ServerError) as e:
        reserve(api)
    assert_http(e.value, 503, retryable=True)
    assert (e.value.code, e.value.name, e.value.error_code) == (
        21,
        "SERVER_ERROR",
        "INTERNAL_ERROR",
    )
    assert server.ledger() == []


@pytest.mark.parametrize(
    "shape", ["missing_required_field", "wrong_status_code", "not_json", "wrong_field_type"]
)
def test_ambiguous_success(api, server, shape) -> None:
    server.add_fault("createReservation", {"kind": "malformed_success", "shape": shape})
    with pytest.raises(cycles.AmbiguousSuccessError) as e:
        reserve(api)
    err = e.value
    assert (err.code, err.name, err.retryable) == (22, "AMBIGUOUS_SUCCESS", True)
    assert err.http_status is not None and 200 <= err.http_status < 300
    assert [x.kind for x in server.ledger()] == ["reserve"], "applied, then answered badly"


@pytest.mark.parametrize("shape", ["missing_required_field", "not_json", "wrong_field_type"])
def test_invalid_response_on_reads_is_not_retryable(api, server, shape) -> None:
    """A read's schema-invalid 2xx has nothing to be ambiguous about: INVALID_RESPONSE, not
    retryable (an app retrying retryable errors would otherwise loop on it forever)."""
    rid = reserve(api, "k-read").reservation_id
    reads = {
        "getReservation": lambda: api.get_reservation(rid),
        "listReservations": lambda: api.list_reservations(),
        "getBalances": lambda: api.get_balances(tenant="acme"),
        "decide": lambda: api.decide(idempotency_key="d", action=ACTION, estimate=usd(1)),
        "getEvidenceJwks": lambda: api.get_evidence_jwks(),
    }
    for operation, call in reads.items():
        server.add_fault(operation, {"kind": "malformed_success", "shape": shape})
        with pytest.raises(cycles.InvalidResponseError) as e:
            call()
        err = e.value
        assert isinstance(err, cycles.HttpError) and not isinstance(
            err, cycles.AmbiguousSuccessError
        )
        assert (err.code, err.name, err.retryable) == (24, "INVALID_RESPONSE", False), operation
        assert err.http_status is not None and 200 <= err.http_status < 300
        assert err.request_id
    assert api.get_reservation(rid).reservation_id == rid, "faults used up: reads succeed"


def test_unauthorized_401(server) -> None:
    for client in (server.client(api_key="wrong"), server.async_client(api_key="wrong")):
        with pytest.raises(cycles.UnauthorizedError) as e:
            reserve(Api(client))
        assert_http(e.value, 401, retryable=False)
        assert (e.value.code, e.value.error_code) == (101, "UNAUTHORIZED")
        client.close()


def test_forbidden_403(api) -> None:
    with pytest.raises(cycles.ForbiddenError) as e:
        reserve(api, subject={"tenant": "globex"})
    assert_http(e.value, 403, retryable=False)
    assert (e.value.code, e.value.error_code) == (102, "FORBIDDEN")


def test_not_found_404(api) -> None:
    with pytest.raises(cycles.NotFoundError) as e:
        api.get_reservation("rsv_does_not_exist")
    assert_http(e.value, 404, retryable=False)
    assert (e.value.code, e.value.name) == (103, "NOT_FOUND")


def test_conflicts_409(api) -> None:
    with pytest.raises(cycles.BudgetExceededError) as e:
        reserve(api, "k-big", amount=10**15)
    assert_http(e.value, 409, retryable=False)
    assert (e.value.code, e.value.error_code) == (104, "BUDGET_EXCEEDED")

    rid = reserve(api, "k-1").reservation_id
    api.commit_reservation(rid, idempotency_key="c-1", actual=usd(10))
    with pytest.raises(cycles.ReservationFinalizedError) as fin:
        api.commit_reservation(rid, idempotency_key="c-2", actual=usd(10))
    assert (fin.value.code, fin.value.http_status) == (108, 409)

    with pytest.raises(cycles.IdempotencyMismatchError) as mismatch:
        reserve(api, "k-1", amount=999)
    assert (mismatch.value.code, mismatch.value.http_status) == (109, 409)


def test_max_extensions_409() -> None:
    from cycles.testing import LocalServer

    with LocalServer(regime={"max_extensions": 1}) as s, s.client() as c:
        rid = reserve(c, "k").reservation_id
        c.extend_reservation(rid, idempotency_key="x1", extend_by_ms=1000)
        with pytest.raises(cycles.MaxExtensionsExceededError) as e:
            c.extend_reservation(rid, idempotency_key="x2", extend_by_ms=1000)
        assert (e.value.code, e.value.http_status) == (113, 409)


def test_expired_410(api, server) -> None:
    rid = reserve(api, "k-exp", ttl_ms=1000).reservation_id
    server.advance_clock(120_000)
    with pytest.raises(cycles.ReservationExpiredError) as e:
        api.commit_reservation(rid, idempotency_key="c", actual=usd(1))
    assert_http(e.value, 410, retryable=False)
    assert (e.value.code, e.value.error_code) == (107, "RESERVATION_EXPIRED")


def test_tenant_closed(api, server) -> None:
    server.set_tenant_closed("acme", True)
    with pytest.raises(cycles.TenantClosedError) as e:
        reserve(api)
    assert (e.value.code, e.value.http_status) == (115, 409)


def test_invalid_request_400_with_unknown_unit(api) -> None:
    # The unknown unit travels unchanged to the server, which rejects it (the local server
    # knows only the spec's units): the client itself never refuses an open enum value.
    with pytest.raises(cycles.InvalidRequestError) as e:
        api.create_reservation(
            idempotency_key="k", action=ACTION, estimate=cycles.Amount("GPU_SECONDS", 5)
        )
    assert_http(e.value, 400, retryable=False)
    assert (e.value.code, e.value.error_code) == (100, "INVALID_REQUEST")
    assert "unit" in e.value.message


def test_unknown_server_code_and_details(api, server) -> None:
    server.add_fault("decide", {"kind": "error", "status": 409, "code": "ACTION_QUOTA_EXCEEDED"})
    with pytest.raises(cycles.UnknownErrorCodeError) as e:
        api.decide(idempotency_key="k", action=ACTION, estimate=usd(1))
    assert (e.value.code, e.value.name) == (199, "UNKNOWN_ERROR_CODE")
    assert e.value.error_code == "ACTION_QUOTA_EXCEEDED" and e.value.http_status == 409
    server.add_fault("decide", {"kind": "error", "status": 429, "code": "LIMIT_EXCEEDED"})
    with pytest.raises(cycles.RateLimitedError):
        api.decide(idempotency_key="k", action=ACTION, estimate=usd(1))


def test_unit_mismatch_details(api, server) -> None:
    with pytest.raises(cycles.CyclesError) as e:
        api.create_reservation(
            idempotency_key="k", action=ACTION, estimate=cycles.Amount("TOKENS", 5)
        )
    # No TOKENS budget at any scope: the server says NOT_FOUND or UNIT_MISMATCH (with details).
    assert isinstance(e.value, (cycles.NotFoundError, cycles.UnitMismatchError))
    if isinstance(e.value, cycles.UnitMismatchError):
        assert e.value.details


def test_invalid_argument_is_a_value_error(api) -> None:
    with pytest.raises(ValueError):
        api.get_reservation("..")
    with pytest.raises(cycles.InvalidArgumentError) as e:
        api.create_reservation(idempotency_key="k", action=ACTION, estimate=object())
    assert e.value.code == 2


def test_hierarchy_is_complete_and_picklable() -> None:
    names = [n for n in errors.__all__ if n != "error_class"]
    for name in names:
        cls = getattr(cycles, name)
        assert issubclass(cls, cycles.CyclesError)
    e = errors._from_native(
        code=20, name="RATE_LIMITED", message="slow", http_status=429,
        error_code="LIMIT_EXCEEDED", request_id="r", trace_id="t", retryable=True,
        retry_after_raw="3", retry_after_seconds=3, details_json='{"a": 1}',
        cycles_evidence={"evidence_id": "e1", "cycles_evidence_url": "http://h/e1"}, variant=None,
    )  # fmt: skip
    assert type(e) is cycles.RateLimitedError and e.details == {"a": 1}
    assert e.cycles_evidence == cycles.EvidenceRef("e1", "http://h/e1")
    back = pickle.loads(pickle.dumps(e))
    assert type(back) is cycles.RateLimitedError and back.retry_after == 3
    assert back.cycles_evidence == e.cycles_evidence
    assert back.request_id == "r" and str(back) == str(e)
    assert errors.error_class("SOMETHING_NEW") is cycles.CyclesError
    assert cycles.TransportTimeoutError("x").code == 11
    # Every kind of the core's table has its own named class (a new core kind without one
    # would silently become a bare CyclesError).
    from cycles import _native

    exported = [getattr(cycles, n) for n in cycles.__all__]
    named = {
        c._default_name: c
        for c in exported
        if isinstance(c, type) and issubclass(c, cycles.CyclesError)
    }
    for name, code in _native.ERROR_CODES:
        assert name in named, f"core kind {name} ({code}) has no exported class"
        assert named[name]._default_code == code, name
    assert cycles.InvalidResponseError("x").code == 24
    # Every variant of the bridge's table has its own exported class under its kind's, with
    # the kind's name and code (a new variant without one would become its kind's class).
    for variant, kind, code in _native.ERROR_VARIANTS:
        cls = errors._BY_VARIANT[variant]
        assert cls in exported and issubclass(cls, errors.error_class(kind)), variant
        assert (cls._default_name, cls._default_code) == (kind, code), variant
    assert [v for v, _, _ in _native.ERROR_VARIANTS] == ["closed", "call_not_sent"]
    assert cycles.CallNotSentError("x").code == 104
    assert issubclass(cycles.CallNotSentError, cycles.BudgetExceededError)


def test_panics_become_internal_errors() -> None:
    import asyncio

    from cycles import _native

    with pytest.raises(cycles.InternalError) as e:
        _native._debug_panic(True)
    assert (e.value.code, e.value.name) == (4, "INTERNAL")
    assert "deliberate test panic" in e.value.message

    async def run() -> None:
        await _native._debug_panic(False)

    with pytest.raises(cycles.InternalError):
        asyncio.run(run())


# -- a server that echoes the API key ---------------------------------------------------------

SECRET = "cyc_live_S3cr3t/Key+Never~Echo_0123456789"
REDACTED = "[REDACTED]"


def echoing_server() -> LocalServer:
    """A local server whose tenant ``acme`` authenticates with ``SECRET``; its
    ``echo_api_key`` fault sends the received key back in the error body."""
    return LocalServer({"tenants": [{"id": "acme", "api_keys": [SECRET]}]})


def everything_shown(e: cycles.CyclesError) -> str:
    back = pickle.loads(pickle.dumps(e))
    return " ".join(
        [str(e), repr(e), e.message, str(e.error_code), json.dumps(e.details), str(back)]
    )


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_an_echoed_api_key_never_reaches_an_exception(mode) -> None:
    with echoing_server() as server:
        client = server.client() if mode == "sync" else server.async_client()
        api = Api(client)
        rid = reserve(api).reservation_id
        echo = {"kind": "echo_api_key"}
        server.add_fault("getBalances", {**echo, "status": 401, "code": "UNAUTHORIZED"})
        server.add_fault("commitReservation", {**echo, "status": 409, "code": "NO_{api_key}"})
        server.add_fault("extendReservation", {**echo, "status": 503, "code": "INTERNAL_ERROR"})
        with pytest.raises(cycles.UnauthorizedError) as unauthorized:
            api.get_balances(tenant="acme")
        with pytest.raises(cycles.CyclesError) as unknown:
            api.commit_reservation(rid, idempotency_key="c", actual=usd(1))
        with pytest.raises(cycles.ServerError) as server_error:
            api.extend_reservation(rid, idempotency_key="x", extend_by_ms=1000)
        client.close()
    assert unknown.value.name == "UNKNOWN_ERROR_CODE"
    assert unknown.value.error_code == f"NO_{REDACTED}"
    for info in (unauthorized, unknown, server_error):
        e = info.value
        assert SECRET not in everything_shown(e), everything_shown(e)
        # Redacted, not dropped: the rest of what the server said is still there.
        assert e.message == f"API key '{REDACTED}' is not accepted here"
        assert e.details is not None and e.details["received_api_key"] == REDACTED
        assert REDACTED in e.details


def test_an_echoed_api_key_never_reaches_events_or_the_cycles_logger(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="cycles")
    got: list[cycles.LifecycleEvent] = []
    with echoing_server() as server:
        # One failed beat (retried, then extended) and every commit attempt echoing the key.
        server.add_fault(
            "extendReservation", {"kind": "echo_api_key", "status": 503, "code": "INTERNAL_ERROR"}
        )
        server.add_fault(
            "commitReservation",
            {"kind": "echo_api_key", "status": 409, "code": "RESERVATION_FINALIZED"},
            times=0,
        )
        with server.client(
            journal_dir=tmp_path, request_timeout=0.5, on_event=got.append, settle_max_attempts=2
        ) as client:
            with client.reserve(100, action=ACTION, ttl_ms=2_000) as r:
                deadline = time.monotonic() + 3.0
                while (
                    not any(e.kind == "heartbeat_failed" for e in got)
                    and time.monotonic() < deadline
                ):
                    time.sleep(0.05)
                r.set_actual(40)
    failed = [e for e in got if e.kind == "heartbeat_failed"]
    assert failed and failed[0].error_kind == "SERVER_ERROR", got
    assert REDACTED in failed[0].message
    settlement = r.settlement
    assert settlement is not None and settlement.status == "rejected", settlement
    assert settlement.error_code == "RESERVATION_FINALIZED"
    rejected = [e for e in got if e.kind == "settlement_attempt_failed"]
    assert rejected and REDACTED in rejected[0].message
    shown = " ".join(repr(e) + str(e.fields) + e.message for e in got) + repr(settlement)
    assert SECRET not in shown, shown
    logged = [x for x in caplog.records if x.name == "cycles"]
    kinds = {getattr(x, "event_kind", None) for x in logged}
    assert {"heartbeat_failed", "settlement_attempt_failed"} <= kinds, kinds
    text = " ".join(x.getMessage() + repr(x.__dict__) for x in logged)
    assert SECRET not in text, text
    journal = " ".join(p.read_text() for p in tmp_path.rglob("*") if p.is_file())
    assert SECRET not in journal
