"""Every runtime operation over real HTTP against the local server, sync and async (the
``api`` fixture runs each test once with Client and once with AsyncClient)."""

from __future__ import annotations

import asyncio
import itertools
import re

import pytest
from conftest import ACTION, SERVER_MODE, USD, usd

import cycles
from cycles.testing import LocalServer


def reserve(api, key: str, amount: int = 1000, **kw):
    return api.create_reservation(idempotency_key=key, action=ACTION, estimate=usd(amount), **kw)


def test_create_commit_round_trip(api, server) -> None:
    created = reserve(api, "k-create", ttl_ms=30_000, metadata={"run": "42", "n": 2**60})
    assert isinstance(created, cycles.ReservationCreated)
    assert created.decision == cycles.Decision.ALLOW
    assert created.reservation_id
    if SERVER_MODE == "spec":  # the reference dialect's ids are bare UUIDs
        assert created.reservation_id.startswith("rsv_")
    assert created.reserved == usd(1000)
    assert created.remaining_ttl_ms == 30_000
    assert created.affected_scopes == ["tenant:acme"]
    assert created.balances and isinstance(created.balances[0], cycles.Balance)
    assert created.meta is not None and created.meta.status == 200
    assert created.meta.request_id and created.meta.trace_id
    assert created.meta.rtt_ms >= 0

    committed = api.commit_reservation(
        created.reservation_id,
        idempotency_key="k-commit",
        actual={"unit": USD, "amount": 700},
        metrics=cycles.StandardMetrics(tokens_input=10, tokens_output=20),
        metadata={"done": True},
    )
    assert isinstance(committed, cycles.CommitResult)
    assert committed.status == cycles.ReservationStatus.COMMITTED
    assert committed.charged == usd(700)
    assert committed.released == usd(300)
    assert committed.cycles_evidence is not None

    # A same-key retry replays; the ledger shows one reserve and one commit.
    again = api.commit_reservation(
        created.reservation_id,
        idempotency_key="k-commit",
        actual=usd(700),
        metrics={"tokens_input": 10, "tokens_output": 20},
        metadata={"done": True},
    )
    assert again.charged == usd(700)
    assert [e.kind for e in server.ledger()] == ["reserve", "commit"]
    assert [r.replay for r in server.requests()][-1] is True


def test_release_extend_get_list(api, server) -> None:
    created = reserve(api, "k-r", ttl_ms=20_000)
    rid = created.reservation_id
    extended = api.extend_reservation(rid, idempotency_key="k-x", extend_by_ms=10_000)
    assert isinstance(extended, cycles.ExtendResult)
    assert extended.status == "ACTIVE"
    assert extended.expires_at_ms == created.expires_at_ms + 10_000
    assert extended.remaining_ttl_ms is not None and extended.remaining_ttl_ms > 20_000

    got = api.get_reservation(rid)
    assert isinstance(got, cycles.Reservation)
    assert got.reservation_id == rid and got.status == "ACTIVE"
    assert got.subject == cycles.Subject(tenant="acme")
    assert got.action == ACTION
    assert got.meta is not None and got.meta.status == 200

    page = api.list_reservations(tenant="acme", status="ACTIVE", limit=10)
    assert isinstance(page, cycles.ReservationPage)
    assert [r.reservation_id for r in page.reservations] == [rid]
    by_key = api.list_reservations(idempotency_key="k-r")
    assert [r.reservation_id for r in by_key.reservations] == [rid]

    released = api.release_reservation(rid, idempotency_key="k-rel", reason="not needed")
    assert isinstance(released, cycles.ReleaseResult)
    assert released.status == "RELEASED" and released.released == usd(1000)
    assert [e.kind for e in server.ledger()] == ["reserve", "extend", "release"]


def test_include_projects_the_listed_rows_optional_members(api) -> None:
    reserve(api, "k-inc", metadata={"run": "7"})
    (plain,) = api.list_reservations(idempotency_key="k-inc").reservations
    assert plain.metadata is None
    page = api.list_reservations(idempotency_key="k-inc", include=[cycles.ListInclude.METADATA])
    (row,) = page.reservations
    assert row.metadata == {"run": "7"}
    assert cycles.ListInclude.METADATA == "metadata"
    assert cycles.ListInclude.COMMITTED_METADATA == "committed_metadata"
    assert cycles.ListInclude.EVIDENCE == "evidence"


def test_list_all_follows_cursors(api) -> None:
    ids = {reserve(api, f"k-page-{i}").reservation_id for i in range(5)}
    rows = api.list_all_reservations(tenant="acme", limit=2)
    assert {r.reservation_id for r in rows} == ids
    assert all(isinstance(r, cycles.Reservation) for r in rows)
    first = api.list_reservations(tenant="acme", limit=2, sort_by="created_at_ms", sort_dir="asc")
    assert len(first.reservations) == 2 and first.next_cursor
    second = api.list_reservations(
        tenant="acme", limit=2, sort_by="created_at_ms", sort_dir="asc", cursor=first.next_cursor
    )
    assert not {r.reservation_id for r in first.reservations} & {
        r.reservation_id for r in second.reservations
    }


def test_list_and_list_all_take_the_window_filters(api) -> None:
    rid = reserve(api, "k-window").reservation_id
    epoch = "1970-01-01T00:00:00Z"
    rows = api.list_all_reservations(tenant="acme", from_=epoch, expires_from=epoch)
    assert [r.reservation_id for r in rows] == [rid]
    assert api.list_all_reservations(tenant="acme", to=epoch) == []
    page = api.list_reservations(tenant="acme", from_=epoch)
    assert [r.reservation_id for r in page.reservations] == [rid]
    assert api.list_reservations(tenant="acme", expires_to=epoch).reservations == []


def test_decide_event_balances(api, server) -> None:
    d = api.decide(idempotency_key="k-d", action=ACTION, estimate=usd(10))
    assert isinstance(d, cycles.DecisionResult) and d.decision == "ALLOW"
    denied = api.decide(idempotency_key="k-d2", action=ACTION, estimate=usd(10**15))
    assert denied.decision == cycles.Decision.DENY
    assert denied.reason_code == cycles.ReasonCode.BUDGET_EXCEEDED == "BUDGET_EXCEEDED"

    ev = api.create_event(
        idempotency_key="k-e",
        action=ACTION,
        actual=usd(250),
        subject=cycles.Subject(tenant="acme", agent="summarizer"),
        metrics={"latency_ms": 5},
        client_time_ms=1,
    )
    assert isinstance(ev, cycles.EventResult)
    assert ev.status == "APPLIED" and ev.event_id
    if SERVER_MODE == "spec":
        assert ev.event_id.startswith("evt_")
    assert ev.meta is not None and ev.meta.status == 201

    bal = api.get_balances(tenant="acme")
    assert isinstance(bal, cycles.BalancesResult)
    (b,) = bal.balances
    assert b.scope == "tenant:acme" and b.spent == usd(250)
    assert isinstance(b.remaining, cycles.SignedAmount)
    assert [e.kind for e in server.ledger()] == ["event"]


def test_dry_run_and_evidence(api) -> None:
    dry = reserve(api, "k-dry", dry_run=True)
    assert dry.decision == "ALLOW" and dry.reservation_id is None

    live = reserve(api, "k-ev")
    assert live.cycles_evidence is not None
    env = api.get_evidence(live.cycles_evidence.evidence_id)
    assert isinstance(env, cycles.EvidenceEnvelope)
    assert env.evidence_id == live.cycles_evidence.evidence_id
    assert env.artifact_type and env.signature and isinstance(env.payload, dict)
    jwks = api.get_evidence_jwks()
    assert isinstance(jwks, cycles.EvidenceJwks)
    assert jwks.keys and isinstance(jwks.keys[0], cycles.EvidenceJwk)
    assert jwks.keys[0].crv == "Ed25519"


def test_a_denial_error_carries_its_evidence(api) -> None:
    with pytest.raises(cycles.BudgetExceededError) as e:
        reserve(api, "k-denied", amount=10**15)
    ref = e.value.cycles_evidence
    assert isinstance(ref, cycles.EvidenceRef), ref
    assert re.fullmatch("[0-9a-f]{64}", ref.evidence_id), ref.evidence_id
    assert ref.cycles_evidence_url.endswith("/" + ref.evidence_id), ref.cycles_evidence_url
    # The reference is the server's: it serves the signed envelope of the denial.
    env = api.get_evidence(ref.evidence_id)
    assert (env.evidence_id, env.artifact_type) == (ref.evidence_id, "error")


def test_an_error_without_evidence_has_none(api) -> None:
    with pytest.raises(cycles.NotFoundError) as e:
        api.get_evidence("0" * 64)
    assert e.value.http_status == 404
    assert e.value.cycles_evidence is None


def test_subject_defaults_to_client_tenant(server) -> None:
    with cycles.Client(server.url, server.api_key) as no_tenant:
        with pytest.raises(cycles.InvalidArgumentError):
            reserve(no_tenant, "k-nt")
    with server.client(tenant="acme") as c:
        assert reserve(c, "k-t").decision == "ALLOW"


async def test_async_calls_run_concurrently(server: LocalServer) -> None:
    server.add_fault("decide", {"kind": "delay", "ms": 300}, times=0)
    async with server.async_client() as client:
        loop = asyncio.get_running_loop()
        start = loop.time()
        results = await asyncio.gather(
            *(client.decide(idempotency_key=f"k-c{i}", action=ACTION, estimate=usd(1))
              for i in range(8))
        )  # fmt: skip
        elapsed = loop.time() - start
    assert all(r.decision == "ALLOW" for r in results)
    assert elapsed < 8 * 0.3 / 2, f"8 delayed calls took {elapsed:.2f}s: not concurrent"


async def test_async_cancellation_does_not_break_the_client(server: LocalServer) -> None:
    server.add_fault("decide", {"kind": "delay", "ms": 2000}, times=1)
    async with server.async_client() as client:
        task = asyncio.ensure_future(
            client.decide(idempotency_key="k-slow", action=ACTION, estimate=usd(1))
        )
        await asyncio.sleep(0.1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        ok = await client.decide(idempotency_key="k-fast", action=ACTION, estimate=usd(1))
        assert ok.decision == "ALLOW"


def test_from_env(server, monkeypatch) -> None:
    monkeypatch.setenv("CYCLES_BASE_URL", server.url)
    monkeypatch.setenv("CYCLES_API_KEY", server.api_key)
    monkeypatch.setenv("CYCLES_TENANT", "acme")
    monkeypatch.setenv("CYCLES_REQUEST_TIMEOUT_MS", "2500")
    with cycles.Client.from_env() as c:
        assert c.tenant == "acme" and c.request_timeout == 2.5 and c.base_url == server.url
        assert reserve(c, "k-env").decision == "ALLOW"
    ac = cycles.AsyncClient.from_env()
    assert asyncio.run(ac.get_balances(tenant="acme")).balances
    ac.close()
    monkeypatch.delenv("CYCLES_API_KEY")
    with pytest.raises(cycles.ConfigError) as e:
        cycles.Client.from_env()
    assert e.value.code == 1 and e.value.name == "CONFIG"


def test_config_errors_never_show_the_key() -> None:
    with pytest.raises(cycles.ConfigError) as e:
        cycles.Client("ftp://example", "sekrit-key-123")
    assert "sekrit" not in str(e.value) and "sekrit" not in repr(e.value)
    with pytest.raises(cycles.ConfigError):
        cycles.Client("http://127.0.0.1:1", "")
    with pytest.raises(cycles.ConfigError):  # core's rule: a timeout of no time at all
        cycles.Client("http://127.0.0.1:1", "k", request_timeout=0)
    c = cycles.Client("http://127.0.0.1:1", "sekrit-key-123")
    assert "sekrit" not in repr(c)
    c.close()


async def test_max_concurrent_requests_bounds_what_is_in_flight(server: LocalServer) -> None:
    # Every balance query is held 300 ms by the server; with one slot the second request
    # cannot arrive before the first was answered (core/tests/operations.rs has the details).
    server.add_fault("getBalances", {"kind": "delay", "ms": 300}, times=0)
    async with cycles.AsyncClient(
        server.url, server.api_key, tenant=server.tenant, max_concurrent_requests=1
    ) as client:
        await asyncio.gather(*(client.get_balances(tenant=server.tenant) for _ in range(3)))
    arrivals = sorted(r.received_mono_us for r in server.requests() if r.operation == "getBalances")
    assert len(arrivals) == 3
    assert all(b - a >= 290_000 for a, b in itertools.pairwise(arrivals)), arrivals


@pytest.mark.parametrize("bad", [-1, True, 2.5, "8"])
def test_max_concurrent_requests_must_be_a_positive_int(server: LocalServer, bad: object) -> None:
    with pytest.raises(cycles.InvalidArgumentError, match="max_concurrent_requests"):
        cycles.Client(server.url, server.api_key, max_concurrent_requests=bad)  # type: ignore[arg-type]
    # 0 is an int: that it is no bound at all is core's rule (ConfigError).
    with pytest.raises(cycles.ConfigError, match="max_concurrent_requests"):
        cycles.Client(server.url, server.api_key, max_concurrent_requests=0)


def test_max_concurrent_requests_from_env(server: LocalServer, monkeypatch) -> None:
    monkeypatch.setenv("CYCLES_BASE_URL", server.url)
    monkeypatch.setenv("CYCLES_API_KEY", server.api_key)
    monkeypatch.setenv("CYCLES_MAX_CONCURRENT_REQUESTS", "zero")
    with pytest.raises(cycles.ConfigError, match="CYCLES_MAX_CONCURRENT_REQUESTS"):
        cycles.Client.from_env()
    monkeypatch.setenv("CYCLES_MAX_CONCURRENT_REQUESTS", "4")
    with cycles.Client.from_env() as client:
        assert client.get_balances(tenant=server.tenant).balances


# Keys an HTTP header cannot carry byte for byte (edge spaces, non-ASCII): core sends them in
# the body only (transport::header_round_trips); they once failed every call.
ODD_KEYS = [" padded ", "trail ", "k\u00e9y", "\u6f22\u5b57-\U0001f600"]


@pytest.mark.parametrize("key", ODD_KEYS)
def test_odd_idempotency_keys_through_raw_operations(api, server, key: str) -> None:
    created = reserve(api, key, 500)
    again = reserve(api, key, 500)  # a replay with the same key: the same reservation
    assert again.reservation_id == created.reservation_id
    api.commit_reservation(created.reservation_id, idempotency_key=key + ":c", actual=usd(200))
    other = reserve(api, key + "-2", 100)
    api.release_reservation(other.reservation_id, idempotency_key=key + ":r", reason="x")
    event = api.create_event(
        idempotency_key=key + ":e", action=ACTION, actual=usd(7), subject={"tenant": "acme"}
    )
    assert event.status is not None
    assert [(e.kind, e.idempotency_key) for e in server.ledger()] == [
        ("reserve", key),
        ("commit", key + ":c"),
        ("reserve", key + "-2"),
        ("release", key + ":r"),
        ("event", key + ":e"),
    ]
