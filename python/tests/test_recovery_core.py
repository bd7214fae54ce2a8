"""Recovery conformance, core and boundary scenarios (CR-CORE-001..004, CR-BOUNDARY-001 of
../shared/spec/scenarios.yaml), through the public Python API against the in-process
LocalServer over real HTTP, journaling into the journal under test (tests/journal_store.py: a
directory under tmp_path, or a Redis of the test's own with CYCLES_TEST_JOURNAL_STORE=redis).
conformance/adapters/python-map.json (and python-redis-map.json) name these tests; each asserts
its scenario's expected requests and assertions."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest
from journal_store import TestJournal
from recovery_support import (
    ACTION,
    USD,
    Tee,
    applied,
    commit_key,
    no_release,
    settlement_requests,
    settlements,
)

import cycles
from cycles.testing import LocalServer

MALFORMED = ("missing_required_field", "wrong_status_code", "not_json", "wrong_field_type")


# -- CR-CORE-001 ----------------------------------------------------------------------------


def test_lost_commit_response_is_retried_with_the_same_key_and_applied_once(
    server: LocalServer, store: TestJournal
) -> None:
    """CR-CORE-001: the server applies the commit and drops the response; the retry reuses
    the original key and the commit is applied exactly once."""
    server.add_fault("commitReservation", {"kind": "drop_response_after_apply"})
    with server.client(**store.options(), replay_interval=3600) as client:
        with client.reserve(1_000, action=ACTION, idempotency_key="core-1", heartbeat=False) as r:
            r.set_actual(400)
    key = "core-1:commit"
    s = r.settlement
    assert s is not None and s.status == "committed" and s.settled
    assert s.charged == cycles.Amount(USD, 400)

    reqs = settlement_requests(server, r.reservation_id, key)
    # expected_requests: commit, commit_same_key
    assert [q.operation for q in reqs] == ["commitReservation", "commitReservation"]
    assert [q.idempotency_key for q in reqs] == [key, key], "retry uses the original key"
    assert reqs[0].status is None and reqs[0].fault == "drop_response_after_apply"
    assert reqs[1].status == 200 and reqs[1].replay, "the retry got the original result"
    assert settlements(server, r.reservation_id, key) == (1, 0), "settled at most once"
    assert [(e.amount, e.idempotency_key) for e in applied(server, "commit")] == [(400, key)]
    assert store.records() == [], "the record is removed after success"
    assert store.dir_untouched_on_redis()
    no_release(server)


async def test_lost_commit_response_async_client_reuses_the_key(
    server: LocalServer, store: TestJournal
) -> None:
    """CR-CORE-001 through AsyncClient (``async with``): same choreography."""
    server.add_fault("commitReservation", {"kind": "drop_response_after_apply"})
    async with server.async_client(**store.options(), replay_interval=3600) as client:
        async with client.reserve(
            1_000, action=ACTION, idempotency_key="core-1a", heartbeat=False
        ) as r:
            r.set_actual(250)
    key = "core-1a:commit"
    assert r.settlement is not None and r.settlement.status == "committed"
    reqs = settlement_requests(server, r.reservation_id, key)
    assert [(q.operation, q.idempotency_key) for q in reqs] == [("commitReservation", key)] * 2
    assert reqs[0].status is None and reqs[1].status == 200
    assert settlements(server, r.reservation_id, key) == (1, 0)
    assert store.records() == []
    assert store.dir_untouched_on_redis()


# -- CR-CORE-002 ----------------------------------------------------------------------------


def test_expired_commit_falls_back_to_one_event_with_the_original_subject_action_and_actual(
    server: LocalServer, store: TestJournal
) -> None:
    """CR-CORE-002: the reservation expired before the commit; the SDK sends the commit
    (410), then ONE event with the same key carrying the original subject, action, actual,
    metrics and metadata; the spend is recorded once, by the event."""
    tee = Tee(server.url)
    got: list[cycles.LifecycleEvent] = []
    action = cycles.Action("llm.completion", "test-model", tags=["core-2"])
    subject = cycles.Subject(tenant=server.tenant)
    try:
        client = cycles.Client(
            tee.url, server.api_key, tenant=server.tenant, **store.options(),
            on_event=got.append, replay_interval=3600,
        )  # fmt: skip
        with client:
            with client.reserve(
                1_000, action=action, subject=subject, idempotency_key="core-2", heartbeat=False
            ) as r:
                r.set_actual(400)
                r.set_metrics(cycles.StandardMetrics(tokens_input=12, tokens_output=34))
                r.set_metadata({"run": "r-7"})
                server.advance_clock(200_000)  # past expires_at + grace while the work ran
    finally:
        tee.close()
    rid, key = r.reservation_id, "core-2:commit"
    s = r.settlement
    assert s is not None and s.status == "recovered_via_event" and s.settled

    # expected_requests: commit, event_same_key (and nothing else settles it)
    reqs = settlement_requests(server, rid, key)
    assert [(q.operation, q.status) for q in reqs] == [
        ("commitReservation", 410),
        ("createEvent", 201),
    ]
    assert all(q.idempotency_key == key for q in reqs)

    # The bytes sent: the event carries the ORIGINAL subject, action and actual.
    (commit,) = tee.bodies("POST", f"/v1/reservations/{rid}/commit")
    (event,) = tee.bodies("POST", "/v1/events")
    actual = {"unit": USD, "amount": 400}
    assert commit["idempotency_key"] == key and commit["actual"] == actual
    assert event["idempotency_key"] == key
    assert event["subject"] == subject.to_json() == {"tenant": server.tenant}
    assert event["action"] == action.to_json()
    assert event["action"] == {"kind": "llm.completion", "name": "test-model", "tags": ["core-2"]}
    assert event["actual"] == actual, "the known actual, unchanged"
    assert event["metrics"] == commit["metrics"] == {"tokens_input": 12, "tokens_output": 34}
    assert event["metadata"]["run"] == "r-7"
    assert event["metadata"]["recovered_reservation_id"] == rid
    assert event["metadata"]["recovery_reason"] == "commit_after_reservation_expired"

    # Settled at most once: one event with the actual, no commit; the record is gone.
    (ev,) = applied(server, "event")
    assert (ev.idempotency_key, ev.tenant, ev.unit, ev.amount) == (key, server.tenant, USD, 400)
    assert applied(server, "commit") == []
    assert store.records() == []
    assert store.dir_untouched_on_redis()
    kinds = [e.kind for e in got if e.reservation_id == rid]
    assert "settlement_mode_switched" in kinds
    settled = [e for e in got if e.kind == "settlement_settled"]
    assert [(e.reservation_id, e.fields["mode"]) for e in settled] == [(rid, "event")]
    no_release(server)


# -- CR-CORE-003 ----------------------------------------------------------------------------


def test_heartbeat_transport_failure_is_observable_and_non_fatal(
    server: LocalServer, store: TestJournal
) -> None:
    """CR-CORE-003: the first lease extension dies with a connection reset; the failure is
    reported with the reservation and a retry disposition, the extension is retried with the
    same key, the work (warn policy) runs on past the original TTL, and its actual is
    committed."""
    server.add_fault("extendReservation", {"kind": "connection_reset"})
    got: list[cycles.LifecycleEvent] = []
    # A lease long enough for a same-key retry inside the retry window after the reset.
    ttl_ms = 3_500
    with server.client(
        **store.options(), request_timeout=0.5, on_event=got.append, replay_interval=3600
    ) as client:

        @client.guarded(1_000, action=ACTION, actual=lambda v: v * 10, ttl_ms=ttl_ms,
                        idempotency_key="core-3", heartbeat_policy="warn")  # fmt: skip
        def work() -> int:
            started = time.monotonic()
            # The work outlives its original TTL and the first (failed) extension.
            while time.monotonic() - started < ttl_ms / 1000 + 0.3 or not any(
                e.kind == "heartbeat_extended" for e in got
            ):
                assert time.monotonic() - started < 10, "no successful extension"
                time.sleep(0.02)
            r = cycles.current_reservation()
            assert r is not None and not r.cancelled, "warn policy never cancels the work"
            return 70

        assert work() == 70, "guarded_action_continues_under_warn_policy"

    failures = [e for e in got if e.kind == "heartbeat_failed"]
    assert failures, f"the failure is an event: {[e.kind for e in got]}"
    f = failures[0]
    rid = f.reservation_id
    assert rid.startswith("rsv_")
    assert f.error_kind == "TRANSPORT_RESET"
    assert f.disposition == "retry" and f.fields["retry_in_ms"] is not None

    # expected_requests: extend, extend_same_key, commit
    ops = [(q.operation, q.idempotency_key, q.status) for q in server.requests()]
    extends = [q for q in ops if q[0] == "extendReservation"]
    assert len(extends) >= 2 and extends[0][1] == extends[1][1], ops
    assert extends[0][2] is None and extends[1][2] == 200, ops
    assert ops[-1][:2] == ("commitReservation", "core-3:commit"), "final settlement attempted"
    assert settlements(server, rid, "core-3:commit") == (1, 0)
    (c,) = applied(server, "commit")
    assert c.amount == 700
    assert store.records() == [] and store.dir_untouched_on_redis()
    no_release(server)


# -- CR-CORE-004 ----------------------------------------------------------------------------


def _protocol_invalid_round(
    server: LocalServer, tmp_path: Path, shape: str, via_event: bool
) -> None:
    # Each round its own journal (a directory, or a Redis of its own).
    with TestJournal(tmp_path / f"{shape}-{via_event}") as j:
        _protocol_invalid_in(server, j, shape, via_event)


def _protocol_invalid_in(server: LocalServer, j: TestJournal, shape: str, via_event: bool) -> None:
    what = f"{shape} via_event={via_event}"
    op = "createEvent" if via_event else "commitReservation"
    server.add_fault(op, {"kind": "malformed_success", "shape": shape})
    key = f"core-4-{shape}:commit"
    with server.client(
        **j.options(), settle_max_attempts=2 if via_event else 1, replay_interval=3600
    ) as one_try:
        with one_try.reserve(
            1_000, action=ACTION, idempotency_key=key[: -len(":commit")], heartbeat=False
        ) as r:
            r.set_actual(400)
            if via_event:
                server.advance_clock(200_000)
        rid = r.reservation_id
        s = r.settlement
        # Applied by the server, but not schema-valid: NOT a success.
        assert s is not None and s.status == "pending" and s.journaled, (what, s)
        once = (0, 1) if via_event else (1, 0)
        assert settlements(server, rid, key) == once, f"{what}: the server applied it"
        rec = j.read(server.url, server.api_key, server.tenant, rid)
        assert rec is not None, f"{what}: record retained"
        assert commit_key(rec) == key, f"{what}: with the original key"
        assert rec.mode == ("event" if via_event else "commit"), what
        one_try.close(timeout=0)

    # A fresh client replays the record with the SAME key; only the valid answer ends it.
    with server.client(**j.options(), replay_interval=3600) as fresh:
        report = fresh.drain(10.0)
    assert report.remaining == (), what
    assert j.records() == [], f"{what}: removed after schema-valid success"
    assert j.dir_untouched_on_redis(), what
    reqs = [q for q in settlement_requests(server, rid, key) if q.operation == op]
    assert len(reqs) == 2, (what, reqs)
    assert all(q.idempotency_key == key for q in reqs), what
    assert reqs[0].fault == "malformed_success", what
    assert reqs[1].status == (201 if via_event else 200), what
    assert reqs[1].replay, f"{what}: the retry got the original result"
    assert settlements(server, rid, key) == once, f"{what}: settled at most once"


def test_protocol_invalid_commit_success_stays_ambiguous_and_is_retried_with_its_key(
    server: LocalServer, tmp_path: Path
) -> None:
    """CR-CORE-004 (commit): every protocol-invalid 2xx (missing field, 202, non-JSON,
    mistyped field) of a commit the server DID apply leaves the settlement pending with its
    journal record and key; the retry uses that key and only the schema-valid 200 ends it."""
    for shape in MALFORMED:
        _protocol_invalid_round(server, tmp_path, shape, via_event=False)


def test_protocol_invalid_event_success_stays_ambiguous_and_is_retried_with_its_key(
    server: LocalServer, tmp_path: Path
) -> None:
    """CR-CORE-004 (fallback event): the same for an expired reservation's event (201
    expected): commit 410, event answered protocol-invalidly, record kept in event mode."""
    for shape in MALFORMED:
        _protocol_invalid_round(server, tmp_path, shape, via_event=True)


# -- CR-BOUNDARY-001 ------------------------------------------------------------------------


class ProviderDown(Exception):
    """The guarded action's own failure; it must come out unchanged."""


def test_missing_actual_is_surfaced_without_settlement(
    server: LocalServer, store: TestJournal
) -> None:
    """CR-BOUNDARY-001: a guarded action that ends without an actual sends no commit or event,
    releases its reservation and raises MissingActualError (released); one that fails before
    any actual propagates its own exception (released too, nothing settled); nothing is
    journaled. Each action sends exactly one release, ``{key}:release``."""
    keys = ["b-missing", "b-silent", "b-failing", "b-async", "b-empty-stream"]
    with server.client(**store.options(), replay_interval=3600) as client:
        with pytest.raises(cycles.MissingActualError) as missing:
            with client.reserve(
                1_000, action=ACTION, idempotency_key=keys[0], heartbeat=False
            ) as r:
                pass  # the work "succeeded" but never said what it cost
        assert missing.value.reservation_id == r.reservation_id
        assert missing.value.released and missing.value.release_error is None
        assert missing.value.message == (
            f"the guarded work on reservation {r.reservation_id} finished without reporting "
            "its actual amount; nothing was committed, and the reservation was released"
        )
        assert r.outcome == "missing_actual" and r.settlement_or_none is None and r.released

        @client.guarded(1_000, action=ACTION, idempotency_key=keys[1], heartbeat=False)
        def silent() -> str:
            return "done"  # actual=None and no set_actual()

        with pytest.raises(cycles.MissingActualError) as silent_missing:
            silent()
        assert silent_missing.value.released

        @client.guarded(1_000, action=ACTION, actual=5, idempotency_key=keys[2], heartbeat=False)
        def failing() -> None:
            raise ProviderDown("provider down")

        with pytest.raises(ProviderDown, match="provider down"):
            failing()

        async def failing_async() -> None:
            async with client.reserve(
                1_000, action=ACTION, idempotency_key=keys[3], heartbeat=False
            ):
                raise ProviderDown("async provider down")

        with pytest.raises(ProviderDown, match="async provider down"):
            asyncio.run(failing_async())

        # A stream that delivered nothing has no actual either: released, never committed as 0.
        with pytest.raises(cycles.MissingActualError, match="reservation was released"):
            with client.stream(1_000, action=ACTION, idempotency_key=keys[4], heartbeat=False):
                pass

    ops = [q.operation for q in server.requests()]
    assert "commitReservation" not in ops and "createEvent" not in ops, ops
    releases = [
        json.loads(q.body or "{}")["idempotency_key"]
        for q in server.requests()
        if q.operation == "releaseReservation"
    ]
    assert releases == [f"{k}:release" for k in keys], "exactly one release per action"
    assert [e.kind for e in server.ledger()] == ["reserve", "release"] * len(keys)
    assert store.records() == [], "nothing journaled without an actual"
    assert store.pending() == []
    assert store.dir_untouched_on_redis()
